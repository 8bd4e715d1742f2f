"""Materializations on DuckDB, as Bruin documents them, each applied in one transaction.

If any statement fails, the transaction is rolled back and the target table is
exactly as it was before the asset started.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import time, timedelta

from engine.dates.instants import to_datetime
from engine.pipeline.assets import Asset
from engine.pipeline.database import (
    Database,
    RunStopped,
    ensure_schema,
    quote_identifier,
    quote_name,
    relation_of,
    run_in_transaction,
    schema_of,
    strip_statement,
)
from engine.pipeline.datavault import DATAVAULT_STRATEGIES, apply_datavault
from engine.pipeline.scd2 import SCD2_STRATEGIES, apply_scd2
from engine.pipeline.source_rows import describe_change, fingerprint, lost_source_rows, raw_tables, source_rows
from engine.pipeline.sql_writes import (
    POST,
    PRE,
    QUERY,
    RAW_SCHEMAS,
    Classified,
    Write,
    after_the_query,
    classify,
    phrase,
    shape,
    writes_inside,
)
from engine.pipeline.templating import Window

__all__ = [
    "Database",
    "MissingColumns",
    "MoreThanOneQuery",
    "OutsideWindowChanged",
    "QueryWrites",
    "RawDeleteRefused",
    "RunStopped",
    "TransactionStatementRefused",
    "UnjudgedStatementRefused",
    "materialize",
    "missing_columns",
    "quote_identifier",
    "quote_name",
    "window_predicate",
]

INCREMENTAL = ("append", "merge", "delete+insert", "time_interval", "truncate+insert")


def materialize(
    db: Database,
    asset: Asset,
    query: str,
    window: Window,
    *,
    full_refresh: bool,
    pre_hooks: Sequence[str] = (),
    post_hooks: Sequence[str] = (),
    fence_window: bool = False,
    schema_prefix: str = "",
    raw_layer: frozenset[str] = frozenset(),
) -> int | None:
    """Apply the asset's materialization, with its hooks, in one transaction; the rows written, if known.

    A failing post hook rolls the materialization back: the asset either lands whole or not at all.
    ``fence_window`` (a backfill's partitions): the table's rows outside the run's window must come out of
    the transaction exactly as they went in, or it is rolled back (:class:`OutsideWindowChanged`); so must every
    raw table (``schema_prefix``'s copies, and ``raw_layer``: tables a ``layer:raw`` tag puts there) when the SQL
    holds a statement that cannot be classified.
    """
    m = asset.materialization
    target = quote_name(asset.name)
    query = strip_statement(query)
    # full_refresh_restricted: the table is never dropped; the strategy runs as on any other run.
    full_refresh = (full_refresh or asset.always_full_refresh) and not asset.full_refresh_restricted

    if m.type is not None:
        if more := after_the_query(query, db.cursor):  # DuckDB would run them after the materialization, unjudged
            raise MoreThanOneQuery(asset.name, more)
        if writes := writes_inside(query, db.cursor):  # DuckDB would run them as it reads the query, unjudged
            raise QueryWrites(asset.name, writes[0])
        ensure_schema(db, asset.name)

    # What the run executes as written, each statement classified once: the hooks, and a query not materialized.
    run_sql = classified_run_sql(db, pre_hooks, post_hooks, query if m.type is None else None)
    _refuse_transactions(asset, run_sql)
    fenced = fence_window and not full_refresh and fences_its_window(asset) and db.table_exists(asset.name)
    outside = outside_predicate(db, asset, window) if fenced else None  # read once, judged before and after
    # Other tables the hooks may delete or rewrite rows of, fingerprinted whole (they have no window here); and the
    # raw tables SQL run as written may reach by an unqualified name (it may write any other table: a person
    # approved that).
    others: dict[str, str] = {}
    if fence_window:  # the pre-flight judged the first partition's; each partition's are judged as it runs
        _refuse_raw_deletes(asset, run_sql, raw_layer)
        others = {name: "a hook of" for name in _resolved(db, asset, _deleted_by(run_sql, (PRE, POST)))}
        for name in _resolved(db, asset, _deleted_by(run_sql, (QUERY,))):
            if schema_of(name).lower() in RAW_SCHEMAS or relation_of(name).lower() in raw_layer:
                others.setdefault(name, "the SQL of")
    # SQL whose effect cannot be read from its text (an import running a directory's CREATE statements, a CALL):
    # whatever it reaches, every row a raw table held must come out of the transaction as it went in.
    unreadable = fence_window and any(c.unclassified for classified in run_sql.values() for c in classified)
    raw = raw_tables(db, asset, schema_prefix, raw_layer) if unreadable else []

    def work() -> int | None:
        other_before = {name: fingerprint(db, name) for name in others if db.table_exists(name)}
        raw_before = source_rows(db, raw)
        before = fingerprint(db, asset.name, outside) if outside is not None else None
        for statement in pre_hooks:
            db.execute(statement)
        rows = apply()
        for statement in post_hooks:
            db.execute(statement)
        if before is not None:
            after = fingerprint(db, asset.name, outside) if db.table_exists(asset.name) else (0, 0)
            if after != before:
                raise OutsideWindowChanged(asset.name, window, before, after)
        for name, was in other_before.items():
            now = fingerprint(db, name) if db.table_exists(name) else (0, 0)
            if now != was:
                raise OtherTableChanged(asset.name, name, was, now, by=others[name])
        if (lost := lost_source_rows(db, raw_before)) is not None:
            raise OtherTableChanged(asset.name, *lost, by="SQL that cannot be classified in")
        return rows

    def apply() -> int | None:
        if m.type is None:
            db.execute(query)
            return None
        if m.type == "view":
            db.execute(f"CREATE OR REPLACE VIEW {target} AS {query}")
            return None
        strategy = m.strategy or "create+replace"
        if strategy in SCD2_STRATEGIES:
            return apply_scd2(db, asset, query, full_refresh=full_refresh)
        if strategy in DATAVAULT_STRATEGIES:
            return apply_datavault(db, asset, query, full_refresh=full_refresh)
        if strategy == "ddl":
            if full_refresh:
                db.execute(f"DROP TABLE IF EXISTS {target}")
            db.execute(f"CREATE TABLE IF NOT EXISTS {target} ({_column_definitions(asset)})")
            for column in asset.columns:
                if column.description:
                    text = column.description.replace("'", "''")
                    db.execute(f"COMMENT ON COLUMN {target}.{quote_identifier(column.name)} IS '{text}'")
            return 0
        if strategy == "create+replace" or (full_refresh and strategy in INCREMENTAL):
            if full_refresh:
                db.execute(f"DROP TABLE IF EXISTS {target}")
            return db.count(f"CREATE OR REPLACE TABLE {target} AS {query}")
        if not db.table_exists(asset.name):
            return db.count(f"CREATE TABLE {target} AS {query}")
        if strategy in INSERTING and (missing := missing_columns(db, asset.name, query)):
            raise MissingColumns(asset.name, missing)  # a query that lost a column would blank it
        if strategy == "append":
            return db.count(f"INSERT INTO {target} BY NAME {query}")
        if strategy == "truncate+insert":
            db.execute(f"DELETE FROM {target}")
            return db.count(f"INSERT INTO {target} BY NAME {query}")
        if strategy == "merge":
            return db.count(_merge_statement(asset, target, query))
        if strategy == "delete+insert":
            key = quote_identifier(m.incremental_key or "")
            staged = quote_identifier("__backfill_stage_" + asset.name.replace(".", "_"))
            db.execute(f"CREATE OR REPLACE TEMP TABLE {staged} AS {query}")
            db.execute(f"DELETE FROM {target} WHERE {key} IN (SELECT DISTINCT {key} FROM {staged})")
            rows = db.count(f"INSERT INTO {target} BY NAME SELECT * FROM {staged}")
            db.execute(f"DROP TABLE {staged}")
            return rows
        if strategy == "time_interval":
            db.execute(f"DELETE FROM {target} WHERE {window_predicate(db, asset, window)}")
            return db.count(f"INSERT INTO {target} BY NAME {query}")
        raise ValueError(f"unsupported strategy {strategy}")

    return run_in_transaction(db, work)


# Strategies that insert the query's rows by name into the table as it is: a column the query does not return
# would be written NULL (Bruin inserts by position, so the same query fails there).
INSERTING = ("append", "truncate+insert", "delete+insert", "time_interval")


def missing_columns(db: Database, table: str, query: str) -> list[str]:
    """The table's columns ``query`` does not return (matched without case, as ``INSERT … BY NAME`` matches
    them): inserting its rows would fill them with NULL."""
    returned = {str(row[0]).lower() for row in db.execute(f"DESCRIBE {query}").fetchall()}
    columns = [c[0] for c in db.execute(f"SELECT * FROM {quote_name(table)} LIMIT 0").description]
    return [c for c in columns if c.lower() not in returned]


# Strategies that, keyed by time, write only their window: what lies outside it must not change.
WINDOW_FENCED = ("time_interval", "delete+insert", "append", "merge")


def fences_its_window(asset: Asset) -> bool:
    m = asset.materialization
    return m.type == "table" and bool(m.incremental_key) and (m.strategy or "") in WINDOW_FENCED


def outside_predicate(db: Database, asset: Asset, window: Window) -> str:
    """The rows of the asset's table that lie outside the run's window, as a WHERE condition."""
    predicate = _whole_days_predicate(asset, window) if asset.materialization.time_granularity == "date" else None
    return f"({predicate or window_predicate(db, asset, window)}) IS NOT TRUE"


def _whole_days_predicate(asset: Asset, window: Window) -> str:
    """A date key's rows that lie inside the window: only the days the window covers whole. An hourly window
    covers no day, so every row of a date-keyed table is outside it (deleting "its" day deletes 23 others)."""
    key = quote_identifier(asset.materialization.incremental_key or "")
    start, after = to_datetime(window.start, window.zone), to_datetime(window.end + 1, window.zone)
    first = start.date() if start.time() == time.min else start.date() + timedelta(days=1)
    last = after.date() - timedelta(days=1)
    if first > last:
        return "FALSE"
    return f"{key} BETWEEN DATE '{first.isoformat()}' AND DATE '{last.isoformat()}'"


def classified_run_sql(
    db: Database, pre_hooks: Sequence[str], post_hooks: Sequence[str], as_written: str | None
) -> dict[str, list[Classified]]:
    """Each statement source a run executes as written (``sql_writes.RUN_SQL_PHASES``), classified."""
    sources = {PRE: pre_hooks, POST: post_hooks, QUERY: [as_written] if as_written is not None else []}
    return {phase: [classify(text, db.cursor) for text in texts] for phase, texts in sources.items()}


def _refuse_transactions(asset: Asset, run_sql: dict[str, list[Classified]]) -> None:
    """A statement that begins or ends a transaction, in any run: the asset runs in one transaction, which a COMMIT
    would end (what came before it kept, whatever fails after) and a ROLLBACK would undo halfway."""
    for phase, classified in run_sql.items():
        for statement in (s for c in classified for s in c.transactions):
            raise TransactionStatementRefused(asset.name, phase, statement)


def _refuse_raw_deletes(asset: Asset, run_sql: dict[str, list[Classified]], raw_layer: frozenset[str]) -> None:
    """A backfill partition's hook (or SQL run as written) that deletes or rewrites a raw table (``raw_layer``'s
    too), as this partition renders it (a macro may delete on some days only), is refused before anything runs."""
    for phase, classified in run_sql.items():
        for write in (w for c in classified for w in c.writes):
            if write.deletes_source(raw_layer):
                raise RawDeleteRefused(asset.name, phase, write.verb, write.table)


def refuse_unjudged(asset: Asset, run_sql: dict[str, list[Classified]], judged: frozenset[str]) -> None:
    """A backfill partition's statement that cannot be classified and whose shape (``sql_writes.shape``) the
    backfill's pre-flight did not see: a macro that renders it on some days only would otherwise run it judged by
    nobody. One the pre-flight saw was judged there (human-only: a person approved it)."""
    for phase, classified in run_sql.items():
        for statement in (s for c in classified for s in c.unclassified):
            if shape(statement) not in judged:
                raise UnjudgedStatementRefused(asset.name, phase, statement)


def _deleted_by(run_sql: dict[str, list[Classified]], phases: Sequence[str]) -> set[str]:
    """The tables these phases delete or rewrite rows of, as written (``_resolved`` leaves the asset's own out)."""
    return {w.table for phase in phases for c in run_sql[phase] for w in c.writes if w.deletes}


def _resolved(db: Database, asset: Asset, names: set[str]) -> list[str]:
    """The tables hooks write, as ``schema.table``: an unqualified name is every table of that name in any schema
    (a hook that moves the search path or runs ``USE`` decides which it reaches), the asset's own left out."""
    tables: set[str] = set()
    for name in sorted(names):
        if "." in name:
            tables.add(name)
            continue
        rows = db.execute(
            "SELECT schema_name, table_name FROM duckdb_tables() WHERE database_name = current_database() "
            "AND lower(table_name) = lower(?)",
            [name],
        ).fetchall()
        tables |= {f"{schema}.{table}" for schema, table in rows}
    own = relation_of(asset.name).lower()
    return sorted(t for t in tables if relation_of(t).lower() != own)


class OtherTableChanged(Exception):
    """A backfill partition's hook deleted or rewrote rows of another table (or SQL run as written, of a raw table):
    rolled back, the partition fails."""

    def __init__(self, name: str, table: str, before: tuple[int, int], after: tuple[int, int], *, by: str) -> None:
        super().__init__(
            f"{by} {name} changed rows of another table, {table} ({describe_change(before, after, 'before')}): "
            "rolled back, nothing of this partition was written"
        )


class RawDeleteRefused(Exception):
    """A backfill partition's hook (or SQL run as written), as rendered for it, deletes or rewrites source data:
    nothing runs."""

    def __init__(self, name: str, phase: str, verb: str, table: str) -> None:
        super().__init__(
            f"{name}: {phrase(phase, partition=True)} runs {verb} on {table}, a raw table: source data is never "
            "deleted or rebuilt in a backfill; nothing of this partition was written"
        )


class TransactionStatementRefused(Exception):
    """A hook (or SQL run as written) that begins or ends a transaction: nothing runs."""

    def __init__(self, name: str, phase: str, statement: str) -> None:
        super().__init__(
            f"{name}: {phrase(phase)} runs {statement[:80]!r}, which would end the transaction the asset runs in "
            "(what came before it could no longer be rolled back) or start another: nothing of this run was written"
        )


class UnjudgedStatementRefused(Exception):
    """A backfill partition's statement that cannot be classified, of a shape the pre-flight never saw."""

    def __init__(self, name: str, phase: str, statement: str) -> None:
        super().__init__(
            f"{name}: {phrase(phase, partition=True)} runs SQL that cannot be classified, unjudged by the pre-flight "
            f"({statement[:50]!r}): nothing of this partition was written (a --continue from here judges it)"
        )


class MoreThanOneQuery(Exception):
    """A materialized asset's query followed by more statements: Bruin refuses it ("cannot enable materialization
    for tasks with multiple queries"); DuckDB would run them after the table or view, judged by nobody."""

    def __init__(self, name: str, more: Sequence[str]) -> None:
        what = "1 more statement" if len(more) == 1 else f"{len(more)} more statements"
        super().__init__(
            f"{name}: a materialized asset runs one query, and this one is followed by {what} ({more[0][:80]!r}): "
            "nothing of this run was written (move them into a hook, or set materialization to none)"
        )


class QueryWrites(Exception):
    """A materialized asset's query that writes inside itself (a CTE's ``DELETE … RETURNING``): nothing runs."""

    def __init__(self, name: str, write: Write) -> None:
        super().__init__(
            f"{name}: a materialized asset's query only reads, and this one runs {write.verb} on {write.table} inside "
            "it (a WITH clause's statement): nothing of this run was written"
        )


class MissingColumns(Exception):
    """The query does not return every column of the table it inserts into: nothing is written."""

    def __init__(self, name: str, missing: Sequence[str]) -> None:
        what = (
            f"column {missing[0]}, which the table has"
            if len(missing) == 1
            else (f"columns {', '.join(missing)}, which the table has")
        )
        super().__init__(
            f"{name}: the query returns no {what}; the rows it writes would hold NULL there: "
            "nothing of this run was written (return it from the query, or drop it from the table)"
        )


class OutsideWindowChanged(Exception):
    """A backfill partition changed its table outside its own window: rolled back, the partition fails."""

    def __init__(self, name: str, window: Window, before: tuple[int, int], after: tuple[int, int]) -> None:
        start = to_datetime(window.start, window.zone).isoformat()
        end = to_datetime(window.end, window.zone).isoformat()
        change = describe_change(before, after, "there before")
        super().__init__(
            f"{name} changed rows outside its window {start} .. {end} ({change}): rolled back, nothing of this "
            "partition was written"
        )


def _merge_statement(asset: Asset, target: str, query: str) -> str:
    keys = " AND ".join(
        f"target.{quote_identifier(c)} IS NOT DISTINCT FROM source.{quote_identifier(c)}" for c in asset.primary_key
    )
    updates = [c.name for c in asset.columns if c.update_on_merge and not c.primary_key]
    matched = (
        "UPDATE SET " + ", ".join(f"{quote_identifier(c)} = source.{quote_identifier(c)}" for c in updates)
        if updates
        else "DO NOTHING"
    )
    if asset.materialization.incremental_predicate:
        keys = f"{keys} AND ({asset.materialization.incremental_predicate})"
    return (
        f"MERGE INTO {target} AS target USING ({query}) AS source ON ({keys}) "
        f"WHEN MATCHED THEN {matched} WHEN NOT MATCHED THEN INSERT BY NAME"
    )


def window_predicate(db: Database, asset: Asset, window: Window) -> str:
    """Rows of the run's window: inclusive dates for ``date``, ``[start, end]`` for ``timestamp``."""
    key = quote_identifier(asset.materialization.incremental_key or "")
    start, end = to_datetime(window.start, window.zone), to_datetime(window.end, window.zone)
    if asset.materialization.time_granularity == "date":
        return f"{key} BETWEEN DATE '{start.date().isoformat()}' AND DATE '{end.date().isoformat()}'"
    column_type = (db.column_type(asset.name, asset.materialization.incremental_key or "") or "").upper()
    if "TIME ZONE" in column_type:
        return (
            f"{key} BETWEEN TIMESTAMPTZ '{start.isoformat(timespec='microseconds')}' "
            f"AND TIMESTAMPTZ '{end.isoformat(timespec='microseconds')}'"
        )
    # A naive TIMESTAMP column holds wall times of the run's zone.
    return (
        f"{key} BETWEEN TIMESTAMP '{start.strftime('%Y-%m-%d %H:%M:%S.%f')}' "
        f"AND TIMESTAMP '{end.strftime('%Y-%m-%d %H:%M:%S.%f')}'"
    )


def _column_definitions(asset: Asset) -> str:
    parts = []
    for column in asset.columns:
        definition = f"{quote_identifier(column.name)} {column.type or 'VARCHAR'}"
        if column.nullable is False:
            definition += " NOT NULL"
        parts.append(definition)
    if asset.primary_key:
        parts.append("PRIMARY KEY (" + ", ".join(quote_identifier(c) for c in asset.primary_key) + ")")
    return ", ".join(parts)
