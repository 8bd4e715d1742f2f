"""The pre-flight's read-only looks into a DuckDB file (issue 22), on real files: opened once and shared, held
files named by their holder, rows counted in and out of a window, and past periods counted in the run's zone."""

from __future__ import annotations

import os
import signal
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import duckdb
import pytest

from engine.dates.instants import to_micros
from engine.guardrails.warehouse import Held, Warehouse, local_start, whole_range_window
from engine.guardrails.warehouses import Warehouses
from engine.pipeline.assets import Asset, Materialization
from engine.pipeline.templating import Window
from tests.duckdb_writer import writing

PARIS = ZoneInfo("Europe/Paris")


def asset(name="main.t", *, key="ts", granularity="timestamp", strategy="time_interval"):
    materialization = Materialization("table", strategy, key, granularity)
    return Asset(name, "duckdb.sql", Path("t.sql"), "t.sql", 1, materialization=materialization, body="SELECT 1")


def at(text: str, zone=UTC) -> int:
    return to_micros(datetime.fromisoformat(text).replace(tzinfo=zone))


def wall(*parts: int) -> datetime:
    """A naive wall time, as the period counts key their periods."""
    return datetime(*parts, tzinfo=UTC).replace(tzinfo=None)


def day_window(first: str, last: str, zone=UTC) -> Window:
    """Whole days ``first``..``last`` (inclusive), as a run sees them."""
    return Window(at(first + "T00:00:00", zone), at(last + "T23:59:59.999999", zone), zone)


def database(path: Path, *statements: str) -> Path:
    connection = duckdb.connect(str(path))
    for statement in statements:
        connection.execute(statement)
    connection.close()
    return path


@pytest.fixture
def events(tmp_path) -> Path:
    """A file with ``main.t``: one row at each noon of 1–5 January 2024, a second copy of the 3rd, a NULL key."""
    return database(
        tmp_path / "w.duckdb",
        "CREATE TABLE main.t (id INTEGER, ts TIMESTAMP, note VARCHAR)",
        "INSERT INTO main.t SELECT i, TIMESTAMP '2024-01-01 12:00:00' + (i - 1) * INTERVAL 1 DAY, 'n' "
        "FROM range(1, 6) r(i)",
        "INSERT INTO main.t VALUES (3, TIMESTAMP '2024-01-03 12:00:00', 'n'), (9, NULL, 'null key')",
    )  # fmt: skip


def test_a_file_is_opened_once_and_opened_again_only_after_it_was_closed(events):
    """The same Warehouse for the same path; a new one once the shared one was closed; close() closes all."""
    warehouses = Warehouses()
    first = warehouses.open(events)
    assert warehouses.open(events) is first and first.connection is not None
    first.close()
    assert first.connection is None
    second = warehouses.open(events)
    assert second is not first and second.rows("main.t") == 7
    warehouses.close()
    assert second.connection is None
    third = warehouses.open(events)
    assert third is not second and third.rows("main.t") == 7
    warehouses.close()


def test_an_absent_file_has_no_tables_until_it_appears(tmp_path):
    """A file not yet created: no connection, no table, size 0; kept until the file exists, then opened."""
    path = tmp_path / "later.duckdb"
    warehouses = Warehouses()
    absent = warehouses.open(path)
    assert absent.connection is None and absent.size_bytes == 0
    assert not absent.exists("main.t") and absent.rows("main.t") is None
    assert absent.rows_in_window(asset(), day_window("2024-01-01", "2024-01-02")) is None
    assert absent.period_counts(asset(), "day", day_window("2024-01-01", "2024-01-02")) == {}
    assert warehouses.open(path) is absent
    database(path, "CREATE TABLE main.t (ts TIMESTAMP)")
    present = warehouses.open(path)
    assert present is not absent and present.exists("main.t") and present.rows("main.t") == 0
    assert present.size_bytes == path.stat().st_size > 0
    warehouses.close()


def test_a_file_held_for_writing_names_the_process_holding_it(events):
    """Another process writing the file: Held, naming that process's PID, without waiting for it."""
    with writing(str(events)) as writer, pytest.raises(Held) as held:
        Warehouse.open(events)
    assert held.value.path == events
    assert held.value.holder == f"process {writer.pid}"
    assert str(held.value) == f"{events} is held by process {writer.pid}"


def test_a_lock_error_without_a_pid_names_another_process_and_other_errors_pass(tmp_path, monkeypatch):
    """DuckDB's lock error without a PID: 'another process'; a file that is no database, even one whose path says
    "lock": DuckDB's own error (it once read as held)."""
    garbage = tmp_path / "blockchain.duckdb"  # "lock" in a path is no lock
    garbage.write_bytes(b"not a database" * 100)
    with pytest.raises(duckdb.IOException, match="not a valid DuckDB database file"):
        Warehouse.open(garbage)

    def locked(*_args, **_kwargs):
        raise duckdb.IOException("IO Error: Could not set LOCK on file: Conflicting lock is held")

    named_like_a_lock = tmp_path / "could not set lock (PID 1).duckdb"
    named_like_a_lock.write_bytes(b"not a database" * 100)
    with pytest.raises(duckdb.IOException, match="not a valid DuckDB database file"):
        Warehouse.open(named_like_a_lock)

    monkeypatch.setattr(duckdb, "connect", locked)
    with pytest.raises(Held) as held:
        Warehouse.open(garbage)
    assert held.value.holder == "another process"


def test_rows_and_the_rows_of_a_window_with_an_inclusive_end(events):
    """rows counts the table (None without it); rows_in_window counts keys in [start, end], end included."""
    warehouse = Warehouse.open(events)
    assert warehouse.exists("main.t") and not warehouse.exists("main.other")
    with pytest.raises(duckdb.Error, match="read-only"):  # no pre-flight query can change data
        warehouse.connection.execute("DELETE FROM main.t")
    assert warehouse.rows("main.t") == 7 and warehouse.rows("main.other") is None
    assert warehouse.rows_in_window(asset(), day_window("2024-01-02", "2024-01-03")) == 3
    noon = at("2024-01-04T12:00:00")
    assert warehouse.rows_in_window(asset(), Window(noon, noon, UTC)) == 1
    assert warehouse.rows_in_window(asset(key=None), day_window("2024-01-02", "2024-01-03")) is None
    assert warehouse.rows_in_window(asset("main.other"), day_window("2024-01-02", "2024-01-03")) is None
    warehouse.close()
    warehouse.close()
    assert warehouse.connection is None


def test_a_query_s_rows_outside_the_window_count_null_keys_and_rows_already_held_count_once(events):
    """count_outside counts NULL keys (no DELETE removes them); count_existing is row for row, INTERSECT ALL."""
    warehouse = Warehouse.open(events)
    assert warehouse.sample_count("SELECT * FROM main.t WHERE id >= 3") == 5
    window = day_window("2024-01-02", "2024-01-03")
    assert warehouse.count_outside(asset(), "SELECT * FROM main.t", window) == 4
    assert warehouse.count_outside(asset(), "SELECT * FROM main.t WHERE ts IS NOT NULL", window) == 3
    query = (
        "SELECT * FROM (VALUES (1, TIMESTAMP '2024-01-01 12:00:00'), (1, TIMESTAMP '2024-01-01 12:00:00'), "
        "(3, TIMESTAMP '2024-01-03 12:00:00'), (3, TIMESTAMP '2024-01-03 12:00:00'), "
        "(3, TIMESTAMP '2024-01-03 12:00:00'), "
        "(7, TIMESTAMP '2024-01-07 12:00:00'), (5, TIMESTAMP '2024-01-09 12:00:00')) v(id, ts)"
    )  # fmt: skip
    # Table copies: id 1 once, id 3 twice, id 7 none, id 5 at another time none; the third column is not compared.
    assert warehouse.count_existing(asset(), query) == 3
    assert warehouse.count_existing(asset(), 'SELECT 2 AS "id"') == 1
    warehouse.close()


def test_past_periods_are_counted_outside_the_window_by_local_period_start(events):
    """Rows per day and per month outside the window, NULL keys left out, keyed by the period's start."""
    warehouse = Warehouse.open(events)
    window = day_window("2024-01-02", "2024-01-03")
    assert warehouse.period_counts(asset(), "day", window) == {
        wall(2024, 1, 1): 1, wall(2024, 1, 4): 1, wall(2024, 1, 5): 1,
    }  # fmt: skip
    assert warehouse.period_counts(asset(), "month", window) == {wall(2024, 1, 1): 3}
    assert warehouse.period_counts(asset(), "hour", window) == {
        wall(2024, 1, 1, 12): 1, wall(2024, 1, 4, 12): 1, wall(2024, 1, 5, 12): 1,
    }  # fmt: skip
    assert warehouse.period_counts(asset(key=None), "day", window) == {}
    assert warehouse.period_counts(asset("main.other"), "day", window) == {}
    warehouse.close()


def test_a_zoned_key_is_counted_by_the_run_s_local_day(tmp_path):
    """A TIMESTAMPTZ key counts in the window's zone: 23:30 UTC is the next day in Paris; a zone with no name
    (datetime.UTC) counts in UTC."""
    path = database(
        tmp_path / "z.duckdb",
        "SET TimeZone = 'UTC'",
        "CREATE TABLE main.z (ts TIMESTAMPTZ)",
        "INSERT INTO main.z VALUES ('2024-01-01 23:30:00+00'), ('2024-01-03 10:00:00+00'), ('2024-01-05 23:30:00+00')",
    )  # fmt: skip
    warehouse = Warehouse.open(path)
    zoned = asset("main.z")
    in_paris = warehouse.period_counts(zoned, "day", day_window("2024-01-03", "2024-01-03", PARIS))
    assert in_paris == {wall(2024, 1, 2): 1, wall(2024, 1, 6): 1}
    in_utc = warehouse.period_counts(zoned, "day", day_window("2024-01-03", "2024-01-03", UTC))
    assert in_utc == {wall(2024, 1, 1): 1, wall(2024, 1, 5): 1}
    warehouse.close()


def test_a_date_key_has_days_but_no_hours(tmp_path):
    """A DATE key: per-day counts as timestamps at midnight; per hour nothing (a date has no hours)."""
    path = database(
        tmp_path / "d.duckdb",
        "CREATE TABLE main.d (day DATE)",
        "INSERT INTO main.d VALUES ('2024-01-01'), ('2024-01-01'), ('2024-01-02'), ('2024-02-10'), (NULL)",
    )
    warehouse = Warehouse.open(path)
    daily = asset("main.d", key="day", granularity="date")
    window = day_window("2024-01-02", "2024-01-02")
    assert warehouse.period_counts(daily, "day", window) == {wall(2024, 1, 1): 2, wall(2024, 2, 10): 1}
    assert warehouse.period_counts(daily, "year", window) == {wall(2024, 1, 1): 3}
    assert warehouse.period_counts(daily, "hour", window) == {}
    warehouse.close()


def test_the_whole_range_window_ends_one_microsecond_before_the_range_and_local_start_is_naive():
    """whole_range_window turns [start, end) into the run's inclusive window; local_start is the wall time."""
    start, end = at("2024-03-31T00:00:00", PARIS), at("2024-04-01T00:00:00", PARIS)
    assert whole_range_window(start, end, PARIS) == Window(start, end - 1, PARIS)
    assert local_start(at("2024-03-31T03:30:00", PARIS), PARIS) == wall(2024, 3, 31, 3, 30)
    assert local_start(at("2024-03-31T03:30:00", PARIS), UTC) == wall(2024, 3, 31, 1, 30)
    assert local_start(0, UTC).tzinfo is None


def test_a_child_opening_a_file_reads_a_lock_only_from_duckdb_s_words(tmp_path):
    """The child's open_database: a held file is DatabaseLocked naming the PID; a broken file whose path says
    "lock" cannot be opened for DuckDB's own reason, not a lock (it once told the user to wait for a writer that did
    not exist)."""
    from engine.pipeline.config import Connection
    from engine.pipeline.duckdb_pool import DatabaseLocked, DatabaseUnavailable, open_database

    held = database(tmp_path / "held.duckdb", "CREATE TABLE t (x INTEGER)")
    with writing(str(held)) as writer, pytest.raises(DatabaseLocked) as locked:
        open_database(Connection("duckdb", "db", held, False, None))
    assert f"DuckDB file {held} (connection 'db') is locked by process {writer.pid}: " in str(locked.value)
    broken = tmp_path / "unlocked.duckdb"
    broken.write_bytes(b"not a database" * 100)
    with pytest.raises(DatabaseUnavailable, match="not a valid DuckDB database file") as unavailable:
        open_database(Connection("duckdb", "db", broken, True, None))
    assert not isinstance(unavailable.value, DatabaseLocked)


def test_the_rows_a_run_deletes_before_it_inserts_are_counted_as_the_runner_deletes(events):
    """What a run deletes: the window's rows for time_interval (the 2nd–3rd: three), the rows whose key the query
    returns for delete+insert (the 3rd's two; a NULL key matches nothing), the whole table for a rebuild (seven);
    nothing for an append or a merge, or an unkeyed time_interval; None without the table."""
    warehouse = Warehouse.open(events)
    try:
        window = day_window("2024-01-02", "2024-01-03")
        third = "SELECT * FROM (VALUES (TIMESTAMP '2024-01-03 12:00:00'), (NULL)) v(ts)"
        counted = warehouse.count_replaced
        assert counted(asset(), third, window, whole=False) == 3
        assert counted(asset(strategy="delete+insert"), third, window, whole=False) == 2
        assert counted(asset(strategy="append"), third, window, whole=True) == 7
        assert counted(asset(strategy="append"), third, window, whole=False) is None
        assert counted(asset(strategy="merge"), third, window, whole=False) is None
        assert counted(asset(key=None), third, window, whole=False) is None
        assert counted(asset("main.gone"), third, window, whole=False) is None
        assert counted(asset("main.gone"), third, window, whole=True) is None
    finally:
        warehouse.close()


def test_a_sample_query_takes_its_parameters_and_ends_on_ctrl_c(events):
    """The pre-flight's sample count passes its parameters to DuckDB; Ctrl+C while DuckDB runs an endless one is
    a KeyboardInterrupt at once (the query interrupted), and the file's cursor still parses SQL as DuckDB's."""
    warehouse = Warehouse.open(events)
    try:
        assert warehouse.sample_count("SELECT * FROM main.t WHERE id > ?", [2]) == 5  # 3, 4, 5, 3 again, 9
        start = time.process_time()

        def signal_when_running() -> None:
            while time.process_time() < start + 0.5:  # DuckDB at work: this process's CPU time grows
                time.sleep(0.01)
            os.kill(os.getpid(), signal.SIGINT)

        threading.Thread(target=signal_when_running, daemon=True).start()
        with pytest.raises(KeyboardInterrupt):
            warehouse.sample_count("SELECT range FROM range(1000000000000) WHERE hash(range) % ? = 0", [7])
        assert len(warehouse.database().cursor.extract_statements("SELECT 1; SELECT 2")) == 2
    finally:
        warehouse.close()


def test_rows_sharing_a_composite_primary_key_are_counted_on_every_column_of_it(events):
    """A merge keyed on (id, note): two rows of the query with the same pair repeat a key; rows that share only
    the id do not; NULLs are equal, as the merge matches them."""
    from dataclasses import replace

    from engine.pipeline.columns import Column

    keyed = replace(
        asset(strategy="merge"),
        columns=(Column("id", "int", True, False, None, ()), Column("note", "varchar", True, False, None, ())),
    )
    query = "SELECT * FROM (VALUES (1, 'a'), (1, 'a'), (1, 'b'), (2, NULL), (2, NULL), (3, 'c')) v(id, note)"
    warehouse = Warehouse.open(events)
    try:
        assert warehouse.count_repeated_keys(keyed, query) == 4
    finally:
        warehouse.close()
