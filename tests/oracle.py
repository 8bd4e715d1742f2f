"""An independent, deliberately naive partition planner used as the oracle in property tests.

It shares no code with ``engine``: it walks forward from the start, finds each
calendar boundary by scanning UTC instants until the local wall clock reaches
the boundary's midnight, and steps elapsed units with plain timedelta
arithmetic in UTC. Slow, obvious, and therefore trustworthy.
"""

from __future__ import annotations

import itertools
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

UTC = UTC


def _wall(moment: datetime, zone: ZoneInfo) -> datetime:
    """Naive local wall time of an aware instant (only for comparisons)."""
    return moment.astimezone(zone).replace(tzinfo=None)


def first_instant_of_day(day: date, zone: ZoneInfo) -> datetime:
    """The first UTC instant at which the local wall clock reads at least ``day`` 00:00."""
    midnight = datetime(day.year, day.month, day.day)  # noqa: DTZ001 - a wall time, compared to walls only
    probe = datetime(day.year, day.month, day.day, tzinfo=UTC) - timedelta(hours=30)
    minute = timedelta(minutes=1)
    while _wall(probe, zone) < midnight:
        probe += timedelta(minutes=30)
    probe -= timedelta(minutes=30)
    while _wall(probe, zone) < midnight:
        probe += minute
    probe -= minute
    while _wall(probe, zone) < midnight:
        probe += timedelta(seconds=1)
    return probe


def _next_first_day(day: date, unit: str) -> date:
    if unit == "daily":
        return day + timedelta(days=1)
    if unit == "weekly":
        return day + timedelta(days=7 - day.weekday())
    if unit == "monthly":
        return date(day.year + (day.month == 12), day.month % 12 + 1, 1)
    return date(day.year + 1, 1, 1)


def _first_day_at_or_before(day: date, unit: str) -> date:
    if unit == "daily":
        return day
    if unit == "weekly":
        return day - timedelta(days=day.weekday())
    if unit == "monthly":
        return day.replace(day=1)
    return date(day.year, 1, 1)


def oracle_partitions(start: datetime, end: datetime, zone: ZoneInfo, unit: str, step: timedelta | None):
    """``[(start, end), ...]`` as aware UTC datetimes."""
    start, end = start.astimezone(UTC), end.astimezone(UTC)
    result = []
    if step is not None:
        cursor = start
        while cursor < end:
            result.append((cursor, min(end, cursor + step)))
            cursor += step
        return result
    # Calendar: the period holding `start` begins on the first day at or before start's local date,
    # unless that day had not begun yet at `start` (clocks turned back across midnight).
    boundary_day = _next_first_day(
        _first_day_at_or_before(start.astimezone(zone).date() - timedelta(days=8), unit), unit
    )
    boundaries = []
    while True:
        boundary = first_instant_of_day(boundary_day, zone)
        if boundary >= end:
            break
        if boundary > start and (not boundaries or boundary > boundaries[-1]):
            boundaries.append(boundary)
        boundary_day = _next_first_day(boundary_day, unit)
    edges = [start, *boundaries, end]
    return [(a, b) for a, b in itertools.pairwise(edges)]
