"""Read-only looks into a pipeline's DuckDB files at pre-flight: tables, rows, sizes, past periods.

Every file is opened ``read_only``, so no pre-flight query can change data; a
file another process holds for writing is reported as held (by whom), not waited for.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path
from typing import Any

from engine.base.interruptible import interruptible
from engine.dates.instants import to_datetime
from engine.pipeline.assets import Asset
from engine.pipeline.duckdb_pool import lock_holder
from engine.pipeline.materialization import (
    INSERTING,
    Database,
    missing_columns,
    quote_identifier,
    quote_name,
    window_predicate,
)
from engine.pipeline.templating import Window


class Held(Exception):
    """The file is open for writing in another process."""

    def __init__(self, path: Path, holder: str) -> None:
        super().__init__(f"{path} is held by {holder}")
        self.path, self.holder = path, holder


class _StoppableCursor:
    """A read-only cursor whose queries a stop signal ends: a sample query of an hour did not stop on Ctrl+C, which
    DuckDB turned into the query's error and the pre-flight into a check it could not decide."""

    def __init__(self, cursor: Any) -> None:
        self._cursor = cursor

    def execute(self, sql: str, parameters: list[Any] | None = None) -> Any:
        return interruptible(lambda: self._cursor.execute(sql, parameters), self._cursor.interrupt)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cursor, name)


@dataclass
class Warehouse:
    """One DuckDB file, opened read-only (or absent: every table is absent)."""

    path: Path
    connection: Any | None

    @classmethod
    def open(cls, path: Path) -> Warehouse:
        import duckdb

        if not path.exists():
            return cls(path, None)
        try:
            return cls(path, duckdb.connect(str(path), read_only=True))
        except duckdb.IOException as error:
            holder = lock_holder(error, path)
            if holder is not None:
                raise Held(path, holder) from None
            raise

    def close(self) -> None:
        if self.connection is not None:
            self.connection.close()
            self.connection = None

    @property
    def size_bytes(self) -> int:
        try:
            return self.path.stat().st_size
        except OSError:
            return 0

    def database(self) -> Database:
        assert self.connection is not None
        return Database(_StoppableCursor(self.connection.cursor()), lambda sql: sql)

    def exists(self, name: str) -> bool:
        return self.connection is not None and self.database().table_exists(name)

    def rows(self, name: str) -> int | None:
        """The table's rows, or None when it does not exist."""
        if not self.exists(name):
            return None
        return int(self.database().scalar(f"SELECT count(*) FROM {quote_name(name)}"))

    def rows_in_window(self, asset: Asset, window: Window) -> int | None:
        """Rows whose time key falls in ``window`` (inclusive end), or None without table or key."""
        if not asset.materialization.incremental_key or not self.exists(asset.name):
            return None
        db = self.database()
        predicate = window_predicate(db, asset, window)
        return int(db.scalar(f"SELECT count(*) FROM {quote_name(asset.name)} WHERE {predicate}"))

    def sample_count(self, query: str, parameters: list[Any] | None = None) -> int:
        """How many rows a query returns, counted by DuckDB without fetching them."""
        return int(self.database().scalar(f"SELECT count(*) FROM ({query})", parameters))

    def count_outside(self, asset: Asset, query: str, window: Window) -> int:
        """How many rows of ``query`` have an incremental key outside ``window`` (NULL keys included: the
        window's DELETE never removes them either)."""
        predicate = window_predicate(self.database(), asset, window)
        return int(self.database().scalar(f"SELECT count(*) FROM ({query}) WHERE ({predicate}) IS NOT TRUE"))

    def count_replaced(self, asset: Asset, query: str, window: Window, *, whole: bool) -> int | None:
        """How many of the table's rows a run deletes before it inserts ``query``'s: all of them (``whole``: a
        rebuild), those in ``window`` (time_interval), those whose key ``query`` returns (delete+insert, as the
        runner deletes); None for a strategy that deletes nothing, or no table."""
        if whole:
            return self.rows(asset.name)
        key, strategy = asset.materialization.incremental_key, asset.materialization.strategy
        if not key or not self.exists(asset.name):
            return None
        if strategy == "time_interval":
            return self.rows_in_window(asset, window)
        if strategy == "delete+insert":
            column = quote_identifier(key)
            return int(
                self.database().scalar(
                    f"SELECT count(*) FROM {quote_name(asset.name)} WHERE {column} IN "
                    f"(SELECT DISTINCT {column} FROM ({query}))"
                )
            )
        return None

    def missing_columns(self, asset: Asset, query: str) -> list[str]:
        """The table's columns ``query`` does not return, for a strategy that inserts into the table as it is
        (the run refuses them rather than write NULL there); none for the others or without a table."""
        if asset.materialization.strategy not in INSERTING or not self.exists(asset.name):
            return []
        return missing_columns(self.database(), asset.name, query)

    def count_repeated_keys(self, asset: Asset, query: str) -> int:
        """How many rows of ``query`` share their primary key with another of its rows (NULLs equal, as the merge
        matches them): a merge inserts each such new key twice, and updates a matched row with any one of them."""
        keys = ", ".join(quote_identifier(name) for name in asset.primary_key)
        return int(
            self.database().scalar(
                f"SELECT coalesce(sum(n), 0) FROM (SELECT count(*) AS n FROM ({query}) GROUP BY {keys} "
                "HAVING count(*) > 1)"
            )
        )

    def count_existing(self, asset: Asset, query: str) -> int:
        """How many rows of ``query`` the table already holds, row for row (``INTERSECT ALL``, so two copies in
        the query and one in the table count once), on the query's columns."""
        db = self.database()
        columns = [row[0] for row in db.execute(f"DESCRIBE ({query})").fetchall()]
        names = ", ".join(quote_identifier(name) for name in columns)
        return int(
            db.scalar(
                f"SELECT count(*) FROM (SELECT {names} FROM ({query}) INTERSECT ALL "
                f"SELECT {names} FROM {quote_name(asset.name)})"
            )
        )

    def period_counts(self, asset: Asset, period: str, window: Window) -> dict[datetime | date, int]:
        """Rows per local ``period`` (hour, day, week, month, year) outside ``window``, by period start."""
        key = asset.materialization.incremental_key
        if not key or not self.exists(asset.name):
            return {}
        db = self.database()
        column_type = (db.column_type(asset.name, key) or "").upper()
        column = quote_identifier(key)
        if "TIME ZONE" in column_type:
            zone = getattr(window.zone, "key", "UTC")
            column = f"timezone('{zone}', {column})"
        elif column_type == "DATE" and period == "hour":
            return {}
        predicate = window_predicate(db, asset, window)
        expression = f"CAST(date_trunc('{period}', {column}) AS TIMESTAMP)"
        rows = db.execute(
            f"SELECT {expression} AS period, count(*) FROM {quote_name(asset.name)} "
            f"WHERE {column} IS NOT NULL AND NOT ({predicate}) GROUP BY ALL"
        ).fetchall()
        return {period_start: int(count) for period_start, count in rows if period_start is not None}


def whole_range_window(start: int, end: int, zone) -> Window:
    """The window covering a whole backfill ``[start, end)`` (inclusive end, as runs see it)."""
    return Window(start, end - 1, zone)


def local_start(instant: int, zone) -> datetime:
    return to_datetime(instant, zone).replace(tzinfo=None)
