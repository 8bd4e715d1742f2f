"""Slowly changing dimensions (type 2) on DuckDB: ``scd2_by_time`` and ``scd2_by_column``, as Bruin documents them.

Every version of a row carries ``_valid_from``, ``_valid_until`` (``TIMESTAMPTZ``,
UTC; ``9999-12-31 23:59:59`` while current) and ``_is_current``. A run never
rewrites history: it closes the current versions that changed or left the source
and inserts the new ones, so running the same data again changes nothing. The
query's rows are staged first and checked (no NULL or repeated primary key, no
NULL incremental key), because a bad batch would otherwise corrupt the history
for good.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.pipeline.assets import Asset
from engine.pipeline.database import Database, quote_identifier, quote_name

SCD2_STRATEGIES = ("scd2_by_time", "scd2_by_column")
VALIDITY_COLUMNS = ("_valid_from", "_valid_until", "_is_current")
OPEN_END = "TIMESTAMPTZ '9999-12-31 23:59:59+00'"
_TIME_TYPES = ("DATE", "TIMESTAMP", "TIMESTAMP_S", "TIMESTAMP_MS", "TIMESTAMP_NS", "TIMESTAMP WITH TIME ZONE")
# The validity columns of a new history table, typed and empty.
_EMPTY_VALIDITY = ", ".join(
    f"CAST(NULL AS {kind}) AS {name}"
    for name, kind in zip(VALIDITY_COLUMNS, ("TIMESTAMPTZ", "TIMESTAMPTZ", "BOOLEAN"), strict=True)
)
# Temporary tables of one apply (the session's own: no other run sees them).
_NEW_VERSIONS = quote_identifier("__backfill_scd2_new")
_CHANGES = quote_identifier("__backfill_scd2_changes")
_RUN_TIME = "current_timestamp"  # when a version without a key time begins


class HistoryProblem(Exception):
    """The batch or the table cannot be applied to the history without corrupting it."""


@dataclass(frozen=True)
class _Batch:
    stage: str  # the quoted temporary table holding the query's rows
    columns: list[str]
    keys: list[str]
    version_start: str  # SQL for a staged row ``s``: when its version begins


def apply_scd2(db: Database, asset: Asset, query: str, *, full_refresh: bool) -> int:
    """Apply the asset's query to its SCD2 table; the number of versions inserted."""
    by_time = asset.materialization.strategy == "scd2_by_time"
    target = quote_name(asset.name)
    batch = _stage(db, asset, query, by_time=by_time)
    if full_refresh:
        db.execute(f"DROP TABLE IF EXISTS {target}")
    if not db.table_exists(asset.name):
        db.execute(f"CREATE TABLE {target} AS SELECT s.*, {_EMPTY_VALIDITY} FROM {batch.stage} AS s WHERE false")
    else:
        missing = [c for c in VALIDITY_COLUMNS if db.column_type(asset.name, c) is None]
        if missing:
            raise HistoryProblem(
                f"table {asset.name} exists without the SCD2 column(s) {', '.join(missing)}: "
                "rebuild it with backfill run --full-refresh"
            )
    _widen_to_the_data(db, asset, target, batch)
    _close_versions_gone_from_source(db, target, batch)
    rows = _apply_time(db, target, batch) if by_time else _apply_column(db, asset, target, batch)
    db.execute(f"DROP TABLE {batch.stage}")
    return rows


def _widen_to_the_data(db: Database, asset: Asset, target: str, batch: _Batch) -> None:
    """A column whose new data is wider than the history's type (INTEGER then BIGINT, DATE then TIMESTAMP) takes
    the type both fit, as Bruin's DuckDB SCD2 does by rebuilding the table from the union of history and
    source; without it the insert would fail, or cast the new rows down."""
    for column in batch.columns:
        current = db.column_type(asset.name, column)
        if current is None:
            continue
        name = quote_identifier(column)
        both = db.execute(f"DESCRIBE SELECT {name} FROM {target} UNION ALL SELECT {name} FROM {batch.stage}")
        wider = str(both.fetchall()[0][1])
        if wider.upper() != current.upper():
            db.execute(f"ALTER TABLE {target} ALTER COLUMN {name} SET DATA TYPE {wider}")


def _stage(db: Database, asset: Asset, query: str, *, by_time: bool) -> _Batch:
    strategy = asset.materialization.strategy
    stage = quote_identifier("__backfill_scd2_" + asset.name.replace(".", "_"))
    db.execute(f"CREATE OR REPLACE TEMP TABLE {stage} AS {query}")
    described = db.execute(f"DESCRIBE {stage}").fetchall()
    types = {row[0]: str(row[1]).upper() for row in described}
    columns = [row[0] for row in described]
    for reserved in VALIDITY_COLUMNS:
        if reserved in types:
            raise HistoryProblem(f"the query returns {reserved}, a column name {strategy} reserves for itself")
    keys = asset.primary_key
    for key in keys:
        if key not in types:
            raise HistoryProblem(f"primary key column {key} is not among the query's columns ({', '.join(columns)})")
    incremental = asset.materialization.incremental_key
    version_start = _RUN_TIME
    if incremental:
        kind = types.get(incremental)
        if kind is None:
            raise HistoryProblem(f"incremental_key {incremental} is not among the query's columns")
        if kind not in _TIME_TYPES:
            raise HistoryProblem(
                f"incremental_key {incremental} is {kind}: {strategy} needs a DATE or TIMESTAMP column"
            )
        column = "s." + quote_identifier(incremental)
        # A naive key (DATE, TIMESTAMP) is read as UTC, as Bruin does, so the history does not depend on the session.
        version_start = column if kind.endswith("TIME ZONE") else f"timezone('UTC', CAST({column} AS TIMESTAMP))"
        nulls = db.count(f"SELECT count(*) FROM {stage} AS s WHERE {column} IS NULL")
        if nulls:
            raise HistoryProblem(f"{nulls} source row(s) have a NULL incremental_key {incremental}")
    key_list = ", ".join(quote_identifier(k) for k in keys)
    null_keys = " OR ".join(f"{quote_identifier(k)} IS NULL" for k in keys)
    nulls = db.count(f"SELECT count(*) FROM {stage} WHERE {null_keys}")
    if nulls:
        raise HistoryProblem(f"{nulls} source row(s) have a NULL primary key ({key_list})")
    identity = key_list + (", " + quote_identifier(incremental) if by_time else "")
    repeated = db.count(f"SELECT count(*) FROM (SELECT 1 FROM {stage} GROUP BY {identity} HAVING count(*) > 1)")
    if repeated:
        what = f"({identity})" if by_time else f"primary key ({key_list})"
        raise HistoryProblem(f"{repeated} {what} value(s) appear more than once in the source rows")
    return _Batch(stage, columns, keys, version_start)


def _matches(keys: list[str], left: str, right: str) -> str:
    return " AND ".join(f"{left}.{quote_identifier(k)} = {right}.{quote_identifier(k)}" for k in keys)


def _close_versions_gone_from_source(db: Database, target: str, batch: _Batch) -> None:
    """Current versions whose key the source no longer has end now (never before they began)."""
    db.execute(
        f"UPDATE {target} AS t SET _valid_until = greatest(current_timestamp, t._valid_from), _is_current = false "
        f"WHERE t._is_current AND NOT EXISTS (SELECT 1 FROM {batch.stage} AS s WHERE {_matches(batch.keys, 's', 't')})"
    )


def _apply_time(db: Database, target: str, batch: _Batch) -> int:
    """Rows whose key time is later than their current version's start become new versions; several versions
    of one key in a batch are chained in time order; older or equal times change nothing."""
    keys = ", ".join(quote_identifier(k) for k in batch.keys)
    current = f"(SELECT {keys}, _valid_from FROM {target} WHERE _is_current)"
    new = _NEW_VERSIONS
    db.execute(
        f"CREATE OR REPLACE TEMP TABLE {new} AS SELECT s.*, {batch.version_start} AS __from FROM {batch.stage} AS s "
        f"LEFT JOIN {current} AS c ON {_matches(batch.keys, 's', 'c')} "
        f"WHERE c._valid_from IS NULL OR {batch.version_start} > c._valid_from"
    )
    db.execute(
        f"UPDATE {target} AS t SET _valid_until = n.first_from, _is_current = false "
        f"FROM (SELECT {keys}, min(__from) AS first_from FROM {new} GROUP BY {keys}) AS n "
        f"WHERE t._is_current AND {_matches(batch.keys, 't', 'n')}"
    )
    following = f"lead(__from) OVER (PARTITION BY {keys} ORDER BY __from)"
    columns = ", ".join(quote_identifier(c) for c in batch.columns)
    rows = db.count(
        f"INSERT INTO {target} BY NAME SELECT {columns}, __from AS _valid_from, "
        f"coalesce({following}, {OPEN_END}) AS _valid_until, {following} IS NULL AS _is_current FROM {new}"
    )
    db.execute(f"DROP TABLE {new}")
    return rows


def _apply_column(db: Database, asset: Asset, target: str, batch: _Batch) -> int:
    """Rows that are new, or differ from their current version in any other column (NULL-safe), become
    new versions; the version they replace ends when they begin."""
    incremental = asset.materialization.incremental_key
    compared = [c for c in batch.columns if c not in batch.keys and c != incremental]
    changed = " OR ".join(f"s.{quote_identifier(c)} IS DISTINCT FROM c.{quote_identifier(c)}" for c in compared)
    first_key = quote_identifier(batch.keys[0])
    changes = _CHANGES
    db.execute(
        f"CREATE OR REPLACE TEMP TABLE {changes} AS SELECT s.*, {batch.version_start} AS __from, "
        f"c.{first_key} IS NOT NULL AS __replaces, c._valid_from AS __replaced_from FROM {batch.stage} AS s "
        f"LEFT JOIN (SELECT * FROM {target} WHERE _is_current) AS c ON {_matches(batch.keys, 's', 'c')} "
        f"WHERE c.{first_key} IS NULL OR ({changed or 'false'})"
    )
    backwards = db.count(f"SELECT count(*) FROM {changes} WHERE __replaces AND __from < __replaced_from")
    if backwards:
        raise HistoryProblem(
            f"{backwards} changed row(s) have an incremental_key {incremental} earlier than the start of the version "
            "they would replace: history only moves forward (run the partitions in time order)"
        )
    db.execute(
        f"UPDATE {target} AS t SET _valid_until = c.__from, _is_current = false FROM {changes} AS c "
        f"WHERE c.__replaces AND t._is_current AND {_matches(batch.keys, 't', 'c')}"
    )
    columns = ", ".join(quote_identifier(c) for c in batch.columns)
    rows = db.count(
        f"INSERT INTO {target} BY NAME SELECT {columns}, __from AS _valid_from, {OPEN_END} AS _valid_until, "
        f"true AS _is_current FROM {changes}"
    )
    db.execute(f"DROP TABLE {changes}")
    return rows
