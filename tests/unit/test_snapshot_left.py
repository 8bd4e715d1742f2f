"""What a run left in the snapshotted tables, over real DuckDB files: a file not made yet, a file another process
holds for writing, a run forgetting what the one before it left, and the tables a run record already explains."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import duckdb
import orjson
import pytest

from engine.base.errors import Refused
from engine.guardrails.snapshot_left import LeftTables, changed_since_left, forget_left, note_left
from engine.pipeline.row_changes import SNAPSHOT_INDEX


def snapshot(directory: Path, database: Path) -> None:
    """A snapshot index of two whole tables of ``database``."""
    tables = [{"name": name, "existed": True, "scope": "whole", "predicate": None, "rows": 0, "copy": name}
              for name in ("main.a", "main.b")]  # fmt: skip
    index = {"taken_at": "2024-01-01T00:00:00Z", "files": [{"database": str(database), "tables": tables}]}
    (directory / SNAPSHOT_INDEX).write_bytes(orjson.dumps(index))


def hold(database: Path, *, read_only: bool = False) -> subprocess.Popen[str]:
    """Another process with ``database`` open (for writing unless ``read_only``) until its stdin closes."""
    holder = subprocess.Popen(
        [sys.executable, "-c", f"import duckdb, sys; c = duckdb.connect({str(database)!r}, read_only={read_only}); "
         "print('held', flush=True); sys.stdin.read()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert holder.stdout is not None and holder.stdout.readline() == "held\n"
    return holder


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
    holder = hold(database)
    try:
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
    holder = hold(database)
    try:
        with pytest.raises(Refused) as refused:
            changed_since_left(index, set())
    finally:
        holder.communicate("")
    assert str(refused.value) == (
        f"the warehouse {database} is open for writing elsewhere (a run, or a session): restore once it has ended; "
        "nothing was restored"
    )
    forget_left(tmp_path)
    index = index_of(tmp_path)
    assert "left_at_us" not in index and all("left" not in t for t in index["files"][0]["tables"])
    reader = hold(database, read_only=True)
    try:
        note_left(tmp_path)  # a reader does not stop another reader
    finally:
        reader.communicate("")
    assert all("left" in t for t in index_of(tmp_path)["files"][0]["tables"])


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
    note_left(tmp_path)
    assert [["left" in t for t in f["tables"]] for f in index_of(tmp_path)["files"]] == [[True, True], [True, True]]
    left = LeftTables(tmp_path)
    with duckdb.connect(str(first), read_only=True) as connection:
        left.read(first, connection)
    left.save()
    files = index_of(tmp_path)["files"]
    assert [["left" in t for t in f["tables"]] for f in files] == [[True, True], [False, False]]
    with duckdb.connect(str(second)) as connection:
        connection.execute("INSERT INTO a VALUES (5)")
    assert changed_since_left(index_of(tmp_path), set()) == []


def ranged(directory: Path, database: Path) -> None:
    """A snapshot index of one table kept by range (days 3 to 4) and one kept whole, in ``database``."""
    with duckdb.connect(str(database)) as connection:
        connection.execute(
            "CREATE TABLE d AS SELECT DATE '2024-01-01' + INTERVAL (i) DAY AS day, 1 AS n FROM range(7) AS t(i);"
            "CREATE TABLE w AS SELECT 1 AS x"
        )
    predicate = "\"day\" BETWEEN DATE '2024-01-03' AND DATE '2024-01-04'"
    tables = [
        {"name": "main.gone", "existed": False, "scope": "whole", "predicate": None, "rows": 0, "copy": "gone"},
        {"name": "main.d", "existed": True, "scope": "range", "predicate": predicate, "rows": 2, "copy": "d"},
        {"name": "main.w", "existed": True, "scope": "whole", "predicate": None, "rows": 1, "copy": "w"},
    ]
    index = {"taken_at": "2024-01-01T00:00:00Z", "files": [{"database": str(database), "tables": tables}]}
    (directory / SNAPSHOT_INDEX).write_bytes(orjson.dumps(index))


def write(database: Path, sql: str) -> None:
    with duckdb.connect(str(database)) as connection:
        connection.execute(sql)


def test_a_range_table_is_compared_in_its_range_and_the_change_is_said_exactly(tmp_path):
    """The range's rows only: a change outside them is no change; inside, the table is named with the time the
    run ended and its rows then and now. A table kept whole changes anywhere. Every table differing is named,
    file after file, whatever came before it."""
    database = tmp_path / "w.duckdb"
    ranged(tmp_path, database)
    note_left(tmp_path)
    index = index_of(tmp_path)
    assert abs(index["left_at_us"] / 1_000_000 - time.time()) < 60
    assert index["files"][0]["tables"][0]["left"] == "absent"
    assert [t["left"][0] for t in index["files"][0]["tables"][1:]] == [2, 1]
    assert all(isinstance(t["left"][1], str) for t in index["files"][0]["tables"][1:])
    index["left_at_us"] = 1_704_067_200_000_000  # 2024-01-01T00:00:00Z
    write(database, "UPDATE d SET n = 5 WHERE day = DATE '2024-01-06'")
    assert changed_since_left(index, set()) == []
    write(database, "UPDATE d SET n = 5 WHERE day = DATE '2024-01-04'")  # as many rows, other values
    [change] = changed_since_left(index, set())
    assert change.startswith("main.d changed since") and "(2 rows then, 2 rows now)" in change
    write(database, "DELETE FROM d WHERE day = DATE '2024-01-03'; INSERT INTO w VALUES (2)")
    assert changed_since_left(index, set()) == [
        "main.d changed since the backfill's last run ended at 2024-01-01T00:00:00Z (2 rows then, 1 row now) by a "
        "writer that left no run record (another tool or a SQL session)",
        "main.w changed since the backfill's last run ended at 2024-01-01T00:00:00Z (1 row then, 2 rows now) by a "
        "writer that left no run record (another tool or a SQL session)",
    ]
    assert [line.split(" ")[0] for line in changed_since_left(index, {"main.d"})] == ["main.w"]
    first = {**index["files"][0], "tables": [{**index["files"][0]["tables"][1], "left": "absent"}]}
    index["files"] = [{**first, "tables": []}, first, index["files"][0]]
    assert [line.split(" ")[0] for line in changed_since_left(index, {"main.w"})] == ["main.d", "main.d"]


def test_a_range_whose_predicate_no_longer_reads_is_a_change(tmp_path):
    """The range's key column renamed by a session: the range cannot be read as it was left, which is a change."""
    database = tmp_path / "w.duckdb"
    ranged(tmp_path, database)
    note_left(tmp_path)
    write(database, "ALTER TABLE d RENAME COLUMN day TO d")
    [change] = changed_since_left(index_of(tmp_path), set())
    assert change.startswith("main.d changed since") and "(2 rows then, unreadable now)" in change


def test_nothing_is_noted_or_forgotten_where_there_is_nothing(tmp_path):
    """No snapshot: nothing written. A pruned snapshot: nothing noted (its copies are gone). Forgetting with
    nothing noted, or with some tables never noted (their file was held), leaves the index as it was."""
    note_left(tmp_path)
    forget_left(tmp_path)
    assert not (tmp_path / SNAPSHOT_INDEX).exists()
    database = tmp_path / "w.duckdb"
    ranged(tmp_path, database)
    pristine = (tmp_path / SNAPSHOT_INDEX).read_bytes()
    forget_left(tmp_path)
    assert (tmp_path / SNAPSHOT_INDEX).read_bytes() == pristine
    index = index_of(tmp_path)
    index["left_at_us"] = 1
    (tmp_path / SNAPSHOT_INDEX).write_bytes(orjson.dumps(index))
    forget_left(tmp_path)
    assert index_of(tmp_path) == orjson.loads(pristine)
    index["pruned_at"] = "2024-02-01T00:00:00Z"
    del index["left_at_us"]
    (tmp_path / SNAPSHOT_INDEX).write_bytes(orjson.dumps(index))
    note_left(tmp_path)
    assert "left_at_us" not in index_of(tmp_path)
