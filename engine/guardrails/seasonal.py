"""Seasonal bounds: a partition's rows are judged against the mean of past periods of the same bucket.

The bucket follows the partition unit: hour of day below a day, day of week for
daily partitions, day of month for monthly ones (the start's, so every past
month), one bucket for everything else.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, tzinfo

from engine.dates.instants import to_datetime
from engine.dates.plan import PartitionUnit

DAY_MICROS = 86_400_000_000
WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
MINIMUM_VALUES = 3


def bucket_kind(unit: PartitionUnit) -> str:
    """``hour``, ``weekday``, ``monthday`` or ``all``."""
    if unit.is_calendar:
        return {"daily": "weekday", "monthly": "monthday"}.get(unit.name, "all")
    return "hour" if unit.step < DAY_MICROS else "all"


def bucket_of_local(moment: datetime | date, kind: str) -> int:
    if kind == "hour":
        return moment.hour if isinstance(moment, datetime) else 0
    if kind == "weekday":
        return moment.weekday()
    if kind == "monthday":
        return moment.day
    return 0


def bucket_of(start: int, unit: PartitionUnit, zone: tzinfo) -> int:
    """The bucket of a partition starting at ``start`` (local to the backfill's zone)."""
    return bucket_of_local(to_datetime(start, zone), bucket_kind(unit))


def bucket_name(bucket: int, kind: str) -> str:
    if kind == "hour":
        return f"{bucket:02d}:00"
    if kind == "weekday":
        return WEEKDAYS[bucket]
    if kind == "monthday":
        return f"day {bucket} of the month"
    return "every period"


def truncation_of(unit: PartitionUnit) -> str | None:
    """The SQL ``date_trunc`` part whose periods match the unit's partitions, when there is one."""
    if unit.is_calendar:
        return {"daily": "day", "weekly": "week", "monthly": "month", "yearly": "year"}[unit.name]
    return "hour" if unit.step == 3_600_000_000 else None


@dataclass(frozen=True)
class Bounds:
    mean: float
    low: float
    high: float
    values: int  # how many past periods the mean is over

    def admits(self, rows: int) -> bool:
        return self.low <= rows <= self.high

    def to_json(self) -> dict[str, float | int]:
        return {
            "mean": round(self.mean, 3),
            "low": round(self.low, 3),
            "high": round(self.high, 3),
            "values": self.values,
        }


def seasonal_bounds(values: list[int], low: float, high: float, minimum: int = MINIMUM_VALUES) -> Bounds | None:
    """``low``–``high`` times the mean of ``values``; None (insufficient history) with fewer than ``minimum``."""
    if len(values) < minimum:
        return None
    mean = sum(values) / len(values)
    return Bounds(mean, mean * low, mean * high, len(values))
