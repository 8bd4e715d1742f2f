"""``backfill diff``: sample rows of what a partition changed, before → after, against the backfill's snapshot.

Before is the snapshot's copy (the table as it was before the backfill's first partition), after is the
warehouse now, both inside the partition's window. Rows are matched by the asset's primary key where it declares
one and the rows keep it (added, removed, changed with the columns that differ); otherwise — no key, or a key
repeated or null on either side — a table's rows are compared as multisets (added and removed). The warehouse
and the snapshot are opened read-only: nothing is written. See docs/diff.md.
"""

from __future__ import annotations

import datetime as dt
import decimal
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.base.errors import BackfillError, BadInput
from engine.dates.plan import Interval
from engine.pipeline.assets import Asset
from engine.pipeline.materialization import Database, quote_identifier, quote_name, window_predicate
from engine.pipeline.row_changes import (
    SNAPSHOT_ALIAS,
    SNAPSHOT_INDEX,
    attach_snapshot,
    changed_keys,
    key_breaks,
    snapshot_tables,
    windowed,
)
from engine.pipeline.templating import Window
from engine.spec.backfill_spec import BackfillSpec

DEFAULT_LIMIT = 20
MAX_LIMIT = 10_000


class WarehouseBusy(BackfillError):
    """The warehouse is open for writing elsewhere (a run): it cannot be read now (exit 3)."""

    exit_code = 3


@dataclass
class TableDiff:
    table: str
    key: list[str] | None
    before: int
    after: int
    added: list[dict[str, Any]] = field(default_factory=list)  # rows (a sample)
    removed: list[dict[str, Any]] = field(default_factory=list)
    changed: list[dict[str, Any]] = field(default_factory=list)  # {key, before, after, columns}
    counts: dict[str, int | None] = field(default_factory=dict)  # added, removed, changed: all of them
    declared_key: list[str] | None = None  # the asset's primary key, whether or not the rows keep it
    key_breaks: dict[str, int] | None = None  # rows repeating the declared key or null in it, per side: no key used

    def to_json(self) -> dict[str, Any]:
        return {
            "table": self.table,
            "key": self.key,
            "declared_key": self.declared_key,
            "key_breaks": self.key_breaks,
            "before": self.before,
            "after": self.after,
            **{name: self.counts.get(name) for name in ("added_total", "removed_total", "changed_total")},
            "added": self.added,
            "removed": self.removed,
            "changed": self.changed,
        }


def partition_window(interval: Interval, spec: BackfillSpec) -> Window:
    """The window a partition's run sees: its interval with an inclusive end."""
    return Window(interval.start, interval.end - 1, spec.zone)


def assets_of(spec: BackfillSpec) -> dict[str, Asset]:
    """The pipeline's assets by lowercased name (the target as it is now)."""
    from engine.pipeline.loading import PIPELINES
    from engine.pipeline.repository import resolve_target

    if spec.target.is_command or not spec.target.path:
        raise BadInput("backfill diff compares a pipeline's tables with its snapshot: a --command backfill has none")
    target = resolve_target(spec.target.path)
    pipeline = PIPELINES.load(target.pipeline_dir)
    return {name.lower(): asset for name, asset in pipeline.assets.items()}


def diff_partitions(
    directory: Path,
    spec: BackfillSpec,
    intervals: list[Interval],
    *,
    table: str | None = None,
    limit: int = DEFAULT_LIMIT,
) -> list[tuple[Interval, list[TableDiff]]]:
    """Each interval's changes per snapshotted windowed table (``table``: that one only)."""
    import duckdb

    tables = snapshot_tables(directory / SNAPSHOT_INDEX)
    if not tables:
        raise BadInput(
            f"backfill {directory.name} has no snapshot to compare with (run with --no-snapshot, a command, or "
            "nothing that changes data): see docs/diff.md"
        )
    assets = assets_of(spec)
    windowed_tables = [(database, name, entry) for (database, name), entry in sorted(tables.items())
                       if name in assets and windowed(assets[name])]  # fmt: skip
    wanted = windowed_tables
    if table is not None:
        wanted = [w for w in windowed_tables if w[1] == table.lower()]
        if not wanted:
            shown = ", ".join(sorted({name for _, name, _ in windowed_tables})) or "none"
            raise BadInput(f"--table {table!r} is not a windowed table of this backfill's snapshot: use one of {shown}")
    results: list[tuple[Interval, list[TableDiff]]] = [(interval, []) for interval in intervals]
    by_database: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for database, name, entry in wanted:
        by_database.setdefault(database, []).append((name, entry))
    for database, entries in by_database.items():
        try:
            connection = duckdb.connect(database, read_only=True)
        except duckdb.IOException as error:
            raise WarehouseBusy(
                f"the warehouse {database} is open for writing elsewhere (a run of this or another backfill): "
                f"diff it once that run has ended ({str(error).splitlines()[0]})"
            ) from None
        try:
            db = Database(connection, lambda sql: sql)
            attached: set[str] = set()
            for name, entry in entries:
                if entry["file"] not in attached and entry.get("existed"):
                    attach_snapshot(db, entry["file"])
                    attached.add(entry["file"])
                asset = assets[name]
                for interval, diffs in results:
                    diffs.append(_diff_table(db, asset, partition_window(interval, spec), entry, limit))
        finally:
            connection.close()
    return results


def _diff_table(db: Database, asset: Asset, window: Window, entry: dict[str, Any], limit: int) -> TableDiff:
    before = f"{SNAPSHOT_ALIAS}.{entry['copy']}" if entry.get("existed") else None
    return diff_table(db, asset, window_predicate(db, asset, window), before, limit)


def diff_table(db: Database, asset: Asset, predicate: str, before_table: str | None, limit: int) -> TableDiff:
    """``asset``'s table now against ``before_table`` (None: it did not exist), both where ``predicate`` holds."""
    after = f"(SELECT * FROM {quote_name(asset.name)} WHERE {predicate})"
    before = (
        f"(SELECT * FROM {before_table} WHERE {predicate})"
        if before_table is not None
        else f"(SELECT * FROM {quote_name(asset.name)} WHERE false)"
    )
    broken = key_breaks(db, asset.primary_key, before, after)
    key = None if broken is not None else asset.primary_key or None
    diff = TableDiff(asset.name, key, _scalar(db, f"SELECT count(*) FROM {before}"),
                     _scalar(db, f"SELECT count(*) FROM {after}"))  # fmt: skip
    diff.declared_key, diff.key_breaks = asset.primary_key or None, broken
    if key:
        using = ", ".join(quote_identifier(column) for column in key)
        order = ", ".join(quote_identifier(column) for column in key)
        added = f"SELECT a.* FROM {after} a ANTI JOIN {before} b USING ({using})"
        removed = f"SELECT b.* FROM {before} b ANTI JOIN {after} a USING ({using})"
        diff.added = _rows(db, f"{added} ORDER BY {order} LIMIT {limit}")
        diff.removed = _rows(db, f"{removed} ORDER BY {order} LIMIT {limit}")
        changed = changed_keys(key, before, after)
        diff.counts = {
            "added_total": _scalar(db, f"SELECT count(*) FROM ({added})"),
            "removed_total": _scalar(db, f"SELECT count(*) FROM ({removed})"),
            "changed_total": _scalar(db, f"SELECT count(*) FROM ({changed})"),
        }
        for keys in _rows(db, f"{changed} ORDER BY {order} LIMIT {limit}"):
            match = " AND ".join(f"{quote_identifier(c)} IS NOT DISTINCT FROM ?" for c in key)
            values = [keys[c] for c in key]
            [old] = _rows(db, f"SELECT * FROM {before} WHERE {match}", values)
            [new] = _rows(db, f"SELECT * FROM {after} WHERE {match}", values)
            columns = [c for c in new if old.get(c) != new.get(c)]
            diff.changed.append({"key": keys, "before": old, "after": new, "columns": columns})
    else:
        added = f"{after} EXCEPT ALL {before}"
        removed = f"{before} EXCEPT ALL {after}"
        diff.added = _rows(db, f"SELECT * FROM ({added}) ORDER BY ALL LIMIT {limit}")
        diff.removed = _rows(db, f"SELECT * FROM ({removed}) ORDER BY ALL LIMIT {limit}")
        diff.counts = {
            "added_total": _scalar(db, f"SELECT count(*) FROM ({added})"),
            "removed_total": _scalar(db, f"SELECT count(*) FROM ({removed})"),
            "changed_total": None,
        }
    return diff


def _scalar(db: Database, sql: str) -> int:
    return int(db.execute(sql).fetchone()[0])


def _rows(db: Database, sql: str, parameters: list | None = None) -> list[dict[str, Any]]:
    cursor = db.execute(sql, parameters) if parameters is not None else db.execute(sql)
    names = [d[0] for d in cursor.description]
    return [{name: _plain(value) for name, value in zip(names, row, strict=True)} for row in cursor.fetchall()]


def _plain(value: Any) -> Any:
    """A value as JSON and a line of text show it: dates and times as ISO 8601, decimals as text."""
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, bytes):
        return value.hex()
    return value
