"""How a person reads durations, counts and times (tui/human.py): one convention everywhere."""

from __future__ import annotations

import pendulum
import pytest

from tui import human


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0.4, "0.4s"),
        (9.96, "10s"),
        (12, "12s"),
        (59.6, "1m"),
        (60, "1m"),
        (65, "1m 5s"),
        (3600, "1h"),
        (7503, "2h 5m"),
        (86_400, "1d"),
        (3 * 86_400 + 4 * 3600 + 5, "3d 4h"),
    ],
)
def test_compact_durations_drop_zero_units(seconds, text):
    """1m, not 1m0s; 2h 5m; 3d 4h."""
    assert human.duration(seconds) == text


def test_words_and_counts():
    """Two units in words where there is room; thousands separated by commas."""
    assert human.duration_words(7503) == "2 hours 5 minutes"
    assert human.count(1_006_560) == "1,006,560"


def test_relative_times_in_the_operators_zone():
    """Recent: '3 hours ago'; yesterday with its time; this year with the month; older: the date."""
    pendulum.set_local_timezone(pendulum.timezone("Europe/Paris"))
    try:
        now = pendulum.datetime(2026, 11, 30, 15, 0, tz="UTC").timestamp()
        assert human.relative_time("2026-11-30T11:59:00Z", now) == "3 hours ago"
        assert human.relative_time("2026-11-29T13:02:00Z", now) == "yesterday 14:02"
        assert human.relative_time("2026-03-02T08:00:00Z", now) == "Mar 2 09:00"
        assert human.relative_time("2025-03-02T08:00:00Z", now) == "2025-03-02"
        assert human.relative_time("2026-11-30T14:59:30Z", now) == "just now"
        assert human.local_zone() == "Europe/Paris"
    finally:
        pendulum.set_local_timezone()


def test_shorten_middle_keeps_the_start_and_more_of_the_end():
    """A path too long for its room keeps a third of the room from its start and two thirds from its end, the
    middle an ellipsis, exactly the width; one that fits is untouched; tiny rooms keep the end."""
    from tui.human import shorten_middle

    path = "/home/ana/repo/.context/backfill-orders-2024.yml"
    assert shorten_middle(path, len(path)) == path
    short = shorten_middle(path, 22)
    assert short == "/home/a…ders-2024.yml" or len(short) == 22
    assert len(short) == 22 and short.startswith("/home/") and short.endswith("2024.yml") and "…" in short
    assert shorten_middle(path, 2) == "ml" and shorten_middle(path, 0) == ""
    assert shorten_middle("abcdef", 4) == "a…ef"
