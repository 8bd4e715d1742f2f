"""Seasonal bounds and buckets against plain re-implementations (hypothesis)."""

from __future__ import annotations

from fractions import Fraction

import pendulum
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.dates.instants import load_zone
from engine.dates.plan import parse_unit
from engine.guardrails.seasonal import bucket_of, seasonal_bounds

ZONES = ["UTC", "America/New_York", "Europe/London", "Asia/Kathmandu", "Australia/Lord_Howe", "America/St_Johns"]


def oracle(values: list[int], low: float, high: float) -> tuple[Fraction, Fraction, Fraction] | None:
    """Exact arithmetic: the mean of the values, and the bounds as fractions of it."""
    if len(values) < 3:
        return None
    mean = Fraction(sum(values), len(values))
    return mean, mean * Fraction(low), mean * Fraction(high)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.integers(min_value=0, max_value=10**9), max_size=60),
    st.floats(min_value=0.01, max_value=0.99),
    st.floats(min_value=1.01, max_value=100),
    st.integers(min_value=0, max_value=10**10),
)
def test_bounds_match_exact_arithmetic_and_admit_the_same_counts(values, low, high, rows):
    """Mean and bounds agree with exact fractions; a count inside the exact bounds (by a margin) is admitted and
    one outside is not; fewer than three values give no bounds (insufficient history)."""
    bounds = seasonal_bounds(values, low, high)
    expected = oracle(values, low, high)
    if expected is None:
        assert bounds is None
        return
    mean, lo, hi = expected
    assert bounds is not None and bounds.values == len(values)
    for got, want in ((bounds.mean, mean), (bounds.low, lo), (bounds.high, hi)):
        assert abs(Fraction(got) - want) <= max(Fraction(1, 10**6), abs(want) / 10**9)
    margin = max(Fraction(1), hi / 10**6)
    if lo + margin <= rows <= hi - margin:
        assert bounds.admits(rows)
    if rows < lo - margin or rows > hi + margin:
        assert not bounds.admits(rows)


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(ZONES),
    st.integers(min_value=0, max_value=2**31 - 1),
    st.sampled_from(["daily", "monthly", "hourly", "6h", "weekly"]),
)
def test_buckets_follow_the_local_calendar(zone_name, seconds, unit_name):
    """Weekday for daily, day of month for monthly, hour of day below a day, one bucket otherwise — read in the
    backfill's zone as pendulum reads it."""
    local = pendulum.from_timestamp(seconds, tz=zone_name)
    bucket = bucket_of(seconds * 1_000_000, parse_unit(unit_name), load_zone(zone_name))
    expected = {
        "daily": local.isoweekday() - 1,
        "monthly": local.day,
        "hourly": local.hour,
        "6h": local.hour,
        "weekly": 0,
    }[unit_name]
    assert bucket == expected
