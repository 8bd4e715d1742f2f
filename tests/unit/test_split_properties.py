"""Property tests: splitting a partition against a naive oracle of local hours and calendar days."""

from __future__ import annotations

import itertools
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.dates.instants import to_micros
from engine.dates.split import SplitUnit, cut_of, halves, leaf_id
from tests import zone_scan
from tests.oracle import oracle_partitions

HOUR = 3_600_000_000
TRANSITIONS = zone_scan.chosen()


def _hour_key(moment: datetime, zone: ZoneInfo) -> tuple:
    local = moment.astimezone(zone)
    return local.date(), local.hour, local.utcoffset()


def oracle_hours(start: datetime, end: datetime, zone: ZoneInfo) -> list[int]:
    """Every instant in (start, end) where the local hour changes, found by scanning minutes then seconds."""
    found, probe = [], start
    while probe < end:
        following = min(probe + timedelta(minutes=1), end)
        if following < end and _hour_key(following, zone) != _hour_key(probe, zone):
            second = probe
            while _hour_key(second, zone) == _hour_key(probe, zone):
                second += timedelta(seconds=1)
            found.append(to_micros(second))
        probe = following
    return found


def split_down(start: int, end: int, zone: ZoneInfo, min_length: int, finest=SplitUnit.SECOND) -> list[tuple]:
    parts = halves(start, end, zone, min_length=min_length, finest=finest)
    if parts is None:
        return [(start, end)]
    return [leaf for half in parts for leaf in split_down(*half, zone, min_length, finest)]


def _day_of(transition) -> tuple[ZoneInfo, datetime, datetime]:
    zone = ZoneInfo(transition.zone)
    moment = datetime.fromtimestamp(transition.at, UTC)
    day = next(
        (a, b)
        for a, b in oracle_partitions(moment - timedelta(days=2), moment + timedelta(days=2), zone, "daily", None)
        if a <= moment < b
    )
    return zone, *day


@pytest.mark.parametrize("transition", TRANSITIONS, ids=lambda t: f"{t.zone}@{t.day}")
def test_a_transition_day_split_to_an_hour_is_exactly_its_local_hours(transition):
    """A day holding a DST (or any) transition, split down to 1 h, ends on the oracle's local hour boundaries only,
    tiles the day, and is exactly its local hours wherever every local hour lasts an hour."""
    zone, day_start, day_end = _day_of(transition)
    start, end = to_micros(day_start), to_micros(day_end)
    leaves = split_down(start, end, zone, HOUR)
    assert leaves[0][0] == start and leaves[-1][1] == end
    assert all(a[1] == b[0] for a, b in itertools.pairwise(leaves))
    boundaries = oracle_hours(day_start, day_end, zone)
    assert {b for _, b in leaves[:-1]} <= set(boundaries)
    edges = [start, *boundaries, end]
    if all(b - a == HOUR for a, b in itertools.pairwise(edges)):
        assert [b for _, b in leaves[:-1]] == boundaries


@pytest.mark.parametrize("transition", TRANSITIONS, ids=lambda t: f"{t.zone}@{t.day}")
def test_a_day_never_splits_below_a_day_when_days_are_the_finest_unit(transition):
    """With whole days the finest cut (a date key), a day does not split and a month splits on the oracle's days."""
    zone, day_start, day_end = _day_of(transition)
    assert halves(to_micros(day_start), to_micros(day_end), zone, min_length=1, finest=SplitUnit.DAY) is None
    first = day_start.astimezone(zone).date().replace(day=1)
    following = date(first.year + (first.month == 12), first.month % 12 + 1, 1)
    month = oracle_partitions(
        datetime.combine(first, datetime.min.time(), tzinfo=zone),
        datetime.combine(following, datetime.min.time(), tzinfo=zone),
        zone,
        "daily",
        None,
    )
    days = {to_micros(b) for _, b in month}
    leaves = split_down(to_micros(month[0][0]), to_micros(month[-1][1]), zone, 1, SplitUnit.DAY)
    assert [b for _, b in leaves[:-1]] == sorted(days)[:-1]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(sorted({t.zone for t in TRANSITIONS} | {"UTC", "Europe/Berlin", "Australia/Lord_Howe"})),
    st.integers(to_micros(datetime(1975, 1, 1, tzinfo=UTC)), to_micros(datetime(2036, 1, 1, tzinfo=UTC))),
    st.integers(2, 90 * 24 * HOUR),
    st.integers(1, 48 * HOUR),
)
def test_halves_tile_fairly_and_respect_the_minimum(name, start, length, min_length):
    """Any interval's halves tile it, each holds at least a quarter of it and ``min_length``, and the same interval
    always splits the same way (its halves' IDs are stable and distinct)."""
    zone = ZoneInfo(name)
    end = start + length
    parts = halves(start, end, zone, min_length=min_length)
    cut = cut_of(start, end, zone)
    if parts is None:
        assert cut is None or min(cut - start, end - cut) < min_length
        return
    (a, b), (c, d) = parts
    assert (a, d) == (start, end) and b == c
    assert 4 * min(b - a, d - c) >= end - start
    assert min(b - a, d - c) >= min_length
    assert halves(start, end, zone, min_length=min_length) == parts
    assert leaf_id("p", a, b) != leaf_id("p", c, d) and leaf_id("p", a, b) == leaf_id("p", a, b)
