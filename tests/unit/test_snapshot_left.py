"""What a run left in the snapshotted tables, over real DuckDB files: a file not made yet, a file another process
holds for writing, a run forgetting what the one before it left, and the tables a run record already explains."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import duckdb
import orjson

from engine.guardrails.snapshot_left import LeftTables, changed_since_left, forget_left, note_left
from engine.pipeline.row_changes import SNAPSHOT_INDEX


def snapshot(directory: Path, database: Path) -> None:
    """A snapshot index of two whole tables of ``database``."""
    tables = [{"name": name, "existed": True, "scope": "whole", "predicate": None, "rows": 0, "copy": name}
              for name in ("main.a", "main.b")]  # fmt: skip
    index = {"taken_at": "2024-01-01T00:00:00Z", "files": [{"database": str(database), "tables": tables}]}
    (directory / SNAPSHOT_INDEX).write_bytes(orjson.dumps(index))


def index_of(directory: Path) -> dict:
    return orjson.loads((directory / SNAPSHOT_INDEX).read_bytes())


def test_tables_of_a_file_not_made_yet_are_left_absent_and_a_later_table_is_a_change(tmp_path):
    """No database file when the run ended: each table is left absent; once a session makes one, it is named."""
    database = tmp_path / "w.duckdb"
    snapshot(tmp_path, database)
    note_left(tmp_path)
    assert [t["left"] for t in index_of(tmp_path)["files"][0]["tables"]] == ["absent", "absent"]
    assert changed_since_left(index_of(tmp_path), set()) == []
    with duckdb.connect(str(database)) as connection:
        connection.execute("CREATE TABLE a AS SELECT 1 AS x")
    [change] = changed_since_left(index_of(tmp_path), set())
    assert change.startswith("main.a changed since the backfill's last run ended at ")
    assert "(no table then, 1 row now)" in change
    assert changed_since_left(index_of(tmp_path), {"main.a"}) == []


def test_a_file_held_by_a_writer_is_left_unknown_and_a_run_forgets_what_the_last_left(tmp_path):
    """A file another process holds for writing cannot be read when the run ends: its tables are left unknown
    (nothing to compare with, nothing claimed); readable again, they are noted; a new run forgets them."""
    database = tmp_path / "w.duckdb"
    with duckdb.connect(str(database)) as connection:
        connection.execute("CREATE TABLE a AS SELECT 1 AS x; CREATE TABLE b AS SELECT 2 AS y")
    snapshot(tmp_path, database)
    holder = subprocess.Popen(
        [sys.executable, "-c", f"import duckdb, sys; c = duckdb.connect({str(database)!r}); print('held', flush=True); "
         "sys.stdin.read()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout.readline() == "held\n"
        note_left(tmp_path)
    finally:
        holder.communicate("")
    index = index_of(tmp_path)
    assert "left_at_us" in index and all("left" not in t for t in index["files"][0]["tables"])
    assert changed_since_left(index, set()) == []
    note_left(tmp_path)
    index = index_of(tmp_path)
    assert [t["left"][0] for t in index["files"][0]["tables"]] == [1, 1]
    assert changed_since_left(index, set()) == []
    forget_left(tmp_path)
    index = index_of(tmp_path)
    assert "left_at_us" not in index and all("left" not in t for t in index["files"][0]["tables"])


def test_a_run_s_end_fills_only_the_files_it_read(tmp_path):
    """Two database files; the record's connections reached only one (the other held): only its tables are left,
    the other file's stay unknown and are never compared."""
    first, second = tmp_path / "a.duckdb", tmp_path / "b.duckdb"
    for database in (first, second):
        with duckdb.connect(str(database)) as connection:
            connection.execute("CREATE TABLE a AS SELECT 1 AS x; CREATE TABLE b AS SELECT 2 AS y")
    snapshot(tmp_path, first)
    index = index_of(tmp_path)
    index["files"].append({**index["files"][0], "database": str(second)})
    (tmp_path / SNAPSHOT_INDEX).write_bytes(orjson.dumps(index))
    left = LeftTables(tmp_path)
    with duckdb.connect(str(first), read_only=True) as connection:
        left.read(first, connection)
    left.save()
    files = index_of(tmp_path)["files"]
    assert [["left" in t for t in f["tables"]] for f in files] == [[True, True], [False, False]]
    with duckdb.connect(str(second)) as connection:
        connection.execute("INSERT INTO a VALUES (5)")
    assert changed_since_left(index_of(tmp_path), set()) == []
