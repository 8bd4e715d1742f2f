"""Materializations on DuckDB, as Bruin documents them, each applied in one transaction.

If any statement fails, the transaction is rolled back and the target table is
exactly as it was before the asset started.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Sequence
from typing import Any

from engine.dates.instants import to_datetime
from engine.pipeline.assets import Asset
from engine.pipeline.templating import Window

INCREMENTAL = ("append", "merge", "delete+insert", "time_interval", "truncate+insert")


def quote_identifier(part: str) -> str:
    return '"' + part.replace('"', '""') + '"'


def quote_name(name: str) -> str:
    """``raw.orders`` → ``"raw"."orders"``."""
    return ".".join(quote_identifier(part) for part in name.split("."))


def _schema_of(name: str) -> str | None:
    parts = name.split(".")
    return ".".join(quote_identifier(p) for p in parts[:-1]) if len(parts) > 1 else None


def _table_parts(name: str) -> tuple[str, str]:
    parts = name.split(".")
    return (parts[-2] if len(parts) > 1 else "main"), parts[-1]


def strip_statement(sql: str) -> str:
    """The query without surrounding whitespace and trailing semicolons (it gets wrapped)."""
    text = sql.strip()
    while text.endswith(";"):
        text = text[:-1].rstrip()
    return text


class RunStopped(Exception):
    """The asset was stopped (cancel, timeout): no further statement runs, and nothing is committed."""


class Database:
    """Runs statements on one DuckDB cursor, prefixing the query annotation comment.

    ``stopped`` says why the asset was stopped, if it was: an interrupt that lands between two statements
    (where DuckDB has nothing to interrupt) must still keep the next one, and the COMMIT, from running.
    """

    def __init__(
        self, cursor: Any, annotate: Callable[[str], str], stopped: Callable[[], str | None] = lambda: None
    ) -> None:
        self.cursor = cursor
        self.annotate = annotate
        self.stopped = stopped

    def raise_if_stopped(self) -> None:
        reason = self.stopped()
        if reason is not None:
            raise RunStopped(reason)

    def execute(self, sql: str, parameters: list[Any] | None = None) -> Any:
        self.raise_if_stopped()
        return self.cursor.execute(self.annotate(sql), parameters or [])

    def scalar(self, sql: str, parameters: list[Any] | None = None) -> Any:
        row = self.execute(sql, parameters).fetchone()
        return row[0] if row else None

    def count(self, sql: str, parameters: list[Any] | None = None) -> int:
        """Run a statement that reports an affected-row count."""
        value = self.scalar(sql, parameters)
        return int(value) if value is not None else 0

    def table_exists(self, name: str) -> bool:
        schema, table = _table_parts(name)
        return bool(
            self.scalar(
                "SELECT count(*) FROM information_schema.tables WHERE table_schema = ? AND table_name = ?",
                [schema, table],
            )
        )

    def column_type(self, name: str, column: str) -> str | None:
        schema, table = _table_parts(name)
        return self.scalar(
            "SELECT data_type FROM information_schema.columns "
            "WHERE table_schema = ? AND table_name = ? AND column_name = ?",
            [schema, table, column],
        )


_SCHEMA_LOCK = threading.Lock()


def ensure_schema(db: Database, name: str) -> None:
    """Create the schema of ``schema.table`` if missing, one thread at a time (concurrent
    CREATE SCHEMA statements in DuckDB transactions conflict with each other)."""
    schema = _schema_of(name)
    if schema:
        with _SCHEMA_LOCK:
            db.execute(f"CREATE SCHEMA IF NOT EXISTS {schema}")


def run_in_transaction(db: Database, work: Callable[[], Any]) -> Any:
    """``work()`` between BEGIN and COMMIT; ROLLBACK and re-raise on any failure."""
    db.cursor.execute("BEGIN TRANSACTION")
    try:
        result = work()
        db.raise_if_stopped()
        db.cursor.execute("COMMIT")
        return result
    except BaseException:
        with contextlib.suppress(Exception):
            db.cursor.execute("ROLLBACK")
        raise


def materialize(
    db: Database,
    asset: Asset,
    query: str,
    window: Window,
    *,
    full_refresh: bool,
    pre_hooks: Sequence[str] = (),
    post_hooks: Sequence[str] = (),
) -> int | None:
    """Apply the asset's materialization, with its hooks, in one transaction; the rows written, if known.

    A failing post hook rolls the materialization back: the asset either lands whole or not at all.
    """
    m = asset.materialization
    target = quote_name(asset.name)
    query = strip_statement(query)

    if m.type is not None:
        ensure_schema(db, asset.name)

    def work() -> int | None:
        for statement in pre_hooks:
            db.execute(statement)
        rows = apply()
        for statement in post_hooks:
            db.execute(statement)
        return rows

    def apply() -> int | None:
        if m.type is None:
            db.execute(query)
            return None
        if m.type == "view":
            db.execute(f"CREATE OR REPLACE VIEW {target} AS {query}")
            return None
        strategy = m.strategy or "create+replace"
        if strategy == "ddl":
            if full_refresh:
                db.execute(f"DROP TABLE IF EXISTS {target}")
            db.execute(f"CREATE TABLE IF NOT EXISTS {target} ({_column_definitions(asset)})")
            return 0
        if strategy == "create+replace" or (full_refresh and strategy in INCREMENTAL):
            if full_refresh:
                db.execute(f"DROP TABLE IF EXISTS {target}")
            return db.count(f"CREATE OR REPLACE TABLE {target} AS {query}")
        if not db.table_exists(asset.name):
            return db.count(f"CREATE TABLE {target} AS {query}")
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


def load_seed(db: Database, asset: Asset) -> int:
    """Replace the seed's table with the CSV's rows (typed by declared columns when given)."""
    target = quote_name(asset.name)
    declared = {c.name: c.type for c in asset.columns if c.type}

    ensure_schema(db, asset.name)

    def work() -> int:
        source = "read_csv(?, header = true, auto_detect = true"
        if declared:
            source += ", types = ?"
            parameters: list[Any] = [str(asset.seed_path), declared]
        else:
            parameters = [str(asset.seed_path)]
        return db.count(f"CREATE OR REPLACE TABLE {target} AS SELECT * FROM {source})", parameters)

    return run_in_transaction(db, work)
