"""Readers of the fields that ``pipeline.yml``'s ``default:`` and an asset's header share: each value is checked for
its kind, and one of the wrong kind is a problem with its line (never a traceback, never read as something else).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from engine.base.errors import BadInput
from engine.pipeline.problems import Problems
from engine.pipeline.yamlfile import line_of


def parse_timeout(data: dict[str, Any], path: Path, problems: Problems, key: str = "timeout") -> int | None:
    """A timeout in microseconds from a Go duration (``90s``, ``2h``) or whole seconds."""
    from engine.dates.durations import parse_duration

    value = data.get(key)
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value * 1_000_000
    if isinstance(value, str) and value.strip():
        try:
            micros = parse_duration(value.strip(), key)
        except BadInput:
            micros = 0
        if micros >= 1_000_000:
            return micros
        if micros > 0:  # Bruin's lint rule valid-timeout (critical): "Asset timeout must be at least 1s"
            problems.add(path, line_of(data, key), f"{key} {value!r} must be at least 1s (as in Bruin)")
            return None
    problems.add(path, line_of(data, key), f"{key} {value!r} must be a positive duration such as 90s, 30m or 2h")
    return None


def parse_secrets(data: dict[str, Any], path: Path, problems: Problems) -> tuple[tuple[str, str], ...]:
    """``secrets: [{key, inject_as}]``: (connection name, environment variable name)."""
    raw = data.get("secrets") or []
    if not isinstance(raw, list):
        problems.add(path, line_of(data, "secrets"), "secrets must be a list of {key, inject_as}")
        return ()
    found = []
    for entry in raw:
        line = line_of(entry) or line_of(data, "secrets")
        key = entry.get("key") if isinstance(entry, dict) else None
        inject_as = entry.get("inject_as", key) if isinstance(entry, dict) else None
        if not isinstance(key, str) or not key or not isinstance(inject_as, str) or not inject_as:
            problems.add(path, line, "each secret needs a key (a connection name) and optionally inject_as")
            continue
        if "=" in inject_as or "\0" in inject_as:  # what an environment can hold; Bruin takes any other name
            problems.add(path, line, f"secret inject_as {inject_as!r} cannot name an environment variable ('=' or NUL)")
            continue
        found.append((key, inject_as))
    return tuple(found)


def check_start_date(data: dict[str, Any], path: Path, problems: Problems, owner: str) -> str | None:
    """``start_date`` as YYYY-MM-DD; None when absent, or when it is not a date (a problem is added then)."""
    value = data.get("start_date")
    if value is None:
        return None
    from datetime import date

    text = value.isoformat() if isinstance(value, date) else str(value)
    message = f"start_date {value!r} of {owner} is not a date: use YYYY-MM-DD"
    try:
        valid = bool(re.fullmatch(r"\d{4}-\d{2}-\d{2}", text, re.ASCII)) and bool(date.fromisoformat(text))
    except ValueError:
        valid = False
    if not valid:
        problems.add(path, line_of(data, "start_date"), message)
    return text if valid else None


def optional_str(data: dict[str, Any], key: str, path: Path, problems: Problems) -> str | None:
    value = data.get(key)
    if value is not None and not isinstance(value, str):
        problems.add(path, line_of(data, key), f"{key} must be a string")
        return None
    return value


def string_list(data: dict[str, Any], key: str, path: Path, problems: Problems) -> list[str]:
    """``data[key]`` as a list of strings (none when absent or empty); anything else is a problem, a lone string
    too (Bruin reads it as no list; iterated, it was one item per character)."""
    value = data.get(key)
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        problems.add(path, line_of(data, key), f"{key} must be a list of strings")
        return []
    return value


def parse_hooks(data: dict[str, Any], path: Path, problems: Problems) -> dict[str, list[str]]:
    raw = data.get("hooks")
    if raw is None:
        return {}
    result: dict[str, list[str]] = {}
    if not isinstance(raw, dict):
        problems.add(path, line_of(data, "hooks"), "hooks must map pre/post to a list of {query: ...}")
        return {}
    for phase, entries in raw.items():
        if phase == "applicable_type":  # default.hooks only: the asset types that inherit them
            if not isinstance(entries, list) or not all(isinstance(t, str) for t in entries):
                problems.add(path, line_of(raw, phase), "hooks.applicable_type must be a list of asset types")
            continue
        if phase not in ("pre", "post") or not isinstance(entries, list):
            problems.add(path, line_of(raw, phase), "hooks must map pre/post to a list of {query: ...}")
            continue
        queries = []
        for entry in entries:
            if not isinstance(entry, dict) or not isinstance(entry.get("query"), str):
                problems.add(path, line_of(entry) or line_of(raw, phase), "each hook needs a query")
                continue
            queries.append(entry["query"])
        result[phase] = queries
    return result
