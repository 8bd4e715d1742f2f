"""TUI tests read times in UTC, whatever the machine's zone, so screens and snapshots are the same everywhere."""

from __future__ import annotations

import pendulum
import pytest


@pytest.fixture(autouse=True)
def operator_in_utc(monkeypatch):
    """The operator's local zone is UTC for the app under test (relative times, 'times in …')."""
    monkeypatch.setenv("TZ", "UTC")
    pendulum.set_local_timezone(pendulum.timezone("UTC"))
    yield
    pendulum.set_local_timezone()
