"""Every materialization on a real DuckDB file: a first run, a second with changed data, exact contents."""

from __future__ import annotations

from datetime import date

import pytest

from tests.builder import Repo

VARIABLES = {
    "name": "p",
    "default_connections": {"duckdb": "db"},
    "variables": {"v": {"type": "integer", "default": 1}},
}
DAY = ("--start-date", "2024-01-01", "--end-date", "2024-01-01")


@pytest.fixture
def repo(tmp_path) -> Repo:
    return Repo(tmp_path / "repo", pipeline=VARIABLES)


def table(repo: Repo, name: str = "s.t") -> list[tuple]:
    return repo.query(f"SELECT * FROM {name} ORDER BY ALL")


def test_create_replace_replaces_the_table(repo):
    """create+replace (the default for type: table) replaces the whole table each run."""
    repo.sql("s.t", "SELECT {{ var.v }} AS id UNION ALL SELECT {{ var.v }} * 10", materialization={"type": "table"})
    repo.run_ok(*DAY)
    assert table(repo) == [(1,), (10,)]
    repo.run_ok(*DAY, "--var", "v=2")
    assert table(repo) == [(2,), (20,)]


def test_append_accumulates(repo):
    """append inserts the query's rows and keeps what was there."""
    repo.sql("s.t", "SELECT {{ var.v }} AS id, 'x' AS tag", materialization={"type": "table", "strategy": "append"})
    repo.run_ok(*DAY)
    repo.run_ok(*DAY, "--var", "v=2")
    assert table(repo) == [(1, "x"), (2, "x")]


def test_merge_updates_only_update_on_merge_columns_and_inserts_new_keys(repo):
    """merge matches on primary keys, updates update_on_merge columns, inserts new keys, keeps the rest."""
    body = """
{% if var.v == 1 %}
SELECT 1 AS id, 'a1' AS name, 'n1' AS note UNION ALL SELECT 2, 'b1', 'n1'
{% else %}
SELECT 2 AS id, 'b2' AS name, 'n2' AS note UNION ALL SELECT 3, 'c2', 'n2'
{% endif %}"""
    repo.sql(
        "s.t",
        body,
        materialization={"type": "table", "strategy": "merge"},
        columns=[
            {"name": "id", "type": "integer", "primary_key": True},
            {"name": "name", "type": "varchar", "update_on_merge": True},
            {"name": "note", "type": "varchar"},
        ],
    )
    repo.run_ok(*DAY)
    repo.run_ok(*DAY, "--var", "v=2")
    assert table(repo) == [(1, "a1", "n1"), (2, "b2", "n1"), (3, "c2", "n2")]


def test_delete_insert_replaces_rows_whose_key_reappears(repo):
    """delete+insert deletes target rows whose incremental_key value is in the new result, then inserts."""
    body = """
{% if var.v == 1 %}
SELECT 'd1' AS dt, 1 AS n UNION ALL SELECT 'd1', 2 UNION ALL SELECT 'd2', 3
{% else %}
SELECT 'd2' AS dt, 30 AS n UNION ALL SELECT 'd3', 40
{% endif %}"""
    repo.sql("s.t", body, materialization={"type": "table", "strategy": "delete+insert", "incremental_key": "dt"})
    repo.run_ok(*DAY)
    repo.run_ok(*DAY, "--var", "v=2")
    assert table(repo) == [("d1", 1), ("d1", 2), ("d2", 30), ("d3", 40)]


def test_time_interval_with_date_granularity(repo):
    """time_interval (date) deletes rows whose key lies in the run's inclusive dates, then inserts."""
    repo.sql(
        "s.t",
        "SELECT CAST(d AS DATE) AS dt, {{ var.v }} AS val "
        "FROM generate_series(DATE '{{ start_date }}', DATE '{{ end_date }}', INTERVAL 1 DAY) AS g(d)",
        materialization={
            "type": "table",
            "strategy": "time_interval",
            "incremental_key": "dt",
            "time_granularity": "date",
        },
    )
    repo.run_ok("--start-date", "2024-01-01", "--end-date", "2024-01-03")
    repo.run_ok("--start-date", "2024-01-02", "--end-date", "2024-01-02", "--var", "v=2")
    assert table(repo) == [(date(2024, 1, 1), 1), (date(2024, 1, 2), 2), (date(2024, 1, 3), 1)]


def test_time_interval_with_timestamp_granularity_is_inclusive_of_both_ends(repo):
    """time_interval (timestamp) replaces rows in [start, end] exactly: 06:00 .. 11:59:59.999999 — a row on the
    end instant itself is replaced, the next microsecond (12:00) is not."""
    repo.sql(
        "s.t",
        "SELECT h AS ts, {{ var.v }} AS val "
        "FROM generate_series(TIMESTAMP '{{ start_datetime }}', TIMESTAMP '{{ end_datetime }}', INTERVAL 1 HOUR) g(h)"
        "{% if var.v == 1 %} UNION ALL SELECT TIMESTAMP '2024-01-01 11:59:59.999999', 1{% endif %}",
        materialization={
            "type": "table",
            "strategy": "time_interval",
            "incremental_key": "ts",
            "time_granularity": "timestamp",
        },
    )
    repo.run_ok(*DAY)
    repo.run_ok("--start-date", "2024-01-01T06:00:00", "--end-date", "2024-01-01T11:59:59.999999", "--var", "v=2")
    rows = table(repo)
    assert len(rows) == 24, "the row at exactly 11:59:59.999999 (the inclusive end) was replaced too"
    assert not [row for row in rows if row[0].microsecond == 999_999]
    assert {row[0].hour for row in rows if row[1] == 2} == set(range(6, 12))
    assert [row[1] for row in rows if row[0].hour == 12] == [1]  # 12:00 is outside the second window


def test_truncate_insert_replaces_contents_keeping_the_table(repo):
    """truncate+insert empties the table and inserts the new rows."""
    repo.sql(
        "s.t",
        "SELECT unnest(range({{ var.v }}, {{ var.v }} + 2)) AS id",
        materialization={"type": "table", "strategy": "truncate+insert"},
    )
    repo.run_ok(*DAY)
    repo.run_ok(*DAY, "--var", "v=5")
    assert table(repo) == [(5,), (6,)]


def test_view_is_replaced(repo):
    """A view is created or replaced with the query."""
    repo.sql("s.t", "SELECT {{ var.v }} AS id", materialization={"type": "view"})
    repo.run_ok(*DAY)
    repo.run_ok(*DAY, "--var", "v=3")
    assert table(repo) == [(3,)]
    assert repo.query("SELECT table_type FROM information_schema.tables WHERE table_name = 't'") == [("VIEW",)]


def test_ddl_creates_the_table_from_columns(repo):
    """ddl creates the table from declared columns (types, NOT NULL, primary key), once."""
    repo.sql(
        "s.t",
        "",
        materialization={"type": "table", "strategy": "ddl"},
        columns=[
            {"name": "id", "type": "INTEGER", "primary_key": True},
            {"name": "name", "type": "VARCHAR", "nullable": False},
        ],
    )
    repo.run_ok(*DAY)
    repo.run_ok(*DAY)
    assert table(repo) == []
    columns = repo.query(
        "SELECT column_name, data_type, is_nullable FROM information_schema.columns "
        "WHERE table_name = 't' ORDER BY ordinal_position"
    )
    assert columns == [("id", "INTEGER", "NO"), ("name", "VARCHAR", "NO")]
    assert repo.query(
        "SELECT constraint_type FROM information_schema.table_constraints WHERE table_name = 't' "
        "AND constraint_type = 'PRIMARY KEY'"
    ) == [("PRIMARY KEY",)]


def test_no_materialization_runs_the_sql_as_written(repo):
    """Without materialization the SQL (several statements) runs as written, in one transaction."""
    repo.sql(
        "s.t",
        "CREATE SCHEMA IF NOT EXISTS s; CREATE TABLE IF NOT EXISTS s.t (id INTEGER);\n"
        "INSERT INTO s.t VALUES ({{ var.v }});",
    )
    repo.run_ok(*DAY)
    repo.run_ok(*DAY, "--var", "v=2")
    assert table(repo) == [(1,), (2,)]


STRATEGIES = [
    {"type": "table"},
    {"type": "table", "strategy": "append"},
    {"type": "table", "strategy": "truncate+insert"},
    {"type": "table", "strategy": "delete+insert", "incremental_key": "key"},
    {"type": "table", "strategy": "time_interval", "incremental_key": "day", "time_granularity": "date"},
    {"type": "table", "strategy": "merge"},
    {"type": "view"},
]
COLUMNS = [{"name": "key", "primary_key": True}, {"name": "id", "update_on_merge": True}]
# The second run (v=2) changes every strategy's result, so a change that escapes the rollback shows.
BODY = "SELECT {{ var.v }} AS id, 'k' AS key, DATE '{{ start_date }}' AS day"


def snapshot(repo: Repo) -> tuple[list[tuple], list[tuple]]:
    """The table's columns with their types, and every row: what a rollback must give back exactly."""
    return repo.query("DESCRIBE s.t"), table(repo)


def strategy_id(materialization: dict) -> str:
    return materialization.get("strategy") or materialization["type"]


@pytest.mark.parametrize("materialization", STRATEGIES, ids=strategy_id)
def test_a_failing_post_hook_rolls_back_a_materialization_that_already_changed_the_table(repo, materialization):
    """The post hook fails after the strategy's statements ran: the table is exactly as before the run."""
    hooks = {"post": [{"query": "SELECT {% if var.v == 2 %}error('post hook failed'){% else %}1{% endif %}"}]}
    repo.sql("s.t", BODY, materialization=materialization, columns=COLUMNS, hooks=hooks)
    repo.run_ok(*DAY)
    before = snapshot(repo)
    failed = repo.run(*DAY, "--var", "v=2")
    assert failed.returncode == 1
    assert "post hook failed" in failed.stdout
    assert snapshot(repo) == before
    assert repo.records()[-1]["assets"][0]["status"] == "failed"


# Statement by statement, each of these changes the table before the one that fails.
FAILS_AFTER_A_CHANGE = {
    # DROP TABLE, then CREATE … AS a query that fails.
    "create+replace --full-refresh": (
        {"type": "table"},
        "SELECT CASE WHEN {{ var.v }} = 2 THEN CAST('not a number' AS INTEGER) ELSE 1 END AS id, 'k' AS key",
        ("--full-refresh", "--reason", "rebuild"),
    ),
    # The staged rows are text: DELETE of key 'k' succeeds, the INSERT's cast to INTEGER fails.
    "delete+insert": (
        {"type": "table", "strategy": "delete+insert", "incremental_key": "key"},
        "SELECT {% if var.v == 2 %}'not a number'{% else %}1{% endif %} AS id, 'k' AS key",
        (),
    ),
    # DELETE FROM, then an INSERT whose text does not cast.
    "truncate+insert": (
        {"type": "table", "strategy": "truncate+insert"},
        "SELECT {% if var.v == 2 %}'not a number'{% else %}1{% endif %} AS id, 'k' AS key",
        (),
    ),
    # DELETE of the interval's rows, then the failing INSERT.
    "time_interval": (
        {"type": "table", "strategy": "time_interval", "incremental_key": "key", "time_granularity": "date"},
        "SELECT {% if var.v == 2 %}'not a number'{% else %}1{% endif %} AS id, DATE '{{ start_date }}' AS key",
        (),
    ),
    # A pre hook deletes rows, then the append's query fails.
    "append after a pre hook": (
        {"type": "table", "strategy": "append"},
        "SELECT CASE WHEN {{ var.v }} = 2 THEN CAST('not a number' AS INTEGER) ELSE 1 END AS id, 'k' AS key",
        (),
    ),
}


@pytest.mark.parametrize("case", FAILS_AFTER_A_CHANGE)
def test_a_statement_failing_after_another_changed_the_table_leaves_it_exactly_as_it_was(repo, case):
    """A later statement of the same materialization fails: the earlier ones are rolled back with it."""
    materialization, body, flags = FAILS_AFTER_A_CHANGE[case]
    pre_hook = {"query": "{% if var.v == 2 %}DELETE FROM s.t{% else %}SELECT 1{% endif %}"}
    hooks = {"pre": [pre_hook]} if case.startswith("append") else {}
    repo.sql("s.t", body, materialization=materialization, columns=COLUMNS, hooks=hooks)
    repo.run_ok(*DAY)
    before = snapshot(repo)
    assert before[1], "the first run must leave rows to lose"
    failed = repo.run(*DAY, "--var", "v=2", *flags)
    assert failed.returncode == 1
    assert "Conversion Error" in failed.stdout
    assert snapshot(repo) == before
    assert repo.records()[-1]["assets"][0]["status"] == "failed"
