"""Quality checks: column checks and custom SQL checks, run after their asset on the whole table."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from engine.pipeline.assets import Asset
from engine.pipeline.columns import Check, CustomCheck
from engine.pipeline.database import Database, quote_identifier, quote_name, strip_statement
from engine.pipeline.sql_writes import not_one_read
from engine.pipeline.templating import render


@dataclass(frozen=True)
class QualityCheckResult:
    name: str  # "unique(order_id)" or the custom check's name
    passed: bool
    blocking: bool
    detail: str  # what was found, or the error text

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "passed": self.passed, "blocking": self.blocking, "detail": self.detail}


def _literal(value: Any) -> str:
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int | float):
        return repr(value)
    return "'" + str(value).replace("'", "''") + "'"


def _violations_query(table: str, column: str, check: Check, foreign_key: tuple[str, str] | None = None) -> str:
    col = quote_identifier(column)
    predicates = {
        "not_null": f"{col} IS NULL",
        "positive": f"{col} <= 0",
        "non_negative": f"{col} < 0",
        "negative": f"{col} >= 0",
    }
    if check.name in predicates:
        return f"SELECT count(*) FROM {table} WHERE {predicates[check.name]}"
    if check.name == "unique":
        return (
            f"SELECT coalesce(sum(n - 1), 0) FROM (SELECT count(*) AS n FROM {table} "
            f"WHERE {col} IS NOT NULL GROUP BY {col} HAVING count(*) > 1)"
        )
    if check.name == "accepted_values":
        values = ", ".join(_literal(v) for v in check.value)
        return f"SELECT count(*) FROM {table} WHERE {col} IS NOT NULL AND {col} NOT IN ({values})"
    if check.name == "pattern":  # Bruin's DuckDB check is "col !~ 'pattern'": a search, so anchor with ^ and $
        return f"SELECT count(*) FROM {table} WHERE NOT regexp_matches({col}, {_literal(check.value)})"
    if check.name == "min":
        return f"SELECT count(*) FROM {table} WHERE {col} < {_literal(check.value)}"
    if check.name == "max":
        return f"SELECT count(*) FROM {table} WHERE {col} > {_literal(check.value)}"
    if check.name == "relationships" and foreign_key is not None:
        parent, parent_column = quote_name(foreign_key[0]), quote_identifier(foreign_key[1])
        return (
            f"SELECT count(*) FROM {table} AS child WHERE child.{col} IS NOT NULL AND NOT EXISTS "
            f"(SELECT 1 FROM {parent} AS parent WHERE parent.{parent_column} = child.{col})"
        )
    raise ValueError(check.name)


def run_checks(
    db: Database, asset: Asset, context: dict[str, Any], rewrite: Callable[[str], str] = lambda sql: sql
) -> list[QualityCheckResult]:
    """Every column check and custom check of the asset; a check that errors counts as failed.

    ``rewrite`` is applied to custom check queries (a schema-prefixed environment's table references)."""
    results = []
    table = quote_name(asset.name)
    for column in asset.columns:
        for check in column.checks:
            label = f"{check.name}({column.name})"
            try:
                violations = int(db.scalar(_violations_query(table, column.name, check, column.foreign_key)) or 0)
            except Exception as error:
                results.append(QualityCheckResult(label, False, check.blocking, _first_line(error)))
                continue
            detail = "ok" if violations == 0 else f"{violations} row{'s' if violations != 1 else ''} violate it"
            results.append(QualityCheckResult(label, violations == 0, check.blocking, detail))
    for custom in asset.custom_checks:
        results.append(_run_custom(db, custom, context, rewrite))
    return results


def _run_custom(
    db: Database, check: CustomCheck, context: dict[str, Any], rewrite: Callable[[str], str]
) -> QualityCheckResult:
    try:
        query = rewrite(render(check.query, context))
        if (
            why := not_one_read(query, db.cursor)
        ) is not None:  # a check that writes would change what it checks, unjudged
            detail = f"a check runs one query that reads, and {why}: nothing of it ran"
            return QualityCheckResult(check.name, False, check.blocking, detail)
        if check.count is not None:
            rows = db.count(f"SELECT count(*) FROM ({strip_statement(query)})")
            passed = rows == check.count
            detail = "ok" if passed else f"returned {rows} row{'s' if rows != 1 else ''}, expected {check.count}"
            return QualityCheckResult(check.name, passed, check.blocking, detail)
        rows = db.execute(query).fetchall()
    except Exception as error:
        return QualityCheckResult(check.name, False, check.blocking, _first_line(error))
    actual = rows[0][0] if rows and rows[0] else None
    expected = check.value
    passed = actual == expected or (
        isinstance(actual, int | float) and isinstance(expected, int | float) and float(actual) == float(expected)
    )
    detail = "ok" if passed else f"returned {actual!r}, expected {expected!r}"
    return QualityCheckResult(check.name, passed, check.blocking, detail)


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
