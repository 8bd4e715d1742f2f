"""A blocking call that a stop signal can end.

DuckDB looks for pending signals while it runs a query and turns the handler's ``KeyboardInterrupt`` into an error
of the query: the pre-flight, which records a query that failed as a check it could not decide, swallowed the
Ctrl+C (or the SIGTERM of a supervisor) and went on to its next sample, for as long as each took. Here the call runs
on a thread of its own, where DuckDB sees no signal; the main thread waits on an event, which a signal interrupts,
asks the call to stop and raises the signal's exception once it has.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def interruptible(call: Callable[[], T], interrupt: Callable[[], object]) -> T:
    """``call()``, ended by ``interrupt()`` when a signal's handler raises (``KeyboardInterrupt``) while it runs;
    that exception is raised once the call has returned. Off the main thread, which signals never reach, a plain
    call. (``Thread.join`` is not waited on: interrupted, Python 3.11 takes the thread for finished.)"""
    if threading.current_thread() is not threading.main_thread():
        return call()
    done = threading.Event()
    outcome: list[tuple[bool, object]] = []

    def run() -> None:
        try:
            outcome.append((True, call()))
        except BaseException as error:  # carried to the caller's thread
            outcome.append((False, error))
        finally:
            done.set()

    # Started with the stop signals held back, so that one arriving while the thread starts is raised below, where
    # the call is interrupted and waited for; the thread keeps them blocked (it never takes a signal itself).
    held = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        threading.Thread(target=run, name="interruptible", daemon=True).start()
    except BaseException:  # no thread (none could be made): nothing runs to wait for
        signal.pthread_sigmask(signal.SIG_SETMASK, held)
        raise
    try:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)  # a signal held back meanwhile is raised here
        done.wait()
    except BaseException:
        signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)  # pressed again: it was asked to stop already
        try:
            interrupt()
            done.wait()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, held)
        raise
    returned, value = outcome[0]
    if not returned:
        raise value  # type: ignore[misc]
    return value  # type: ignore[return-value]
