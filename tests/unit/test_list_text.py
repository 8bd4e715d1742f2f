"""`backfill list`'s range column: as short as it can be without losing what a range is."""

from __future__ import annotations

import pytest

from tui.cli.browse_command import range_text


@pytest.mark.parametrize(
    ("start", "end", "shown"),
    [
        ("2024-01-01T00:00:00Z", "2024-03-31T00:00:00Z", "2024-01-01 → 03-31"),
        ("2023-12-01T00:00:00-05:00", "2024-01-01T00:00:00-05:00", "2023-12-01 → 2024-01-01"),
        ("2024-01-01T06:00:00Z", "2024-01-02T06:00:00Z", "2024-01-01 06:00 → 01-02 06:00"),
        ("2024-01-01T00:00:00Z", "2024-01-01T12:30:00Z", "2024-01-01 00:00 → 01-01 12:30"),
        ("", "2024-01-02T00:00:00Z", "—"),
    ],
)
def test_a_range_is_dates_when_whole_days_and_drops_the_end_s_repeated_year(start, end, shown):
    """Whole days: dates alone; any time of day: both times; the end's year only when it differs; unknown: —."""
    assert range_text(start, end) == shown
