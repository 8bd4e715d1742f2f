"""Local calendar periods (days, Monday weeks, months, years) and where they start in a zone.

A period is addressed by an integer key (day ordinal, week number, month
number, year) so that "the k-th period after the first" is plain arithmetic.
Its start is the first instant of its first local day
(:func:`engine.dates.instants.local_day_start`).
"""

from __future__ import annotations

from datetime import date, tzinfo
from enum import Enum

from engine.dates.instants import (
    MICROS_PER_DAY,
    MICROS_PER_SECOND,
    local_date,
    local_day_start,
    offset_micros,
)

_UNIX_ORDINAL = 719_163  # date(1970, 1, 1).toordinal()
# A local day can only vanish inside a gap of at least a day; DST gaps are an
# hour or two. Offsets jumping forward by this much are worth a closer look.
_BIG_JUMP = 12 * 3600 * MICROS_PER_SECOND
_SAMPLE_STEP = 7 * MICROS_PER_DAY
# The tz database has irregular transitions only in this window; outside it
# zones follow fixed rules whose jumps are a few hours at most.
_IRREGULAR_FROM = (date(1800, 1, 1).toordinal() - _UNIX_ORDINAL) * MICROS_PER_DAY
_IRREGULAR_UNTIL = (date(2200, 1, 1).toordinal() - _UNIX_ORDINAL) * MICROS_PER_DAY


class CalendarUnit(Enum):
    DAY = "daily"
    WEEK = "weekly"
    MONTH = "monthly"
    YEAR = "yearly"

    def key_of(self, day: date) -> int:
        """The key of the period holding a local date."""
        if self is CalendarUnit.DAY:
            return day.toordinal()
        if self is CalendarUnit.WEEK:
            return (day.toordinal() - 1) // 7  # ordinal 1 (0001-01-01) is a Monday
        if self is CalendarUnit.MONTH:
            return day.year * 12 + day.month - 1
        return day.year

    def first_day(self, key: int) -> date:
        """The first local date of a period."""
        if self is CalendarUnit.DAY:
            return date.fromordinal(key)
        if self is CalendarUnit.WEEK:
            return date.fromordinal(key * 7 + 1)
        if self is CalendarUnit.MONTH:
            return date(key // 12, key % 12 + 1, 1)
        return date(key, 1, 1)


def period_start(unit: CalendarUnit, key: int, zone: tzinfo) -> int:
    """First instant of a period in ``zone``."""
    return local_day_start(unit.first_day(key), zone)


def period_of(unit: CalendarUnit, instant: int, zone: tzinfo) -> int:
    """Key of the period holding an instant: the last period that starts at or before it.

    Usually the period of the instant's local date; where clocks fall back
    across midnight, late wall times of one day come after the next day began,
    so the date's period can be too early, never too late (a local day starts
    at or before every instant that shows its date).
    """
    key = unit.key_of(local_date(instant, zone))
    while period_start(unit, key + 1, zone) <= instant:
        key += 1
    return key


def empty_periods(unit: CalendarUnit, first: int, last: int, zone: tzinfo) -> list[int]:
    """Keys in (first, last) of periods with no instant at all (a local day the zone skipped).

    Found without walking every period: sample the zone's offset weekly over the
    part of the range where irregular transitions exist, and look closely only
    around forward jumps big enough to swallow a whole day.
    """
    lo = max(period_start(unit, first, zone), _IRREGULAR_FROM)
    hi = min(period_start(unit, last, zone), _IRREGULAR_UNTIL)
    found: set[int] = set()
    sample, previous = lo, offset_micros(lo, zone) if lo < hi else 0
    while sample < hi:
        following = min(sample + _SAMPLE_STEP, hi)
        offset = offset_micros(following, zone)
        if offset - previous >= _BIG_JUMP:
            found.update(_vanished_keys(unit, sample, following, zone))
        sample, previous = following, offset
    return sorted(key for key in found if first < key < last)


def _vanished_keys(unit: CalendarUnit, lo: int, hi: int, zone: tzinfo) -> set[int]:
    keys: set[int] = set()
    ordinal = local_date(lo, zone).toordinal()
    end_ordinal = local_date(hi, zone).toordinal()
    while ordinal <= end_ordinal:
        day = date.fromordinal(ordinal)
        key = unit.key_of(day)
        if period_start(unit, key, zone) == period_start(unit, key + 1, zone):
            keys.add(key)
        ordinal += 1
    return keys
