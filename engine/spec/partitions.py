"""What a partition looks like from outside: its ID and the exact dates its child receives."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from engine.dates.formatting import InstantFormatter
from engine.dates.plan import Interval
from engine.spec.backfill_spec import BackfillSpec


class PartitionDescriber:
    """IDs and RFC 3339 boundaries of a spec's partitions.

    ``child_start_date`` is the start and ``child_end_date`` the end minus one
    microsecond (the inclusive end every child receives), both with
    microseconds and offset so that nothing is lost on the way to the child.
    """

    def __init__(self, spec: BackfillSpec) -> None:
        self.spec = spec
        self.ids = spec.ids
        self.formatter = InstantFormatter(spec.zone)

    def partition_id(self, interval: Interval) -> str:
        return self.ids.of(interval.start, interval.end)

    def child_dates(self, interval: Interval) -> tuple[str, str]:
        fmt = self.formatter.format
        return fmt(interval.start, "always"), fmt(interval.end - 1, "always")

    def describe(self, interval: Interval) -> dict[str, Any]:
        """The partition fields shared by every output: id, index, start, end and child dates."""
        fmt = self.formatter
        start, child_start = fmt.format_both(interval.start)
        return {
            "id": self.ids.of(interval.start, interval.end),
            "index": interval.index,
            "start": start,
            "end": fmt.format(interval.end),
            "child_start_date": child_start,
            "child_end_date": fmt.format(interval.end - 1, "always"),
        }

    def describe_many(self, intervals: Iterable[Interval]) -> Iterator[dict[str, Any]]:
        """:meth:`describe` for consecutive intervals, formatting each shared boundary once."""
        fmt = self.formatter
        ids = self.ids
        previous_end, previous_texts = None, ("", "")
        for interval in intervals:
            start, child_start = previous_texts if interval.start == previous_end else fmt.format_both(interval.start)
            end_texts = fmt.format_both(interval.end)
            yield {
                "id": ids.of(interval.start, interval.end),
                "index": interval.index,
                "start": start,
                "end": end_texts[0],
                "child_start_date": child_start,
                "child_end_date": fmt.format(interval.end - 1, "always"),
            }
            previous_end, previous_texts = interval.end, end_texts
