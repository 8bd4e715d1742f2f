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


def test_a_leading_plus_is_allowed_once_and_terms_are_read_in_order():
    """Go accepts "+6h"; "++6h" is not a duration; every term of a compound duration counts once."""
    assert parse_duration("+6h", "--timeout") == 6 * 3_600_000_000
    assert parse_duration("+1h30m15s", "--timeout") == (3600 + 30 * 60 + 15) * 1_000_000
    with pytest.raises(BadInput, match="is not a duration"):
        parse_duration("++6h", "--timeout")


def test_formatting_at_each_unit_boundary_and_below_zero():
    """Exact spellings where the unit changes (µs, ms, s), for a fraction with a leading zero, and for negatives."""
    cases = {
        0: "0s",
        1: "1µs",
        999: "999µs",
        1_000: "1ms",
        1_001: "1.001ms",
        1_050: "1.05ms",
        999_999: "999.999ms",
        1_000_000: "1s",
        1_000_001: "1.000001s",
        60_000_000: "1m",
        -1_500: "-1.5ms",
        -3_600_000_000: "-1h",
    }
    assert {micros: format_duration(micros) for micros in cases} == cases
