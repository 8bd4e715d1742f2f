"""Go durations for --partition and --timeout."""

from __future__ import annotations

import pytest

from engine.base.errors import BadInput
from engine.dates.durations import format_duration, parse_duration


@pytest.mark.parametrize(
    ("text", "micros"),
    [
        ("6h", 6 * 3_600_000_000),
        ("90m", 90 * 60_000_000),
        ("1h30m", 90 * 60_000_000),
        ("15m", 15 * 60_000_000),
        ("500ms", 500_000),
        ("1.5h", 90 * 60_000_000),
        ("1µs", 1),
        ("1μs", 1),
        ("1us", 1),
        ("1000ns", 1),
        ("2h45m30.5s", (2 * 3600 + 45 * 60 + 30) * 1_000_000 + 500_000),
        (".5s", 500_000),
    ],
)
def test_go_durations_parse_to_microseconds(text, micros):
    """Every Go duration form we accept gives exact microseconds."""
    assert parse_duration(text, "--partition") == micros


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("0s", "is zero"),
        ("-1h", "is negative"),
        ("1ns", "whole number of microseconds"),
        ("1d", "is not a duration"),
        ("h", "is not a duration"),
        ("1h 30m", "is not a duration"),
        ("", "is not a duration"),
    ],
)
def test_bad_durations_are_errors(text, problem):
    """Zero, negative, sub-microsecond and malformed durations are rejected with the accepted forms."""
    with pytest.raises(BadInput, match=problem) as error:
        parse_duration(text, "--partition")
    assert "positive Go duration" in str(error.value)


def test_durations_print_in_go_units_without_zero_components():
    """Go's units and spelling, zero components left out (1h30m, not 1h30m0s): still what Go and we parse."""
    samples = (5_400_000_000, 900_000_000, 500_000, 1_500, 1, 30_000_000, 3_600_000_000, 3_601_500_000)
    assert [parse_duration(format_duration(m), "--timeout") for m in samples] == list(samples)
    assert [format_duration(m) for m in (3_600_000_000, 3_601_500_000)] == ["1h", "1h1.5s"]
    assert [format_duration(m) for m in (5_400_000_000, 900_000_000, 500_000, 1_500, 1, 30_000_000)] == [
        "1h30m",
        "15m",
        "500ms",
        "1.5ms",
        "1µs",
        "30s",
    ]
