"""Snapshot tests of the browser: the list of saved backfills, the rerun form with errors, a browsed backfill."""

from __future__ import annotations

import pytest

from tests.tui.fixtures import FROZEN, build_complete_backfill, build_saved_backfill
from tests.tui.live import screen_text, wait_until
from tui.app.backfill_app import BackfillApp
from tui.app.screens.dashboard import DashboardScreen
from tui.app.screens.rerun_form import RerunForm


@pytest.fixture
def root(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the list shows its root relative to the working directory
    root = tmp_path / "states"
    build_saved_backfill(root)
    build_complete_backfill(root)
    return root


def test_list_screen(snap_compare, root):
    """The saved backfills, newest first, with state and counts."""
    app = BackfillApp(root=root, clock=lambda: FROZEN, frozen=True)
    assert snap_compare(app, terminal_size=(130, 20))


def test_browsed_backfill(snap_compare, root):
    """A saved backfill opened from the list: read-only, nothing runs it."""
    app = BackfillApp(root=root, clock=lambda: FROZEN, frozen=True)
    assert snap_compare(app, press=["enter"], terminal_size=(110, 34))


def test_rerun_form_showing_errors(snap_compare, root):
    """The rerun form with an invalid retry count and timeout: each explained beside its field, Run disabled."""
    app = BackfillApp(root=root, clock=lambda: FROZEN, frozen=True)

    async def fill_in(pilot) -> None:
        await wait_until(pilot, lambda: "incomplete" in screen_text(app))
        await pilot.press("enter")
        await wait_until(pilot, lambda: isinstance(app.screen, DashboardScreen))
        await pilot.press("r")
        await wait_until(pilot, lambda: isinstance(app.screen, RerunForm))
        app.screen.query_one("#retries").value = "three"
        app.screen.query_one("#timeout").value = "10 minutes"
        await wait_until(
            pilot, lambda: "'10 minutes' is not a duration" in screen_text(app) and "'three'" in screen_text(app)
        )

    assert snap_compare(app, run_before=fill_in, terminal_size=(110, 40))
