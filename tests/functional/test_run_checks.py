"""Column checks and custom checks: every kind passing and failing, blocking and non-blocking."""

from __future__ import annotations

import pytest

from tests.builder import Repo

DAY = ("--start-date", "2024-01-01", "--end-date", "2024-01-01")
CHECKED_COLUMNS = [
    {"name": "id", "checks": [{"name": "not_null", "blocking": False}, {"name": "unique", "blocking": False}]},
    {
        "name": "val",
        "checks": [
            {"name": "positive", "blocking": False},
            {"name": "non_negative", "blocking": False},
            {"name": "min", "value": 1, "blocking": False},
            {"name": "max", "value": 3, "blocking": False},
        ],
    },
    {"name": "neg", "checks": [{"name": "negative", "blocking": False}]},
    {"name": "cat", "checks": [{"name": "accepted_values", "value": ["a", "b"], "blocking": False}]},
]
CUSTOM = [
    {"name": "no big values", "query": "SELECT count(*) FROM s.t WHERE val > 10", "blocking": False},
    {"name": "three rows", "query": "SELECT count(*) FROM s.t", "value": 3, "blocking": False},
]


@pytest.fixture
def repo(tmp_path) -> Repo:
    return Repo(tmp_path / "repo")


def checks_of(record: dict, asset: str) -> dict[str, tuple[bool, str]]:
    entry = next(a for a in record["assets"] if a["name"] == asset)
    return {c["name"]: (c["passed"], c["detail"]) for c in entry["checks"]}


def test_every_check_passes_on_good_data(repo):
    """Good rows pass every column check and both custom checks."""
    repo.sql(
        "s.t",
        "SELECT * FROM (VALUES (1, 1, -1, 'a'), (2, 2, -2, 'b'), (3, 3, -3, 'a')) v(id, val, neg, cat)",
        materialization={"type": "table"},
        columns=CHECKED_COLUMNS,
        custom_checks=CUSTOM,
    )
    code, record = repo.run_json(*DAY)
    assert code == 0
    results = checks_of(record, "s.t")
    assert len(results) == 10 and all(passed for passed, _ in results.values())


def test_every_check_fails_on_bad_data_and_says_how_many_rows(repo):
    """Each check kind fails on violating rows and reports the count; non-blocking failures do not fail."""
    repo.sql(
        "s.t",
        "SELECT * FROM (VALUES (NULL, 0, 5, 'z'), (2, -1, -2, 'b'), (2, 30, 0, 'a')) v(id, val, neg, cat)",
        materialization={"type": "table"},
        columns=CHECKED_COLUMNS,
        custom_checks=[
            {"name": "no big values", "query": "SELECT count(*) FROM s.t WHERE val > 10", "blocking": False},
            {"name": "four rows", "query": "SELECT count(*) FROM s.t", "value": 4, "blocking": False},
        ],
    )
    code, record = repo.run_json(*DAY)
    assert code == 0  # nothing blocking failed
    assert checks_of(record, "s.t") == {
        "not_null(id)": (False, "1 row violate it"),
        "unique(id)": (False, "1 row violate it"),
        "positive(val)": (False, "2 rows violate it"),
        "non_negative(val)": (False, "1 row violate it"),
        "min(val)": (False, "2 rows violate it"),
        "max(val)": (False, "1 row violate it"),
        "negative(neg)": (False, "2 rows violate it"),
        "accepted_values(cat)": (False, "1 row violate it"),
        "no big values": (False, "returned 1, expected 0"),
        "four rows": (False, "returned 3, expected 4"),
    }


def test_blocking_failure_fails_the_asset_and_skips_downstream(repo):
    """A failing blocking check (the default) fails its asset; downstream is reported upstream_failed."""
    repo.sql(
        "s.t",
        "SELECT NULL AS id",
        materialization={"type": "table"},
        columns=[{"name": "id", "checks": [{"name": "not_null"}]}],
    )
    repo.sql("s.down", "SELECT * FROM s.t", materialization={"type": "table"}, depends=["s.t"])
    result = repo.run(*DAY)
    assert result.returncode == 1
    assert "check not_null(id) failed (blocking): 1 row violate it" in result.stdout
    statuses = {a["name"]: a["status"] for a in repo.records()[-1]["assets"]}
    assert statuses == {"s.t": "failed", "s.down": "upstream_failed"}
    assert repo.query("SELECT count(*) FROM information_schema.tables WHERE table_name = 'down'") == [(0,)]


def test_non_blocking_failure_is_reported_without_failing(repo):
    """A failing non-blocking custom check is printed, and the run still succeeds."""
    repo.sql(
        "s.t",
        "SELECT 1 AS id",
        materialization={"type": "table"},
        custom_checks=[{"name": "expects two", "query": "SELECT count(*) FROM s.t", "value": 2, "blocking": False}],
    )
    result = repo.run_ok(*DAY)
    assert "check expects two failed (non-blocking): returned 1, expected 2" in result.stdout


def test_only_checks_and_only_main(repo):
    """--only main skips checks; --only checks runs checks against the existing table without rebuilding it."""
    repo.sql(
        "s.t",
        "SELECT {{ var.v }} AS id",
        materialization={"type": "table"},
        columns=[{"name": "id", "checks": [{"name": "max", "value": 1}]}],
    )
    (repo.pipeline_dir / "pipeline.yml").write_text(
        "name: p\ndefault_connections: {duckdb: db}\nvariables: {v: {type: integer, default: 1}}\n"
    )
    assert repo.run("--only", "main", "--var", "v=5", *DAY).returncode == 0
    assert repo.query("SELECT * FROM s.t") == [(5,)]
    checks_only = repo.run("--only", "checks", *DAY)
    assert checks_only.returncode == 1 and "check max(id) failed" in checks_only.stdout
    assert repo.query("SELECT * FROM s.t") == [(5,)]
    assert repo.run("--var", "v=1", *DAY).returncode == 0


def relationship_pipeline(repo: Repo, child_rows: str) -> None:
    repo.sql("s.customers", "SELECT * FROM (VALUES (1), (2)) v(id)", materialization={"type": "table"})
    repo.sql(
        "s.orders",
        f"SELECT * FROM (VALUES {child_rows}) v(order_id, customer_id)",
        materialization={"type": "table"},
        depends=["s.customers"],
        columns=[
            {
                "name": "customer_id",
                "foreign_key": {"table": "s.customers", "column": "id"},
                "checks": [{"name": "relationships"}],
            }
        ],
    )


def test_relationships_passes_when_every_key_has_a_parent_and_ignores_nulls(repo):
    """relationships: every non-NULL child key exists in the foreign_key column; NULLs are not violations."""
    relationship_pipeline(repo, "(10, 1), (11, 2), (12, NULL)")
    code, record = repo.run_json(*DAY)
    assert code == 0
    assert checks_of(record, "s.orders") == {"relationships(customer_id)": (True, "ok")}


def test_relationships_fails_naming_how_many_child_rows_are_orphans(repo):
    """A child key missing from the parent fails the (blocking) check with the number of orphan rows."""
    relationship_pipeline(repo, "(10, 1), (11, 3), (12, 4)")
    code, record = repo.run_json(*DAY)
    assert code == 1
    assert checks_of(record, "s.orders") == {"relationships(customer_id)": (False, "2 rows violate it")}


def test_relationships_needs_a_foreign_key_to_an_asset_of_the_pipeline(repo):
    """A relationships check without foreign_key, or a foreign_key to a table no asset makes, is a validation
    error."""
    repo.sql(
        "s.orders",
        "SELECT 1 AS a, 2 AS b",
        materialization={"type": "table"},
        columns=[
            {"name": "a", "checks": [{"name": "relationships"}]},
            {"name": "b", "foreign_key": {"table": "s.nowhere", "column": "id"}},
        ],
    )
    result = repo.run(*DAY)
    assert result.returncode == 2
    assert "check relationships of column 'a' needs foreign_key" in result.stderr
    assert "names 's.nowhere', not an asset of this pipeline" in result.stderr


def test_a_foreign_key_to_a_column_its_asset_does_not_declare_is_refused_as_bruin_refuses_it(repo):
    """Bruin's valid-column-metadata (critical): a foreign_key naming a column the referenced asset does not
    declare, when it declares columns, fails the pipeline (matched without case); it ran here with exit 0. An
    asset that declares no columns is not checked."""
    repo.sql("s.customers", "SELECT 1 AS id", materialization={"type": "table"}, columns=[{"name": "ID"}])
    repo.sql("s.plain", "SELECT 1 AS id", materialization={"type": "table"})
    repo.sql(
        "s.orders",
        "SELECT 1 AS a, 1 AS b, 1 AS c",
        materialization={"type": "table"},
        depends=["s.customers", "s.plain"],
        columns=[
            {"name": "a", "foreign_key": {"table": "s.customers", "column": "customer_id"}},
            {"name": "b", "foreign_key": {"table": "s.customers", "column": "Id"}},
            {"name": "c", "foreign_key": {"table": "s.plain", "column": "anything"}},
        ],
    )
    result = repo.run(*DAY)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.count("foreign_key of column") == 1
    assert (
        "foreign_key of column 'a' names 's.customers.customer_id', a column s.customers does not declare (as Bruin "
        "checks it)"
    ) in result.stderr
    repo.sql("s.orders", "SELECT 1 AS b", materialization={"type": "table"}, depends=["s.customers"],
             columns=[{"name": "b", "foreign_key": {"table": "s.customers", "column": "id"}}])  # fmt: skip
    repo.run_ok(*DAY)


def test_custom_check_count_compares_the_number_of_rows_returned(repo):
    """custom_checks[].count: the query's row count must equal count (not its first value)."""
    repo.sql(
        "s.t",
        "SELECT * FROM (VALUES (1), (2), (3)) v(id)",
        materialization={"type": "table"},
        custom_checks=[
            {"name": "two big", "query": "SELECT id FROM s.t WHERE id >= 2", "count": 2, "blocking": False},
            {"name": "none negative", "query": "SELECT id FROM s.t WHERE id < 0;", "count": 0, "blocking": False},
            {"name": "one small", "query": "SELECT id FROM s.t WHERE id < 3", "count": 1, "blocking": False},
        ],
    )
    code, record = repo.run_json(*DAY)
    assert code == 0
    assert checks_of(record, "s.t") == {
        "two big": (True, "ok"),
        "none negative": (True, "ok"),
        "one small": (False, "returned 2 rows, expected 1"),
    }
