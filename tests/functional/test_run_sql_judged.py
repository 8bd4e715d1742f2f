"""SQL a run executes as written — hooks, and the query of an SQL asset without materialization — judged through
the real command as each partition renders it: raw deletes, statements that end the run's transaction, and
statements that cannot be classified which the pre-flight never saw. Each test counts the rows the SQL would have
lost, not the exit code alone."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest
import yaml

from tests.backfills import records, state_dirs
from tests.builder import Repo
from tests.conftest import run_backfill
from tests.functional.test_guardrails import WEEK, dry_checks, redeclare_daily


def pipeline(tmp_path: Path, level: str) -> Repo:
    """The daily pipeline of test_guardrails (five weeks of history) at ``level``, with raw.landing of 5 rows."""
    repo = Repo(tmp_path / "repo", guardrails=level)
    repo.sql("raw.events", "SELECT 1 AS x", materialization={"type": "view"})
    redeclare_daily(repo)
    repo.run_ok("--start-date", "2023-12-01", "--end-date", "2024-01-07")
    repo.execute("CREATE TABLE raw.landing AS SELECT range AS x FROM range(5)")
    return repo


def on_the_tenth(repo: Repo, then: str, otherwise: str) -> None:
    """A macro ``day_sql()`` that renders ``then`` for the partition of 2024-01-10 and ``otherwise`` for the rest."""
    repo.write("p/macros/day_sql.sql", "{% macro day_sql() %}{% if start_date == '2024-01-10' %}" + then
               + "{% else %}" + otherwise + "{% endif %}{% endmacro %}")  # fmt: skip


def backfill_week(repo: Repo, home) -> tuple[int, list[dict]]:
    ran = run_backfill("p", *WEEK, "--reason", "r", "--no-progress", "--output", "json", cwd=repo.root, env=home)
    [backfill] = state_dirs(repo.root / "logs" / "backfills") or [None]
    return ran.returncode, records(backfill) if backfill is not None else []


def failed_days(found: list[dict]) -> dict[str, str]:
    return {r["start"][:10]: r["attempts"][-1]["error"] for r in found if r["status"] == "failed"}


@pytest.mark.parametrize("level", ["sandbox", "standard"])
def test_sql_run_as_written_that_deletes_raw_data_is_never_allowed(tmp_path, home, level):
    """An SQL asset without materialization whose query is ``DELETE FROM raw.landing``: the pre-flight said only
    "runs its SQL as written" (human-only, a warning in sandbox), so the week ran with verdict auto and emptied the
    source, exit 0. Its SQL is now judged like a hook: never, at every level; exit 3, the source whole."""
    repo = pipeline(tmp_path, level)
    repo.sql("mid.cleanup", "DELETE FROM raw.landing", depends=["raw.events"])
    checks = dry_checks(repo, home)
    assert (checks["verdict"], checks["materialization"]["tier"]) == ("never", "never"), checks["materialization"]
    assert checks["materialization"]["detail"] == (
        "mid.cleanup: its SQL, run as written, runs DELETE on raw.landing, a raw table: source data is never deleted "
        "or rebuilt"
    )
    code, found = backfill_week(repo, home)
    assert (code, found) == (3, [])
    assert repo.query("SELECT count(*) FROM raw.landing") == [(5,)]


def test_sql_run_as_written_that_deletes_raw_data_on_one_day_fails_that_day(tmp_path, home):
    """The same delete rendered by a macro on the tenth only: the pre-flight's first partition reads, the tenth
    deleted the source (5 rows → 0), exit 0. Each partition now judges its own rendering: the tenth fails with
    nothing run (the days before it succeed, and the failure stops the backfill), the source keeps its rows."""
    repo = pipeline(tmp_path, "sandbox")
    on_the_tenth(repo, "DELETE FROM raw.landing", "SELECT 1")
    repo.sql("mid.cleanup", "{{ day_sql() }}", depends=["raw.events"])
    assert dry_checks(repo, home)["verdict"] == "auto"
    code, found = backfill_week(repo, home)
    assert repo.query("SELECT count(*) FROM raw.landing") == [(5,)]
    assert code == 1
    assert [(r["start"][:10], r["status"]) for r in found] == [
        ("2024-01-08", "succeeded"),
        ("2024-01-09", "succeeded"),
        ("2024-01-10", "failed"),
    ]
    assert (
        "mid.cleanup: this partition's SQL, run as written, runs DELETE on raw.landing, a raw table: source data is "
        "never deleted or rebuilt in a backfill; nothing of this partition was written"
    ) in failed_days(found)["2024-01-10"]


@pytest.mark.parametrize("ends", ["COMMIT", "ROLLBACK"])
def test_a_hook_that_ends_the_transaction_never_runs_by_backfill_or_by_hand(tmp_path, home, ends):
    """``COMMIT; DELETE FROM mid.other`` as a post hook: verdict auto; the COMMIT made the partition permanent, the
    DELETE ran outside every transaction, and the fence's "rolled back" undid nothing (mid.other 5 rows → 0).
    The pre-flight now says never (exit 3), and a run by hand refuses it before anything runs: mid.other keeps
    its rows and mid.daily gets no row of that day."""
    repo = pipeline(tmp_path, "standard")
    repo.execute("CREATE TABLE mid.other AS SELECT range AS x FROM range(5)")
    redeclare_daily(repo, hooks={"post": [{"query": f"{ends}; DELETE FROM mid.other"}]})
    checks = dry_checks(repo, home)
    assert (checks["verdict"], checks["materialization"]["tier"]) == ("never", "never"), checks["materialization"]
    assert backfill_week(repo, home)[0] == 3
    by_hand = repo.run("--start-date", "2024-01-08", "--end-date", "2024-01-08", env=home)
    assert by_hand.returncode == 1, by_hand.stdout + by_hand.stderr
    assert (
        f"mid.daily: a post hook runs {ends!r}, which would end the transaction the asset runs in (what came before "
        "it could no longer be rolled back) or start another: nothing of this run was written"
    ) in by_hand.stdout
    assert repo.query("SELECT count(*) FROM mid.other") == [(5,)]
    assert repo.query("SELECT count(*) FROM mid.daily WHERE day >= DATE '2024-01-08'") == [(0,)]


@pytest.mark.parametrize("level", ["standard", "sandbox"])
def test_a_statement_only_a_later_partition_renders_is_refused_there(tmp_path, home, level):
    """``PRAGMA import_database('d')`` rendered by a macro on the tenth only, whose schema.sql replaces
    raw.landing: the pre-flight saw the first partition (a SELECT, or in sandbox another statement it judged), the
    tenth ran the import unjudged, raw.landing 5 rows → 0, exit 0. A partition now refuses a statement that
    cannot be classified unless the pre-flight saw its shape: the tenth fails with nothing run, and a --continue
    judges the tenth's rendering (the statement shown for a person to approve)."""
    repo = pipeline(tmp_path, level)
    (repo.root / "d").mkdir()
    (repo.root / "d" / "schema.sql").write_text("CREATE OR REPLACE TABLE raw.landing (x INTEGER);\n")
    (repo.root / "d" / "load.sql").write_text("")
    on_the_tenth(repo, "PRAGMA import_database('d')", "SELECT 1" if level == "standard" else "CALL pragma_version()")
    redeclare_daily(repo, hooks={"post": [{"query": "{{ day_sql() }}"}]})
    assert dry_checks(repo, home)["verdict"] == "auto"
    code, found = backfill_week(repo, home)
    assert repo.query("SELECT count(*) FROM raw.landing") == [(5,)]
    assert code == 1 and list(failed_days(found)) == ["2024-01-10"]
    assert (
        "mid.daily: this partition's post hook runs SQL that cannot be classified, unjudged by the pre-flight "
        "(\"PRAGMA import_database('')\"): nothing of this partition was written (a --continue from here judges it)"
    ) in failed_days(found)["2024-01-10"]
    [backfill] = state_dirs(repo.root / "logs" / "backfills")
    resumed = run_backfill("--continue", backfill.name, "--dry-run", "--output", "json", cwd=repo.root, env=home)
    [judged] = [c for c in json.loads(resumed.stdout)["preflight"]["checks"] if c["name"] == "materialization"]
    assert "a post hook runs SQL that cannot be classified: \"PRAGMA import_database('')\"" in judged["detail"]


def test_a_judged_statement_runs_on_every_day_with_that_day_s_values(tmp_path, home):
    """What the pre-flight judged runs in every partition that renders it with other dates or numbers (its shape):
    a hook ``CALL range(<day of month>)`` runs on all five days, exit 0, and the invocation records what it let
    through in guardrails.json."""
    repo = pipeline(tmp_path, "sandbox")
    redeclare_daily(repo, hooks={"post": [{"query": "CALL range({{ start_date[8:] | int }})"}]})
    code, found = backfill_week(repo, home)
    assert code == 0 and [r["status"] for r in found] == ["succeeded"] * 5
    [backfill] = state_dirs(repo.root / "logs" / "backfills")
    [invocation] = json.loads((backfill / "guardrails.json").read_text())["invocations"]
    assert invocation["judged_sql"] == {"mid.daily": ["CALL range(0)"]}


def test_a_judged_statement_longer_than_an_argument_may_be_runs_in_every_partition(tmp_path, home):
    """A generated view of 4,000 columns as a hook: its shape, judged by the pre-flight, passes the 128 KiB one
    argument may hold. Given on the command line, every partition started by exec failed before it ran ("Argument
    list too long"); it is given in the state directory's ``judged-sql.json``, and all five days run it."""
    repo = pipeline(tmp_path, "sandbox")
    columns = ", ".join(f"x + {n} AS generated_column_number_{n}" for n in range(4_000))
    redeclare_daily(
        repo, hooks={"post": [{"query": f"CREATE OR REPLACE VIEW mid.wide AS SELECT {columns} FROM raw.landing"}]}
    )
    ran = run_backfill("p", *WEEK, "--reason", "r", "--no-progress", "--launcher", "exec", cwd=repo.root, env=home)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    [backfill] = state_dirs(repo.root / "logs" / "backfills")
    assert [r["status"] for r in records(backfill)] == ["succeeded"] * 5
    [judged] = json.loads((backfill / "judged-sql.json").read_text())["mid.daily"]
    assert len(judged) > 128 * 1024
    assert repo.query("SELECT generated_column_number_3999 FROM mid.wide ORDER BY 1 LIMIT 1") == [(3_999,)]


def test_a_judged_statement_that_moves_the_search_path_cannot_reach_raw_data(tmp_path, home):
    """``SET search_path`` judged on the first day (to main, in sandbox) and rendered to raw on the tenth, before a
    bare ``DELETE FROM source_rows``: the same shape, so it runs; the fingerprint of every schema's source_rows
    catches the delete of raw's, and the tenth is rolled back."""
    repo = pipeline(tmp_path, "sandbox")
    repo.execute("CREATE TABLE raw.source_rows AS SELECT range AS id FROM range(5)")
    repo.execute("CREATE TABLE main.source_rows AS SELECT 1 AS id WHERE false")
    on_the_tenth(repo, "SET search_path = 'raw'", "SET search_path = 'main'")
    redeclare_daily(repo, hooks={"post": [{"query": "{{ day_sql() }}; DELETE FROM source_rows"}]})
    code, found = backfill_week(repo, home)
    assert repo.query("SELECT count(*) FROM raw.source_rows") == [(5,)]
    assert code == 1 and list(failed_days(found)) == ["2024-01-10"]
    assert (
        "a hook of mid.daily changed rows of another table, raw.source_rows (5 rows before, 0 after): rolled back"
    ) in failed_days(found)["2024-01-10"]


def test_a_partition_run_started_by_hand_judges_no_statement_it_is_not_given(tmp_path, home):
    """``--judged-sql`` (and ``--judged-files``) go only with a backfill's own partition runs; with their IDs but a
    file no backfill writes (or none: the shapes themselves typed in) it is one line naming the value, exit 2. A
    partition's command line copied from a log without it judged nothing: its hook ``CALL pragma_version()`` is
    refused; given a file of the shape, it runs."""
    repo = pipeline(tmp_path, "sandbox")
    redeclare_daily(repo, hooks={"post": [{"query": "CALL pragma_version()"}]})
    day = ("--start-date", "2024-01-08", "--end-date", "2024-01-08")
    child = ("--backfill-id", "bf-1", "--run-id", "bf-1-p0-a1", "--partition-id", "9b0c")
    started = {**home, "BACKFILL_ID": "bf-1", "BACKFILL_RUN_ID": "bf-1-p0-a1", "BACKFILL_PARTITION_ID": "9b0c"}
    (repo.root / "list.json").write_text("[1]")
    not_theirs = {
        "--judged-sql": "an object of asset names, each with a list of statements",
        "--judged-files": "not a judged watch (TypeError: list indices must be integers or slices, not str)",
    }
    for flag, why in not_theirs.items():
        alone = repo.run(*day, flag, "{}", env=home)
        assert (alone.returncode, alone.stderr) == (
            2,
            f"backfill: error: {flag} goes only with --backfill-id, which a backfill gives its own partitions' runs\n",
        )
        bad = repo.run(*day, *child, flag, "list.json", env=started)
        assert (bad.returncode, bad.stderr) == (
            2,
            f"backfill: error: {flag} 'list.json' is not what a backfill gives its partitions: {why}\n",
        )
        missing = repo.run(*day, *child, flag, "gone.json", env=started)
        assert (missing.returncode, missing.stderr) == (
            2,
            f"backfill: error: {flag} 'gone.json' is not what a backfill gives its partitions: No such file or "
            "directory\n",
        )
    typed = repo.run(*day, *child, "--judged-sql", '{"mid.daily": ["CALL pragma_version()"]}', env=started)
    assert (typed.returncode, typed.stderr) == (
        2,
        'backfill: error: --judged-sql \'{"mid.daily": ["CALL pragma_version()"]}\' is not what a backfill gives '
        "its partitions: No such file or directory\n",
    )
    copied = repo.run(*day, *child, env=started)
    assert copied.returncode == 1, copied.stdout + copied.stderr
    assert "runs SQL that cannot be classified, unjudged by the pre-flight" in copied.stdout
    (repo.root / "judged.json").write_text('{"mid.daily": ["CALL pragma_version()"]}')
    repo.run_ok(*day, *child, "--judged-sql", "judged.json", env=started)


WRITING_CTE = "WITH d AS (DELETE FROM raw.landing RETURNING *) SELECT count(*) AS n FROM d"


def test_a_materialized_query_that_deletes_inside_itself_is_never_allowed(tmp_path, home):
    """A table whose query is ``WITH d AS (DELETE FROM raw.landing RETURNING *) SELECT …``: DuckDB parses it as a
    SELECT, so nothing judged the DELETE (human-only only because the read-only sample failed; a typed approval
    would have emptied the source). The pre-flight now says never, naming it; by hand the run refuses it before
    anything runs. raw.landing keeps its rows."""
    repo = pipeline(tmp_path, "standard")
    repo.sql("mid.copy", WRITING_CTE, depends=["raw.events"], materialization={"type": "table"})
    checks = dry_checks(repo, home)
    assert (checks["verdict"], checks["materialization"]["tier"]) == ("never", "never"), checks["materialization"]
    assert (
        "mid.copy (create+replace): the first partition's query runs DELETE on raw.landing inside it (a WITH clause's "
        "statement); a materialized asset's query only reads, so every run would fail"
    ) in checks["materialization"]["detail"]
    assert checks["materialization"]["evidence"]["assets"]["mid.copy"]["query_writes"] == ["DELETE on raw.landing"]
    by_hand = repo.run("--start-date", "2024-01-08", "--end-date", "2024-01-08", "--select", "mid.copy", env=home)
    assert by_hand.returncode == 1 and "this one runs DELETE on raw.landing inside it" in by_hand.stdout
    assert repo.query("SELECT count(*) FROM raw.landing") == [(5,)]


def test_a_hook_that_deletes_inside_a_query_is_judged_by_that_delete(tmp_path, home):
    """The same query as a post hook: DuckDB parses it as a SELECT, so it was judged a read, ran with verdict auto
    and emptied raw.landing, exit 0. It is now judged by the DELETE it runs: never, exit 3, the source whole. (As a
    custom check: tests/functional/test_guardrails.py, test_a_custom_check_that_writes_runs_nothing_and_fails.)"""
    repo = pipeline(tmp_path, "standard")
    redeclare_daily(repo, hooks={"post": [{"query": WRITING_CTE}]})
    checks = dry_checks(repo, home)
    assert checks["materialization"]["detail"] == (
        "mid.daily: a post hook runs DELETE on raw.landing, a raw table: source data is never deleted or rebuilt"
    )
    assert backfill_week(repo, home)[0] == 3
    assert repo.query("SELECT count(*) FROM raw.landing") == [(5,)]


def test_a_hook_whose_cte_deletes_before_an_insert_is_judged_by_that_delete(tmp_path, home):
    """``WITH d AS (DELETE FROM raw.landing RETURNING *) INSERT INTO mid.audit SELECT * FROM d``: the hook was judged
    by its INSERT (an append to mid.audit), ran with verdict auto and moved the source into the audit table, exit 0.
    Every write inside parentheses is now judged as its own statement: never, exit 3, the source whole."""
    repo = pipeline(tmp_path, "standard")
    repo.execute("CREATE TABLE mid.audit (x BIGINT)")
    hook = "WITH d AS (DELETE FROM raw.landing RETURNING *) INSERT INTO mid.audit SELECT * FROM d"
    redeclare_daily(repo, hooks={"post": [{"query": hook}]})
    checks = dry_checks(repo, home)
    assert checks["materialization"]["detail"] == (
        "mid.daily: a post hook runs DELETE on raw.landing, a raw table: source data is never deleted or rebuilt"
    )
    assert backfill_week(repo, home)[0] == 3
    assert repo.query("SELECT count(*) FROM raw.landing") == [(5,)]


def test_a_hook_duckdb_parses_but_cannot_name_is_judged_by_a_person(tmp_path, home):
    """A pre hook ``UPDATE EXTENSIONS``: DuckDB's Python module raised "29 is not a valid StatementType" naming its
    type, and the pre-flight said "could not decide: 29 is not a valid StatementType." It is now a statement that
    cannot be classified, named, and judged by a person (human-only: exit 4 without a terminal, nothing run)."""
    repo = pipeline(tmp_path, "standard")
    redeclare_daily(repo, hooks={"pre": [{"query": "UPDATE EXTENSIONS"}]})
    checks = dry_checks(repo, home)
    assert (checks["materialization"]["tier"], checks["materialization"]["detail"]) == (
        "human-only",
        "mid.daily: a pre hook runs SQL that cannot be classified: 'UPDATE EXTENSIONS'",
    )
    code, found = backfill_week(repo, home)
    assert (code, found) == (4, [])


TRUNCATING_CTE = "WITH d AS (TRUNCATE raw.landing) SELECT 1 AS n"
COMMENTED_CTE = "WITH d AS (/* tidy */ DELETE FROM raw.landing RETURNING *) SELECT count(*) AS n FROM d"


@pytest.mark.parametrize("query", [TRUNCATING_CTE, COMMENTED_CTE])
def test_a_truncate_or_a_commented_delete_in_a_cte_is_judged_by_what_it_deletes(tmp_path, home, query):
    """``WITH d AS (TRUNCATE raw.landing) SELECT 1`` (TRUNCATE is a CTE body DuckDB runs) was judged a read as a post
    hook: verdict auto, exit 0, the source emptied; ``WITH d AS (/* tidy */ DELETE …)`` was judged a read as a
    materialized query. Both are now the DELETE they run: never for the hook and for the table's query, exit 3,
    the source whole."""
    repo = pipeline(tmp_path, "standard")
    redeclare_daily(repo, hooks={"post": [{"query": query}]})
    assert dry_checks(repo, home)["materialization"]["detail"] == (
        "mid.daily: a post hook runs DELETE on raw.landing, a raw table: source data is never deleted or rebuilt"
    )
    assert backfill_week(repo, home)[0] == 3
    assert repo.query("SELECT count(*) FROM raw.landing") == [(5,)]
    redeclare_daily(repo)
    repo.sql("mid.copy", query, depends=["raw.events"], materialization={"type": "table"})
    checks = dry_checks(repo, home)
    assert (checks["verdict"], checks["materialization"]["tier"]) == ("never", "never"), checks["materialization"]
    assert backfill_week(repo, home)[0] == 3
    by_hand = repo.run("--start-date", "2024-01-08", "--end-date", "2024-01-08", "--select", "mid.copy", env=home)
    assert by_hand.returncode == 1 and "this one runs DELETE on raw.landing inside it" in by_hand.stdout
    assert repo.query("SELECT count(*) FROM raw.landing") == [(5,)]


def with_warehouses(repo: Repo, *files: str) -> None:
    """Environment ``live`` (production guardrails) on ``prod.duckdb``, and a ``mart.revenue`` of 5 rows in each of
    ``files`` (prod.duckdb, or a scratch file no environment names)."""
    config = yaml.safe_load((repo.root / ".bruin.yml").read_text())
    live = {"guardrails": "production", "connections": {"duckdb": [{"name": "db", "path": "prod.duckdb"}]}}
    config["environments"]["live"] = live
    repo.write(".bruin.yml", yaml.safe_dump(config))
    for file in files:
        with duckdb.connect(str(repo.root / file)) as connection:
            connection.execute("CREATE SCHEMA mart; CREATE TABLE mart.revenue AS SELECT range AS x FROM range(5)")


def revenue(repo: Repo, file: str) -> int:
    with duckdb.connect(str(repo.root / file), read_only=True) as connection:
        return connection.execute("SELECT count(*) FROM mart.revenue").fetchone()[0]


ATTACHES = (
    "ATTACH 'prod.duckdb' AS p",
    "ATTACH IF NOT EXISTS 'duckdb:{root}/prod.duckdb' AS p",
    "SET VARIABLE w = 'prod.duckdb'; ATTACH getvariable('w') AS p",
)


@pytest.mark.parametrize("attach", ATTACHES)
def test_sql_that_attaches_production_s_warehouse_is_judged_at_production_s_level(tmp_path, home, attach):
    """A sandbox environment's SQL run as written that attaches the file of environment ``live`` (production) and
    deletes its mart: each statement "cannot be classified", which sandbox lets through, so the verdict was auto and
    production's mart.revenue went from 5 rows to 0, exit 0. The level follows every file the run attaches —
    named by its text, or not named (an expression: it may be any environment's): production, which needs a
    person (exit 4 in a pipe), and production's rows stay."""
    repo = pipeline(tmp_path, "sandbox")
    with_warehouses(repo, "prod.duckdb")
    sql = f"{attach.format(root=repo.root)}; DELETE FROM p.mart.revenue; DETACH p"
    repo.sql("mid.cleanup", sql, depends=["raw.events"])
    checks = dry_checks(repo, home)
    assert (checks["verdict"], checks["environment"]["evidence"]["level"]) == ("human-only", "production")
    source = checks["environment"]["evidence"]["from"]
    named = f"mid.cleanup's SQL attaches {(repo.root / 'prod.duckdb').resolve()}, environment 'live''s DuckDB file"
    unnamed = "mid.cleanup's SQL attaches a database its text does not name, which may be environment 'live''s"
    assert source == (unnamed if "getvariable" in attach else named)
    assert checks["environment"]["detail"] == f"dev: production guardrails ({source}): every run needs approval"
    assert backfill_week(repo, home) == (4, [])
    assert revenue(repo, "prod.duckdb") == 5


def test_a_partition_that_attaches_another_file_than_the_one_judged_is_refused(tmp_path, home):
    """A macro attaching ``scratch.duckdb`` (no environment's) on every day but the tenth, which attaches
    ``prod.duckdb``: the pre-flight judged the scratch file (sandbox, verdict auto), and the tenth's ATTACH had the
    same shape once its quoted text was blanked, so it deleted production's mart (5 rows → 0), exit 0. The file
    is now part of what was judged: the tenth fails with nothing run, and production keeps its rows."""
    repo = pipeline(tmp_path, "sandbox")
    with_warehouses(repo, "prod.duckdb", "scratch.duckdb")
    on_the_tenth(repo, "ATTACH 'prod.duckdb' AS p", "ATTACH 'scratch.duckdb' AS p")
    repo.sql("mid.cleanup", "{{ day_sql() }}; DELETE FROM p.mart.revenue; DETACH p", depends=["raw.events"])
    assert dry_checks(repo, home)["verdict"] == "auto"
    code, found = backfill_week(repo, home)
    assert revenue(repo, "prod.duckdb") == 5
    assert code == 1 and list(failed_days(found)) == ["2024-01-10"]
    assert (
        "mid.cleanup: this partition's SQL, run as written, runs SQL that cannot be classified, unjudged by the "
        "pre-flight (\"ATTACH 'prod.duckdb' AS p\"): nothing of this partition was written"
    ) in failed_days(found)["2024-01-10"]


COPIES = (
    "COPY (SELECT 1 AS x) TO 'prod.duckdb' (FORMAT csv)",
    'COPY (SELECT 1 AS x) TO "{root}/prod.duckdb.wal" (FORMAT csv)',
    "COPY (SELECT 1 AS x, 2 AS y) TO 'warehouses' (FORMAT csv, PARTITION_BY (x), OVERWRITE)",
    "COPY (SELECT 1 AS x) TO ('prod' || '.duckdb') (FORMAT csv)",
)


@pytest.mark.parametrize("copy", COPIES)
def test_sql_that_copies_over_production_s_warehouse_is_judged_at_production_s_level(tmp_path, home, copy):
    """A sandbox environment's SQL run as written ``COPY … TO 'prod.duckdb'``: the statement "cannot be classified",
    which sandbox lets through, so the verdict was auto, exit 0, and environment ``live``'s file was CSV text after
    ("not a valid DuckDB database file"). A COPY that overwrites an environment's file, its write-ahead log, or
    empties a directory holding it (``PARTITION_BY … OVERWRITE``), or one whose target is an expression, is judged
    at that environment's level: production, which needs a person (exit 4 in a pipe); production's rows stay."""
    repo = pipeline(tmp_path, "sandbox")
    (repo.root / "warehouses").mkdir()
    config = yaml.safe_load((repo.root / ".bruin.yml").read_text())
    prod = "warehouses/prod.duckdb" if "warehouses" in copy else "prod.duckdb"
    config["environments"]["live"] = {
        "guardrails": "production", "connections": {"duckdb": [{"name": "db", "path": prod}]},
    }  # fmt: skip
    repo.write(".bruin.yml", yaml.safe_dump(config))
    with duckdb.connect(str(repo.root / prod)) as connection:
        connection.execute("CREATE SCHEMA mart; CREATE TABLE mart.revenue AS SELECT range AS x FROM range(5)")
    repo.sql("mid.export", f"{copy.format(root=repo.root)}; SELECT 1", depends=["raw.events"])
    checks = dry_checks(repo, home)
    assert (checks["verdict"], checks["environment"]["evidence"]["level"]) == ("human-only", "production")
    target = (repo.root / prod).resolve()
    expected = {
        "prod.duckdb'": f"mid.export's SQL copies to {target}, the DuckDB file of environment 'live'",
        ".wal": f"mid.export's SQL copies to {target}.wal, the write-ahead log of the DuckDB file of environment "
        "'live'",
        "OVERWRITE": f"mid.export's SQL copies to {target.parent}, a directory holding the DuckDB file {target} of "
        "environment 'live'",
        "||": "mid.export's SQL copies to a file its text does not name, which may be environment 'live''s",
    }
    [source] = [why for key, why in expected.items() if key in copy]
    assert checks["environment"]["evidence"]["from"] == source
    assert backfill_week(repo, home) == (4, [])
    assert revenue(repo, prod) == 5


@pytest.mark.parametrize("target", ["'prod.duckdb'", "$$prod.duckdb$$"])
def test_a_partition_that_copies_over_a_warehouse_the_pre_flight_did_not_see_is_refused(tmp_path, home, target):
    """A macro exporting each day to its own CSV file, but on the tenth to ``prod.duckdb``: the exports' names are
    blanked (each partition writes another), so the tenth had the judged shape and overwrote production's file. A
    target that is a DuckDB file, a write-ahead log or a directory keeps its name, and one in a string of another
    quoting (``$$prod.duckdb$$``, which the text does not say is a file) keeps its quoting: the tenth fails with
    nothing run, the days before it exported, and production keeps its rows."""
    repo = pipeline(tmp_path, "sandbox")
    with_warehouses(repo, "prod.duckdb")
    on_the_tenth(repo, f"COPY (SELECT 1 AS x) TO {target} (FORMAT csv)",
                 "COPY (SELECT 1 AS x) TO 'export-{{ start_date }}.csv' (FORMAT csv)")  # fmt: skip
    repo.sql("mid.export", "{{ day_sql() }}; SELECT 1", depends=["raw.events"])
    assert dry_checks(repo, home)["verdict"] == "auto"
    code, found = backfill_week(repo, home)
    assert revenue(repo, "prod.duckdb") == 5
    assert code == 1 and list(failed_days(found)) == ["2024-01-10"]
    shown = target if target.startswith("'") else "$$$$"  # a name kept, or the quoting of a string
    refused = failed_days(found)["2024-01-10"]
    assert "runs SQL that cannot be classified, unjudged by the pre-flight" in refused
    assert f"COPY (SELECT 1 AS x) TO {shown}" in refused
    assert sorted(p.name for p in repo.root.glob("export-*.csv")) == [
        "export-2024-01-08.csv",
        "export-2024-01-09.csv",
    ]  # the days before it exported, each to its own file


def test_a_continue_typed_in_another_directory_runs_no_copy_over_a_warehouse(tmp_path, home):
    """A week exported to its own file; then the SQL copies over ``prod.duckdb`` (a relative name) and the operator
    types ``--continue --rerun all`` in another directory, where no such file is: the pre-flight there judges the
    target an export's file (verdict auto), but each partition it runs, in the backfill's own directory, keeps the
    target's name and is refused as unjudged. Nothing is written; production keeps its rows."""
    repo = pipeline(tmp_path, "sandbox")
    with_warehouses(repo, "prod.duckdb")
    repo.sql("mid.export", "COPY (SELECT 1 AS x) TO 'export.csv' (FORMAT csv); SELECT 1", depends=["raw.events"])
    assert backfill_week(repo, home)[0] == 0
    [backfill] = state_dirs(repo.root / "logs" / "backfills")
    repo.sql("mid.export", "COPY (SELECT 1 AS x) TO 'prod.duckdb' (FORMAT csv); SELECT 1", depends=["raw.events"])
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    ran = run_backfill("--continue", backfill.name, "--state-dir", str(backfill.parent), "--rerun", "all",
                       "--reason", "again", "--no-progress",
                       cwd=elsewhere, env=home)  # fmt: skip
    assert ran.returncode == 1, ran.stderr
    assert revenue(repo, "prod.duckdb") == 5
    rerun = [r["attempts"][1] for r in records(backfill) if len(r["attempts"]) > 1]
    assert rerun and all(a["status"] == "failed" and "unjudged by the pre-flight" in a["error"] for a in rerun)


REPLACE_RAW = {  # statements that cannot be classified, whose schema.sql replaces a raw table the text never names
    "a hook's import": ("hook", "PRAGMA import_database('d')", "raw"),
    "SQL run as written": ("as written", "IMPORT DATABASE 'd'", "raw"),
    "a prefixed environment's copy": ("hook", "PRAGMA import_database('d')", "dev_raw"),
}


@pytest.mark.parametrize("route", REPLACE_RAW)
def test_sql_that_cannot_be_classified_cannot_replace_raw_data_even_where_it_is_let_through(tmp_path, home, route):
    """A sandbox lets SQL that cannot be classified through, and its first partition is the one the pre-flight
    judged: ``PRAGMA import_database('d')``, whose schema.sql replaces raw.landing, ran on every day with verdict
    auto, raw.landing 5 rows → 0, exit 0 — a delete of source data, which is never allowed, by a statement that
    does not name it. Every raw table (a prefixed environment's copies too) is now fingerprinted in a partition
    that runs such SQL: the first day is rolled back and fails, and raw.landing keeps its 5 rows."""
    where, statement, schema = REPLACE_RAW[route]
    repo = pipeline(tmp_path, "sandbox")
    if schema != "raw":
        environment = yaml.safe_load((repo.root / ".bruin.yml").read_text())
        environment["environments"]["dev"]["schema_prefix"] = "dev_"
        repo.write(".bruin.yml", yaml.safe_dump(environment))
        repo.execute(f"CREATE SCHEMA {schema}", f"CREATE TABLE {schema}.landing AS SELECT range AS x FROM range(5)")
    (repo.root / "d").mkdir()
    (repo.root / "d" / "schema.sql").write_text(f"CREATE OR REPLACE TABLE {schema}.landing (x INTEGER);\n")
    (repo.root / "d" / "load.sql").write_text("")
    if where == "hook":
        redeclare_daily(repo, hooks={"post": [{"query": statement}]})
    else:
        repo.sql("mid.cleanup", statement, depends=["raw.events"])
    assert dry_checks(repo, home)["verdict"] == "auto"
    code, found = backfill_week(repo, home)
    assert repo.query(f"SELECT count(*) FROM {schema}.landing") == [(5,)]
    assert code == 1 and list(failed_days(found)) == ["2024-01-08"]
    asset = ("" if schema == "raw" else "dev_") + ("mid.daily" if where == "hook" else "mid.cleanup")
    assert (
        f"SQL that cannot be classified in {asset} changed rows of another table, {schema}.landing (5 rows before, "
        "0 after): rolled back, nothing of this partition was written"
    ) in failed_days(found)["2024-01-08"]


HIDING = {  # a DELETE after a string or comment that DuckDB closes where the classifier did not
    "dollar quotes": "SELECT $$'$$; DELETE FROM raw.landing; SELECT $$'$$",
    "an escape string": "SELECT E'\\''; DELETE FROM raw.landing; SELECT E'\\''",
    "a carriage return": 'SELECT 1; -- keep the source{{ "\\r" }}DELETE FROM raw.landing',  # a file's is read as \n
}


@pytest.mark.parametrize("hook", HIDING.values(), ids=HIDING.keys())
def test_a_raw_delete_behind_a_string_duckdb_reads_otherwise_is_never_allowed(tmp_path, home, hook):
    """A post hook whose DELETE of raw.landing follows a dollar-quoted string, an escape string or a comment ended
    by a carriage return (rendered by the template: a file's is read as a newline): read as one SELECT, verdict
    auto, and DuckDB ran the DELETE. The SQL is now read as DuckDB reads it: never (exit 3), the source whole."""
    repo = pipeline(tmp_path, "standard")
    redeclare_daily(repo, hooks={"post": [{"query": hook}]})
    checks = dry_checks(repo, home)
    assert (checks["verdict"], checks["materialization"]["tier"]) == ("never", "never"), checks["materialization"]
    code, found = backfill_week(repo, home)
    assert (code, found) == (3, [])
    assert repo.query("SELECT count(*) FROM raw.landing") == [(5,)]


def with_tagged_source(repo: Repo) -> None:
    """ingest.events: a table of 5 rows, the asset of a loader that a ``layer:raw`` tag puts in the raw layer
    (its schema says nothing)."""
    repo.execute("CREATE SCHEMA ingest", "CREATE TABLE ingest.events AS SELECT range AS x FROM range(5)")
    repo.sql("ingest.events", "SELECT 1 AS x", materialization={"type": "table", "strategy": "append"},
             tags=["layer:raw"])  # fmt: skip


def test_sql_that_deletes_an_asset_tagged_raw_is_never_allowed(tmp_path, home):
    """``DELETE FROM ingest.events`` as SQL run as written, where ingest.events is a ``layer:raw`` asset: the layer
    check called it raw, but the SQL's judge looked at schemas only — verdict auto in a sandbox, the week ran and
    the source lost its 5 rows, exit 0. Now never (exit 3), the rows counted after, and never too when the cleanup
    runs alone (the tagged loader is then not among the assets the pre-flight judges)."""
    repo = pipeline(tmp_path, "sandbox")
    with_tagged_source(repo)
    repo.sql("mid.cleanup", "DELETE FROM ingest.events", depends=["raw.events", "ingest.events"])
    checks = dry_checks(repo, home)
    assert (checks["verdict"], checks["materialization"]["tier"]) == ("never", "never"), checks["materialization"]
    assert (
        "mid.cleanup: its SQL, run as written, runs DELETE on ingest.events, a raw table: source data is never "
        "deleted or rebuilt"
    ) in checks["materialization"]["detail"]
    assert backfill_week(repo, home) == (3, [])
    assert repo.query("SELECT count(*) FROM ingest.events") == [(5,)]
    alone = dry_checks(repo, home, "--selector", "mid.cleanup")  # the tagged loader neither selected nor downstream
    assert (alone["verdict"], alone["materialization"]["tier"]) == ("never", "never"), alone["materialization"]


def test_a_partition_that_deletes_an_asset_tagged_raw_is_refused(tmp_path, home):
    """The same delete rendered by a macro on the tenth only: the pre-flight saw a read; the tenth fails with
    nothing run, and ingest.events keeps its rows (the days before appended theirs)."""
    repo = pipeline(tmp_path, "sandbox")
    with_tagged_source(repo)
    on_the_tenth(repo, "DELETE FROM ingest.events", "SELECT 1")
    repo.sql("mid.cleanup", "{{ day_sql() }}", depends=["raw.events", "ingest.events"])
    code, found = backfill_week(repo, home)
    assert code == 1 and list(failed_days(found)) == ["2024-01-10"]
    assert (
        "mid.cleanup: this partition's SQL, run as written, runs DELETE on ingest.events, a raw table: source data is "
        "never deleted or rebuilt in a backfill; nothing of this partition was written"
    ) in failed_days(found)["2024-01-10"]
    assert repo.query("SELECT count(*) FROM ingest.events") == [(8,)]
