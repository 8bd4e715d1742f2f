"""Calendar periods: keys and first days are inverse, and the period of an instant across a midnight fall-back."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.dates.calendar import CalendarUnit, empty_periods, period_of, period_start
from engine.dates.instants import to_micros

DAYS = st.dates(min_value=date(1, 1, 8), max_value=date(9999, 12, 1))


@given(DAYS, st.sampled_from(list(CalendarUnit)))
def test_every_day_lies_in_the_period_its_key_names(day, unit):
    """first_day(key_of(d)) <= d < first_day(key_of(d) + 1): keys and first days are exact inverses."""
    key = unit.key_of(day)
    assert unit.first_day(key) <= day < unit.first_day(key + 1)


@given(DAYS)
def test_weeks_start_on_monday_months_on_the_first_and_years_on_new_years_day(day):
    """The first day of each kind of period, whatever day it is asked for."""
    assert CalendarUnit.WEEK.first_day(CalendarUnit.WEEK.key_of(day)).isoweekday() == 1
    assert CalendarUnit.MONTH.first_day(CalendarUnit.MONTH.key_of(day)) == day.replace(day=1)
    assert CalendarUnit.YEAR.first_day(CalendarUnit.YEAR.key_of(day)) == date(day.year, 1, 1)
    assert CalendarUnit.DAY.first_day(CalendarUnit.DAY.key_of(day)) == day
    assert CalendarUnit.DAY.key_of(day + timedelta(days=1)) == CalendarUnit.DAY.key_of(day) + 1


MONCTON = ZoneInfo("America/Moncton")


@pytest.mark.parametrize("unit", list(CalendarUnit))
def test_after_a_fall_back_across_midnight_the_new_day_has_begun(unit):
    """Moncton, 2000-10-29: at 00:01 ADT clocks went back to 23:01 on the 28th. 03:30Z shows 23:30 on the 28th,
    yet the 29th began at 03:00Z: the instant belongs to the 29th (and to its week, month and year)."""
    for moment in (datetime(2000, 10, 29, 3, 30, tzinfo=UTC), datetime(2000, 10, 29, 3, 0, tzinfo=UTC)):
        instant = to_micros(moment)  # 03:00Z is the very first instant of the 29th
        key = period_of(unit, instant, MONCTON)
        assert key == unit.key_of(date(2000, 10, 29))
        assert period_start(unit, key, MONCTON) <= instant < period_start(unit, key + 1, MONCTON)


APIA = ZoneInfo("Pacific/Apia")


def test_the_day_apia_skipped_is_the_one_empty_period_and_only_strictly_inside_the_range():
    """Apia skipped 2011-12-30 (UTC-10 to UTC+14): the only empty day between Dec 1 and Jan 31, found only when it
    lies strictly between the first and last keys; no week, month or year is empty."""
    day = CalendarUnit.DAY
    skipped = day.key_of(date(2011, 12, 30))
    assert empty_periods(day, day.key_of(date(2011, 12, 1)), day.key_of(date(2012, 1, 31)), APIA) == [skipped]
    assert empty_periods(day, skipped, skipped + 5, APIA) == []
    assert empty_periods(day, skipped - 5, skipped, APIA) == []
    assert empty_periods(day, skipped - 1, skipped + 1, APIA) == [skipped]
    for unit in (CalendarUnit.WEEK, CalendarUnit.MONTH, CalendarUnit.YEAR):
        first, last = unit.key_of(date(2011, 1, 1)), unit.key_of(date(2012, 12, 31))
        assert empty_periods(unit, first, last, APIA) == []
