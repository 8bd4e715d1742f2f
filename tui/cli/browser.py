"""`backfill list` and `backfill show ID` on a terminal: the browser app, then summaries of any reruns."""

from __future__ import annotations

import signal
import sys
from pathlib import Path

from engine.base.errors import EXIT_FAILED, EXIT_OK
from engine.store.locate import locate_backfill
from tui.app.backfill_app import BackfillApp
from tui.cli.crash import report_crash
from tui.cli.stop_signals import FORWARDED, SIGNAL_REASONS, leave_once_stopped, stop_for
from tui.cli.summary import exit_code_of, resume_hint, summary_lines
from tui.cli.terminal import Paint, colors_enabled, detach_from_terminal


def browse(
    *,
    root: Path | None,
    backfill_id: str | None,
    state_dir: str | None,
    no_color: bool = False,
    read_only: bool = False,
) -> int:
    store = None
    if backfill_id is not None:
        store, _ = locate_backfill(backfill_id, state_dir, Path.cwd())
        store.read_manifest()  # a broken backfill is an error before the screen opens
    app = BackfillApp(root=root, open_store=store, closes_when_done=False, no_color=no_color, read_only=read_only)

    def on_stop_signal(signum, _frame) -> None:
        # SIGTERM, or SIGHUP (the terminal closed), ends the process whatever the screen: the reruns started from
        # it are stopped as a backfill's own run is, and joined below. SIGHUP's default action killed the process
        # and left their children running.
        for run in app.started_runs:
            stop_for(run.executor, signum, SIGNAL_REASONS[signum], FORWARDED[signum])
        app.exit(None)
        if signum == signal.SIGHUP:
            detach_from_terminal()
            leave_once_stopped([run.thread for run in app.started_runs])

    handled = [signal.SIGTERM]
    if signal.getsignal(signal.SIGHUP) != signal.SIG_IGN:  # under nohup a closed terminal is meant not to stop it
        handled.append(signal.SIGHUP)
    previous = {signum: signal.signal(signum, on_stop_signal) for signum in handled}
    try:
        app.run()
    finally:
        app.stop_started_runs()
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    code = EXIT_OK
    if app.crash is not None:
        running = " Reruns started from it were stopped; --continue resumes them." if app.started_runs else ""
        report_crash(app.crash, app.crash_text or "", store.directory if store else root, going_on=running.strip())
    paint = Paint(colors_enabled(sys.stdout, no_color_flag=no_color))
    for run in app.started_runs:
        if run.outcome is None:  # the executor thread died: its records say what it did
            continue
        lines = summary_lines(
            store=run.prepared.store,
            spec=run.prepared.spec,
            board=run.prepared.board,
            outcome=run.outcome,
            resume=resume_hint(run.prepared),
            paint=paint,
        )
        print("\n".join(lines))
        code = exit_code_of(run.outcome)
    return EXIT_FAILED if app.crash is not None and code == EXIT_OK else code
