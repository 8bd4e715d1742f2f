"""Ctrl+C and SIGTERM ask the executor to stop (and SIGHUP: a closed terminal is a stop, not a kill)."""

from __future__ import annotations

import signal

from engine.execute.executor import Executor

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
