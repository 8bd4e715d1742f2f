"""The Textual app: a dashboard over a live executor (and, for browsing, over saved backfills).

The app polls its source ``POLL_SECONDS`` apart and never blocks the engine; the
engine never calls the app. ``clock`` and ``frozen`` exist for tests and
screenshots: a fixed clock and no blinking cursor make the screen reproducible.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from textual.app import App
from textual.binding import Binding

from engine.snapshot import FINISHED
from tui.screens.dashboard import DashboardScreen
from tui.sources import BackfillSource

POLL_SECONDS = 0.1


class BackfillApp(App[str | None]):
    """Returns the outcome it saw last (succeeded, failed, cancelled) or None."""

    CSS_PATH = Path(__file__).with_name("dashboard.tcss")
    TITLE = "backfill"
    ENABLE_COMMAND_PALETTE = False
    BINDINGS = [Binding("ctrl+c", "stop('interrupted (Ctrl+C)')", "Stop", show=False, priority=True)]

    def __init__(
        self,
        source: BackfillSource,
        *,
        clock: Callable[[], float] = time.time,
        frozen: bool = False,
        exit_when_succeeded: bool = True,
    ) -> None:
        super().__init__()
        self.source = source
        self.clock = clock
        self.frozen = frozen
        self.exit_when_succeeded = exit_when_succeeded
        self.stop_requested = False
        self.outcome: str | None = None

    def on_mount(self) -> None:
        if self.frozen:
            self.cursor_blink = False
        self.push_screen(DashboardScreen(self.source, self.clock))
        if not self.frozen:
            self.set_interval(POLL_SECONDS, self.poll_source)

    def poll_source(self) -> None:
        screen = self.screen
        if not isinstance(screen, DashboardScreen):
            dashboards = [s for s in self.screen_stack if isinstance(s, DashboardScreen)]
            if not dashboards:
                return
            screen = dashboards[-1]
        state = screen.refresh_from_source()
        if state.state == FINISHED:
            self.outcome = state.outcome
            if self.stop_requested or (state.outcome == "succeeded" and self.exit_when_succeeded):
                self.exit(state.outcome)

    def action_stop(self, reason: str) -> None:
        """Stop the run (first press) or quit once it has finished (or when nothing runs)."""
        state = self.source.poll()
        if self.source.can_stop and state.state not in (FINISHED,):
            if not self.stop_requested:
                self.stop_requested = True
                self.source.stop(reason)
                self.poll_source()
            return
        self.exit(state.outcome)
