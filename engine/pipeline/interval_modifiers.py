"""Interval modifiers: shift a run's start and end by ``-2h``, ``1d``, ``-1M`` ... (Bruin's units).

``ns``, ``ms``, ``s``, ``m`` and ``h`` are elapsed time; ``d`` and ``M`` move the
local calendar in the run's zone (a wall time that does not exist moves
forward to the first instant after the gap, an ambiguous one takes the earlier).
"""

from __future__ import annotations

import calendar
import re
from dataclasses import replace
from typing import Any

from engine.dates.instants import resolve_local, to_datetime
from engine.pipeline.templating import TemplateProblem, Window, render

_MODIFIER = re.compile(r"([+-]?[0-9]+)(ns|ms|s|m|h|d|M)")  # ASCII digits, as Bruin reads them (\d takes ٣)
_ELAPSED = {"ms": 1_000, "s": 1_000_000, "m": 60_000_000, "h": 3_600_000_000}


def parse_modifier(text: str) -> tuple[int, str]:
    """``(amount, unit)``; ``"0"`` is no shift."""
    value = text.strip()
    if value in ("", "0", "+0", "-0"):
        return 0, "s"
    match = _MODIFIER.fullmatch(value)
    if not match:
        raise TemplateProblem(
            f"interval modifier {text!r} is not a single amount and unit (ns, ms, s, m, h, d, M), e.g. -2h or 1d"
        )
    amount, unit = int(match.group(1)), match.group(2)
    if unit == "ns" and amount % 1000:
        raise TemplateProblem(f"interval modifier {text!r} is finer than a microsecond")
    return amount, unit


def shift(instant: int, amount: int, unit: str, window: Window) -> int:
    if amount == 0:
        return instant
    if unit == "ns":
        return instant + amount // 1000
    if unit in _ELAPSED:
        return instant + amount * _ELAPSED[unit]
    wall = to_datetime(instant, window.zone)
    if unit == "d":
        moved = wall.toordinal() + amount
        from datetime import date

        day = date.fromordinal(moved)
        wall = wall.replace(year=day.year, month=day.month, day=day.day)
    else:
        months = wall.year * 12 + wall.month - 1 + amount
        year, month = divmod(months, 12)
        month += 1
        wall = wall.replace(year=year, month=month, day=min(wall.day, calendar.monthrange(year, month)[1]))
    return resolve_local(wall, window.zone).instant


def apply_modifiers(window: Window, modifiers: dict[str, str] | None, context: dict[str, Any]) -> Window:
    """The window shifted by ``{"start": ..., "end": ...}`` (each may be a Jinja template)."""
    if not modifiers:
        return window
    start, end = window.start, window.end
    if "start" in modifiers:
        start = shift(start, *parse_modifier(render(modifiers["start"], context)), window)
    if "end" in modifiers:
        end = shift(end, *parse_modifier(render(modifiers["end"], context)), window)
    return replace(window, start=start, end=end)
