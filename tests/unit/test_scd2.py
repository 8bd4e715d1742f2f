"""SCD2 in-process on a real DuckDB database: versions opened and closed as Bruin documents, and every batch
that would corrupt the history refused before it changes a row (Bruin's docs: materializations/scd2)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import pytest

from engine.pipeline.assets import Asset, Materialization
from engine.pipeline.columns import Column
from engine.pipeline.database import Database
from engine.pipeline.scd2 import HistoryProblem, apply_scd2

OPEN = "9999-12-31 23:59:59"


def asset(strategy: str, *, keys: tuple[str, ...] = ("id",), incremental: str | None = "ts") -> Asset:
    columns = tuple(Column(key, "integer", True, False, None, ()) for key in keys)
    return Asset(
        "dim.people", "duckdb.sql", Path("people.sql"), "people.sql", 1,
        materialization=Materialization("table", strategy, incremental, None), columns=columns,
    )  # fmt: skip


@pytest.fixture
def db():
    connection = duckdb.connect(":memory:")
    connection.execute("SET TimeZone = 'UTC'; CREATE SCHEMA dim")
    yield Database(connection.cursor(), lambda sql: sql)
    connection.close()


def run(db: Database, target: Asset, rows: str, *, full_refresh: bool = False) -> int:
    """Apply ``rows`` (a VALUES list of (id, name, ts)) in a transaction, as the runner does: a refusal rolls
    everything back."""
    query = f"SELECT * FROM (VALUES {rows}) AS v(id, name, ts)"
    db.execute("BEGIN TRANSACTION")
    try:
        inserted = apply_scd2(db, target, query, full_refresh=full_refresh)
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")
    return inserted


def history(db: Database) -> list[tuple]:
    return db.execute(
        "SELECT id, name, strftime(_valid_from, '%Y-%m-%d %H:%M:%S'), strftime(_valid_until, '%Y-%m-%d %H:%M:%S'), "
        "_is_current FROM dim.people ORDER BY ALL"
    ).fetchall()


def ts(text: str) -> str:
    return f"TIMESTAMP '{text}'"


def test_by_time_opens_a_version_per_later_time_and_chains_a_batch(db):
    """The first batch opens one version per key; a later time closes it where the new one begins; an equal or
    older time changes nothing; two versions of one key in a batch are chained in time order."""
    by_time = asset("scd2_by_time")
    assert run(db, by_time, f"(1, 'ann', {ts('2024-01-01')}), (2, 'bob', {ts('2024-01-01')})") == 2
    assert run(db, by_time, f"(1, 'ann', {ts('2024-01-01')}), (2, 'bob', {ts('2024-01-01')})") == 0
    assert run(db, by_time, f"(1, 'anne', {ts('2024-02-01')}), (1, 'annie', {ts('2024-03-01')}), "
                            f"(2, 'old', {ts('2023-12-01')})") == 2  # fmt: skip
    assert history(db) == [
        (1, "ann", "2024-01-01 00:00:00", "2024-02-01 00:00:00", False),
        (1, "anne", "2024-02-01 00:00:00", "2024-03-01 00:00:00", False),
        (1, "annie", "2024-03-01 00:00:00", OPEN, True),
        (2, "bob", "2024-01-01 00:00:00", OPEN, True),
    ]


def test_a_key_that_leaves_the_source_is_closed_now_and_never_before_it_began(db):
    """Key 2 missing from the next batch: its current version ends at the run's time (not before its start)."""
    by_time = asset("scd2_by_time")
    run(db, by_time, f"(1, 'ann', {ts('2024-01-01')}), (2, 'bob', {ts('2999-01-01')})")
    run(db, by_time, f"(1, 'ann', {ts('2024-01-01')})")
    rows = {row[0]: row for row in history(db)}
    assert rows[1][3:] == (OPEN, True)
    assert rows[2][2:] == ("2999-01-01 00:00:00", "2999-01-01 00:00:00", False)  # greatest(now, its start)


def test_by_column_versions_a_row_whose_other_columns_changed(db):
    """A changed name (NULL-safe: NULL to a value is a change) makes a new version at its key time; the same
    row again changes nothing."""
    by_column = asset("scd2_by_column")
    assert run(db, by_column, f"(1, NULL, {ts('2024-01-01')}), (2, 'bob', {ts('2024-01-01')})") == 2
    assert run(db, by_column, f"(1, NULL, {ts('2024-01-05')}), (2, 'bob', {ts('2024-01-05')})") == 0
    assert run(db, by_column, f"(1, 'ann', {ts('2024-02-01')}), (2, 'bob', {ts('2024-02-01')})") == 1
    assert history(db) == [
        (1, "ann", "2024-02-01 00:00:00", OPEN, True),
        (1, None, "2024-01-01 00:00:00", "2024-02-01 00:00:00", False),
        (2, "bob", "2024-01-01 00:00:00", OPEN, True),
    ]


@pytest.mark.parametrize(
    ("strategy", "rows", "problem"),
    [
        ("scd2_by_time", f"(NULL, 'x', {ts('2024-04-01')})", "1 source row(s) have a NULL primary key (\"id\")"),
        ("scd2_by_column", f"(NULL, 'x', {ts('2024-04-01')}), (NULL, 'y', {ts('2024-04-01')})",
         "2 source row(s) have a NULL primary key (\"id\")"),
        ("scd2_by_time", "(3, 'x', CAST(NULL AS TIMESTAMP))", "1 source row(s) have a NULL incremental_key ts"),
        ("scd2_by_column", f"(1, 'x', {ts('2024-04-01')}), (1, 'y', {ts('2024-04-01')})",
         "1 primary key (\"id\") value(s) appear more than once in the source rows"),
        ("scd2_by_time", f"(1, 'x', {ts('2024-04-01')}), (1, 'y', {ts('2024-04-01')})",
         "1 (\"id\", \"ts\") value(s) appear more than once in the source rows"),
        ("scd2_by_column", f"(1, 'x', {ts('2023-01-01')})",
         "1 changed row(s) have an incremental_key ts earlier than the start of the version they would replace"),
    ],
    ids=["null-key", "null-keys", "null-time", "repeated-key", "repeated-key-and-time", "backwards"],
)  # fmt: skip
def test_a_batch_that_would_corrupt_the_history_changes_nothing(db, strategy, rows, problem):
    """Each bad batch is refused with what is wrong, and the table is exactly as it was."""
    target = asset(strategy)
    run(db, target, f"(1, 'ann', {ts('2024-01-01')}), (2, 'bob', {ts('2024-01-01')})")
    before = history(db)
    with pytest.raises(HistoryProblem) as refused:
        run(db, target, rows)
    assert str(refused.value).startswith(problem)
    assert history(db) == before


def test_a_time_in_another_type_or_a_missing_column_is_refused(db):
    """An incremental_key that is not a DATE or TIMESTAMP, a key or time column the query lacks, a query that
    returns a validity column: refused before anything is created."""
    not_a_time = "incremental_key name is VARCHAR: scd2_by_time needs a DATE or TIMESTAMP"
    with pytest.raises(HistoryProblem, match=not_a_time):
        run(db, asset("scd2_by_time", incremental="name"), f"(1, 'x', {ts('2024-01-01')})")
    with pytest.raises(
        HistoryProblem, match=r"primary key column code is not among the query's columns \(id, name, ts\)"
    ):
        run(db, asset("scd2_by_time", keys=("code",)), f"(1, 'x', {ts('2024-01-01')})")
    with pytest.raises(HistoryProblem, match="incremental_key day is not among the query's columns"):
        run(db, asset("scd2_by_time", incremental="day"), f"(1, 'x', {ts('2024-01-01')})")
    query = "SELECT 1 AS id, TIMESTAMP '2024-01-01' AS ts, true AS _is_current"
    with pytest.raises(HistoryProblem, match="the query returns _is_current, a column name scd2_by_time reserves"):
        apply_scd2(db, asset("scd2_by_time"), query, full_refresh=False)
    assert not db.table_exists("dim.people")


def test_a_date_key_is_read_as_utc_midnight_and_by_column_without_a_key_time_uses_now(db):
    """A DATE key starts its version at UTC midnight; scd2_by_column without incremental_key starts at now."""
    run(db, asset("scd2_by_time"), "(1, 'ann', DATE '2024-01-01')")
    assert history(db) == [(1, "ann", "2024-01-01 00:00:00", OPEN, True)]
    db.execute("DROP TABLE dim.people")
    run(db, asset("scd2_by_column", incremental=None), "(1, 'ann', 0)")
    [(_, _, start, end, current)] = history(db)
    today = datetime.now(UTC)
    assert start[:10] in {today.date().isoformat(), (today - timedelta(days=1)).date().isoformat()}
    assert (end, current) == (OPEN, True)


def test_a_table_without_the_validity_columns_is_refused_and_a_full_refresh_rebuilds_it(db):
    """An existing table that is not an SCD2 history: refused (rebuild with --full-refresh), which drops it."""
    db.execute("CREATE TABLE dim.people AS SELECT 1 AS id, 'x' AS name, TIMESTAMP '2024-01-01' AS ts")
    with pytest.raises(
        HistoryProblem, match="exists without the SCD2 column.s. _valid_from, _valid_until, _is_current"
    ):
        run(db, asset("scd2_by_time"), f"(1, 'ann', {ts('2024-01-01')})")
    assert run(db, asset("scd2_by_time"), f"(1, 'ann', {ts('2024-01-01')})", full_refresh=True) == 1
    assert history(db) == [(1, "ann", "2024-01-01 00:00:00", OPEN, True)]


def test_a_composite_key_identifies_a_row_by_all_its_columns(db):
    """Keys (id, region): the same id in two regions is two rows; a NULL in either key column is refused, and
    the message lists both columns."""
    by_time = asset("scd2_by_time", keys=("id", "region"))

    def batch(rows: str) -> str:
        return f"SELECT * FROM (VALUES {rows}) AS v(id, region, name, ts)"

    def load(rows: str) -> int:
        return apply_scd2(db, by_time, batch(rows), full_refresh=False)

    assert load(f"(1, 'eu', 'ann', {ts('2024-01-01')}), (1, 'us', 'ann', {ts('2024-01-01')})") == 2
    assert load(f"(1, 'eu', 'anne', {ts('2024-02-01')}), (1, 'us', 'ann', {ts('2024-01-01')})") == 1
    current = db.execute(
        "SELECT id, region, name, _is_current FROM dim.people ORDER BY region, _valid_from"
    ).fetchall()  # fmt: skip
    assert current == [(1, "eu", "ann", False), (1, "eu", "anne", True), (1, "us", "ann", True)]
    with pytest.raises(HistoryProblem, match=r'1 source row\(s\) have a NULL primary key \("id", "region"\)'):
        load(f"(1, NULL, 'x', {ts('2024-03-01')})")
    with pytest.raises(HistoryProblem, match=r'1 \("id", "region", "ts"\) value\(s\) appear more than once'):
        load(f"(2, 'eu', 'x', {ts('2024-03-01')}), (2, 'eu', 'y', {ts('2024-03-01')})")
    by_column = asset("scd2_by_column", keys=("id", "region"))
    db.execute("DROP TABLE dim.people")
    apply_scd2(db, by_column, batch(f"(1, 'eu', 'ann', {ts('2024-01-01')}), (1, 'us', 'bo', {ts('2024-01-01')})"),
               full_refresh=False)  # fmt: skip
    assert apply_scd2(db, by_column, batch(f"(1, 'eu', 'ann', {ts('2024-02-01')}), (1, 'us', 'bob', "
                                           f"{ts('2024-02-01')})"), full_refresh=False) == 1  # fmt: skip
    closed = db.execute("SELECT region, name FROM dim.people WHERE NOT _is_current").fetchall()
    assert closed == [("us", "bo")]


@pytest.mark.parametrize(
    ("key", "expected"),
    [("TIMESTAMPTZ '2024-01-01 00:00:00+00'", 1_704_067_200), ("DATE '2024-01-01'", 1_704_067_200),
     ("TIMESTAMP '2024-01-01 12:00:00'", 1_704_110_400)],
    ids=["timestamptz", "date", "timestamp"],
)  # fmt: skip
def test_a_version_starts_at_its_key_in_utc_whatever_the_session_zone(db, key, expected):
    """In a New York session, a zoned key is taken as the instant it is, and a naive one (DATE, TIMESTAMP) as UTC."""
    db.execute("SET TimeZone = 'America/New_York'")
    apply_scd2(db, asset("scd2_by_time"), f"SELECT 1 AS id, 'ann' AS name, {key} AS ts", full_refresh=False)
    assert db.scalar("SELECT epoch(_valid_from) FROM dim.people") == expected


def test_the_message_of_a_table_that_is_not_a_history_says_how_to_rebuild_it(db):
    """The refusal names the missing columns and the command that rebuilds the table."""
    db.execute("CREATE TABLE dim.people AS SELECT 1 AS id, 'x' AS name, TIMESTAMP '2024-01-01' AS ts, "
               "TIMESTAMPTZ '2024-01-01' AS _valid_from")  # fmt: skip
    with pytest.raises(HistoryProblem) as refused:
        apply_scd2(
            db, asset("scd2_by_time"), f"SELECT 1 AS id, 'x' AS name, {ts('2024-01-01')} AS ts", full_refresh=False
        )
    assert str(refused.value) == (
        "table dim.people exists without the SCD2 column(s) _valid_until, _is_current: rebuild it with "
        "backfill run --full-refresh"
    )
