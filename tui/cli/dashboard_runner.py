"""Run a backfill under the dashboard: the executor on its thread, the app on the main thread.

The app returns when the backfill succeeded, or when the user quits a finished
one, or after a stop once every child has exited. Whatever happens to the app,
the executor is stopped and joined before we return: no child outlives us.

A fault of the screen is not a reason to stop the work: when the app dies of an
unexpected exception while the backfill runs, the terminal is restored, one line
says what failed and where the full traceback went, and the backfill goes on to
its end with progress lines (Ctrl+C still stops it).

A closed terminal under ``nohup`` (SIGHUP ignored) is not a stop: the screen
leaves (Textual's driver reports the lost terminal instead of blocking on it), the
terminal's descriptors are pointed at /dev/null, and the backfill goes on to its
end with progress lines that go nowhere, exiting with its usual code; SIGINT and
SIGTERM still stop it.

A closed terminal (SIGHUP: the window closed, SSH dropped, tmux killed) is a stop
too, and the screen has nowhere left to draw: the terminal's descriptors are
pointed at /dev/null so no write blocks or fails, and once every executor has
stopped and waited for its children the process leaves within a few seconds
even if the screen never returns (Textual's writer can die on the lost
terminal and block the app's shutdown for ever). A terminal that closes without
a SIGHUP (it was not the process's controlling terminal) stops it the same way,
unless SIGHUP is ignored.
"""

from __future__ import annotations

import signal
import sys

from engine.execute.backfill import Prepared
from engine.execute.executor import Executor, Outcome
from engine.execute.executor_thread import ExecutorThread
from tui.app.backfill_app import BackfillApp, StartedRun
from tui.app.sources import ExecutorSource
from tui.cli.crash import report_crash
from tui.cli.progress import ProgressLines
from tui.cli.stop_signals import (
    FORWARDED,
    SIGNAL_REASONS,
    install_stop_handlers,
    leave_once_stopped,
    restore_handlers,
    stop_for,
)
from tui.cli.terminal import Paint, colors_enabled, detach_from_terminal, terminal_descriptors


def run_with_dashboard(executor: Executor, prepared: Prepared, *, no_color: bool) -> tuple[Outcome, list[StartedRun]]:
    """The executor's outcome, and the reruns started from the dashboard once it had finished (each stopped
    and joined before returning)."""
    thread = ExecutorThread(executor)
    source = ExecutorSource(executor, options=prepared.options, parallelism=prepared.parallelism)
    app = BackfillApp(source, no_color=no_color, settings=prepared.settings)

    def on_terminate(signum, _frame) -> None:
        # Stop the run and leave once every child has exited: SIGTERM (or SIGHUP: the terminal closed) ends
        # the process, whatever the screen.
        reason = SIGNAL_REASONS[signum]
        app.stop_requested = True
        stop_for(executor, signum, reason, FORWARDED[signum])
        for run in app.started_runs:
            stop_for(run.executor, signum, reason, FORWARDED[signum])
        if signum == signal.SIGHUP:
            detach_from_terminal()
            threads = [thread, *(run.thread for run in app.started_runs)]
            leave_once_stopped(threads)

    handled = [signal.SIGTERM]
    if signal.getsignal(signal.SIGHUP) != signal.SIG_IGN:  # under nohup a closed terminal is meant not to stop it
        handled.append(signal.SIGHUP)
    previous = {signum: signal.signal(signum, on_terminate) for signum in handled}
    thread.start()
    try:
        try:
            app.run()
        except Exception as error:  # a failure while starting or stopping the app itself
            app.crash = app.crash or error
            app.crash_text = app.crash_text or repr(error)
        if app.terminal_gone:
            detach_from_terminal()
        if app.terminal_gone and thread.is_alive() and not app.stop_requested:
            if signal.SIGHUP in handled:
                # No SIGHUP came, though none is ignored: the terminal was not this process's controlling one (a
                # harness that hands it a pty for its descriptors alone). It closed all the same: the same stop.
                on_terminate(signal.SIGHUP, None)
            else:
                _carry_on_without_terminal(executor, prepared, thread)
        elif app.crash is not None and thread.is_alive():
            _carry_on_without_screen(app, executor, prepared, thread, no_color=no_color)
        elif app.crash is not None:
            report_crash(app.crash, app.crash_text or "", prepared.store.directory, going_on="The backfill had ended.")
    finally:
        if thread.is_alive():
            executor.request_stop("the dashboard closed")
        thread.join()
        app.stop_started_runs()
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    return thread.result(), list(app.started_runs)


def _carry_on_without_terminal(executor: Executor, prepared: Prepared, thread: ExecutorThread) -> None:
    """The terminal went away with SIGHUP ignored (nohup): the backfill goes on to its end, its progress lines
    written where the terminal was (nowhere, now), SIGINT and SIGTERM still stopping it."""
    _follow_with_lines(executor, prepared, thread, Paint(False))


def _carry_on_without_screen(
    app: BackfillApp, executor: Executor, prepared: Prepared, thread: ExecutorThread, *, no_color: bool
) -> None:
    assert app.crash is not None
    report_crash(
        app.crash,
        app.crash_text or "",
        prepared.store.directory,
        going_on="The backfill goes on with progress lines; Ctrl+C stops it.",
    )
    _follow_with_lines(executor, prepared, thread, Paint(colors_enabled(sys.stderr, no_color_flag=no_color)))


def _follow_with_lines(executor: Executor, prepared: Prepared, thread: ExecutorThread, paint: Paint) -> None:
    """Progress lines on stderr from where the screen left off, until the executor's thread ends; Ctrl+C and
    SIGTERM stop the run meanwhile, and so does the loss of whoever read the lines, unless SIGHUP is ignored."""
    terminals = terminal_descriptors()
    handlers = install_stop_handlers(executor)
    try:
        lines = ProgressLines(executor, prepared.spec, prepared.store, sys.stderr, paint)
        snapshot = executor.snapshot()
        lines.last_sequence = snapshot.events[-1].sequence if snapshot.events else 0
        lines.done = snapshot.finished
        lines.follow_while_read(thread, terminals, hangup_stops=signal.SIGHUP in handlers)
    finally:
        restore_handlers(handlers)
