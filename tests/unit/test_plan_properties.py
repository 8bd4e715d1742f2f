"""Property tests: the planner against the independent oracle in ``tests/oracle.py``."""

from __future__ import annotations

import itertools
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from engine.dates.instants import to_datetime, to_micros
from engine.dates.plan import Plan, parse_unit
from tests import zone_scan
from tests.oracle import oracle_partitions

UTC = UTC
# Zones and days from a scan of the zone database (tests/zone_scan.py): a few of every kind of transition
# between 1970 and 2037 — forward and back, at and across midnight, skipped days, 30/45-minute offsets —
# plus the zones earlier versions were checked against.
ZONES = sorted(
    {
        *zone_scan.zones(),
        "America/New_York",
        "Europe/London",
        "Pacific/Chatham",
        "America/Santiago",
        "Asia/Kathmandu",
    }
)
SPECIAL_DAYS = [
    *zone_scan.special_days(),
    date(2000, 10, 27),  # Moncton falls back from 00:01 to 23:01 on 2000-10-29 (03:01 UTC)
    date(2019, 9, 6),  # Santiago: no midnight on 2019-09-08
    date(2024, 3, 8),  # New York spring forward 2024-03-10
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


TRANSITIONS = zone_scan.chosen()


@st.composite
def ranges(draw):
    zone = ZoneInfo(draw(st.sampled_from(ZONES)))
    unit = draw(st.sampled_from(sorted(UNITS)))
    step, max_count = UNITS[unit]
    if draw(st.integers(0, 3)) == 0:
        # A start within two hours of a scanned transition, in that transition's zone.
        transition = draw(st.sampled_from(TRANSITIONS))
        zone = ZoneInfo(transition.zone)
        start = datetime.fromtimestamp(transition.at, UTC) + timedelta(
            microseconds=draw(st.integers(-7_200_000_000, 7_200_000_000))
        )
        return _with_end(draw, zone, unit, step, max_count, start)
    if draw(st.booleans()):
        base = draw(st.sampled_from(SPECIAL_DAYS))
    else:
        base = draw(st.dates(min_value=date(1975, 1, 1), max_value=date(2036, 12, 31)))
    start_wall = datetime.combine(base, datetime.min.time(), tzinfo=UTC) + timedelta(
        microseconds=draw(st.integers(0, 3 * 86_400_000_000 - 1)) if draw(st.booleans()) else 0
    )
    # The wall time read in the zone (earlier instant on overlaps; a gap shifts it), or the same figures taken
    # as an instant, which can fall in the second pass of a repeated hour that no wall time names.
    start = to_datetime(to_micros(start_wall.replace(tzinfo=zone)), UTC) if draw(st.booleans()) else start_wall
    return _with_end(draw, zone, unit, step, max_count, start)


def _with_end(draw, zone, unit, step, max_count, start):
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
@example(
    (
        ZoneInfo("America/Moncton"),
        "daily",
        None,
        datetime(2000, 10, 29, 3, 30, tzinfo=UTC),  # 23:30 -04:00, after the clocks went back past midnight
        datetime(2000, 11, 1, 4, tzinfo=UTC),
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


@pytest.mark.parametrize("transition", TRANSITIONS, ids=lambda t: f"{t.zone}@{t.day}")
def test_plans_starting_around_every_scanned_transition_match_the_oracle(transition):
    """For each scanned transition, ranges starting just before, on, and inside the changed stretch of wall time
    (the second pass of a repeated hour included), in every calendar unit and hourly, equal the oracle's."""
    zone = ZoneInfo(transition.zone)
    moment = datetime.fromtimestamp(transition.at, UTC)
    offsets = [-3600, -1, 0, 1, 1800, 3599, 3600 * 3]
    for unit in ("daily", "weekly", "monthly", "hourly"):
        step = UNITS[unit][0]
        for seconds in offsets:
            start = moment + timedelta(seconds=seconds)
            end = start + timedelta(days=40)
            plan = Plan(to_micros(start), to_micros(end), zone, parse_unit(unit))
            pairs = _as_pairs(plan)
            assert pairs == oracle_partitions(start, end, zone, unit, step), (unit, start)
            assert all(a < b for a, b in pairs), (unit, start)
