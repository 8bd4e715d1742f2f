"""A blocking call that a stop signal ends.

DuckDB runs a query without returning to Python, so a signal's Python handler waits for the query's end. Under
Python's default SIGINT handler DuckDB does stop the query, but as an error of the query ("Query interrupted"),
which the pre-flight recorded as a check it could not decide: it swallowed the Ctrl+C and went on to its next
sample; under the command's own SIGTERM handler the query ran to its end. Here a thread reads Python's wakeup
descriptor, which the interpreter writes the moment a signal arrives, and asks the call to stop (``interrupt``);
once the call has ended the signal goes to the handler that was installed (``KeyboardInterrupt``: exit 130).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def interruptible(call: Callable[[], T], interrupt: Callable[[], object]) -> T:
    """``call()``; a stop signal (SIGINT, SIGTERM, SIGHUP; not one ignored) arriving meanwhile calls
    ``interrupt()`` from another thread, and goes to the handler that was installed once the call has ended,
    whatever it returned or raised. Off the main thread, which signals never reach, a plain call."""
    if threading.current_thread() is not threading.main_thread():
        return call()
    arrived: list[tuple[int, object]] = []

    def note(signum: int, frame: object) -> None:  # never raises: nothing half-done is left by it
        arrived.append((signum, frame))

    reader, writer = os.pipe()
    os.set_blocking(writer, False)
    installed: dict[int, object] = {}
    wakeup: int | None = None
    watcher = threading.Thread(target=_interrupt_on_wakeup, args=(reader, interrupt), name="stop-watch", daemon=True)
    failure: BaseException | None = None
    try:
        watcher.start()
        for signum in STOP_SIGNALS:
            if signal.getsignal(signum) != signal.SIG_IGN:
                # not Python's default handler: DuckDB then installs no SIGINT handler of its own, and Python's
                # writes the wakeup descriptor
                installed[signum] = signal.signal(signum, note)
        wakeup = signal.set_wakeup_fd(writer, warn_on_full_buffer=False)
        value = call()
    except BaseException as error:  # handed on below, after the signal if one came
        failure = error
    finally:
        if wakeup is not None:
            signal.set_wakeup_fd(wakeup)
        os.close(writer)  # the watcher reads to the end of the pipe and returns
        if watcher.ident is not None:  # started: a thread that could not start leaves its own error to be raised
            watcher.join()
        _checkpoint()  # a handler the interpreter still owed runs here, under ``note``
        for signum, handler in installed.items():
            signal.signal(signum, handler)
        os.close(reader)
    if arrived:
        signum, frame = arrived[0]
        handler = installed[signum]
        if callable(handler):
            handler(
                signum, frame
            )  # raises (KeyboardInterrupt); one that only notes the signal lets the call's end go on
        elif handler == signal.SIG_DFL:
            signal.raise_signal(signum)
    if failure is not None:
        raise failure
    return value


def _interrupt_on_wakeup(reader: int, interrupt: Callable[[], object]) -> None:
    """Each signal's byte on Python's wakeup descriptor: ``interrupt()``; the end of the pipe: return."""
    with contextlib.suppress(OSError):
        while os.read(reader, 64):
            interrupt()


def _checkpoint() -> None:
    """A call: the interpreter runs the Python handlers of signals that arrived before it."""
