"""An asset's columns and quality checks, as its header declares them (Bruin's ``columns`` and ``custom_checks``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.pipeline.bruin_lint import column_detail_problems
from engine.pipeline.problems import Problems
from engine.pipeline.yamlfile import line_of

COLUMN_CHECKS = (
    "not_null",
    "unique",
    "positive",
    "non_negative",
    "negative",
    "accepted_values",
    "pattern",
    "min",
    "max",
    "relationships",
)
CHECKS_WITH_VALUE = ("accepted_values", "pattern", "min", "max")
COLUMN_FIELDS = {
    "name",
    "type",
    "description",
    "primary_key",
    "update_on_merge",
    "nullable",
    "checks",
    "tags",
    "owner",
    "domains",
    "meta",
    "merge_sql",
    "extends",
    "foreign_key",
    # Bruin defines these too (pkg/pipeline/yaml.go, column); they change nothing on DuckDB here.
    "source_column",
    "mask",
    "default",
    "precision",
    "scale",
    "length",
    "collation",
    "upstreams",
}
CHECK_FIELDS = {"name", "value", "blocking", "description", "notifications", "retries"}
CUSTOM_CHECK_FIELDS = {"name", "query", "value", "blocking", "description", "count", "notifications", "retries"}


@dataclass(frozen=True)
class Check:
    name: str
    value: Any
    blocking: bool
    line: int


@dataclass(frozen=True)
class CustomCheck:
    name: str
    query: str
    value: Any
    blocking: bool
    line: int
    count: int | None = None  # when given: the query's row count must equal it (instead of value)


@dataclass(frozen=True)
class Column:
    name: str
    type: str | None
    primary_key: bool
    update_on_merge: bool
    nullable: bool | None
    checks: tuple[Check, ...]
    description: str | None = None
    meta: dict[str, Any] | None = None
    foreign_key: tuple[str, str] | None = None  # (table, column) the relationships check looks up


def parse_columns(data: dict[str, Any], path: Path, problems: Problems) -> tuple[Column, ...]:
    raw = data.get("columns") or []
    if not isinstance(raw, list):
        problems.add(path, line_of(data, "columns"), "columns must be a list")
        return ()
    columns = []
    seen: set[str] = set()
    for entry in raw:
        line = line_of(entry) or line_of(data, "columns")
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            problems.add(path, line, "every column needs a name")
            continue
        # Bruin's lint rules duplicate-column-names and duplicate-tags (critical) compare without case.
        if entry["name"].lower() in seen:
            problems.add(path, line, f"column {entry['name']!r} is declared twice (as Bruin reads names, without case)")
        seen.add(entry["name"].lower())
        tags = entry.get("tags")
        if tags is not None and (not isinstance(tags, list) or not all(isinstance(tag, str) for tag in tags)):
            where = line_of(entry, "tags") or line
            problems.add(path, where, f"the tags of column {entry['name']!r} must be a list of strings")
        elif isinstance(tags, list) and repeated_name([str(tag) for tag in tags]):
            problems.add(path, line_of(entry, "tags") or line, f"column {entry['name']!r} gives a tag twice (as Bruin "
                         "reads tags, without case)")  # fmt: skip
        for key in entry:
            if key not in COLUMN_FIELDS:
                problems.warn(path, line_of(entry, key), f"unknown field {key!r} in column {entry['name']!r} (ignored)")
        for key, message in column_detail_problems(entry):
            problems.add(path, line_of(entry, key) or line, message)
        checks = []
        listed = entry.get("checks")
        if listed is not None and not isinstance(listed, list):
            problems.add(
                path, line_of(entry, "checks") or line, f"the checks of column {entry['name']!r} must be a list"
            )
            listed = None
        for check in listed or []:
            check_line = line_of(check) or line_of(entry, "checks")
            if not isinstance(check, dict) or not isinstance(check.get("name"), str):
                problems.add(path, check_line, f"every check of column {entry['name']!r} needs a name")
                continue
            for key in check:
                if key not in CHECK_FIELDS:
                    problems.warn(
                        path, line_of(check, key), f"unknown field {key!r} in check {check['name']!r} (ignored)"
                    )
            if check["name"] not in COLUMN_CHECKS:
                problems.add(
                    path, check_line, f"unknown check {check['name']!r} (supported: {', '.join(COLUMN_CHECKS)})"
                )
                continue
            value = check.get("value")
            if check["name"] in CHECKS_WITH_VALUE and value is None:
                problems.add(path, check_line, f"check {check['name']} needs a value")
                continue
            if check["name"] == "accepted_values" and not isinstance(value, list):
                problems.add(path, check_line, "check accepted_values needs a list value")
                continue
            if check["name"] in ("min", "max") and (
                isinstance(value, bool) or not isinstance(value, int | float | str)
            ):
                problems.add(
                    path, check_line, f"check {check['name']} needs a number, or a date or text to compare with"
                )
                continue
            if check["name"] == "pattern" and not isinstance(value, str):
                problems.add(path, check_line, "check pattern needs a regular expression (a string value)")
                continue
            if check["name"] == "relationships" and not isinstance(entry.get("foreign_key"), dict):
                problems.add(path, check_line, f"check relationships of column {entry['name']!r} needs foreign_key")
                continue
            checks.append(Check(check["name"], value, bool(check.get("blocking", True)), check_line))
        columns.append(
            Column(
                name=entry["name"],
                type=entry.get("type"),
                primary_key=bool(entry.get("primary_key", False)),
                update_on_merge=bool(entry.get("update_on_merge", False)),
                nullable=entry.get("nullable"),
                checks=tuple(checks),
                description=entry.get("description"),
                meta=entry.get("meta") if isinstance(entry.get("meta"), dict) else None,
                foreign_key=_foreign_key(entry, path, problems),
            )
        )
    return tuple(columns)


def _foreign_key(entry: dict[str, Any], path: Path, problems: Problems) -> tuple[str, str] | None:
    raw = entry.get("foreign_key")
    if raw is None:
        return None
    table, column = (raw.get("table"), raw.get("column")) if isinstance(raw, dict) else (None, None)
    if not isinstance(table, str) or not table or not isinstance(column, str) or not column:
        problems.add(path, line_of(entry, "foreign_key"), "foreign_key needs table (an asset name) and column")
        return None
    return table, column


def parse_custom_checks(data: dict[str, Any], path: Path, problems: Problems) -> tuple[CustomCheck, ...]:
    raw = data.get("custom_checks") or []
    if not isinstance(raw, list):
        problems.add(path, line_of(data, "custom_checks"), "custom_checks must be a list")
        return ()
    checks = []
    for entry in raw:
        line = line_of(entry) or line_of(data, "custom_checks")
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            problems.add(path, line, "every custom check needs a name")
            continue
        if not isinstance(entry.get("query"), str) or not entry["query"].strip():
            problems.add(path, line, f"custom check {entry['name']!r} needs a query")
            continue
        for key in entry:
            if key not in CUSTOM_CHECK_FIELDS:
                problems.warn(
                    path, line_of(entry, key), f"unknown field {key!r} in custom check {entry['name']!r} (ignored)"
                )
        count = entry.get("count")
        if count is not None and (isinstance(count, bool) or not isinstance(count, int) or count < 0):
            problems.add(
                path, line_of(entry, "count"), f"count of custom check {entry['name']!r} must be a whole number"
            )
            continue
        if count is not None and "value" in entry:
            problems.add(path, line, f"custom check {entry['name']!r} takes value or count, not both")
            continue
        checks.append(
            CustomCheck(
                entry["name"], entry["query"], entry.get("value", 0), bool(entry.get("blocking", True)), line, count
            )
        )
    return tuple(checks)


def repeated_name(names: Sequence[str]) -> str | None:
    """The first name given twice, compared without case (as Bruin compares tags and column names), or None."""
    seen: set[str] = set()
    for name in names:
        if name.lower() in seen:
            return name
        seen.add(name.lower())
    return None
