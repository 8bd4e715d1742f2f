"""What a partition changed: per table, the rows added, removed and changed inside its window, against the
backfill's snapshot (the tables as they were before its first partition; docs/diff.md).

Measured by the run itself, on its own connection, once its assets ran: a backfill's children write the
DuckDB file, so no other process could read it meanwhile. A table whose window holds the same rows as the
snapshot's (count and a sum of row hashes: its fingerprint) is unchanged without another query; otherwise,
where the asset declares a primary key that holds on both sides, rows are matched by key (added, removed,
changed: same key, other values), and elsewhere as multisets (added and removed; a changed row is one of each).
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import orjson

from engine.pipeline.assets import Asset
from engine.pipeline.materialization import Database, quote_identifier, quote_name, window_predicate
from engine.pipeline.templating import Window

SNAPSHOT_ALIAS = "backfill_snapshot"
# A row's hash, from its columns: never ``hash(t)`` of a table alias, which a column named ``t`` turns into that
# column's hash alone (DuckDB resolves a column before an alias), so a change to any other column would not show.
ROW_HASH = "hash(*COLUMNS(*))"
SNAPSHOT_INDEX = "snapshot.json"  # in the backfill's directory, written by engine/guardrails/table_snapshot.py


def snapshot_tables(index_path: Path) -> dict[tuple[str, str], dict[str, Any]]:
    """(database file, table name lowercased) → the snapshot's entry for it, with ``file`` (the snapshot copy's path);
    empty when there is no readable snapshot."""
    try:
        index = orjson.loads(index_path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return {}
    found = {}
    for entry in index.get("files") or []:
        for table in entry.get("tables") or []:
            key = (str(Path(entry["database"]).resolve()), str(table["name"]).lower())
            found[key] = table | {"file": str(index_path.parent / entry["snapshot"])}
    return found


def windowed(asset: Asset) -> bool:
    """A table asset with an incremental key: its partition's rows are the rows of its window."""
    m = asset.materialization
    return m.type == "table" and bool(m.incremental_key)


def measure(db: Database, asset: Asset, window: Window, table: dict[str, Any]) -> dict[str, Any]:
    """The changes to ``asset``'s table inside ``window`` since the snapshot entry ``table`` (its snapshot file
    attached by the caller as :data:`SNAPSHOT_ALIAS`)."""
    predicate = window_predicate(db, asset, window)
    after = f"(SELECT * FROM {quote_name(asset.name)} WHERE {predicate})"
    before = (
        f"(SELECT * FROM {SNAPSHOT_ALIAS}.{table['copy']} WHERE {predicate})"
        if table.get("existed")
        else f"(SELECT * FROM {quote_name(asset.name)} WHERE false)"
    )
    key = asset.primary_key or None
    counts = {"before": 0, "after": 0}
    prints = []
    for side, query in (("before", before), ("after", after)):
        rows, total = db.execute(f"SELECT count(*), coalesce(sum({ROW_HASH}), 0) FROM {query}").fetchone()
        counts[side] = int(rows)
        prints.append((int(rows), int(total)))
    result: dict[str, Any] = {"key": key, **counts, "added": 0, "removed": 0, "changed": 0 if key else None}
    if prints[0] == prints[1]:
        return result  # the same rows: its fingerprint did not move
    broken = key_breaks(db, key, before, after)
    if broken is not None:  # rows cannot be matched by a key they repeat: compared as multisets, and said so
        key = None
        result.update(key=None, changed=None, declared_key=asset.primary_key, key_breaks=broken)
    if key:
        using = ", ".join(quote_identifier(column) for column in key)
        result["added"] = _count(db, f"SELECT count(*) FROM {after} a ANTI JOIN {before} b USING ({using})")
        result["removed"] = _count(db, f"SELECT count(*) FROM {before} b ANTI JOIN {after} a USING ({using})")
        result["changed"] = _count(db, f"SELECT count(*) FROM ({changed_keys(key, before, after)})")
    else:
        result["added"] = _count(db, f"SELECT count(*) FROM ({after} EXCEPT ALL {before})")
        result["removed"] = _count(db, f"SELECT count(*) FROM ({before} EXCEPT ALL {after})")
    return result


def key_breaks(db: Database, key: list[str] | None, before: str, after: str) -> dict[str, int] | None:
    """Where rows break the declared primary ``key`` inside the window — repeat it or leave part of it null —
    how many on each side (``{"before": n, "after": m}``, counting every null-keyed row and every repeat past
    a key's first row); None when the key holds on both sides (or there is none). A key that does not hold
    cannot match rows: matched by it, a duplicated row would be neither added nor changed, the very damage a
    diff is asked to show."""
    if not key:
        return None
    columns = ", ".join(quote_identifier(column) for column in key)
    unkeyed = " OR ".join(f"{quote_identifier(column)} IS NULL" for column in key)
    counts = {
        side: _count(
            db,
            f"SELECT coalesce(sum(CASE WHEN unkeyed THEN n ELSE n - 1 END), 0) FROM (SELECT ({unkeyed}) AS unkeyed, "
            f"count(*) AS n FROM {query} GROUP BY {columns}) WHERE unkeyed OR n > 1",
        )
        for side, query in (("before", before), ("after", after))
    }
    return counts if any(counts.values()) else None


def changed_keys(key: list[str], before: str, after: str) -> str:
    """SQL for the keys on both sides whose rows differ, each row's hash taken under a name no key column has."""
    columns = ", ".join(quote_identifier(column) for column in key)
    hashed = "row_hash"
    while hashed in {column.lower() for column in key}:
        hashed += "_"
    name = quote_identifier(hashed)

    def rows(side: str) -> str:
        return f"(SELECT {columns}, {ROW_HASH} AS {name} FROM {side})"

    return f"SELECT {columns} FROM {rows(after)} a JOIN {rows(before)} b USING ({columns}) WHERE a.{name} <> b.{name}"


def _count(db: Database, sql: str) -> int:
    return int(db.execute(sql).fetchone()[0])


def attach_snapshot(db: Database, path: str) -> None:
    db.execute(f"ATTACH '{path.replace(chr(39), chr(39) * 2)}' AS {SNAPSHOT_ALIAS} (READ_ONLY)")


def detach_snapshot(db: Database) -> None:
    with contextlib.suppress(Exception):  # a warm runner parks this connection: nothing of ours stays attached
        db.execute(f"DETACH {SNAPSHOT_ALIAS}")
