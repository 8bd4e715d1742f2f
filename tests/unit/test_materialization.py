"""Every materialization on a real in-memory DuckDB database: the table's rows after each strategy, the window
a ``time_interval`` run replaces, and a failing hook that leaves the table exactly as it was."""

from __future__ import annotations

import dataclasses
from datetime import UTC, date, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import duckdb
import pytest

from engine.dates.instants import to_micros
from engine.pipeline.assets import Asset, Materialization
from engine.pipeline.columns import Column
from engine.pipeline.database import Database, strip_statement
from engine.pipeline.materialization import (
    MissingColumns,
    MoreThanOneQuery,
    OtherTableChanged,
    OutsideWindowChanged,
    RawDeleteRefused,
    fences_its_window,
    materialize,
    window_predicate,
)
from engine.pipeline.seeds import load_seed
from engine.pipeline.templating import Window

DAY_2 = Window(
    to_micros(datetime(2024, 1, 2, tzinfo=UTC)), to_micros(datetime(2024, 1, 2, 23, 59, 59, 999999, tzinfo=UTC)), UTC
)


def column(
    name: str,
    type_: str | None = "integer",
    *,
    key: bool = False,
    update: bool = False,
    nullable: bool | None = None,
    description: str | None = None,
) -> Column:
    return Column(name, type_, key, update, nullable, (), description)


def asset(
    strategy: str | None,
    *,
    type_: str | None = "table",
    key: str | None = None,
    granularity: str | None = None,
    columns: tuple[Column, ...] = (),
    predicate: str | None = None,
    **fields,
) -> Asset:
    return Asset(
        "mart.t",
        "duckdb.sql",
        Path("t.sql"),
        "t.sql",
        1,
        materialization=Materialization(type_, strategy, key, granularity, predicate),
        columns=columns,
        **fields,
    )


@pytest.fixture
def db():
    connection = duckdb.connect(":memory:")
    connection.execute("SET TimeZone = 'UTC'")
    yield Database(connection.cursor(), lambda sql: sql)
    connection.close()


def rows(db: Database, table: str = "mart.t") -> list[tuple]:
    return db.execute(f"SELECT * FROM {table} ORDER BY ALL").fetchall()


def seed(db: Database, sql: str) -> None:
    db.execute("CREATE SCHEMA IF NOT EXISTS mart")
    db.execute(f"CREATE TABLE mart.t AS {sql}")


def values(text: str, names: str = "id, v") -> str:
    return f"SELECT * FROM (VALUES {text}) AS s({names})"


def test_create_replace_builds_the_table_and_its_schema(db):
    """The default strategy creates the schema and replaces the table with the query's rows; the count is the
    rows written."""
    assert materialize(db, asset(None), values("(1, 'a'), (2, 'b')") + " ;; ", DAY_2, full_refresh=False) == 2
    assert rows(db) == [(1, "a"), (2, "b")]
    assert materialize(db, asset(None), values("(3, 'c')"), DAY_2, full_refresh=False) == 1
    assert rows(db) == [(3, "c")]
    assert materialize(db, asset("create+replace"), values("(4, 'd')"), DAY_2, full_refresh=False) == 1
    assert rows(db) == [(4, "d")]


def test_append_adds_rows_by_name_and_creates_a_missing_table(db):
    """The first append creates the table; the next inserts by column name, not position."""
    assert materialize(db, asset("append"), values("(1, 'a')"), DAY_2, full_refresh=False) == 1
    assert materialize(db, asset("append"), values("('b', 2)", "v, id"), DAY_2, full_refresh=False) == 1
    assert rows(db) == [(1, "a"), (2, "b")]


def test_truncate_insert_keeps_only_the_new_rows(db):
    """Every old row goes, the query's rows come in."""
    seed(db, values("(1, 'a'), (2, 'b')"))
    assert materialize(db, asset("truncate+insert"), values("(3, 'c')"), DAY_2, full_refresh=False) == 1
    assert rows(db) == [(3, "c")]


@pytest.mark.parametrize(
    "strategy",
    [
        asset("append"),
        asset("truncate+insert"),
        asset("delete+insert", key="d"),
        asset("time_interval", key="d", granularity="date"),
    ],
    ids=lambda a: a.materialization.strategy,
)
def test_a_query_that_stopped_returning_a_column_writes_nothing(db, strategy):
    """``INSERT … BY NAME`` fills a column the query does not return with NULL: a query that lost ``amount`` (and
    ``Note``, matched without case) would blank them in every row it replaces, with exit 0. It is refused and
    rolled back instead (Bruin's positional insert fails there too); the columns in another order still land."""
    seed(db, "SELECT DATE '2024-01-02' AS d, 5 AS amount, 'x' AS Note")
    lost = "SELECT DATE '2024-01-02' AS d"
    with pytest.raises(MissingColumns) as raised:
        materialize(db, strategy, lost, DAY_2, full_refresh=False)
    assert str(raised.value) == (
        "mart.t: the query returns no columns amount, Note, which the table has; the rows it writes would hold "
        "NULL there: nothing of this run was written (return it from the query, or drop it from the table)"
    )
    assert rows(db) == [(date(2024, 1, 2), 5, "x")]
    with pytest.raises(MissingColumns, match=r"no column amount, which the table has; "):
        materialize(db, strategy, "SELECT DATE '2024-01-02' AS d, 'y' AS note", DAY_2, full_refresh=False)
    reordered = "SELECT 'y' AS NOTE, 6 AS amount, DATE '2024-01-02' AS d"
    assert materialize(db, strategy, reordered, DAY_2, full_refresh=False) == 1
    assert rows(db)[-1] == (date(2024, 1, 2), 6, "y")


def test_merge_updates_the_columns_marked_and_inserts_new_keys(db):
    """A matched key updates only ``update_on_merge`` columns; a new key is inserted; a NULL key matches a NULL
    key (IS NOT DISTINCT FROM) instead of adding a row."""
    seed(db, values("(1, 'a', 10), (NULL, 'n', 20)", "id, v, w"))
    merged = asset("merge", columns=(column("id", key=True), column("v", "varchar", update=True), column("w")))
    changed = materialize(
        db, merged, values("(1, 'A', 99), (NULL, 'N', 98), (2, 'b', 30)", "id, v, w"), DAY_2, full_refresh=False
    )
    assert changed == 3
    assert rows(db) == [(1, "A", 10), (2, "b", 30), (None, "N", 20)]


def test_merge_on_a_composite_key_updates_every_marked_column(db):
    """Two key columns must both match; two update columns are both set."""
    seed(db, values("(1, 1, 'a', 0), (1, 2, 'b', 0)", "k1, k2, v, w"))
    merged = asset(
        "merge",
        columns=(column("k1", key=True), column("k2", key=True), column("v", "varchar", update=True),
                 column("w", update=True)),
    )  # fmt: skip
    materialize(db, merged, values("(1, 2, 'B', 9), (2, 1, 'c', 5)", "k1, k2, v, w"), DAY_2, full_refresh=False)
    assert rows(db) == [(1, 1, "a", 0), (1, 2, "B", 9), (2, 1, "c", 5)]


def test_merge_without_update_columns_leaves_matches_alone(db):
    """With no ``update_on_merge`` column a matched row is left as it is (DO NOTHING)."""
    seed(db, values("(1, 'a')"))
    merged = asset("merge", columns=(column("id", key=True), column("v", "varchar")))
    materialize(db, merged, values("(1, 'A'), (2, 'b')"), DAY_2, full_refresh=False)
    assert rows(db) == [(1, "a"), (2, "b")]


def test_merge_with_a_predicate_matches_only_where_it_holds(db):
    """``incremental_predicate`` narrows the match: a key outside it is inserted again, not updated."""
    seed(db, values("(1, 'a', 1), (2, 'b', 5)", "id, v, w"))
    merged = asset(
        "merge",
        columns=(column("id", key=True), column("v", "varchar", update=True), column("w")),
        predicate="target.w > 3",
    )
    materialize(db, merged, values("(1, 'A', 1), (2, 'B', 5)", "id, v, w"), DAY_2, full_refresh=False)
    assert rows(db) == [(1, "A", 1), (1, "a", 1), (2, "B", 5)]


def test_delete_insert_replaces_the_keys_the_query_returns(db):
    """Rows whose key the query returns are replaced; other keys stay; the staging table is gone after."""
    seed(db, values("(1, 'a'), (1, 'a2'), (2, 'b')", "k, v"))
    replaced = asset("delete+insert", key="k")
    assert materialize(db, replaced, values("(1, 'new'), (3, 'c')", "k, v"), DAY_2, full_refresh=False) == 2
    assert rows(db) == [(1, "new"), (2, "b"), (3, "c")]
    assert db.scalar("SELECT count(*) FROM duckdb_tables() WHERE table_name LIKE '__backfill_stage_%'") == 0


def test_time_interval_on_a_date_key_replaces_the_days_of_the_window(db):
    """A ``date`` key: the window's days are deleted (inclusive), the days around it stay."""
    seed(db, "SELECT (DATE '2024-01-01' + INTERVAL (i) DAY)::DATE AS d, i AS v FROM range(3) t(i)")
    daily = asset("time_interval", key="d", granularity="date")
    assert window_predicate(db, daily, DAY_2) == "\"d\" BETWEEN DATE '2024-01-02' AND DATE '2024-01-02'"
    assert materialize(db, daily, "SELECT DATE '2024-01-02' AS d, 100 AS v", DAY_2, full_refresh=False) == 1
    assert [(d.isoformat(), v) for d, v in rows(db)] == [("2024-01-01", 0), ("2024-01-02", 100), ("2024-01-03", 2)]


def test_time_interval_on_a_timestamptz_key_replaces_the_instants_of_the_window(db):
    """A TIMESTAMPTZ key: rows inside the window's instants go, to the microsecond at both ends."""
    seed(
        db,
        "SELECT * FROM (VALUES (TIMESTAMPTZ '2024-01-01 23:59:59.999999+00', 1), "
        "(TIMESTAMPTZ '2024-01-02 00:00:00+00', 2), (TIMESTAMPTZ '2024-01-02 23:59:59.999999+00', 3), "
        "(TIMESTAMPTZ '2024-01-03 00:00:00+00', 4)) AS s(ts, v)",
    )
    hourly = asset("time_interval", key="ts", granularity="timestamp")
    materialize(db, hourly, "SELECT TIMESTAMPTZ '2024-01-02 12:00:00+00' AS ts, 9 AS v", DAY_2, full_refresh=False)
    assert [v for _, v in rows(db)] == [1, 9, 4]


def test_a_naive_timestamp_key_holds_wall_times_of_the_run_zone(db):
    """A TIMESTAMP key is compared with the window's wall times in its zone, not in UTC."""
    zone = ZoneInfo("Asia/Kolkata")
    start = to_micros(datetime(2024, 1, 2, tzinfo=zone))
    window = Window(start, start + 86_400_000_000 - 1, zone)
    seed(
        db,
        "SELECT * FROM (VALUES (TIMESTAMP '2024-01-01 23:00:00', 1), (TIMESTAMP '2024-01-02 00:00:00', 2), "
        "(TIMESTAMP '2024-01-02 23:59:59.999999', 3), (TIMESTAMP '2024-01-03 00:00:00', 4)) AS s(ts, v)",
    )
    local = asset("time_interval", key="ts", granularity="timestamp")
    assert window_predicate(db, local, window) == (
        "\"ts\" BETWEEN TIMESTAMP '2024-01-02 00:00:00.000000' AND TIMESTAMP '2024-01-02 23:59:59.999999'"
    )
    materialize(db, local, "SELECT TIMESTAMP '2024-01-02 05:00:00' AS ts, 9 AS v", window, full_refresh=False)
    assert [v for _, v in rows(db)] == [1, 9, 4]


def test_a_timestamptz_predicate_names_the_offsets(db):
    """The predicate of a zoned key carries the window's offset and microseconds."""
    zone = ZoneInfo("America/New_York")
    start = to_micros(datetime(2024, 1, 2, tzinfo=zone))
    seed(db, "SELECT TIMESTAMPTZ '2024-01-02 00:00:00+00' AS ts")
    predicate = window_predicate(db, asset("time_interval", key="ts"), Window(start, start + 999, zone))
    assert predicate == (
        "\"ts\" BETWEEN TIMESTAMPTZ '2024-01-02T00:00:00.000000-05:00' "
        "AND TIMESTAMPTZ '2024-01-02T00:00:00.000999-05:00'"
    )


@pytest.mark.parametrize("strategy", ["append", "merge", "delete+insert", "time_interval", "truncate+insert"])
def test_a_full_refresh_of_an_incremental_strategy_rebuilds_the_table(db, strategy):
    """``--full-refresh`` drops and rebuilds an incremental table from the query alone."""
    seed(db, values("(1, 'old'), (2, 'old')"))
    rebuilt = asset(strategy, key="id", granularity="date", columns=(column("id", key=True),))
    assert materialize(db, rebuilt, values("(5, 'new')"), DAY_2, full_refresh=True) == 1
    assert rows(db) == [(5, "new")]


def test_always_full_refresh_rebuilds_without_the_flag(db):
    """``parameters.full_refresh: true`` rebuilds on every run."""
    seed(db, values("(1, 'old')"))
    assert (
        materialize(db, asset("append", always_full_refresh=True), values("(2, 'new')"), DAY_2, full_refresh=False) == 1
    )
    assert rows(db) == [(2, "new")]


def test_a_restricted_full_refresh_runs_the_strategy_as_usual(db):
    """``full_refresh_restricted`` keeps the table: a full refresh appends like any other run."""
    seed(db, values("(1, 'old')"))
    kept = asset("append", full_refresh_restricted=True)
    materialize(db, kept, values("(2, 'new')"), DAY_2, full_refresh=True)
    assert rows(db) == [(1, "old"), (2, "new")]


def test_a_view_is_replaced(db):
    """``type: view`` (re)creates a view over the query."""
    materialize(db, asset(None, type_="view"), values("(1, 'a')"), DAY_2, full_refresh=False)
    materialize(db, asset(None, type_="view"), values("(2, 'b')"), DAY_2, full_refresh=False)
    assert rows(db) == [(2, "b")]
    assert db.scalar("SELECT count(*) FROM duckdb_views() WHERE view_name = 't'") == 1


def test_no_materialization_runs_the_sql_as_written(db):
    """Without a materialization the statement runs as is, in no schema of ours, and no row count is known."""
    assert (
        materialize(db, asset(None, type_=None), "CREATE TABLE loose AS SELECT 1 AS x", DAY_2, full_refresh=False)
        is None
    )
    assert rows(db, "loose") == [(1,)]
    assert db.scalar("SELECT count(*) FROM duckdb_schemas() WHERE schema_name = 'mart'") == 0


def test_ddl_creates_the_declared_table_with_keys_and_comments(db):
    """``ddl`` declares columns (VARCHAR when untyped), NOT NULL, the primary key and column comments (quotes
    escaped); a full refresh drops what was there."""
    declared = asset(
        "ddl",
        columns=(column("id", key=True), column("at", "date", key=True), column("note", None, description="it's"),
                 column("must", nullable=False), column("may", nullable=True)),
    )  # fmt: skip
    assert materialize(db, declared, "", DAY_2, full_refresh=False) == 0
    described = db.execute(
        "SELECT column_name, data_type, is_nullable FROM information_schema.columns WHERE table_name = 't' "
        "ORDER BY ordinal_position"
    ).fetchall()
    assert described == [
        ("id", "INTEGER", "NO"), ("at", "DATE", "NO"), ("note", "VARCHAR", "YES"), ("must", "INTEGER", "NO"),
        ("may", "INTEGER", "YES"),
    ]  # fmt: skip
    assert db.scalar("SELECT comment FROM duckdb_columns() WHERE column_name = 'note'") == "it's"
    assert db.scalar("SELECT comment FROM duckdb_columns() WHERE column_name = 'id'") is None
    db.execute("INSERT INTO mart.t VALUES (1, DATE '2024-01-01', 'x', 0, NULL)")
    db.execute("INSERT INTO mart.t VALUES (1, DATE '2024-01-02', 'x', 0, NULL)")  # the key has two columns
    with pytest.raises(duckdb.ConstraintException):
        db.execute("INSERT INTO mart.t VALUES (1, DATE '2024-01-01', 'y', 0, NULL)")
    materialize(db, declared, "", DAY_2, full_refresh=False)
    assert len(rows(db)) == 2
    materialize(db, declared, "", DAY_2, full_refresh=True)
    assert rows(db) == []


def test_ddl_without_a_key_declares_no_constraint(db):
    """No primary key column: duplicate rows are accepted."""
    materialize(db, asset("ddl", columns=(column("id"),)), "", DAY_2, full_refresh=False)
    db.execute("INSERT INTO mart.t VALUES (1), (1), (NULL)")
    assert rows(db) == [(1,), (1,), (None,)]


def test_a_failing_post_hook_leaves_the_table_as_it_was(db):
    """Pre hook, strategy and post hook are one transaction: a failing post hook undoes all of them."""
    seed(db, values("(1, 'a')"))
    db.execute("CREATE TABLE mart.audit (x INTEGER)")
    with pytest.raises(duckdb.Error):
        materialize(
            db,
            asset("truncate+insert"),
            values("(2, 'b')"),
            DAY_2,
            full_refresh=False,
            pre_hooks=["INSERT INTO mart.audit VALUES (1)"],
            post_hooks=["SELECT * FROM missing"],
        )
    assert rows(db) == [(1, "a")]
    assert rows(db, "mart.audit") == []


def test_hooks_run_before_and_after_the_strategy(db):
    """The pre hook sees the old table, the post hook the new one."""
    seed(db, values("(1, 'a')"))
    db.execute("CREATE TABLE mart.seen (n INTEGER)")
    materialize(
        db,
        asset("append"),
        values("(2, 'b')"),
        DAY_2,
        full_refresh=False,
        pre_hooks=["INSERT INTO mart.seen SELECT count(*) FROM mart.t"],
        post_hooks=["INSERT INTO mart.seen SELECT count(*) + 10 FROM mart.t"],
    )
    assert rows(db, "mart.seen") == [(1,), (12,)]


def test_an_unknown_strategy_is_refused_and_rolled_back(db):
    """A strategy no code handles raises instead of doing something else."""
    seed(db, values("(1, 'a')"))
    with pytest.raises(ValueError, match="unsupported strategy upsert"):
        materialize(db, asset("upsert"), values("(2, 'b')"), DAY_2, full_refresh=False)
    assert rows(db) == [(1, "a")]


def test_a_seed_loads_its_csv_typed_by_declared_columns(db, tmp_path):
    """A seed replaces its table with the CSV; declared types win over detection."""
    csv = tmp_path / "s.csv"
    csv.write_text("code,amount\n7,1.5\n10,2\n")
    typed = Asset("ref.codes", "duckdb.seed", csv, "s.csv", 1, seed_path=csv, columns=(column("code", "varchar"),))
    assert load_seed(db, typed) == 2
    assert rows(db, "ref.codes") == [("10", 2.0), ("7", 1.5)]
    untyped = Asset("ref.codes", "duckdb.seed", csv, "s.csv", 1, seed_path=csv)
    assert load_seed(db, untyped) == 2
    assert rows(db, "ref.codes") == [(7, 1.5), (10, 2.0)]


def test_scd2_and_data_vault_strategies_are_handed_their_loaders(db):
    """An SCD2 asset opens versions and a Data Vault hub inserts keys once, through ``materialize`` itself."""
    scd2 = asset("scd2_by_column", columns=(column("id", key=True), column("v", "varchar")))
    materialize(db, scd2, values("(1, 'a')"), DAY_2, full_refresh=False)
    materialize(db, scd2, values("(1, 'b')"), DAY_2, full_refresh=False)
    versions = db.execute("SELECT id, v, _is_current FROM mart.t ORDER BY v").fetchall()
    assert versions == [(1, "a", False), (1, "b", True)]
    materialize(db, scd2, values("(1, 'c')"), DAY_2, full_refresh=True)
    assert db.execute("SELECT id, v, _is_current FROM mart.t").fetchall() == [(1, "c", True)]
    hub = Asset(
        "mart.hub", "duckdb.sql", Path("h.sql"), "h.sql", 1,
        materialization=Materialization("table", "datavault_hub", None, None),
        columns=(column("c_hk", "varchar"), column("c_bk", "varchar"), column("load_dts", "timestamp"),
                 column("record_source", "varchar")),
    )  # fmt: skip
    batch = "SELECT 'h1' AS c_hk, 'b1' AS c_bk, TIMESTAMP '2024-01-02' AS load_dts, 'crm' AS record_source"
    assert materialize(db, hub, batch, DAY_2, full_refresh=False) == 1
    assert materialize(db, hub, batch, DAY_2, full_refresh=False) == 0
    assert materialize(db, hub, batch, DAY_2, full_refresh=True) == 1


@pytest.mark.parametrize(
    ("sql", "statement"),
    [
        ("SELECT 1;;  ", "SELECT 1"),
        ("SELECT 1 -- done", "SELECT 1"),
        ("SELECT 1; -- done\n-- and more\n", "SELECT 1"),
        ("SELECT 1 /* c */ ;", "SELECT 1"),
        ("SELECT 1 /* unclosed", "SELECT 1"),
        ("SELECT '--x' AS a", "SELECT '--x' AS a"),
        ("SELECT 'it''s; -- not a comment'", "SELECT 'it''s; -- not a comment'"),
        ('SELECT 1 AS "a--b" -- x', 'SELECT 1 AS "a--b"'),
        ("SELECT 'unclosed -- text", "SELECT 'unclosed -- text"),
        ("  \n", ""),
    ],
)
def test_a_statement_loses_what_follows_its_last_token(sql, statement):
    """Trailing semicolons, whitespace and comments go (a wrapped query's parenthesis must not be commented
    out); quoted text that looks like a comment stays."""
    assert strip_statement(sql) == statement


def test_a_merge_whose_query_ends_in_a_comment_runs(db):
    """``MERGE … USING (query -- comment)`` would swallow the parenthesis: the comment is dropped first."""
    seed(db, values("(1, 'a')"))
    merged = asset("merge", columns=(column("id", key=True), column("v", "varchar", update=True)))
    materialize(db, merged, values("(1, 'A')") + " -- latest names", DAY_2, full_refresh=False)
    assert rows(db) == [(1, "A")]


def three_days(db: Database) -> None:
    seed(db, "SELECT (DATE '2024-01-01' + INTERVAL (i) DAY)::DATE AS d, i AS v FROM range(3) t(i)")


FENCED = asset("time_interval", key="d", granularity="date")


def test_a_fenced_partition_that_writes_outside_its_window_is_rolled_back(db):
    """A query that returns rows of a later day: the rows outside the window changed, so the whole partition
    is rolled back and the error says how many rows there were before and after."""
    three_days(db)
    before = rows(db)
    lying = "SELECT * FROM (VALUES (DATE '2024-01-02', 10), (DATE '2024-01-03', 11)) AS s(d, v)"
    with pytest.raises(OutsideWindowChanged) as raised:
        materialize(db, FENCED, lying, DAY_2, full_refresh=False, fence_window=True)
    assert str(raised.value) == (
        "mart.t changed rows outside its window 2024-01-02T00:00:00+00:00 .. 2024-01-02T23:59:59.999999+00:00 "
        "(2 rows there before, 3 after): rolled back, nothing of this partition was written"
    )
    assert rows(db) == before


def test_a_hook_that_rewrites_other_days_is_caught_even_with_the_same_count(db):
    """A post hook that changes rows of another day (same count, other contents) is caught by the hash."""
    three_days(db)
    before = rows(db)
    with pytest.raises(OutsideWindowChanged, match=r"\(the same 2 rows, but their contents changed\)"):
        hook = "UPDATE mart.t SET v = v + 100 WHERE d = DATE '2024-01-01'"
        query = "SELECT DATE '2024-01-02' AS d, 5 AS v"
        materialize(db, FENCED, query, DAY_2, full_refresh=False, post_hooks=[hook], fence_window=True)
    assert rows(db) == before


def test_a_hook_naming_its_own_table_with_the_catalog_is_fenced_by_its_window(db):
    """``memory.mart.t`` is the asset's own table: a hook deleting the partition's own day through that name
    lands (it is not taken for another table, whose every change would fail the partition), and one deleting
    another day is rolled back by the window's fence."""
    three_days(db)
    query = "SELECT DATE '2024-01-02' AS d, 5 AS v"
    tidy = "DELETE FROM memory.mart.t WHERE d = DATE '2024-01-02'"
    materialize(db, FENCED, query, DAY_2, full_refresh=False, pre_hooks=[tidy], fence_window=True)
    assert rows(db) == [(date(2024, 1, 1), 0), (date(2024, 1, 2), 5), (date(2024, 1, 3), 2)]
    with pytest.raises(OutsideWindowChanged):
        prune = "DELETE FROM memory.mart.t WHERE d < DATE '2024-01-02'"
        materialize(db, FENCED, query, DAY_2, full_refresh=False, post_hooks=[prune], fence_window=True)


def test_a_materialized_query_followed_by_more_statements_runs_none_of_them(db):
    """A view's query followed by a DELETE of the source: refused before anything runs, naming the asset, how many
    statements follow and the first; the source keeps its rows and no view is made."""
    db.execute("CREATE SCHEMA raw")
    db.execute("CREATE TABLE raw.rows AS SELECT 1 AS id")
    view = asset(None, type_="view")
    with pytest.raises(MoreThanOneQuery) as raised:
        materialize(db, view, "SELECT 1 AS x; DELETE FROM raw.rows; SELECT 2", DAY_2, full_refresh=False)
    assert str(raised.value) == (
        "mart.t: a materialized asset runs one query, and this one is followed by 2 more statements ('DELETE FROM "
        "raw.rows'): nothing of this run was written (move them into a hook, or set materialization to none)"
    )
    assert rows(db, "raw.rows") == [(1,)]
    assert db.execute("SELECT count(*) FROM duckdb_views() WHERE view_name = 't'").fetchone() == (0,)
    with pytest.raises(MoreThanOneQuery, match=r"followed by 1 more statement \('SELECT 2'\)"):
        materialize(db, view, "SELECT 1 AS x; SELECT 2;", DAY_2, full_refresh=False)


def test_an_unqualified_name_a_hook_writes_is_fingerprinted_in_every_schema_that_holds_it(db):
    """``DELETE FROM t`` after ``SET search_path``: the name reaches whichever schema the path says. Every other
    table called ``t`` (in any case) is fingerprinted, so the delete of raw.T is rolled back naming it (before,
    ``t`` was looked for in main only, found nowhere, and the source lost its rows); the asset's own mart.t stays
    under its window's fence, so deleting its own day through the bare name lands."""
    three_days(db)
    db.execute("CREATE SCHEMA raw")
    db.execute('CREATE TABLE raw."T" AS SELECT range AS id FROM range(5)')  # DuckDB matches names without case
    query = "SELECT DATE '2024-01-02' AS d, 5 AS v"
    db.execute("CREATE TABLE mart.other AS SELECT 1 AS x")
    with pytest.raises(OtherTableChanged, match=r"another table, raw\.T \(5 rows before, 0 after\)"):
        hook = "DELETE FROM mart.other WHERE false; SET search_path = 'raw'; DELETE FROM t"
        materialize(db, FENCED, query, DAY_2, full_refresh=False, post_hooks=[hook], fence_window=True)
    db.execute("RESET search_path")
    assert rows(db, "raw.T") == [(0,), (1,), (2,), (3,), (4,)]
    db.execute("CREATE TABLE raw.a AS SELECT 1 AS id")  # two bare names: each is resolved, neither replaces the other
    with pytest.raises(OtherTableChanged, match=r"another table, raw\.a \(1 row before, 0 after\)"):
        hook = "SET search_path = 'raw'; DELETE FROM a; DELETE FROM t WHERE false"
        materialize(db, FENCED, query, DAY_2, full_refresh=False, post_hooks=[hook], fence_window=True)
    db.execute("RESET search_path")
    own = "SET search_path = 'mart'; DELETE FROM T WHERE d = DATE '2024-01-02'; RESET search_path"
    materialize(db, FENCED, query, DAY_2, full_refresh=False, pre_hooks=[own], fence_window=True)
    assert rows(db) == [(date(2024, 1, 1), 0), (date(2024, 1, 2), 5), (date(2024, 1, 3), 2)]


@pytest.mark.parametrize("phase", ["pre", "post"])
def test_a_partition_s_hook_that_deletes_raw_data_runs_nothing(db, phase):
    """A backfill partition's hook, as rendered for it, that deletes from the raw layer: refused before any
    statement runs, naming the asset, the phase, the verb and the table; the source and the table are as they
    were. A run outside a backfill (no fence) is not judged here."""
    three_days(db)
    db.execute("CREATE SCHEMA raw")
    db.execute("CREATE TABLE raw.rows AS SELECT 1 AS id")
    before = rows(db)
    hooks = {f"{phase}_hooks": ["SELECT 1", "UPDATE Raw.Rows SET id = 2"]}
    query = "SELECT DATE '2024-01-02' AS d, 5 AS v"
    with pytest.raises(RawDeleteRefused) as raised:
        materialize(db, FENCED, query, DAY_2, full_refresh=False, fence_window=True, **hooks)
    assert str(raised.value) == (
        f"mart.t: this partition's {phase} hook runs UPDATE on raw.rows, a raw table: source data is never deleted "
        "or rebuilt in a backfill; nothing of this partition was written"
    )
    assert (rows(db), rows(db, "raw.rows")) == (before, [(1,)])
    materialize(db, FENCED, query, DAY_2, full_refresh=False, **hooks)
    assert rows(db, "raw.rows") == [(2,)]


def test_a_partition_s_hook_that_changes_another_table_is_rolled_back(db):
    """A post hook that deletes from, or rewrites, another table (an audit table, a mart): the partition is rolled
    back whole, the error names both tables and says what moved (the count, or only the contents); a table the
    hook drops counts as emptied. Outside a backfill (no fence) the hook runs."""
    three_days(db)
    db.execute("CREATE TABLE mart.audit AS SELECT range AS n FROM range(4)")
    query = "SELECT DATE '2024-01-02' AS d, 5 AS v"
    before = rows(db)
    cases = [
        ("DELETE FROM mart.audit WHERE n < 2", "(4 rows before, 2 after)"),
        ("UPDATE mart.audit SET n = n + 10 WHERE n = 3", "(the same 4 rows, but their contents changed)"),
        ("DROP TABLE mart.audit", "(4 rows before, 0 after)"),
    ]
    for hook, change in cases:
        with pytest.raises(OtherTableChanged) as raised:
            materialize(db, FENCED, query, DAY_2, full_refresh=False, post_hooks=[hook], fence_window=True)
        assert str(raised.value) == (
            f"a hook of mart.t changed rows of another table, mart.audit {change}: rolled back, nothing of this "
            "partition was written"
        )
        assert (rows(db), rows(db, "mart.audit")) == (before, [(0,), (1,), (2,), (3,)])
    materialize(db, FENCED, query, DAY_2, full_refresh=False, post_hooks=[cases[0][0]])
    assert rows(db, "mart.audit") == [(2,), (3,)]
    db.execute("DELETE FROM mart.audit WHERE n = 2")  # one row left: said in the singular
    with pytest.raises(OtherTableChanged, match=r"mart\.audit \(the same 1 row, but its contents changed\)"):
        materialize(db, FENCED, query, DAY_2, full_refresh=False, post_hooks=["UPDATE mart.audit SET n = 0"],
                    fence_window=True)  # fmt: skip


def test_sql_that_cannot_be_classified_leaves_every_raw_table_as_it_was(db, tmp_path):
    """An import (SQL that cannot be classified: which tables it writes is in files, not in its text) that empties
    a table of each raw schema, whatever case its schema is written in, is rolled back naming it; one that writes
    only a mart table (a person approved it), only adds rows to a raw table, or writes the asset's own raw table
    lands, and so does SQL that can be classified, judged by the tables it names. Outside a backfill it runs."""
    three_days(db)
    for schema in ("raw", "Source", "src", "landing"):
        db.execute(f"CREATE SCHEMA {schema}")
        db.execute(f"CREATE TABLE {schema}.rows AS SELECT range AS id FROM range(3)")
    db.execute("CREATE TABLE mart.other AS SELECT 1 AS id")
    db.execute("CREATE TABLE raw.empty (id INTEGER)")  # nothing in it to lose
    query = "SELECT DATE '2024-01-02' AS d, 5 AS v"

    def importing(table: str) -> str:
        directory = tmp_path / table.replace(".", "_")
        directory.mkdir(exist_ok=True)
        (directory / "schema.sql").write_text(f"CREATE OR REPLACE TABLE {table} (id INTEGER);\n")
        (directory / "load.sql").write_text("")
        return f"PRAGMA import_database('{directory}')"

    for schema in ("raw", "Source", "src", "landing"):
        with pytest.raises(OtherTableChanged) as raised:
            materialize(db, FENCED, query, DAY_2, full_refresh=False, post_hooks=[importing(f"{schema}.rows")],
                        fence_window=True)  # fmt: skip
        assert str(raised.value) == (
            f"SQL that cannot be classified in mart.t changed rows of another table, {schema}.rows (3 rows before, "
            "0 after): rolled back, nothing of this partition was written"
        )
        assert rows(db, f"{schema}.rows") == [(0,), (1,), (2,)]
    materialize(db, FENCED, query, DAY_2, full_refresh=False, post_hooks=[importing("mart.other")], fence_window=True)
    assert rows(db, "mart.other") == []
    adding = tmp_path / "adding"  # an import that only adds source rows (a source re-sent) is no delete
    adding.mkdir()
    (adding / "schema.sql").write_text("")
    (adding / "rows.csv").write_text("id\n42\n")
    (adding / "load.sql").write_text(f"COPY raw.rows FROM '{adding / 'rows.csv'}' (HEADER);\n")
    hook = f"PRAGMA import_database('{adding}')"
    materialize(db, FENCED, query, DAY_2, full_refresh=False, post_hooks=[hook], fence_window=True)
    assert rows(db, "raw.rows") == [(0,), (1,), (2,), (42,)]
    db.execute("CREATE TABLE raw.own AS SELECT 1 AS id")  # rebuilt by its own strategy, which its rules judge
    own = dataclasses.replace(asset(None), name="raw.own")
    materialize(db, own, "SELECT 7 AS id", DAY_2, full_refresh=False, post_hooks=["CALL pragma_version()"],
                fence_window=True)  # fmt: skip
    assert rows(db, "raw.own") == [(7,)]
    # SQL that can be classified is judged by what it names: an insert into a raw table is no delete, and lands.
    materialize(db, FENCED, query, DAY_2, full_refresh=False, post_hooks=["INSERT INTO raw.rows VALUES (9)"],
                fence_window=True)  # fmt: skip
    assert rows(db, "raw.rows") == [(0,), (1,), (2,), (9,), (42,)]
    materialize(db, FENCED, query, DAY_2, full_refresh=False, post_hooks=[importing("src.rows")])
    assert rows(db, "src.rows") == []


def test_sql_that_cannot_be_classified_reaches_no_raw_row_under_a_prefix_or_by_a_drop(db, tmp_path):
    """Under the schema prefix ``dev_`` both the source (raw.rows) and the developer's copy (dev_raw.rows) are raw;
    an import that drops either is rolled back, the table said to have lost every row it held."""
    three_days(db)
    for schema in ("raw", "dev_raw"):
        db.execute(f"CREATE SCHEMA {schema}")
        db.execute(f"CREATE TABLE {schema}.rows AS SELECT range AS id FROM range(3)")
        dropping = tmp_path / schema
        dropping.mkdir()
        (dropping / "schema.sql").write_text(f"DROP TABLE {schema}.rows;\n")
        (dropping / "load.sql").write_text("")
        hook = f"PRAGMA import_database('{dropping}')"
        with pytest.raises(OtherTableChanged) as raised:
            materialize(db, FENCED, "SELECT DATE '2024-01-02' AS d, 5 AS v", DAY_2, full_refresh=False,
                        post_hooks=[hook], fence_window=True, schema_prefix="dev_")  # fmt: skip
        assert f"another table, {schema}.rows (3 rows before, 0 after): rolled back" in str(raised.value)
        assert rows(db, f"{schema}.rows") == [(0,), (1,), (2,)]


def test_an_asset_tagged_raw_is_source_data_to_every_guard(db, tmp_path):
    """``ingest.events``, in no raw schema, is in ``raw_layer`` (a ``layer:raw`` tag on its asset): a partition's
    hook that deletes from it is refused before anything runs, and an import that empties it is rolled back; a hook
    that inserts into it lands."""
    from engine.pipeline.materialization import RawDeleteRefused

    three_days(db)
    db.execute("CREATE SCHEMA ingest")
    db.execute("CREATE TABLE ingest.events AS SELECT range AS id FROM range(3)")
    query, tagged = "SELECT DATE '2024-01-02' AS d, 5 AS v", frozenset({"ingest.events"})
    with pytest.raises(RawDeleteRefused, match=r"runs DELETE on ingest\.events, a raw table"):
        materialize(db, FENCED, query, DAY_2, full_refresh=False, post_hooks=["DELETE FROM Ingest.Events"],
                    fence_window=True, raw_layer=tagged)  # fmt: skip
    emptying = tmp_path / "emptying"
    emptying.mkdir()
    (emptying / "schema.sql").write_text("CREATE OR REPLACE TABLE ingest.events (id INTEGER);\n")
    (emptying / "load.sql").write_text("")
    with pytest.raises(OtherTableChanged, match=r"ingest\.events \(3 rows before, 0 after\)"):
        materialize(db, FENCED, query, DAY_2, full_refresh=False, post_hooks=[f"PRAGMA import_database('{emptying}')"],
                    fence_window=True, raw_layer=tagged)  # fmt: skip
    assert rows(db, "ingest.events") == [(0,), (1,), (2,)]
    materialize(db, FENCED, query, DAY_2, full_refresh=False, post_hooks=["INSERT INTO ingest.events VALUES (9)"],
                fence_window=True, raw_layer=tagged)  # fmt: skip
    assert rows(db, "ingest.events") == [(0,), (1,), (2,), (9,)]  # adding to source data is no delete


def test_a_duplicated_row_outside_the_window_is_caught(db):
    """Summed hashes see a row added twice (an XOR would cancel the pair)."""
    three_days(db)
    twice = "SELECT * FROM (VALUES (DATE '2024-01-02', 9), (DATE '2024-01-03', 2), (DATE '2024-01-03', 2)) AS s(d, v)"
    with pytest.raises(OutsideWindowChanged):
        materialize(db, FENCED, twice, DAY_2, full_refresh=False, fence_window=True)


def test_an_hourly_window_over_a_date_key_covers_no_day(db):
    """Hourly partitions over a date key: deleting "its" day deletes the other 23 hours' rows, so every row
    of the table counts as outside the hour and the partition is rolled back."""
    three_days(db)
    before = rows(db)
    hour = Window(DAY_2.start + 3_600_000_000, DAY_2.start + 2 * 3_600_000_000 - 1, UTC)
    with pytest.raises(OutsideWindowChanged, match="3 rows there before, 3 after|the same 3 rows"):
        materialize(db, FENCED, "SELECT DATE '2024-01-02' AS d, 7 AS v", hour, full_refresh=False, fence_window=True)
    assert rows(db) == before


def test_a_partition_that_stays_in_its_window_lands(db):
    """The honest partition: replaced inside its window, the rest untouched, no error; unfenced (a run by
    hand, as Bruin runs it) a lying query lands as written."""
    three_days(db)
    materialize(db, FENCED, "SELECT DATE '2024-01-02' AS d, 50 AS v", DAY_2, full_refresh=False, fence_window=True)
    assert [v for _, v in rows(db)] == [0, 50, 2]
    materialize(db, FENCED, "SELECT DATE '2024-01-03' AS d, 60 AS v", DAY_2, full_refresh=False)
    assert [v for _, v in rows(db)] == [0, 2, 60]  # the window's day deleted, 2024-01-03 twice


def test_what_is_not_fenced(db):
    """Rebuilding strategies, a full refresh and a table not yet created are not fenced (they own the whole
    table); append and merge keyed by time are."""
    assert [fences_its_window(asset(s, key="d")) for s in ("time_interval", "delete+insert", "append", "merge")] == [
        True, True, True, True
    ]  # fmt: skip
    assert not fences_its_window(asset("create+replace", key="d"))
    assert not fences_its_window(asset("truncate+insert", key="d"))
    assert not fences_its_window(asset("merge"))
    assert not fences_its_window(asset("time_interval", type_="view", key="d"))
    materialize(db, FENCED, "SELECT DATE '2024-01-05' AS d, 1 AS v", DAY_2, full_refresh=False, fence_window=True)
    three = "SELECT (DATE '2024-01-01' + INTERVAL (i) DAY)::DATE AS d, i AS v FROM range(3) t(i)"
    materialize(db, FENCED, three, DAY_2, full_refresh=True, fence_window=True)
    assert len(rows(db)) == 3


def test_a_timestamp_keyed_table_is_fenced_to_its_instants(db):
    """A TIMESTAMPTZ key: the window's instants are inside, the rest outside, to the microsecond."""
    values_ = (
        "(TIMESTAMPTZ '2024-01-01 23:59:59.999999+00', 1), (TIMESTAMPTZ '2024-01-02 10:00:00+00', 2), "
        "(TIMESTAMPTZ '2024-01-03 00:00:00+00', 3)"
    )
    seed(db, f"SELECT * FROM (VALUES {values_}) AS s(ts, v)")
    hourly = asset("time_interval", key="ts", granularity="timestamp")
    inside = "SELECT TIMESTAMPTZ '2024-01-02 11:00:00+00' AS ts, 9 AS v"
    materialize(db, hourly, inside, DAY_2, full_refresh=False, fence_window=True)
    assert [v for _, v in rows(db)] == [1, 9, 3]
    outside = "SELECT TIMESTAMPTZ '2024-01-03 00:00:00+00' AS ts, 9 AS v"
    with pytest.raises(OutsideWindowChanged, match=r"\(2 rows there before, 3 after\)"):
        materialize(db, hourly, outside, DAY_2, full_refresh=False, fence_window=True)
    assert [v for _, v in rows(db)] == [1, 9, 3]


def test_a_hook_that_drops_the_table_is_caught(db):
    """A post hook that drops the asset's own table leaves nothing outside the window: rolled back."""
    three_days(db)
    before = rows(db)
    with pytest.raises(OutsideWindowChanged, match=r"\(2 rows there before, 0 after\)"):
        materialize(db, FENCED, "SELECT DATE '2024-01-02' AS d, 5 AS v", DAY_2, full_refresh=False,
                    post_hooks=["DROP TABLE mart.t"], fence_window=True)  # fmt: skip
    assert rows(db) == before


def test_only_the_days_a_window_covers_whole_are_inside_it(db):
    """A 36-hour window from noon on the 1st covers only the 2nd whole: rows of the 1st are outside it, so
    a partition that deletes them is rolled back; in the window's own zone, named in the error."""
    three_days(db)
    zone = ZoneInfo("Asia/Kolkata")
    start = to_micros(datetime(2024, 1, 1, 12, tzinfo=zone))
    window = Window(start, to_micros(datetime(2024, 1, 3, tzinfo=zone)) - 1, zone)
    deleting = asset("delete+insert", key="d", granularity="date")
    query = "SELECT * FROM (VALUES (DATE '2024-01-01', 7), (DATE '2024-01-02', 8)) AS s(d, v)"
    with pytest.raises(OutsideWindowChanged) as raised:
        materialize(db, deleting, query, window, full_refresh=False, fence_window=True)
    assert "outside its window 2024-01-01T12:00:00+05:30 .. 2024-01-02T23:59:59.999999+05:30" in str(raised.value)
    materialize(db, deleting, "SELECT DATE '2024-01-02' AS d, 8 AS v", window, full_refresh=False, fence_window=True)
    assert [v for _, v in rows(db)] == [0, 8, 2]  # only the 2nd replaced
    utc_day = Window(to_micros(datetime(2024, 1, 2, tzinfo=UTC)), to_micros(datetime(2024, 1, 3, tzinfo=UTC)) - 1, zone)
    with pytest.raises(OutsideWindowChanged):  # a UTC day is 05:30 to 05:30 there: no local day whole
        materialize(
            db, deleting, "SELECT DATE '2024-01-02' AS d, 9 AS v", utc_day, full_refresh=False, fence_window=True
        )
