"""Parsing --start-date/--end-date and placing boundaries in a zone: exact instants and exact messages."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest

from engine.base.errors import BadInput
from engine.dates.instants import (
    MAX_INSTANT,
    MIN_INSTANT,
    boundary_instant,
    format_instant,
    load_zone,
    local_date,
    parse_boundary,
    resolve_local,
    to_datetime,
    to_micros,
    zone_name,
)

FORMATS = (
    "use YYYY-MM-DD, YYYY-MM-DDTHH:MM[:SS[.ffffff]] "
    "or a timestamp with an offset such as 2024-01-01T06:00:00Z or 2024-01-01T06:00:00+02:00"
)
NEW_YORK = ZoneInfo("America/New_York")


def utc(*fields: int) -> int:
    return to_micros(datetime(*fields, tzinfo=UTC))


@pytest.mark.parametrize(
    ("text", "instant"),
    [
        ("2024-01-01T06:00:00Z", utc(2024, 1, 1, 6)),
        ("2024-01-01T06:00:00z", utc(2024, 1, 1, 6)),
        ("2024-01-01T06:00Z", utc(2024, 1, 1, 6)),
        ("2024-01-01 06:00:00+05:30", utc(2024, 1, 1, 0, 30)),
        ("2024-01-01T06:00:00+0530", utc(2024, 1, 1, 0, 30)),
        ("2024-01-01T06:00:00-03:45", utc(2024, 1, 1, 9, 45)),
        ("2024-01-01T06:00:00+05", utc(2024, 1, 1, 1)),
        ("2024-01-01T06:00:00-05", utc(2024, 1, 1, 11)),
        ("2024-01-01T06:00:00+23:59", utc(2023, 12, 31, 6, 1)),
        ("2024-01-01T06:00:00+05:59", utc(2024, 1, 1, 0, 1)),
        ("2024-01-01T06:00:07.25Z", utc(2024, 1, 1, 6, 0, 7, 250_000)),
        ("2024-01-01T06:00:07,000001Z", utc(2024, 1, 1, 6, 0, 7, 1)),
        ("2024-01-01T06:00:07.1234560000Z", utc(2024, 1, 1, 6, 0, 7, 123_456)),
    ],
)
def test_timestamps_with_an_offset_are_exact_instants(text, instant):
    """Every offset form (Z, z, ±HH:MM, ±HHMM, ±HH) and fraction form gives the exact microsecond."""
    boundary = parse_boundary(text, "--start-date")
    assert (boundary.text, boundary.kind, boundary.instant) == (text, "instant", instant)
    assert boundary_instant(boundary, NEW_YORK, "--start-date", inclusive_date=False) == instant


def test_dates_and_local_timestamps_keep_their_text_and_wall_time():
    """A date is a day, a timestamp without offset a wall time (seconds default to 0), both with their text."""
    day = parse_boundary("2024-02-29", "--end-date")
    assert (day.text, day.kind, day.day) == ("2024-02-29", "date", date(2024, 2, 29))
    local = parse_boundary("2024-03-10T06:05", "--start-date")
    assert (local.text, local.kind) == ("2024-03-10T06:05", "local")
    assert local.wall is not None and local.wall == datetime(2024, 3, 10, 6, 5, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("2024-13-01", "--start-date '2024-13-01' is not a real calendar date: " + FORMATS),
        ("yesterday", "--start-date 'yesterday' is not a date or timestamp: " + FORMATS),
        (
            "  2024-01-01T06:00:00Z ",
            "--start-date '  2024-01-01T06:00:00Z ' has spaces around it: give it without them (" + FORMATS + ")",
        ),
        (
            "2024-01-01T24:00",
            "--start-date '2024-01-01T24:00' is not a real date and time: check the day, hour and minute",
        ),
        (
            "2024-01-01T00:00:00.1234567Z",
            "--start-date '2024-01-01T00:00:00.1234567Z' is finer than a microsecond: "
            "give at most 6 fractional digits of a second",
        ),
        (
            "2024-01-01T00:00:00+24:00",
            "--start-date '2024-01-01T00:00:00+24:00' has an impossible UTC offset '+24:00': use ±HH:MM up to ±23:59",
        ),
        (
            "2024-01-01T00:00:00-05:60",
            "--start-date '2024-01-01T00:00:00-05:60' has an impossible UTC offset '-05:60': use ±HH:MM up to ±23:59",
        ),
    ],
)
def test_bad_boundaries_get_one_exact_line(text, message):
    """Each kind of bad value is named with the flag, the value and what would be accepted."""
    with pytest.raises(BadInput) as raised:
        parse_boundary(text, "--start-date")
    assert str(raised.value) == message


def test_the_supported_range_is_inclusive_at_both_ends():
    """0001-01-03T00:00Z and 9999-12-29T23:59:59Z are the first and last instants; one microsecond beyond is
    refused with the flag and the value."""
    first = parse_boundary("0001-01-03T00:00:00Z", "--start-date")
    last = parse_boundary("9999-12-29T23:59:59Z", "--end-date")
    assert boundary_instant(first, UTC, "--start-date", inclusive_date=False) == MIN_INSTANT
    assert boundary_instant(last, UTC, "--end-date", inclusive_date=False) == MAX_INSTANT
    too_late = parse_boundary("9999-12-29T23:59:59.000001Z", "--end-date")
    with pytest.raises(BadInput) as raised:
        boundary_instant(too_late, UTC, "--end-date", inclusive_date=False)
    assert str(raised.value) == (
        "--end-date '9999-12-29T23:59:59.000001Z' is out of range: use a date between 0001-01-03 and 9999-12-28"
    )
    for text, kind in [("0001-01-02", "date"), ("0001-01-02T12:00", "local")]:
        with pytest.raises(BadInput, match=rf"^--start-date '{text}' is out of range"):
            boundary_instant(parse_boundary(text, "--start-date"), UTC, "--start-date", inclusive_date=False)
        assert parse_boundary(text, "--start-date").kind == kind
    with pytest.raises(BadInput) as raised:
        boundary_instant(parse_boundary("9999-12-31", "--end-date"), UTC, "--end-date", inclusive_date=True)
    assert str(raised.value) == "--end-date '9999-12-31' is past the last supported date 9999-12-28"


def test_a_wall_time_in_a_gap_is_refused_with_the_first_instant_after_it():
    """02:30 on 2024-03-10 does not exist in New York: the message offers 03:00-04:00 (07:00Z), exactly."""
    gap = resolve_local(datetime(2024, 3, 10, 2, 30, tzinfo=UTC), NEW_YORK)
    assert (gap.instant, gap.exists, gap.ambiguous) == (utc(2024, 3, 10, 7), False, False)
    assert type(gap.instant) is int
    with pytest.raises(BadInput) as raised:
        boundary_instant(
            parse_boundary("2024-03-10T02:30", "--start-date"), NEW_YORK, "--start-date", inclusive_date=False
        )
    assert str(raised.value) == (
        "--start-date '2024-03-10T02:30' does not exist in America/New_York (clocks skip it for daylight saving): "
        "give an explicit offset, e.g. 2024-03-10T03:00:00-04:00"
    )


@pytest.mark.parametrize("fold", [0, 1])
def test_a_wall_time_in_an_overlap_is_the_earlier_instant_whatever_its_fold(fold):
    """01:30 on 2024-11-03 happens twice in New York: the earlier (EDT, 05:30Z) is taken and flagged ambiguous."""
    overlap = resolve_local(datetime(2024, 11, 3, 1, 30, fold=fold, tzinfo=UTC), NEW_YORK)
    assert (overlap.instant, overlap.exists, overlap.ambiguous) == (utc(2024, 11, 3, 5, 30), True, True)
    plain = resolve_local(datetime(2024, 11, 4, 1, 30, fold=fold, tzinfo=UTC), NEW_YORK)
    assert (plain.instant, plain.exists, plain.ambiguous) == (utc(2024, 11, 4, 6, 30), True, False)


def test_instants_are_shown_and_dated_in_their_zone_not_the_machines():
    """20:00 UTC on 1970-01-01 is already the 2nd in Tokyo (+09); the zone's name and offset are shown."""
    tokyo = ZoneInfo("Asia/Tokyo")
    evening = 20 * 3600 * 1_000_000
    noon = 12 * 3600 * 1_000_000
    assert local_date(evening, tokyo) == date(1970, 1, 2)
    assert to_datetime(evening, tokyo).isoformat() == "1970-01-02T05:00:00+09:00"
    assert to_datetime(-noon, UTC).isoformat() == "1969-12-31T12:00:00+00:00"
    assert format_instant(evening, tokyo) == "1970-01-02T05:00:00+09:00"
    assert format_instant(noon, UTC) == "1970-01-01T12:00:00Z"
    assert format_instant(noon, load_zone("utc"), micros="always") == "1970-01-01T12:00:00.000000Z"
    assert format_instant(noon, ZoneInfo("Europe/London")) == "1970-01-01T13:00:00+01:00"  # British Standard Time
    assert format_instant(utc(2024, 1, 1), ZoneInfo("Europe/London")) == "2024-01-01T00:00:00+00:00"  # not Z
    assert zone_name(tokyo) == "Asia/Tokyo"
    assert zone_name(timezone(timedelta(hours=2))) == "UTC+02:00"


def test_an_unknown_zone_says_how_to_list_the_known_ones():
    """The message names the value and the command that lists every zone."""
    with pytest.raises(BadInput) as raised:
        load_zone("Mars/Olympus")
    assert str(raised.value) == (
        "unknown time zone 'Mars/Olympus': use UTC or an IANA name such as America/New_York or Europe/London "
        "(list them with: python3 -c 'import zoneinfo; print(*sorted(zoneinfo.available_timezones()))')"
    )
