"""Snapshot tests of the dashboard: frozen clock, no polling, no blinking cursor, a fixed saved state."""

from __future__ import annotations

import pytest

from engine.execute.executor_snapshot import STOPPING
from tests.tui.fixtures import FROZEN, FixedStateSource, build_saved_backfill
from tui.app.backfill_app import BackfillApp


@pytest.fixture
def store(tmp_path):
    return build_saved_backfill(tmp_path / "states")


def app_for(source) -> BackfillApp:
    return BackfillApp(source, clock=lambda: FROZEN, frozen=True)


def test_dashboard_mid_run(snap_compare, store):
    """Mid-run: header, completion bar with ETA, counts, and rows following the earliest running partition."""
    assert snap_compare(app_for(FixedStateSource(store)), terminal_size=(110, 36))


def test_details_pane_with_a_log(snap_compare, store):
    """The details pane of a retried failed partition: both attempts and the latest log with its traceback."""
    assert snap_compare(app_for(FixedStateSource(store)), press=["home", "n", "enter"], terminal_size=(110, 40))


def test_status_filter(snap_compare, store):
    """Filtered to 'failed or cancelled': only those rows, and the status line names the filter."""
    presses = ["s", "down", "down", "down", "down", "down", "enter"]
    assert snap_compare(app_for(FixedStateSource(store)), press=presses, terminal_size=(110, 30))


def test_stopping_state(snap_compare, store):
    """Stopping: the status line says how many active runs it waits for."""
    source = FixedStateSource(store, state=STOPPING, stop_reason="stopped from the dashboard (q)")
    assert snap_compare(app_for(source), terminal_size=(110, 30))


def test_small_terminal_80x24(snap_compare, store):
    """At 80×24 the dashboard still shows header, bar, rows and keys."""
    assert snap_compare(app_for(FixedStateSource(store)), terminal_size=(80, 24))


def test_a_split_partition_opened_with_its_tree_in_the_details(snap_compare, tmp_path):
    """A 25-hour day split twice, opened with →: its halves indented under it with ``▾ 2/3``, the inner half's
    ``⑂ 1/2``, the failed leaf's reason on the partition; the details list the tree with each leaf's attempts."""
    from tests.tui.fixtures import build_split_backfill

    source = FixedStateSource(build_split_backfill(tmp_path / "states"))
    assert snap_compare(app_for(source), press=["down", "right", "enter"], terminal_size=(120, 40))
