"""Parsing --start-date/--end-date, zones, DST gaps and overlaps, RFC 3339 output."""

from __future__ import annotations

import pytest

from engine.base.errors import BadInput
from engine.dates.instants import boundary_instant, format_instant, load_zone, parse_boundary


def instant(text: str, zone: str = "UTC", *, end: bool = False) -> str:
    z = load_zone(zone)
    flag = "--end-date" if end else "--start-date"
    return format_instant(boundary_instant(parse_boundary(text, flag), z, flag, inclusive_date=end), z)


def test_date_start_is_local_midnight():
    """A date as start is that local day's midnight in the zone."""
    assert instant("2024-01-01", "America/New_York") == "2024-01-01T00:00:00-05:00"


def test_date_end_is_inclusive():
    """A date-only end includes that day: it becomes the next local day's start."""
    assert instant("2024-01-03", end=True) == "2024-01-04T00:00:00Z"
    assert instant("2024-03-09", "America/New_York", end=True) == "2024-03-10T00:00:00-05:00"


def test_timestamp_end_is_exclusive():
    """A timestamp end is used as given (exclusive)."""
    assert instant("2024-01-01T01:00:00Z", end=True) == "2024-01-01T01:00:00Z"


def test_unzoned_timestamp_is_read_in_the_zone():
    """An unzoned timestamp is a wall time in --timezone."""
    assert instant("2024-07-01T06:00:00", "Europe/London") == "2024-07-01T06:00:00+01:00"


def test_timestamp_with_offset_is_an_instant_shown_in_the_zone():
    """An offset identifies an instant, which is then shown in the selected zone."""
    assert instant("2024-01-01T12:00:00+02:00", "America/New_York") == "2024-01-01T05:00:00-05:00"
    assert instant("2024-01-01T12:00:00Z", "Asia/Kathmandu") == "2024-01-01T17:45:00+05:45"


def test_microseconds_are_kept_and_shown_only_when_non_zero():
    """Whole microseconds survive parsing and formatting; zero microseconds are not printed."""
    assert instant("2024-01-01T00:00:00.000001Z") == "2024-01-01T00:00:00.000001Z"
    assert instant("2024-01-01T00:00:00.500Z") == "2024-01-01T00:00:00.500000Z"
    assert instant("2024-01-01T00:00:00.1234560Z") == "2024-01-01T00:00:00.123456Z"


def test_finer_than_a_microsecond_is_an_error():
    """A seventh non-zero fractional digit is rejected, naming the value."""
    with pytest.raises(BadInput, match=r"--start-date '2024-01-01T00:00:00.1234567Z' is finer than a microsecond"):
        instant("2024-01-01T00:00:00.1234567Z")


def test_local_time_in_a_gap_is_an_error_with_an_offset_hint():
    """02:30 on a spring-forward day does not exist in New York: error with an explicit-offset hint."""
    with pytest.raises(BadInput) as error:
        instant("2024-03-10T02:30:00", "America/New_York")
    message = str(error.value)
    assert "does not exist in America/New_York" in message
    assert "give an explicit offset, e.g. 2024-03-10T03:00:00-04:00" in message


def test_local_time_in_an_overlap_takes_the_earlier_instant():
    """01:30 on a fall-back day occurs twice: the earlier (-04:00) is taken and shown."""
    assert instant("2024-11-03T01:30:00", "America/New_York") == "2024-11-03T01:30:00-04:00"


def test_date_without_midnight_starts_at_first_existing_instant():
    """Santiago skipped 00:00 on 2019-09-08: the day starts at 01:00 -03:00."""
    assert instant("2019-09-08", "America/Santiago") == "2019-09-08T01:00:00-03:00"


@pytest.mark.parametrize(
    "text",
    ["2024-13-01", "2024-02-30", "yesterday", "2024/01/01", "2024-01-01T25:00:00", "2024-01-01T00:00:00+25:00", ""],
)
def test_bad_dates_name_the_value_and_the_accepted_forms(text):
    """Malformed or impossible dates are one clear error naming the value."""
    with pytest.raises(BadInput) as error:
        instant(text)
    assert repr(text) in str(error.value)


@pytest.mark.parametrize("name", ["Mars/Olympus", "../etc/passwd", "america/new york", ""])
def test_unknown_zone_says_how_to_find_valid_ones(name):
    """An unknown zone names the value and how to list valid zones."""
    with pytest.raises(BadInput) as error:
        load_zone(name)
    assert repr(name) in str(error.value) and "available_timezones" in str(error.value)


def test_utc_spellings():
    """UTC is accepted in any case and printed with Z."""
    assert instant("2024-01-01", "utc") == "2024-01-01T00:00:00Z"


def test_the_transition_is_found_exactly_from_any_bracket():
    """The bisection for the first instant after a gap ends on the transition second whatever bracket it starts
    from — brackets of 2, 3 and more seconds around New York's 2024-03-10 07:00:00 UTC included."""
    from zoneinfo import ZoneInfo

    from engine.dates.instants import _first_instant_after_gap

    zone = ZoneInfo("America/New_York")
    transition = 1_710_054_000  # 2024-03-10T07:00:00Z, seconds
    for before in range(1, 6):
        for after in range(1, 6):
            found = _first_instant_after_gap((transition - before) * 1_000_000, (transition + after) * 1_000_000, zone)
            assert found == transition * 1_000_000, (before, after)
