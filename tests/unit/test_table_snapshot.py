"""Snapshots and restores on a real DuckDB warehouse, in-process: what a backfill may change is copied before it
runs (the range of a ``time_interval`` table, other tables whole, nothing of a view), and a restore after the
damage gives back tables equal row for row, drops what the backfill created, and refuses what it cannot do."""

from __future__ import annotations

import orjson
import pytest

from engine.base.errors import BadInput, Refused
from engine.base.who import requester
from engine.execute.backfill import state_root_for
from engine.execute.guarding import request_for_new
from engine.guardrails.preflight import run_preflight
from engine.guardrails.request import GuardOptions
from engine.guardrails.restore import restore_backfill
from engine.guardrails.table_snapshot import (
    SNAPSHOT_INDEX,
    SnapshotFailed,
    measured_copy_rate,
    read_snapshot,
    restore_snapshot,
    take_snapshot,
)
from engine.pipeline.options import RunOptions
from engine.spec.backfill_spec import ExecutionOptions
from engine.spec.planning import plan_request
from engine.store import audit
from engine.store.guardrails_log import read_guardrails
from engine.store.locks import FileLock
from engine.store.state_store import StateStore
from tests.builder import Repo

DAILY = {"type": "table", "strategy": "time_interval", "incremental_key": "day", "time_granularity": "date"}
TABLES = ("mid.daily", "mid.totals", "mid.fresh", "tally")


def build(root) -> Repo:
    """A warehouse with a daily table (four days), a whole table and a view; ``mid.fresh`` does not exist yet."""
    repo = Repo(root, guardrails="standard")
    repo.sql("mid.daily", "SELECT DATE '{{ start_date }}' AS day, 1 AS n", materialization=DAILY)
    repo.sql(
        "mid.totals",
        "SELECT 1 AS total, 'x' AS label, DATE '{{ start_date }}' AS day",
        materialization={"type": "table", "strategy": "append", "incremental_key": "day"},
    )
    repo.sql("tally", "SELECT 1 AS n", materialization={"type": "table"})  # no schema: DuckDB's main
    repo.sql("mid.fresh", "SELECT 1 AS x", materialization={"type": "table"})
    repo.sql("mid.shown", "SELECT 1 AS x", materialization={"type": "view"})
    repo.execute(
        "CREATE SCHEMA mid",
        "CREATE TABLE mid.daily AS SELECT (DATE '2024-01-01' + INTERVAL (i) DAY)::DATE AS day, i AS n "
        "FROM range(4) t(i)",
        "CREATE TABLE mid.totals (total INTEGER NOT NULL, label VARCHAR, day DATE)",
        "INSERT INTO mid.totals VALUES (10, 'a', DATE '2024-01-01'), (20, 'b', DATE '2024-01-02'), "
        "(20, 'b', DATE '2024-01-02')",
        "CREATE TABLE tally AS SELECT 5 AS n",
        "CREATE VIEW mid.shown AS SELECT 1 AS x",
    )
    return repo


def preflight_of(repo: Repo, run_options: RunOptions | None = None):
    """The real pre-flight of a backfill of 2024-01-02..03 (daily)."""
    planned = plan_request(
        target=str(repo.pipeline_dir),
        command=None,
        name=None,
        start="2024-01-02",
        end="2024-01-03",
        timezone="UTC",
        partition="daily",
        environment=None,
        config_file=None,
        run_options=run_options or RunOptions(),
        options=ExecutionOptions(),
        force=False,
        cwd=repo.root,
    )
    state = state_root_for(planned.spec, None, repo.root).path
    return run_preflight(request_for_new(planned, GuardOptions(), reason="test", root=state, cwd=repo.root))


def contents(repo: Repo) -> dict[str, list[tuple] | None]:
    """Every table's rows in a canonical order (None: no such table)."""
    found = {}
    for name in TABLES:
        schema, table = name.split(".") if "." in name else ("main", name)
        exists = repo.query(
            f"SELECT count(*) FROM duckdb_tables() WHERE schema_name = '{schema}' AND table_name = '{table}'"
        )[0][0]
        found[name] = repo.query(f"SELECT * FROM {name} ORDER BY ALL") if exists else None
    return found


@pytest.fixture
def snapped(tmp_path):
    """The repository, the snapshot's directory and its index, and the tables as they were before."""
    repo = build(tmp_path / "repo")
    before = contents(repo)
    directory = tmp_path / "it's state"  # a quote in the path: ATTACH must escape it
    return repo, directory, snapshot_into(repo, directory), before


def snapshot_into(repo: Repo, directory) -> dict:
    """The real pre-flight's snapshot taken into ``directory`` (made here); its index."""
    directory.mkdir()
    preflight = preflight_of(repo)
    try:
        return take_snapshot(preflight.facts, directory)
    finally:
        preflight.facts.warehouses.close()


def test_the_snapshot_copies_the_range_of_an_interval_table_and_other_tables_whole(snapped):
    """The daily table's two days in range, the whole append table, the missing table marked new, no view."""
    _, directory, index, _ = snapped
    (file,) = index["files"]
    tables = {t["name"]: t for t in file["tables"]}
    assert set(tables) == {"mid.daily", "mid.totals", "mid.fresh", "tally"}
    assert tables["mid.daily"] == {
        "name": "mid.daily",
        "existed": True,
        "scope": "range",
        "predicate": "\"day\" BETWEEN DATE '2024-01-02' AND DATE '2024-01-03'",
        "rows": 2,
        "copy": '"mid__daily"',
    }
    # An append table has a key but only adds rows: it is copied whole, not by range.
    assert tables["mid.totals"] == {
        "name": "mid.totals",
        "existed": True,
        "scope": "whole",
        "predicate": None,
        "rows": 3,
        "copy": '"mid__totals"',
    }
    assert tables["mid.fresh"] == {
        "name": "mid.fresh",
        "existed": False,
        "scope": "whole",
        "predicate": None,
        "rows": 0,
        "copy": '"mid__fresh"',
    }
    assert file["snapshot"] == "snapshot-0.duckdb"
    assert index["format"] == 1 and index["bytes"] == (directory / "snapshot-0.duckdb").stat().st_size > 0
    assert index["taken_at"].endswith("Z") and len(index["taken_at"]) == 20 and index["seconds"] >= 0
    assert read_snapshot(directory) == index == orjson.loads((directory / SNAPSHOT_INDEX).read_bytes())
    assert b'\n  "format": 1' in (directory / SNAPSHOT_INDEX).read_bytes()  # indented for people


def test_the_tables_hooks_and_sql_run_as_written_name_are_copied_whole_and_restored(tmp_path):
    """A hook's INSERT INTO mid.log and the DELETE of an SQL asset without materialization name tables no asset
    owns: each is copied whole, so a restore gives back the rows that SQL deleted."""
    repo = build(tmp_path / "repo")
    repo.sql("mid.daily", "SELECT DATE '{{ start_date }}' AS day, 1 AS n", materialization=DAILY,
             hooks={"post": [{"query": "INSERT INTO mid.log SELECT 1"}]})  # fmt: skip
    repo.sql("mid.cleanup", "DELETE FROM mid.audit WHERE day = DATE '{{ start_date }}'")
    repo.execute("CREATE TABLE mid.log (n INTEGER)", "CREATE TABLE mid.audit AS SELECT DATE '2024-01-02' AS day")
    preflight = preflight_of(repo)
    try:
        index = take_snapshot(preflight.facts, tmp_path)
    finally:
        preflight.facts.warehouses.close()
    tables = {t["name"]: (t["existed"], t["scope"], t["rows"]) for t in index["files"][0]["tables"]}
    assert (tables["mid.log"], tables["mid.audit"]) == ((True, "whole", 0), (True, "whole", 1))
    repo.execute("DELETE FROM mid.audit", "INSERT INTO mid.log SELECT 1")
    restore_snapshot(tmp_path)
    assert (repo.query("SELECT count(*) FROM mid.audit"), repo.query("SELECT count(*) FROM mid.log")) == (
        [(1,)],
        [(0,)],
    )


def test_the_snapshot_leaves_the_warehouse_unchanged(snapped):
    """Taking a snapshot changes no table of the warehouse (its connection is read-only) and detaches."""
    repo, _, _, before = snapped
    assert contents(repo) == before


def test_a_restore_after_the_damage_gives_the_tables_back(snapped):
    """Days of the range rewritten, the whole table truncated and refilled, a new table created: the restore
    puts back exactly the rows before and drops the new table, saying what it did per table."""
    repo, directory, _, before = snapped
    repo.execute(
        "DELETE FROM mid.daily WHERE day = DATE '2024-01-02'",
        "UPDATE mid.daily SET n = 99 WHERE day = DATE '2024-01-03'",
        "DELETE FROM mid.totals",
        "INSERT INTO mid.totals VALUES (1, 'x', NULL)",
        "CREATE TABLE mid.fresh AS SELECT 1 AS x",
        "UPDATE tally SET n = 6",
    )
    done = restore_snapshot(directory)
    assert contents(repo) == before
    assert done == [
        "mid.daily: 2 rows of the range put back",
        "mid.fresh: dropped (it did not exist before the backfill)",
        "mid.totals: 3 rows put back",
        "tally: 1 rows put back",
    ]
    # The same columns: the rows go back into the table as it is, so its definition (NOT NULL) is kept.
    with pytest.raises(Exception, match="NOT NULL constraint failed"):
        repo.execute("INSERT INTO mid.totals VALUES (NULL, 'y', NULL)")


def test_a_table_named_with_its_catalog_is_copied_once_and_restored_in_place(tmp_path):
    """``warehouse.mid.totals`` (Bruin's ``catalog.schema.table``) whose hooks delete from it by either name: one table,
    one copy (it was copied twice, as two tables); put back in place, its NOT NULL kept (it was dropped and made
    again from the copy, its definition lost)."""
    repo = build(tmp_path / "repo")
    (repo.pipeline_dir / "assets" / "mid.totals.sql").unlink()
    repo.sql(
        "warehouse.mid.totals",
        "SELECT 1 AS total, 'x' AS label, DATE '{{ start_date }}' AS day",
        materialization={"type": "table", "strategy": "append", "incremental_key": "day"},
        hooks={
            "pre": [{"query": "DELETE FROM mid.totals WHERE label = 'a'"}],
            "post": [{"query": "DELETE FROM warehouse.mid.totals WHERE label = 'b'"}],
        },
    )
    before = contents(repo)
    directory = tmp_path / "state"
    names = [t["name"] for t in snapshot_into(repo, directory)["files"][0]["tables"]]
    assert sorted(names) == ["mid.daily", "mid.fresh", "tally", "warehouse.mid.totals"]
    repo.execute("DELETE FROM mid.totals", "INSERT INTO mid.totals VALUES (1, 'x', NULL)")
    assert "warehouse.mid.totals: 3 rows put back" in restore_snapshot(directory)
    assert contents(repo) == before
    with pytest.raises(Exception, match="NOT NULL constraint failed"):
        repo.execute("INSERT INTO mid.totals VALUES (NULL, 'y', NULL)")


def test_a_whole_table_whose_columns_changed_is_rebuilt(snapped):
    """A table rebuilt with other columns (a full refresh) is recreated from the copy with its old columns."""
    repo, directory, _, before = snapped
    repo.execute("DROP TABLE mid.totals", "CREATE TABLE mid.totals AS SELECT 'other' AS total")
    restore_snapshot(directory)
    assert contents(repo) == before
    assert repo.query(
        "SELECT column_name, data_type FROM information_schema.columns WHERE table_name = 'totals' "
        "ORDER BY ordinal_position"
    ) == [("total", "INTEGER"), ("label", "VARCHAR"), ("day", "DATE")]


def test_a_whole_table_dropped_by_the_backfill_comes_back(snapped):
    """A table the backfill dropped is created again from its copy."""
    repo, directory, _, before = snapped
    repo.execute("DROP TABLE mid.totals")
    restore_snapshot(directory)
    assert contents(repo) == before


def test_a_range_table_dropped_by_the_backfill_gets_its_range_back(snapped):
    """A dropped interval table comes back with the range the snapshot holds (the rest was never copied)."""
    repo, directory, _, _ = snapped
    repo.execute("DROP TABLE mid.daily")
    restore_snapshot(directory)
    assert [(d.isoformat(), n) for d, n in repo.query("SELECT * FROM mid.daily ORDER BY ALL")] == [
        ("2024-01-02", 1),
        ("2024-01-03", 2),
    ]


def test_a_failed_restore_changes_nothing(snapped):
    """One table that cannot be put back rolls the whole file's restore back."""
    repo, directory, index, _ = snapped
    index["files"][0]["tables"].append(
        {"name": "mid.ghost", "existed": True, "scope": "whole", "predicate": None, "rows": 1, "copy": '"no_such_copy"'}
    )
    (directory / SNAPSHOT_INDEX).write_bytes(orjson.dumps(index))
    repo.execute("DELETE FROM mid.totals")
    damaged = contents(repo)
    with pytest.raises(Exception, match="no_such_copy"):
        restore_snapshot(directory)
    assert contents(repo) == damaged


def test_a_missing_snapshot_file_restores_nothing(snapped):
    """The index names a copy that is gone: refused before any table is touched."""
    repo, directory, _, _ = snapped
    (directory / "snapshot-0.duckdb").unlink()
    repo.execute("DELETE FROM mid.totals")
    with pytest.raises(BadInput, match=r"^snapshot file .*snapshot-0\.duckdb is missing: nothing was restored$"):
        restore_snapshot(directory)
    assert repo.query("SELECT count(*) FROM mid.totals") == [(0,)]


def test_no_snapshot_and_a_damaged_index_are_refused(tmp_path):
    """No index: the backfill has no snapshot (one line saying why it might not); a damaged one is unusable."""
    with pytest.raises(BadInput, match=rf"^backfill {tmp_path.name} has no snapshot \(it was run with --no-snapshot"):
        restore_snapshot(tmp_path)
    assert read_snapshot(tmp_path) is None
    (tmp_path / SNAPSHOT_INDEX).write_bytes(b"{broken")
    with pytest.raises(BadInput, match=r"snapshot\.json cannot be read \(.*\): the snapshot is unusable$"):
        read_snapshot(tmp_path)


def test_a_warehouse_that_cannot_be_opened_fails_the_snapshot(tmp_path, monkeypatch):
    """The snapshot cannot read the warehouse: SnapshotFailed, and nothing was run."""
    repo = build(tmp_path / "repo")
    preflight = preflight_of(repo)
    try:
        import duckdb

        def refuse(path):
            raise duckdb.IOException("locked by another process")

        monkeypatch.setattr(preflight.facts.warehouses, "open", refuse)
        with pytest.raises(
            SnapshotFailed,
            match=r"^cannot open .*warehouse\.duckdb to snapshot it \(locked by "
            r"another process\): nothing was run$",
        ):
            take_snapshot(preflight.facts, tmp_path)
    finally:
        preflight.facts.warehouses.close()
    assert not (tmp_path / SNAPSHOT_INDEX).exists()


def test_a_warehouse_not_yet_created_is_snapshotted_as_all_new(tmp_path):
    """No warehouse file yet: every table is new, restored by dropping it; no copy file is written."""
    repo = Repo(tmp_path / "repo", guardrails="standard")
    repo.sql("mid.totals", "SELECT 1 AS total", materialization={"type": "table"})
    preflight = preflight_of(repo)
    try:
        index = take_snapshot(preflight.facts, tmp_path)
    finally:
        preflight.facts.warehouses.close()
    assert index["files"][0]["tables"] == [
        {
            "name": "mid.totals",
            "existed": False,
            "scope": "whole",
            "predicate": None,
            "rows": 0,
            "copy": '"mid__totals"',
        }
    ]
    assert index["bytes"] == 0 and not (tmp_path / "snapshot-0.duckdb").exists()
    repo.execute("CREATE SCHEMA mid", "CREATE TABLE mid.totals AS SELECT 1 AS total")
    assert restore_snapshot(tmp_path) == ["mid.totals: dropped (it did not exist before the backfill)"]
    assert repo.query("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'totals'") == [(0,)]


def test_backfill_restore_is_refused_while_the_backfill_runs_and_audited_after(snapped):
    """``restore`` refuses while someone holds the backfill's lock; once free it restores, logs the restore in
    guardrails.json with its reason and writes one RESTORE audit line."""
    repo, directory, _, before = snapped
    store = StateStore(directory)
    holder = FileLock(store.lock_path)
    assert holder.try_acquire()
    repo.execute("DELETE FROM mid.totals")
    with pytest.raises(Refused, match=rf"^backfill {store.id} is running: restore it once it has stopped$"):
        restore_backfill(store, "undo")
    assert repo.query("SELECT count(*) FROM mid.totals") == [(0,)]
    holder.release()
    done = restore_backfill(store, "undo the bad fix")
    assert contents(repo) == before
    (entry,) = read_guardrails(store)["invocations"]
    assert entry["mode"] == "restore" and entry["reason"] == "undo the bad fix" and entry["restored"] == done
    assert entry["by"] == requester() and entry["at"].startswith("20")
    (line,) = audit.read(directory).entries
    assert line["action"] == "RESTORE" and line["reason"] == "undo the bad fix" and line["backfill_id"] == store.id
    assert line["previous_message"] == "; ".join(done) and line["requested_by"] == requester()
    assert line["requested_at"] == line["applied_at"] and line["applied_at"].startswith("20")
    assert line["applied_by"].startswith("backfill restore (PID ")
    assert FileLock(store.lock_path).try_acquire()  # released after


def test_the_snapshot_covers_the_days_an_interval_modifier_reaches(tmp_path):
    """An asset whose start modifier reaches a day back replaces that day too: its snapshot holds it."""
    repo = build(tmp_path / "repo")
    repo.sql("mid.daily", "SELECT DATE '{{ start_date }}' AS day, 1 AS n", materialization=DAILY,
             interval_modifiers={"start": "-1d"})  # fmt: skip
    preflight = preflight_of(repo, RunOptions(apply_interval_modifiers=True))
    try:
        index = take_snapshot(preflight.facts, tmp_path)
    finally:
        preflight.facts.warehouses.close()
    daily = next(t for t in index["files"][0]["tables"] if t["name"] == "mid.daily")
    assert daily["predicate"] == "\"day\" BETWEEN DATE '2024-01-01' AND DATE '2024-01-03'"
    assert daily["rows"] == 3


def test_the_copy_rate_comes_from_the_latest_timed_snapshots(tmp_path):
    """The median rows a second of earlier snapshots that copied enough rows to time; none → None."""
    rates = [(100_000, 0.05), (50_000, 0.05), (1_000, 0.0001), (300_000, 0.1)]  # 2M, 1M, too few, 3M rows/s
    directories = []
    for n, (rows, seconds) in enumerate(rates):
        directory = tmp_path / f"b{n}"
        directory.mkdir()
        (directory / SNAPSHOT_INDEX).write_bytes(orjson.dumps({"rows": rows, "seconds": seconds}))
        directories.append(directory)
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / SNAPSHOT_INDEX).write_bytes(b"{")
    assert measured_copy_rate([*directories, tmp_path / "broken", tmp_path / "none"]) == 2_000_000
    assert measured_copy_rate(directories, latest=1) == 2_000_000
    assert measured_copy_rate([directories[2]]) is None


def test_the_copy_rate_reads_only_the_newest_backfills(tmp_path):
    """Beyond the newest ``examined`` backfills nothing is read: an old timed snapshot does not count."""
    directories = []
    for n in range(3):
        directory = tmp_path / f"b{n}"
        directory.mkdir()
        directories.append(directory)
    (directories[2] / SNAPSHOT_INDEX).write_bytes(orjson.dumps({"rows": 100_000, "seconds": 0.05}))
    assert measured_copy_rate(directories, examined=2) is None
    assert measured_copy_rate(directories, examined=3) == 2_000_000
