"""Splitting a partition in two, along the calendar of its zone.

A partition that failed in a way a smaller window would not (a timeout, memory) is cut in two. The cut is a
boundary of the coarsest unit that still cuts it fairly — a year at a month, a month at a day, a day at a local
hour, an hour at a minute, a minute at a second — the one of that unit nearest the elapsed midpoint (the earlier
on a tie), and a unit is fair when each half holds at least a quarter of the interval. Local units follow the
zone's wall clock: a 25-hour fall-back day splits 12 h + 13 h at local noon, and the repeated hour is one of its
own. Nothing here reads the plan: an interval and its zone are enough, so the same parent always splits the same.
"""

from __future__ import annotations

import hashlib
from datetime import tzinfo
from enum import IntEnum

from engine.dates.calendar import CalendarUnit, period_of, period_start
from engine.dates.instants import MICROS_PER_SECOND, to_datetime

_LOCAL_MICROS = {3: 3_600 * MICROS_PER_SECOND, 4: 60 * MICROS_PER_SECOND, 5: MICROS_PER_SECOND}


class SplitUnit(IntEnum):
    """The boundaries a cut may fall on, coarsest first."""

    MONTH = 1
    DAY = 2
    HOUR = 3
    MINUTE = 4
    SECOND = 5


def _wall_key(instant: int, zone: tzinfo, unit: SplitUnit) -> tuple[int, ...]:
    """Which local hour (minute, second) holds ``instant``: its wall clock truncated, and its offset (the two
    occurrences of a repeated hour are two hours)."""
    moment = to_datetime(instant, zone)
    fields = (moment.year, moment.month, moment.day, moment.hour, moment.minute, moment.second)[: unit + 1]
    offset = moment.utcoffset()
    return (*fields, int(offset.total_seconds()) if offset is not None else 0)


def _first(low: int, high: int, holds) -> int:
    """The first instant in ``(low, high]`` where ``holds``, which is false at ``low``, true at ``high`` and changes
    once between them (a binary search: exact in every zone, a 30-minute shift included)."""
    while high - low > 1:
        middle = (low + high) // 2
        if holds(middle):
            high = middle
        else:
            low = middle
    return high


def _boundaries_around(instant: int, zone: tzinfo, unit: SplitUnit) -> tuple[int, int]:
    """The start of the ``unit`` period holding ``instant`` and the start of the next one."""
    if unit in (SplitUnit.MONTH, SplitUnit.DAY):
        calendar = CalendarUnit.MONTH if unit is SplitUnit.MONTH else CalendarUnit.DAY
        # ``period_of`` is the local date (month) of an instant, so its period holds the instant even beside a day
        # the zone skipped (that day's period is empty: the next one starts where it would have).
        key = period_of(calendar, instant, zone)
        return period_start(calendar, key, zone), period_start(calendar, key + 1, zone)
    key, length = _wall_key(instant, zone, unit), _LOCAL_MICROS[unit]
    # A local period never lasts longer than its unit (an hour after a 30-minute shift starts at the shift).
    floor = _first(instant - length, instant, lambda t: _wall_key(t, zone, unit) == key)
    return floor, _first(instant, floor + length, lambda t: _wall_key(t, zone, unit) != key)


def cut_of(start: int, end: int, zone: tzinfo, finest: SplitUnit = SplitUnit.SECOND) -> int | None:
    """Where ``[start, end)`` splits, or None when no boundary of ``finest`` or coarser cuts it fairly."""
    middle = start + (end - start) // 2
    for unit in SplitUnit:
        if unit > finest:
            break
        floor, following = _boundaries_around(middle, zone, unit)
        candidates = [c for c in (floor, following) if start < c < end]
        if not candidates:
            continue
        cut = min(candidates, key=lambda c: (abs(c - middle), c))
        if 4 * min(cut - start, end - cut) >= end - start:
            return cut
    return None


def halves(
    start: int, end: int, zone: tzinfo, *, min_length: int, finest: SplitUnit = SplitUnit.SECOND
) -> tuple[tuple[int, int], tuple[int, int]] | None:
    """The two halves of ``[start, end)``, each at least ``min_length`` µs long, or None when it cannot split."""
    cut = cut_of(start, end, zone, finest)
    if cut is None or cut - start < min_length or end - cut < min_length:
        return None
    return (start, cut), (cut, end)


def leaf_id(parent_id: str, start: int, end: int) -> str:
    """A half's ID: derived from its parent's and its own interval only (the same split always names the same)."""
    return hashlib.sha256(b"split\n%s\n%d\n%d" % (parent_id.encode(), start, end)).hexdigest()
