"""Bruin's inline comment headers: an asset declared line by line (``-- @bruin.name: raw.events`` in SQL,
``# @bruin.name: …`` in Python) instead of in a ``@bruin`` block.

The rows are read as Bruin reads them (``pkg/pipeline/comment.go``, ``commentRowsToTask``): only lines that
start with the comment marker in their first column and whose text starts with ``@bruin.``; ``key: value``
with the value trimmed; comma lists for ``depends``, ``secrets``, ``cluster_by`` and column checks. The
result is the mapping a ``@bruin`` block with the same fields would give, with each key's line, so the
rest of the asset is validated by the one reader of headers. A key Bruin skips without a word is skipped
here too, with a warning naming it.
"""

from __future__ import annotations

from typing import Any

from engine.pipeline.yamlfile import Located, LocatedList

MARKERS = {".sql": "--", ".py": "#"}
PREFIX = "@bruin."
# The keys commentRowsToTask reads; it skips every other one.
PLAIN_KEYS = ("name", "description", "type", "connection", "image", "instance", "start_date", "timeout")
MATERIALIZATION_KEYS = ("type", "strategy", "partition_by", "incremental_key", "incremental_predicate", "cluster_by")
COLUMN_KEYS = ("checks", "type", "mask", "primary_key", "default", "collation", "precision", "scale", "length")
_TRUE, _FALSE = ("1", "t", "T", "TRUE", "true", "True"), ("0", "f", "F", "FALSE", "false", "False")


def _mapping(line: int) -> Located:
    mapping = Located()
    mapping.line, mapping.lines = line, {}
    return mapping


def _sequence(line: int, items: list[Any]) -> LocatedList:
    sequence = LocatedList(items)
    sequence.line, sequence.lines = line, [line] * len(items)
    return sequence


def _boolean(value: str) -> bool | str:
    """Go's ``strconv.ParseBool`` spellings; anything else stays text (validation then names it)."""
    return True if value in _TRUE else False if value in _FALSE else value


def _integer(value: str) -> int | str:
    return int(value) if value.lstrip("-").isdigit() and value.isascii() else value


def _commas(value: str) -> list[str]:
    return [part.strip() for part in value.split(",")]


def inline_header(text: str, suffix: str) -> tuple[Located, str, list[tuple[int, str]]] | None:
    """The header mapping, the body (``@bruin.`` rows blanked, so line numbers stay) and the rows Bruin skips
    (line, warning) of an asset declared in inline comments; None when the file has no such row (it is not an
    asset, as in Bruin)."""
    marker = MARKERS.get(suffix)
    if marker is None:
        return None
    lines = text.split("\n")
    rows = []
    for number, line in enumerate(lines, start=1):
        if line.startswith(marker) and line[len(marker) :].strip().startswith(PREFIX):
            rows.append((number, line[len(marker) :].strip()[len(PREFIX) :]))
            lines[number - 1] = ""
    if not rows:
        return None
    data = _mapping(rows[0][0])
    columns: dict[str, Located] = {}
    skipped = []
    for number, row in rows:
        key, found, value = row.partition(":")
        key, value = key.strip(), value.strip()
        if key == "routing.egress_gateway":
            skipped.append((number, f"'@bruin.{row.strip()}': routing means nothing to a DuckDB run: ignored"))
        elif not found or not _place(data, columns, key, value, number):
            skipped.append((number, f"'@bruin.{row.strip()}' is not a field of Bruin's inline headers: ignored"))
    if columns:
        data["columns"] = _sequence(data.line, list(columns.values()))
        data.lines["columns"] = next(iter(columns.values())).line
    return data, "\n".join(lines), skipped


def _place(data: Located, columns: dict[str, Located], key: str, value: str, line: int) -> bool:
    """Put one row where a ``@bruin`` block would have it; False for a row Bruin skips."""
    parts = key.split(".")
    if key in PLAIN_KEYS:
        _set(data, key, value, line)
    elif key == "depends":
        _set(data, key, _sequence(line, _commas(value)), line)
    elif key == "secrets":
        secrets = []
        for entry in _commas(value):
            secret = _mapping(line)
            name, _, injected = entry.partition(":")
            secret["key"], secret.lines["key"] = name.strip(), line
            secret["inject_as"], secret.lines["inject_as"] = (injected or name).strip(), line
            secrets.append(secret)
        _set(data, key, _sequence(line, secrets), line)
    elif key in ("enabled", "refresh_restricted", "full_refresh_restricted"):
        _set(data, key, _boolean(value), line)
    elif key in ("retries", "rerun_cooldown"):
        _set(data, key, _integer(value), line)
    elif len(parts) == 2 and (
        parts[0] == "parameters" or (parts[0] == "materialization" and parts[1].lower() in MATERIALIZATION_KEYS)
    ):
        section = data.get(parts[0])
        if not isinstance(section, Located):
            section = _mapping(line)
            _set(data, parts[0], section, line)
        field = parts[1].lower() if parts[0] == "materialization" else parts[1]
        if field in ("type", "strategy") and parts[0] == "materialization":
            value = value.lower()
        _set(section, field, _sequence(line, _commas(value)) if field == "cluster_by" else value, line)
    elif len(parts) == 3 and parts[0] == "columns" and parts[2] in COLUMN_KEYS:
        column = columns.get(parts[1])
        if column is None:
            column = columns[parts[1]] = _mapping(line)
            _set(column, "name", parts[1], line)
        if parts[2] == "checks":
            checks = column.get("checks") or _sequence(line, [])
            for check in _commas(value):
                entry = _mapping(line)
                _set(entry, "name", check, line)
                checks.append(entry)
                checks.lines.append(line)
            _set(column, "checks", checks, line)
        elif parts[2] == "primary_key":
            _set(column, "primary_key", _boolean(value), line)
        elif parts[2] == "type":
            _set(column, "type", value.lower(), line)
        else:
            _set(column, parts[2], value, line)
    else:
        return False
    return True


def _set(mapping: Located, key: str, value: Any, line: int) -> None:
    mapping[key] = value
    mapping.lines[key] = line
