"""Ctrl+C and SIGTERM ask the executor to stop (and SIGHUP: a closed terminal is a stop, not a kill)."""

from __future__ import annotations

import os
import signal
import threading
import time

from engine.base.errors import EXIT_CANCELLED
from engine.execute.executor import Executor
from engine.execute.executor_thread import ExecutorThread

SIGNAL_REASONS = {
    signal.SIGINT: "interrupted (Ctrl+C)",
    signal.SIGTERM: "terminated (SIGTERM)",
    signal.SIGHUP: "the terminal closed (SIGHUP)",
}
# What the children's process groups receive at once for each; SIGKILL follows after the grace period.
FORWARDED = {signal.SIGINT: signal.SIGINT, signal.SIGTERM: signal.SIGTERM, signal.SIGHUP: signal.SIGTERM}


def stop_for(executor: Executor, signum: int, reason: str, forwarded: int) -> None:
    """Ctrl+C and SIGTERM are a person's (or a supervisor's) stop: sent again, they escalate — SIGTERM to every
    child now, then SIGKILL now. A closed terminal (SIGHUP) stops once: nobody is there to insist."""
    if signum == signal.SIGHUP:
        executor.request_stop(reason, forwarded)
    else:
        executor.operator_stop(reason, forwarded)


def install_stop_handlers(executor: Executor) -> dict[int, object]:
    """Route the stop signals to the executor (``stop_for``); returns the previous handlers."""
    previous = {}
    for signum, reason in SIGNAL_REASONS.items():
        if signum == signal.SIGHUP and signal.getsignal(signum) == signal.SIG_IGN:
            continue  # started under nohup: a closed terminal is meant not to stop it

        def handler(signum, _frame, reason=reason, forwarded=FORWARDED[signum]):
            stop_for(executor, signum, reason, forwarded)

        previous[signum] = signal.signal(signum, handler)
    return previous


def restore_handlers(previous: dict[int, object]) -> None:
    for signum, handler in previous.items():
        signal.signal(signum, handler)  # type: ignore[arg-type]


HANGUP_GRACE = 5.0  # seconds a screen gets to return by itself once the work has stopped


def leave_once_stopped(threads: list[ExecutorThread]) -> None:
    """After a hangup: once every executor has stopped and waited for its children (records written), leave even if
    the screen never returns (its writer can die on the lost terminal and block the app's shutdown for ever)."""

    def leave() -> None:
        for thread in threads:
            thread.join()
        time.sleep(HANGUP_GRACE)
        os._exit(EXIT_CANCELLED)

    threading.Thread(target=leave, name="hangup", daemon=True).start()
