"""Snapshots, the restore path: before the first partition, everything the backfill can change is copied into
DuckDB files under the backfill's state directory, and ``backfill restore`` puts it back.

``time_interval`` and ``delete+insert`` tables keep only the rows inside the range
(what the backfill can delete or replace); every other table is copied whole. A
table that did not exist is restored by dropping it. Views and DDL change no data
and are not copied. The other tables an asset's hooks write are copied whole.
"""

from __future__ import annotations

import contextlib
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from engine.base.atomic import write_atomic
from engine.base.errors import BackfillError, BadInput, Refused, StateUnreadable
from engine.guardrails.facts import AssetFacts, Facts
from engine.guardrails.warehouse import Held
from engine.pipeline.database import relation_of, schema_of
from engine.pipeline.materialization import Database, quote_identifier, quote_name, window_predicate
from engine.pipeline.row_changes import SNAPSHOT_INDEX

PARTIAL = ("time_interval", "delete+insert")


class SnapshotFailed(BackfillError):
    """The snapshot could not be taken: nothing was run (exit 1)."""

    exit_code = 1


@dataclass(frozen=True)
class SnapshotTable:
    name: str
    existed: bool
    scope: str  # "whole" or "range"
    predicate: str | None
    rows: int
    copy: str  # the table's name inside the snapshot file

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "existed": self.existed,
            "scope": self.scope,
            "predicate": self.predicate,
            "rows": self.rows,
            "copy": self.copy,
        }


def _written_by_hooks(assets: list[AssetFacts]) -> list[str]:
    """The other tables the assets' hooks (and the SQL of assets run as written) write, as the first partition
    renders them, in the order first named: they are part of the asset, so what they may change is copied whole
    like a rebuilt table."""
    names = []
    for asset_facts in assets:
        for classified in asset_facts.classified.values():
            for statements in classified:
                names += [w.table for w in statements.writes if w.table not in names]
    return names


def _copy_name(name: str) -> str:
    return quote_identifier(name.replace(".", "__"))


def take_snapshot(facts: Facts, directory: Path) -> dict[str, Any]:
    """Copy what the selected data-changing assets may change; returns (and saves) the snapshot index. The
    warehouse is read through the pre-flight's read-only connection (a snapshot can never change it); only
    the snapshot file is written."""
    import duckdb

    started = time.time()
    files = []
    copied: list[SnapshotTable] = []
    by_file = facts.by_file([a for a in facts.selected if a.changes_data])
    for number, (path, assets) in enumerate(sorted(by_file.items())):
        target = directory / f"snapshot-{number}.duckdb"
        target.unlink(missing_ok=True)
        tables: list[SnapshotTable] = []
        try:
            connection = facts.warehouses.open(path).connection
        except (Held, duckdb.Error) as error:
            raise SnapshotFailed(f"cannot open {path} to snapshot it ({error}): nothing was run") from None
        if connection is None:  # no file yet: every table is new, and the way back is to drop it
            tables = [SnapshotTable(a.asset.name, False, "whole", None, 0, _copy_name(a.asset.name)) for a in assets]
            files.append({"database": str(path), "snapshot": target.name, "tables": [t.to_json() for t in tables]})
            continue
        cursor = None
        try:
            connection.execute(f"ATTACH '{_sql_text(str(target))}' AS snap (READ_WRITE)")
            cursor = connection.cursor()
            db = Database(cursor, lambda sql: sql)
            for asset_facts in assets:
                asset = asset_facts.asset
                copy = _copy_name(asset.name)
                if not db.table_exists(asset.name):
                    tables.append(SnapshotTable(asset.name, False, "whole", None, 0, copy))
                    continue
                partial = asset_facts.strategy in PARTIAL and asset.materialization.incremental_key
                window = facts.effective_window(asset, facts.range_window())  # what its runs may replace
                predicate = window_predicate(db, asset, window) if partial else None
                where = f" WHERE {predicate}" if predicate else ""
                db.execute(f"CREATE TABLE snap.{copy} AS SELECT * FROM {quote_name(asset.name)}{where}")
                rows = int(db.scalar(f"SELECT count(*) FROM snap.{copy}"))
                tables.append(SnapshotTable(asset.name, True, "range" if predicate else "whole", predicate, rows, copy))
            own = {relation_of(t.name).lower() for t in tables}  # one table however its name is written
            for name in _written_by_hooks(assets):
                if relation_of(name).lower() in own:
                    continue
                own.add(relation_of(name).lower())
                copy = _copy_name(name)
                if not db.table_exists(name):
                    tables.append(SnapshotTable(name, False, "whole", None, 0, copy))
                    continue
                db.execute(f"CREATE TABLE snap.{copy} AS SELECT * FROM {quote_name(name)}")
                rows = int(db.scalar(f"SELECT count(*) FROM snap.{copy}"))
                tables.append(SnapshotTable(name, True, "whole", None, rows, copy))
        except duckdb.Error as error:
            raise SnapshotFailed(f"cannot snapshot {path} into {target} ({error}): nothing was run") from None
        finally:
            if cursor is not None:
                cursor.close()  # a cursor is a connection of its own: while it is open, DETACH may not finish
            with contextlib.suppress(duckdb.Error):  # the warehouse's connection is shared: leave it as it was
                connection.execute("DETACH snap")
        files.append({"database": str(path), "snapshot": target.name, "tables": [t.to_json() for t in tables]})
        copied += tables
    index = {
        "format": 1,
        "taken_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "taken_at_us": int(started * 1_000_000),  # to the microsecond: what a restore compares later runs with
        "rows": sum(t.rows for t in copied),
        "retention_days": facts.settings.limits.snapshot_retention_days,
        "seconds": round(time.time() - started, 3),
        "bytes": sum((directory / f["snapshot"]).stat().st_size for f in files if (directory / f["snapshot"]).exists()),
        "files": files,
    }
    write_atomic(directory / SNAPSHOT_INDEX, orjson.dumps(index, option=orjson.OPT_INDENT_2))
    return index


def measured_copy_rate(directories: list[Path], *, latest: int = 10, examined: int = 50) -> float | None:
    """Rows a second the latest snapshots copied (their median), from the state root's earlier backfills
    (newest first; at most ``examined`` of them are read, so a state root of thousands costs the pre-flight
    nothing more); None when none copied enough rows to time (under 10,000, the timing is mostly overhead)."""
    rates = []
    for directory in directories[:examined]:
        try:
            index = orjson.loads((directory / SNAPSHOT_INDEX).read_bytes())
            rows, seconds = int(index.get("rows") or 0), float(index.get("seconds") or 0)
        except (OSError, orjson.JSONDecodeError, TypeError, ValueError):
            continue
        if rows >= 10_000 and seconds > 0:
            rates.append(rows / seconds)
        if len(rates) >= latest:
            break
    return statistics.median(rates) if rates else None


def prune_snapshots(directories: list[Path], *, now: float) -> list[str]:
    """Delete the snapshot files of backfills whose snapshot is older than its retention and that no
    executor runs; their ``snapshot.json`` says when they were pruned. What was pruned, one line each."""
    from engine.store.locks import FileLock

    pruned = []
    for directory in directories:
        try:
            index = read_snapshot(directory)
        except BadInput:
            continue
        if index is None or index.get("pruned_at") or "taken_at_us" not in index:
            continue
        age_days = (now - int(index["taken_at_us"]) / 1_000_000) / 86_400
        if age_days <= float(index.get("retention_days") or 30):
            continue
        lock = FileLock(directory / ".lock")
        if not lock.try_acquire():
            continue  # running: a snapshot in use is never pruned
        try:
            freed = 0
            for entry in index["files"]:
                copy = directory / entry["snapshot"]
                with contextlib.suppress(FileNotFoundError):
                    freed += copy.stat().st_size
                    copy.unlink()
            index["pruned_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now))
            write_atomic(directory / SNAPSHOT_INDEX, orjson.dumps(index, option=orjson.OPT_INDENT_2))
        finally:
            lock.release()
        pruned.append(f"{directory.name}: snapshot of {index['taken_at']} ({age_days:.0f} days old), {freed:,} bytes")
    return pruned


def read_snapshot(directory: Path) -> dict[str, Any] | None:
    try:
        return orjson.loads((directory / SNAPSHOT_INDEX).read_bytes())
    except FileNotFoundError:
        return None
    except (OSError, orjson.JSONDecodeError) as error:
        raise BadInput(f"{directory / SNAPSHOT_INDEX} cannot be read ({error}): the snapshot is unusable") from None


def restorable_snapshot(directory: Path) -> dict[str, Any]:
    """The snapshot's index, or why there is nothing to restore (none taken, or pruned): BadInput."""
    index = read_snapshot(directory)
    if index is None:
        raise BadInput(f"backfill {directory.name} has no snapshot (it was run with --no-snapshot, or changed no data)")
    if index.get("pruned_at"):
        raise BadInput(
            f"the snapshot of backfill {directory.name} (taken {index['taken_at']}) was pruned at "
            f"{index['pruned_at']}, past its retention of {index.get('retention_days', 30):g} days: nothing to restore"
        )
    return index


def restore_snapshot(directory: Path) -> list[str]:
    """Put every snapshotted table back as it was, one transaction per database file; what was done, per table."""
    import duckdb

    index = restorable_snapshot(directory)
    for entry in index["files"]:  # every copy readable before any table is touched
        snapshot = directory / entry["snapshot"]
        if entry["tables"] and any(t["existed"] for t in entry["tables"]) and not snapshot.exists():
            raise BadInput(f"snapshot file {snapshot} is missing: nothing was restored")
        if snapshot.exists():
            try:
                duckdb.connect(str(snapshot), read_only=True).close()
            except duckdb.Error as error:
                raise StateUnreadable(
                    f"snapshot file {snapshot} cannot be read ({str(error).splitlines()[0]}): nothing was restored"
                ) from None
    done = []
    for entry in index["files"]:
        snapshot = directory / entry["snapshot"]
        try:
            connection = duckdb.connect(entry["database"])
        except duckdb.IOException as error:
            raise warehouse_busy(entry["database"], f" ({str(error).splitlines()[0]})", done) from None
        try:
            if snapshot.exists():
                connection.execute(f"ATTACH '{_sql_text(str(snapshot))}' AS snap (READ_ONLY)")
            # Not a cursor: a DuckDB cursor is a connection of its own, outside this connection's transaction.
            db = Database(connection, lambda sql: sql)
            connection.execute("BEGIN TRANSACTION")
            for table in entry["tables"]:
                done.append(_restore_table(db, table))
            connection.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(duckdb.Error):
                connection.execute("ROLLBACK")
            raise
        finally:
            connection.close()
    return done


def warehouse_busy(database: str, detail: str = "", done: list[str] | None = None) -> Refused:
    """Why a restore cannot go on: another process holds the warehouse for writing (and what was restored before
    it, one transaction per file)."""
    restored = f"restored before it: {'; '.join(done)}" if done else "nothing was restored"
    return Refused(
        f"the warehouse {database} is open for writing elsewhere (a run, or a session): restore once it has "
        f"ended{detail}; {restored}"
    )


def _restore_table(db: Database, table: dict[str, Any]) -> str:
    name, copy = table["name"], table["copy"]
    target = quote_name(name)
    if not table["existed"]:
        db.execute(f"DROP TABLE IF EXISTS {target}")
        return f"{name}: dropped (it did not exist before the backfill)"
    exists = db.table_exists(name)
    if table["scope"] == "range" and exists:
        db.execute(f"DELETE FROM {target} WHERE {table['predicate']}")
        db.execute(f"INSERT INTO {target} BY NAME SELECT * FROM snap.{copy}")
        return f"{name}: {table['rows']:,} rows of the range put back"
    if exists and _columns(db, name) == _snapshot_columns(db, copy):
        db.execute(f"DELETE FROM {target}")
        db.execute(f"INSERT INTO {target} SELECT * FROM snap.{copy}")
    else:
        db.execute(f"DROP TABLE IF EXISTS {target}")
        db.execute(f"CREATE TABLE {target} AS SELECT * FROM snap.{copy}")
    return f"{name}: {table['rows']:,} rows put back"


def _columns(db: Database, name: str) -> list[tuple[str, str]]:
    schema, table = schema_of(name) or "main", name.split(".")[-1]
    return [
        tuple(row)
        for row in db.execute(
            "SELECT column_name, data_type FROM information_schema.columns WHERE table_catalog = current_database() "
            "AND table_schema = ? AND table_name = ? ORDER BY ordinal_position",
            [schema, table],
        ).fetchall()
    ]


def _snapshot_columns(db: Database, copy: str) -> list[tuple[str, str]]:
    plain = copy.strip('"').replace('""', '"')
    return [
        tuple(row)
        for row in db.execute(
            "SELECT column_name, data_type FROM information_schema.columns WHERE table_catalog = 'snap' "
            "AND table_name = ? ORDER BY ordinal_position",
            [plain],
        ).fetchall()
    ]


def _sql_text(text: str) -> str:
    return text.replace("'", "''")
