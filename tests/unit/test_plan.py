"""The planner on named cases: units, clipping, DST days, skipped days, errors, random access."""

from __future__ import annotations

from datetime import date

import pytest

from engine.base.errors import BadInput
from engine.dates.instants import boundary_instant, format_instant, load_zone, parse_boundary
from engine.dates.plan import Plan, parse_unit


def make_plan(start: str, end: str, unit: str, zone: str = "UTC") -> Plan:
    z = load_zone(zone)
    s = boundary_instant(parse_boundary(start, "--start-date"), z, "--start-date", inclusive_date=False)
    e = boundary_instant(parse_boundary(end, "--end-date"), z, "--end-date", inclusive_date=True)
    return Plan(s, e, z, parse_unit(unit))


def show(plan: Plan) -> list[tuple[str, str]]:
    return [(format_instant(i.start, plan.zone), format_instant(i.end, plan.zone)) for i in plan]


def test_date_range_is_inclusive_of_the_end_date():
    """2024-01-01 .. 2024-01-03 daily is January 1, 2 and 3."""
    plan = make_plan("2024-01-01", "2024-01-03", "daily")
    assert show(plan) == [
        ("2024-01-01T00:00:00Z", "2024-01-02T00:00:00Z"),
        ("2024-01-02T00:00:00Z", "2024-01-03T00:00:00Z"),
        ("2024-01-03T00:00:00Z", "2024-01-04T00:00:00Z"),
    ]


def test_one_hour_with_timestamps():
    """A timestamp end is exclusive: exactly one hourly partition."""
    assert len(make_plan("2024-01-01T00:00:00Z", "2024-01-01T01:00:00Z", "hourly")) == 1


def test_weeks_start_on_monday_and_are_clipped():
    """Weekly partitions align to Mondays; the first and last are clipped to the range."""
    plan = make_plan("2024-01-03", "2024-01-17", "weekly")  # Wednesday .. Wednesday (inclusive)
    assert show(plan) == [
        ("2024-01-03T00:00:00Z", "2024-01-08T00:00:00Z"),
        ("2024-01-08T00:00:00Z", "2024-01-15T00:00:00Z"),
        ("2024-01-15T00:00:00Z", "2024-01-18T00:00:00Z"),
    ]


def test_months_and_years_follow_the_local_calendar():
    """Monthly and yearly boundaries are local first days, offsets included."""
    plan = make_plan("2024-02-15", "2024-04-10", "monthly", "America/New_York")
    assert show(plan) == [
        ("2024-02-15T00:00:00-05:00", "2024-03-01T00:00:00-05:00"),
        ("2024-03-01T00:00:00-05:00", "2024-04-01T00:00:00-04:00"),
        ("2024-04-01T00:00:00-04:00", "2024-04-11T00:00:00-04:00"),
    ]
    assert len(make_plan("2019-01-01", "2026-08-01", "yearly")) == 8


def test_fall_back_day_has_25_hourly_partitions_and_spring_forward_23():
    """Hourly is elapsed time: DST days have 25 and 23 partitions, the local days 25 h and 23 h."""
    assert len(make_plan("2024-11-03", "2024-11-03", "hourly", "America/New_York")) == 25
    assert len(make_plan("2024-03-10", "2024-03-10", "hourly", "America/New_York")) == 23
    fall = make_plan("2024-11-03", "2024-11-03", "daily", "America/New_York").interval(0)
    assert fall.end - fall.start == 25 * 3_600_000_000


def test_durations_are_anchored_at_the_start():
    """6h partitions count from the requested start, not from midnight."""
    plan = make_plan("2024-01-01T03:00:00Z", "2024-01-02T00:00:00Z", "6h")
    assert [s for s, _ in show(plan)] == [
        "2024-01-01T03:00:00Z",
        "2024-01-01T09:00:00Z",
        "2024-01-01T15:00:00Z",
        "2024-01-01T21:00:00Z",
    ]
    assert show(plan)[-1][1] == "2024-01-02T00:00:00Z"


def test_lord_howe_half_hour_shift():
    """Lord Howe moves 30 minutes: its DST day is 23.5 hours long."""
    day = make_plan("2024-10-06", "2024-10-06", "daily", "Australia/Lord_Howe").interval(0)
    assert day.end - day.start == 23 * 3_600_000_000 + 1_800_000_000


@pytest.mark.parametrize(
    ("zone", "day", "first"),
    [
        ("America/Santiago", "2019-09-08", "2019-09-08T01:00:00-03:00"),
        ("America/Havana", "2024-03-10", "2024-03-10T01:00:00-04:00"),
        ("Asia/Beirut", "2024-03-31", "2024-03-31T01:00:00+03:00"),
    ],
)
def test_day_without_midnight_starts_at_first_existing_instant(zone, day, first):
    """Where DST starts at 00:00, the day's partition starts at the first instant that exists."""
    plan = make_plan(day, day, "daily", zone)
    assert show(plan)[0][0] == first


def test_apia_skipped_day_yields_no_partition():
    """Pacific/Apia had no 2011-12-30: six partitions for the seven dates 12-27 .. 01-02."""
    plan = make_plan("2011-12-27", "2012-01-02", "daily", "Pacific/Apia")
    starts = [s[:10] for s, _ in show(plan)]
    assert starts == ["2011-12-27", "2011-12-28", "2011-12-29", "2011-12-31", "2012-01-01", "2012-01-02"]
    assert plan.index_of(plan.interval(3).start) == 3


@pytest.mark.parametrize(
    ("start", "end", "message"),
    [
        ("2024-01-02T00:00:00Z", "2024-01-01T00:00:00Z", "is before the start"),
        ("2024-01-01T00:00:00Z", "2024-01-01T00:00:00Z", "is empty in UTC and yields no partition"),
    ],
)
def test_end_not_after_start_is_an_error(start, end, message):
    """An end at or before the start is rejected."""
    with pytest.raises(BadInput, match=message):
        make_plan(start, end, "daily")


def test_range_with_no_partition_is_an_error():
    """A skipped day alone yields no partition: an error, not an empty plan."""
    with pytest.raises(BadInput, match="is empty in Pacific/Apia and yields no partition"):
        make_plan("2011-12-30", "2011-12-30", "daily", "Pacific/Apia")


@pytest.mark.parametrize("unit", ["minutely", "0s", "-1h", "1ns", "6 h", "days"])
def test_bad_partition_units(unit):
    """Unknown units, zero, negative and sub-microsecond durations are errors naming the value."""
    with pytest.raises(BadInput, match=repr(unit).replace("(", r"\(")):
        parse_unit(unit)


def test_count_and_random_access_do_not_enumerate():
    """Four million minute partitions: count and the last interval come back without iterating."""
    plan = make_plan("2019-01-01", "2026-08-01", "1m")
    assert len(plan) == (date(2026, 8, 2) - date(2019, 1, 1)).days * 1440  # 3 988 800
    last = plan.interval(len(plan) - 1)
    assert format_instant(last.end, plan.zone) == "2026-08-02T00:00:00Z"
    assert plan.index_of(last.start) == len(plan) - 1
    assert next(plan.iterate(reverse=True)) == last
    with pytest.raises(IndexError):
        plan.interval(len(plan))


def test_partition_units_parse_to_their_canonical_names():
    """Calendar names in any case (never padded with spaces: refused, like any value), hourly as a one-hour step,
    durations by their Go spelling; a fixed step longer than 100 years is refused."""
    from engine.dates.calendar import CalendarUnit
    from engine.dates.plan import HOUR, PartitionUnit

    assert parse_unit("Weekly") == PartitionUnit("weekly", calendar=CalendarUnit.WEEK)
    for padded in (" Weekly ", "6h ", "\tdaily"):
        with pytest.raises(BadInput, match="has spaces around it"):
            parse_unit(padded)
    assert parse_unit("876000h").step == 876_000 * HOUR  # 100 years of 365 days
    with pytest.raises(BadInput, match="is longer than 100 years"):
        parse_unit("878400h1us")
    assert parse_unit("DAILY") == PartitionUnit("daily", calendar=CalendarUnit.DAY)
    assert parse_unit("Hourly") == PartitionUnit("hourly", step=HOUR)
    assert parse_unit("90m") == PartitionUnit("1h30m", step=90 * 60_000_000)
    assert parse_unit(".5h") == PartitionUnit("30m", step=HOUR // 2)
    assert parse_unit("+15m") == PartitionUnit("15m", step=15 * 60_000_000)
    assert not parse_unit("6h").is_calendar and parse_unit("monthly").is_calendar
    for text in ("", "  ", "h6"):
        with pytest.raises(BadInput) as raised:
            parse_unit(text)
        assert str(raised.value) == (
            f"--partition {text!r} is not a partition unit: use hourly, daily, weekly, monthly, yearly "
            "or a positive Go duration such as 6h, 90m or 15m"
        )
