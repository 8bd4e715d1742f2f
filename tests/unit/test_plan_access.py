"""Random access into a plan: index_of, index_containing, interval, reverse iteration from a position, and the
exact messages of plans that cannot exist (mutation audit: each test kills mutants the others let live)."""

from __future__ import annotations

import pytest

from engine.base.errors import BadInput
from engine.dates.plan import parse_unit
from tests.unit.test_plan import make_plan

HOUR = 3_600_000_000


@pytest.mark.parametrize(("unit", "zone"), [("daily", "America/New_York"), ("6h", "UTC"), ("daily", "Pacific/Apia")])
def test_index_containing_finds_every_instant_of_every_partition(unit, zone):
    """Each partition's start, an instant inside it and its last microsecond belong to it; instants before the
    plan and at its (exclusive) end belong to none."""
    plan = (
        make_plan("2011-12-25", "2012-01-05", unit, zone)
        if zone == "Pacific/Apia"
        else make_plan("2024-03-08", "2024-03-12", unit, zone)
    )
    for interval in plan:
        middle = (interval.start + interval.end) // 2
        for instant in (interval.start, middle, interval.end - 1):
            assert plan.index_containing(instant) == interval.index, (interval, instant)
    assert plan.index_containing(plan.start - 1) is None
    assert plan.index_containing(plan.end) is None
    assert plan.index_containing(plan.end - 1) == len(plan) - 1


def test_index_of_only_answers_for_partition_starts():
    """A partition's start gives its index; an instant just after it, the end of the plan and an instant
    before it give None — for duration and calendar units."""
    for plan in (
        make_plan("2024-01-01", "2024-01-03", "6h"),
        make_plan("2024-03-08", "2024-03-12", "daily", "America/New_York"),
    ):
        for interval in plan:
            assert plan.index_of(interval.start) == interval.index
            assert plan.index_of(interval.start + 1) is None
        assert plan.index_of(plan.end) is None
        assert plan.index_of(plan.start - HOUR) is None


def test_intervals_carry_their_index_and_a_bad_index_is_named():
    """interval(i).index is i for both kinds of unit; an index outside the plan raises IndexError naming it."""
    for plan in (make_plan("2024-01-01", "2024-01-02", "6h"), make_plan("2024-01-01", "2024-01-09", "daily")):
        assert [plan.interval(i).index for i in range(len(plan))] == list(range(len(plan)))
        with pytest.raises(IndexError) as raised:
            plan.interval(len(plan))
        assert raised.value.args == (len(plan),)


def test_reverse_iteration_from_a_position_skips_the_newest_ones():
    """iterate(reverse=True, begin=2) starts two partitions before the newest and ends with the oldest."""
    plan = make_plan("2024-01-01", "2024-01-06", "daily")
    assert [i.index for i in plan.iterate(reverse=True, begin=2)] == [3, 2, 1, 0]
    assert [i.index for i in plan.iterate(begin=4)] == [4, 5]


def test_an_end_one_microsecond_into_a_day_gives_that_day_a_partition():
    """[Jan 1, Jan 2 00:00:00.000001): the last microsecond belongs to Jan 2, which gets a one-microsecond
    partition."""
    plan = make_plan("2024-01-01T00:00:00Z", "2024-01-02T00:00:00.000001Z", "daily")
    assert len(plan) == 2 and plan.interval(1).end - plan.interval(1).start == 1


def test_impossible_ranges_are_named_in_the_backfill_zone():
    """The messages show both instants in the plan's zone (here with New York's offset)."""
    with pytest.raises(BadInput) as raised:
        make_plan("2024-01-02T00:00:00", "2024-01-01T00:00:00", "daily", "America/New_York")
    assert str(raised.value) == (
        "the end 2024-01-01T00:00:00-05:00 is before the start 2024-01-02T00:00:00-05:00: give an end later "
        "than the start"
    )
    with pytest.raises(BadInput) as raised:
        make_plan("2024-01-02T00:00:00", "2024-01-02T00:00:00", "daily", "America/New_York")
    assert str(raised.value) == (
        "the range 2024-01-02T00:00:00-05:00 .. 2024-01-02T00:00:00-05:00 is empty in America/New_York and yields "
        "no partition: give an end later than the start (a date end is inclusive; a timestamp end is exclusive)"
    )


def test_a_unit_that_is_neither_a_name_nor_a_duration_says_both_are_accepted():
    """A word starting with a letter is not tried as a duration; a duration's own error names --partition."""
    with pytest.raises(BadInput) as raised:
        parse_unit("Xh")
    assert str(raised.value).startswith("--partition 'Xh' is not a partition unit: use hourly, daily")
    with pytest.raises(BadInput) as raised:
        parse_unit("5x")
    assert str(raised.value).startswith("--partition '5x' is not a duration: use a positive Go duration")
