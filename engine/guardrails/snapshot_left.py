"""What a backfill's runs left in the tables its snapshot holds, so that ``backfill restore`` can tell a later write
by anything — another tool, a SQL session, a pipeline of another repository — from the backfill's own.

Run records name the later runs of this tool; nothing names the rest. So when a run ends, each snapshotted table
is fingerprinted in the scope a restore puts back (the range's rows, or the whole table) and the result kept in
the snapshot's index (``left``); a restore fingerprints the tables again and refuses, unless ``--force``, when
one differs. A run forgets what the one before it left as it starts: a run that then dies before its end leaves
nothing to compare with, and the restore is judged on run records alone, as before.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import orjson

from engine.base.atomic import write_atomic
from engine.guardrails.table_snapshot import read_snapshot, warehouse_busy
from engine.guardrails.warehouse import Held, Warehouse
from engine.pipeline.materialization import Database
from engine.pipeline.row_changes import SNAPSHOT_INDEX
from engine.pipeline.source_rows import fingerprint

ABSENT = "absent"  # the table did not exist when the run ended


def forget_left(directory: Path) -> None:
    """A run starts: what an earlier run left no longer describes the tables."""
    index = read_snapshot(directory)
    if index is None or "left_at_us" not in index:
        return
    del index["left_at_us"]
    for entry in index["files"]:
        for table in entry["tables"]:
            table.pop("left", None)
    _save(directory, index)


class LeftTables:
    """What a run's end finds in the snapshotted tables, read through connections its caller holds (the record's:
    one open per file), then saved. A file never read (held by a writer) leaves its tables unknown."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.index = read_snapshot(directory)
        self.found: dict[str, dict[str, Any] | None] = {}

    def read(self, path: Path, connection: Any | None) -> None:
        """Fingerprint the snapshot's tables in ``path`` (``connection``: read-only; None when there is no file)."""
        if self.index is None:
            return
        for entry in self.index["files"]:
            if Path(entry["database"]) == path:
                self.found[entry["database"]] = _fingerprints(entry, connection)

    def save(self) -> None:
        index = self.index
        if index is None or index.get("pruned_at"):
            return
        for entry in index["files"]:
            left = self.found.get(entry["database"])
            for table in entry["tables"]:
                table.pop("left", None)
                if left is not None:
                    table["left"] = left[table["name"]]
        index["left_at_us"] = int(time.time() * 1_000_000)
        _save(self.directory, index)


def note_left(directory: Path) -> None:
    """The tables as they are now (a restore's end), through connections of its own."""
    left = LeftTables(directory)
    for entry in left.index["files"] if left.index is not None else ():
        left.found[entry["database"]] = _read(entry)
    left.save()


def changed_since_left(index: dict[str, Any], explained: set[str]) -> list[str]:
    """The snapshotted tables that differ from what the backfill's last run left, leaving out those a later run
    record already names (``explained``): ``mart.x changed … (9 rows then, 10 now) …``."""
    if "left_at_us" not in index:
        return []
    when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(index["left_at_us"] / 1_000_000))
    changed = []
    for entry in index["files"]:
        known = {t["name"]: t["left"] for t in entry["tables"] if "left" in t and t["name"] not in explained}
        if not known:
            continue
        now = _read(entry)
        if now is None:
            raise warehouse_busy(entry["database"])
        for name, left in known.items():
            if now[name] != left:
                changed.append(
                    f"{name} changed since the backfill's last run ended at {when} ({_rows(left)} then, "
                    f"{_rows(now[name])} now) by a writer that left no run record (another tool or a SQL session)"
                )
    return changed


def _read(entry: dict[str, Any]) -> dict[str, Any] | None:
    """One database file's tables through a read-only connection of its own; None when another process holds the
    file for writing."""
    import duckdb

    try:
        warehouse = Warehouse.open(Path(entry["database"]))
    except (Held, duckdb.Error):
        return None
    try:
        return _fingerprints(entry, warehouse.connection)
    finally:
        warehouse.close()


def _fingerprints(entry: dict[str, Any], connection: Any | None) -> dict[str, Any]:
    """Each table of one database file in its restore's scope: [rows, hash sum], or ABSENT (every table, when
    there is no file: ``connection`` None)."""
    import duckdb

    if connection is None:
        return {table["name"]: ABSENT for table in entry["tables"]}
    db = Database(connection, lambda sql: sql)
    found: dict[str, Any] = {}
    for table in entry["tables"]:
        name = table["name"]
        if not db.table_exists(name):
            found[name] = ABSENT
            continue
        scope = table["predicate"] if table["scope"] == "range" and table["predicate"] else "TRUE"
        try:
            rows, total = fingerprint(db, name, scope)
            found[name] = [rows, str(total)]  # the hashes' sum is a HUGEINT: JSON keeps it as text
        except duckdb.Error as error:  # its columns changed under the range's predicate: not as it was left
            found[name] = f"unreadable: {error}"
    return found


def _rows(left: Any) -> str:
    if left == ABSENT:
        return "no table"
    if isinstance(left, list):
        return f"{left[0]:,} row{'s' * (left[0] != 1)}"
    return "unreadable"


def _save(directory: Path, index: dict[str, Any]) -> None:
    write_atomic(directory / SNAPSHOT_INDEX, orjson.dumps(index, option=orjson.OPT_INDENT_2))
