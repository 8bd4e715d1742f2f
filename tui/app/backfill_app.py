"""The Textual app: the live dashboard over an executor, and the browser of saved backfills.

The app polls its sources ``POLL_SECONDS`` apart and never blocks the engine; the
engine never calls the app. ``clock`` and ``frozen`` exist for tests and
screenshots: a fixed clock, no polling and no blinking cursor make the screen
reproducible.
"""

from __future__ import annotations

import gc
import os
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from textual.app import App
from textual.binding import Binding
from textual.screen import Screen

from engine.base.errors import BackfillError
from engine.base.settings import Settings
from engine.execute.backfill import Loaded, Prepared
from engine.execute.executor import Executor, Outcome
from engine.execute.executor_snapshot import FINISHED
from engine.execute.executor_thread import ExecutorThread
from engine.store.state_store import StateStore
from tui.app.screens.dashboard import DashboardScreen
from tui.app.sources import BackfillSource, ExecutorSource, open_saved
from tui.app.terminal_driver import TerminalDriver

if TYPE_CHECKING:
    from engine.execute.invocation import Invocation

POLL_SECONDS = 0.1


@dataclass
class StartedRun:
    """A rerun started from the browser: its executor thread is joined when the app ends."""

    prepared: Prepared
    thread: ExecutorThread
    started: float

    @property
    def executor(self) -> Executor:
        return self.thread.executor

    @property
    def outcome(self) -> Outcome | None:
        """Set when the executor returned (None while it runs, or if it raised)."""
        return self.thread.outcome


class BackfillApp(App[str | None]):
    """Returns the outcome of the live run it showed last (succeeded, failed, cancelled), or None."""

    CSS_PATH = Path(__file__).with_name("dashboard.tcss")
    TITLE = "backfill"
    ENABLE_COMMAND_PALETTE = False
    BINDINGS = [Binding("ctrl+c", "stop('interrupted (Ctrl+C)')", "Stop", show=False, priority=True)]

    def __init__(
        self,
        source: BackfillSource | None = None,
        *,
        root: Path | None = None,
        open_store: StateStore | None = None,
        clock: Callable[[], float] = time.time,
        frozen: bool = False,
        closes_when_done: bool | None = None,
        no_color: bool = False,
        settings: Settings | None = None,
        read_only: bool = False,
    ) -> None:
        # Textual reads NO_COLOR when the app is built: --no-color sets it for that moment only, so the
        # children started later do not inherit it.
        saved = os.environ.get("NO_COLOR")
        if no_color:
            os.environ["NO_COLOR"] = "1"
        try:
            super().__init__(driver_class=TerminalDriver)
        finally:
            if no_color and saved is None:
                del os.environ["NO_COLOR"]
        self.settings = settings if settings is not None else Settings.from_environment()
        self.read_only = read_only  # backfill watch: nothing on screen acts on the backfill
        self.source = source
        self.root = root
        self.open_store = open_store
        self.clock = clock
        self.frozen = frozen
        # The command line's live dashboard closes itself when the run succeeded or was stopped;
        # the browser stays open until the user leaves.
        self.closes_when_done = source is not None if closes_when_done is None else closes_when_done
        self.stop_requested = False
        self.outcome: str | None = None
        self.started_runs: list[StartedRun] = []
        self.crash: BaseException | None = None  # an unexpected exception that ended the app
        self.crash_text: str | None = None
        self.terminal_gone = False  # the terminal went away (SIGHUP ignored): the work goes on without a screen

    def terminal_lost(self) -> None:
        """The terminal went away and SIGHUP did not stop us (nohup): leave the screen; the command line carries
        on with progress lines (see tui/cli/dashboard_runner.py)."""
        self.terminal_gone = True
        self.exit(self.outcome)

    def _handle_exception(self, error: Exception) -> None:
        # Keep the exception for the command line, which prints one line and writes the full traceback to a
        # file; the backfill itself goes on without the screen (see tui/cli/dashboard_runner.py).
        if self.crash is None:
            self.crash = error
            self.crash_text = "".join(traceback.format_exception(error))
        super()._handle_exception(error)

    def _print_error_renderables(self) -> None:
        if self.crash is not None:
            self._exit_renderables.clear()  # reported by the command line instead of a screenful of traceback
            return
        super()._print_error_renderables()

    def run(self, *args, **kwargs) -> str | None:
        # What was imported and built before the first frame (Textual, the engine, the plan) lives as long as the
        # app: frozen, the collector's full passes leave it alone. Unfrozen, one such pass fell on the way to
        # the first frame of a million-partition run (35 ms of about 0.35 s; docs/performance.md).
        gc.freeze()
        return super().run(*args, **kwargs)

    def get_default_screen(self) -> Screen:
        # A live run's dashboard is the first screen itself: pushed over an empty default screen, the empty
        # one was laid out and drawn first, and the first frame waited for both.
        if self.source is not None:
            return DashboardScreen(self.source, self.clock)
        return super().get_default_screen()

    def on_mount(self) -> None:
        if self.frozen:
            self.cursor_blink = False
        if self.source is None:  # else the live dashboard is the default screen
            if self.open_store is not None:
                self.push_screen(DashboardScreen(open_saved(self.open_store), self.clock))
            else:
                from tui.app.screens.backfill_list import BackfillListScreen

                self.push_screen(BackfillListScreen(self.root or Path.cwd(), frozen=self.frozen))
        if not self.frozen:
            self.set_interval(POLL_SECONDS, self.poll_source)

    # ---------------------------------------------------------------- polling

    def dashboard(self) -> DashboardScreen | None:
        screens = [s for s in self.screen_stack if isinstance(s, DashboardScreen)]
        return screens[-1] if screens else None

    def poll_source(self) -> None:
        screen = self.dashboard()
        if screen is None:
            return
        state = screen.refresh_from_source()
        if state.state == FINISHED and screen.source.can_stop:
            self.outcome = state.outcome
            if self.closes_when_done and (self.stop_requested or state.outcome == "succeeded"):
                self.exit(state.outcome)

    # ---------------------------------------------------------------- browsing and rerunning

    def open_backfill(self, directory: Path) -> None:
        try:
            source = open_saved(StateStore(directory))
        except BackfillError as error:
            self.notify(str(error), title="cannot open this backfill", severity="error", timeout=8)
            return
        self.push_screen(DashboardScreen(source, self.clock))

    def start_rerun(self, source: BackfillSource, options, selection, *, whole_partitions: bool = False) -> None:
        """Resume a saved backfill on an engine thread, exactly as `backfill --continue` does (pre-flight
        included: the pre-flight screen asks when a person must answer), and show it in a live dashboard
        instead of the browsed one."""
        from engine.execute.invocation import judge_resume
        from engine.guardrails.tiers import AUTO, NEVER

        store = source.store
        try:
            manifest = store.read_manifest()
            board, running = store.load_board(source.spec.plan, source.spec.ids.of)
            loaded = Loaded(store, source.spec, manifest, board, running, store.directory.parent)
            invocation = judge_resume(
                loaded,
                options,
                selection,
                reason=None,
                settings=self.settings,
                can_ask=True,
                whole_partitions=whole_partitions,
            )
        except BackfillError as error:
            self.notify(str(error), title="cannot rerun", severity="error", timeout=10)
            return
        if invocation.paused is not None:
            self.notify(f"backfill {store.id} is {invocation.paused.sentence()}", title="nothing ran", timeout=8)
            return
        preflight = invocation.preflight
        if preflight is not None and preflight.verdict == NEVER:
            invocation.abandon()
            failing = "; ".join(f"{c.name}: {c.detail}" for c in preflight.blocking)
            self.notify(failing, title="refused by the pre-flight (never allowed)", severity="error", timeout=15)
            return
        if preflight is None or (preflight.verdict == AUTO and invocation.reason is not None):
            self._launch_rerun(invocation, None, typed=False)
            return
        from tui.app.screens.preflight import PreflightScreen

        def answered(answer) -> None:
            if answer is None:
                invocation.abandon()
                self.notify("nothing ran", title="not approved", timeout=6)
                return
            self._launch_rerun(invocation, answer.reason, typed=answer.approved)

        title = f"backfill {store.id} · rerun"
        invocation.close_warehouses()
        self.push_screen(PreflightScreen(preflight, title, invocation.reason), callback=answered)

    def _launch_rerun(self, invocation: Invocation, reason: str | None, *, typed: bool) -> None:
        try:
            approval = invocation.approve(approve=None, typed=typed, reason=reason)
            prepared = invocation.start(approval)
        except BackfillError as error:  # the invocation gave the backfill up
            self.notify(str(error), title="cannot rerun", severity="error", timeout=10)
            return
        try:
            executor = invocation.executor()
        except BackfillError as error:  # no launcher (a cluster out of reach): the backfill is given up
            self.notify(str(error), title="cannot rerun", severity="error", timeout=10)
            return
        run = StartedRun(prepared, ExecutorThread(executor).start(), time.monotonic())
        self.started_runs.append(run)
        live = ExecutorSource(run.executor, options=prepared.options, parallelism=prepared.parallelism)
        self.stop_requested = False
        self.switch_screen(DashboardScreen(live, self.clock))

    def action_stop(self, reason: str) -> None:
        """Stop a live run (first press); otherwise leave this dashboard, or the app from its first screen."""
        screen = self.dashboard()
        if screen is not None and screen is self.screen:
            state = screen.source.poll()
            if screen.source.can_stop and state.state != FINISHED:
                # The first stop sends SIGINT and waits out the grace; asked again, the executor escalates:
                # SIGTERM to every child now, then SIGKILL now.
                self.stop_requested = True
                screen.source.stop(reason)
                self.poll_source()
                return
            self.outcome = state.outcome if screen.source.can_stop else self.outcome
            if len(self.screen_stack) > 2:
                self.pop_screen()
                return
        self.exit(self.outcome)

    def stop_started_runs(self) -> None:
        """Whatever happened to the app, no rerun it started outlives it."""
        for run in self.started_runs:
            if run.thread.is_alive():
                run.executor.request_stop("the browser closed")
            run.thread.join()
