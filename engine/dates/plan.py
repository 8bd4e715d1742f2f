"""The partition plan: a lazy, random-access sequence of half-open intervals ``[start, end)``.

Nothing here holds a list of partitions. The count is O(1), partition *i* is
O(1), and iteration in either direction computes each interval as it goes:

* elapsed units (``hourly`` and Go durations) step by elapsed time from the
  requested start, so a fall-back day has 25 hourly partitions;
* calendar units (``daily``, ``weekly``, ``monthly``, ``yearly``) align to local
  calendar boundaries in the zone; the first and last are clipped to the range.
  A local day the zone skipped entirely yields no partition, which is the only
  place a partition index and a period number can disagree (a short sorted list).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import tzinfo
from typing import NamedTuple

from engine.base.errors import BadInput
from engine.dates.calendar import CalendarUnit, empty_periods, period_of, period_start
from engine.dates.durations import format_duration, parse_duration
from engine.dates.instants import format_instant, zone_name

HOUR = 3_600_000_000


@dataclass(frozen=True)
class PartitionUnit:
    """How a range is cut: a calendar unit, or a fixed elapsed step in microseconds."""

    name: str
    calendar: CalendarUnit | None = None
    step: int = 0

    @property
    def is_calendar(self) -> bool:
        return self.calendar is not None


CALENDAR_NAMES = {unit.value: unit for unit in CalendarUnit}


MAX_STEP = 100 * 366 * 24 * HOUR  # a fixed step longer than a century is a typo, not a partition


def parse_unit(text: str) -> PartitionUnit:
    """``hourly``, ``daily``, ``weekly``, ``monthly``, ``yearly`` or a positive Go duration of at most 100 years."""
    if text.strip() and text != text.strip():
        raise BadInput(
            f"--partition {text!r} has spaces around it: use hourly, daily, weekly, monthly, yearly or a positive "
            "Go duration such as 6h"
        )
    name = text.lower()
    if name in CALENDAR_NAMES:
        return PartitionUnit(name, calendar=CALENDAR_NAMES[name])
    if name == "hourly":
        return PartitionUnit("hourly", step=HOUR)
    if not text.strip() or text.strip()[0] not in "0123456789.+-":
        raise BadInput(
            f"--partition {text!r} is not a partition unit: use hourly, daily, weekly, monthly, yearly "
            "or a positive Go duration such as 6h, 90m or 15m"
        )
    step = parse_duration(text, "--partition")
    if step > MAX_STEP:
        raise BadInput(
            f"--partition {text!r} is longer than 100 years ({format_duration(MAX_STEP)}): no range needs partitions "
            "that long; use yearly, or a shorter duration"
        )
    return PartitionUnit(format_duration(step), step=step)


class Interval(NamedTuple):
    """One partition: its chronological index and its half-open ``[start, end)`` in instants."""

    index: int
    start: int
    end: int


@dataclass(frozen=True)
class Plan:
    """Partitions of ``[start, end)`` in ``zone`` cut by ``unit``."""

    start: int
    end: int
    zone: tzinfo
    unit: PartitionUnit
    _first_key: int = field(init=False, repr=False, compare=False)
    _last_key: int = field(init=False, repr=False, compare=False)
    _empty: tuple[int, ...] = field(init=False, repr=False, compare=False)
    _count: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.end < self.start:
            raise BadInput(
                f"the end {format_instant(self.end, self.zone)} is before the start "
                f"{format_instant(self.start, self.zone)}: give an end later than the start"
            )
        if self.end == self.start:
            raise BadInput(
                f"the range {format_instant(self.start, self.zone)} .. {format_instant(self.end, self.zone)} "
                f"is empty in {zone_name(self.zone)} and yields no partition: give an end later than the start "
                "(a date end is inclusive; a timestamp end is exclusive)"
            )
        calendar = self.unit.calendar
        if calendar is None:
            first = last = 0
            empty: tuple[int, ...] = ()
            count = -(-(self.end - self.start) // self.unit.step)
        else:
            first = period_of(calendar, self.start, self.zone)
            last = period_of(calendar, self.end - 1, self.zone)
            empty = tuple(empty_periods(calendar, first, last, self.zone))
            count = last - first + 1 - len(empty)
        object.__setattr__(self, "_first_key", first)
        object.__setattr__(self, "_last_key", last)
        object.__setattr__(self, "_empty", empty)
        object.__setattr__(self, "_count", count)
        # count >= 1: the start's own period is never an empty one (period_of passes over them), and empty
        # periods are only counted strictly between the first and the last.

    def __len__(self) -> int:
        return self._count

    def interval(self, index: int) -> Interval:
        """Partition ``index`` (0-based, chronological)."""
        if not 0 <= index < self._count:
            raise IndexError(index)
        calendar = self.unit.calendar
        if calendar is None:
            start = self.start + index * self.unit.step
            return Interval(index, start, min(self.end, start + self.unit.step))
        key = self._first_key + index
        for skipped in self._empty:
            if skipped <= key:
                key += 1
            else:
                break
        start = self.start if key == self._first_key else period_start(calendar, key, self.zone)
        if key == self._last_key:
            end = self.end
        else:
            following = key + 1
            while following in self._empty:
                following += 1
            end = period_start(calendar, following, self.zone)
        return Interval(index, start, end)

    def index_of(self, start: int) -> int | None:
        """The index of the partition that starts at ``start``, or None if none does."""
        if not self.start <= start < self.end:
            return None
        calendar = self.unit.calendar
        if calendar is None:
            index, remainder = divmod(start - self.start, self.unit.step)
            return None if remainder else index
        key = period_of(calendar, start, self.zone)
        index = key - self._first_key - sum(1 for skipped in self._empty if skipped < key)
        return index if self.interval(index).start == start else None

    def index_containing(self, instant: int) -> int | None:
        """The index of the partition whose ``[start, end)`` holds ``instant``, or None outside the plan."""
        if not self.start <= instant < self.end:
            return None
        low, high = 0, self._count - 1
        while low < high:  # the last partition starting at or before the instant
            middle = (low + high + 1) // 2
            if self.interval(middle).start <= instant:
                low = middle
            else:
                high = middle - 1
        return low

    def __iter__(self) -> Iterator[Interval]:
        return self.iterate()

    def iterate(self, *, reverse: bool = False, begin: int = 0) -> Iterator[Interval]:
        """Intervals in chronological order, or newest first with ``reverse``; from position ``begin``."""
        count = self._count
        if reverse:
            for position in range(begin, count):
                yield self.interval(count - 1 - position)
        else:
            for index in range(begin, count):
                yield self.interval(index)
