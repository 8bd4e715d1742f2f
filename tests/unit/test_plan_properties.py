"""Property tests: the planner against the independent oracle in ``tests/oracle.py``."""

from __future__ import annotations

import itertools
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from engine.dates.instants import to_datetime, to_micros
from engine.dates.plan import Plan, parse_unit
from tests.oracle import oracle_partitions

UTC = UTC
ZONES = [
    "UTC",
    "America/New_York",
    "Europe/London",
    "Australia/Lord_Howe",
    "Pacific/Apia",
    "America/Santiago",
    "Asia/Kathmandu",
    "Pacific/Chatham",
    "America/Sao_Paulo",
    "America/Havana",
    "Asia/Beirut",
]
# Days next to notable transitions, so that examples land on them often.
SPECIAL_DAYS = [
    date(2011, 12, 27),  # Apia skips 2011-12-30
    date(2019, 9, 6),  # Santiago: no midnight on 2019-09-08
    date(2022, 9, 9),
    date(2024, 3, 8),  # New York spring forward 2024-03-10
    date(2024, 11, 1),  # New York fall back 2024-11-03
    date(2024, 10, 5),  # Lord Howe +30 min on 2024-10-06
    date(2024, 4, 5),  # Lord Howe -30 min on 2024-04-07
    date(2024, 3, 29),  # London 2024-03-31
    date(2018, 2, 16),  # Sao Paulo fall back at midnight 2018-02-18
    date(2024, 3, 8),  # Havana, Beirut switch at midnight in March
    date(2024, 9, 27),  # Chatham 2024-09-29
    date(1986, 1, 1),  # Kathmandu +05:30 -> +05:45
]
UNITS = {
    "daily": (None, 70),
    "weekly": (None, 30),
    "monthly": (None, 26),
    "yearly": (None, 5),
    "hourly": (timedelta(hours=1), 24 * 12),
    "15m": (timedelta(minutes=15), 24 * 4 * 5),
    "90m": (timedelta(minutes=90), 300),
    "7m": (timedelta(minutes=7), 600),
    "6h": (timedelta(hours=6), 200),
    "1h30m": (timedelta(minutes=90), 300),
}


@st.composite
def ranges(draw):
    zone = ZoneInfo(draw(st.sampled_from(ZONES)))
    unit = draw(st.sampled_from(sorted(UNITS)))
    step, max_count = UNITS[unit]
    if draw(st.booleans()):
        base = draw(st.sampled_from(SPECIAL_DAYS))
    else:
        base = draw(st.dates(min_value=date(1975, 1, 1), max_value=date(2036, 12, 31)))
    start_wall = datetime.combine(base, datetime.min.time(), tzinfo=UTC) + timedelta(
        microseconds=draw(st.integers(0, 2 * 86_400_000_000 - 1)) if draw(st.booleans()) else 0
    )
    # Interpret the wall time in the zone (earlier instant on overlaps; a gap just shifts it).
    start = to_datetime(to_micros(start_wall.replace(tzinfo=zone)), UTC)
    typical = (
        step
        or {
            "daily": timedelta(days=1),
            "weekly": timedelta(days=7),
            "monthly": timedelta(days=31),
            "yearly": timedelta(days=366),
        }[unit]
    )
    length = typical * draw(st.integers(1, max_count)) - timedelta(
        microseconds=draw(st.integers(0, int(typical.total_seconds() * 1_000_000) - 1))
    )
    end = start + max(length, timedelta(microseconds=1))
    return zone, unit, step, start, end


def _as_pairs(plan: Plan):
    return [(to_datetime(iv.start, UTC), to_datetime(iv.end, UTC)) for iv in plan]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ranges())
@example(
    (
        ZoneInfo("Pacific/Apia"),
        "daily",
        None,
        datetime(2011, 12, 27, 10, tzinfo=UTC),
        datetime(2012, 1, 3, 10, tzinfo=UTC),
    )
)
@example(
    (
        ZoneInfo("America/Santiago"),
        "daily",
        None,
        datetime(2019, 9, 6, 4, tzinfo=UTC),
        datetime(2019, 9, 10, 3, tzinfo=UTC),
    )
)
@example(
    (
        ZoneInfo("America/New_York"),
        "hourly",
        timedelta(hours=1),
        datetime(2024, 11, 3, 4, tzinfo=UTC),
        datetime(2024, 11, 4, 5, tzinfo=UTC),
    )
)
def test_planner_matches_oracle_and_tiles_the_range(case):
    """Intervals equal the oracle's, tile [start, end) without gap or overlap, and are never empty."""
    zone, unit, step, start, end = case
    plan = Plan(to_micros(start), to_micros(end), zone, parse_unit(unit))
    pairs = _as_pairs(plan)
    assert pairs == oracle_partitions(start, end, zone, unit, step)
    assert pairs[0][0] == start and pairs[-1][1] == end
    assert all(a < b for a, b in pairs)
    assert all(previous[1] == following[0] for previous, following in itertools.pairwise(pairs))
    assert len(plan) == len(pairs)


@settings(max_examples=200, deadline=None)
@given(ranges(), st.data())
def test_random_access_agrees_with_iteration_both_ways(case, data):
    """plan.interval(i) equals the i-th iterated interval, forwards and in reverse, and index_of inverts it."""
    zone, unit, _, start, end = case
    plan = Plan(to_micros(start), to_micros(end), zone, parse_unit(unit))
    forward = list(plan.iterate())
    backward = list(plan.iterate(reverse=True))
    assert backward == forward[::-1]
    for index in data.draw(st.lists(st.integers(0, len(plan) - 1), max_size=10)):
        assert plan.interval(index) == forward[index]
        assert plan.index_of(forward[index].start) == index
    begin = data.draw(st.integers(0, len(plan)))
    assert list(plan.iterate(begin=begin)) == forward[begin:]


@settings(max_examples=200, deadline=None)
@given(ranges())
def test_boundaries_fall_on_the_unit(case):
    """Inner boundaries are local midnights on the unit's first day (or the first instant after a gap),
    and elapsed partitions start a whole number of steps after the start."""
    zone, unit, step, start, end = case
    plan = Plan(to_micros(start), to_micros(end), zone, parse_unit(unit))
    for interval in list(plan)[1:]:
        moment = to_datetime(interval.start, zone)
        if step is not None:
            assert (interval.start - plan.start) % int(step / timedelta(microseconds=1)) == 0
            continue
        just_before = to_datetime(interval.start - 1, zone)
        assert moment.date() != just_before.date()
        first_day = moment.date()
        if moment.time() != datetime.min.time():
            # Only allowed when local midnight did not exist that day (clocks jumped over it).
            midnight = datetime(first_day.year, first_day.month, first_day.day, tzinfo=zone)
            assert to_datetime(to_micros(midnight), zone).time() != datetime.min.time()
        if unit == "weekly":
            assert first_day.weekday() == 0
        if unit in ("monthly", "yearly"):
            assert first_day.day == 1
        if unit == "yearly":
            assert first_day.month == 1
