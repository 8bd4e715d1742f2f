"""Textual's Linux driver, drawing on stdout and made to outlive its terminal.

When the terminal goes away while SIGHUP is ignored (``nohup``, ``trap '' HUP``), every write to it fails with
EIO. Textual's writer thread dies of the first one; its queue then fills, and the next write blocks the app's
event loop for ever — no timer, no signal handler's callback ever runs again. Here writes to a terminal that is
gone are dropped instead, input stops being awaited, and the app hears of the loss once, on its own loop.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import IO, Any

from textual.drivers.linux_driver import LinuxDriver


class _TerminalWrites:
    """The terminal as Textual's writer thread sees it: a failed write or flush reports the loss and is dropped."""

    def __init__(self, file: IO[str], lost: Callable[[], None]) -> None:
        self._file = file
        self._lost = lost

    def write(self, text: str) -> int:
        try:
            return self._file.write(text)
        except (OSError, ValueError):  # EIO from a hung-up terminal; ValueError from a file closed under us
            self._lost()
            return len(text)

    def flush(self) -> None:
        try:
            self._file.flush()
        except (OSError, ValueError):
            self._lost()

    def fileno(self) -> int:
        return self._file.fileno()

    def isatty(self) -> bool:
        return True


class TerminalDriver(LinuxDriver):
    """A :class:`LinuxDriver` whose terminal may go away: the app's ``terminal_lost()`` is called (on its loop)
    once, the first time the terminal cannot be written or read."""

    def __init__(self, app: Any, **options: Any) -> None:
        super().__init__(app, **options)
        # On stdout, the terminal the dashboard was chosen for (stdin and stdout on a terminal) and whose size it
        # takes: Textual's own choice, stderr, drew the whole screen into the file of `backfill … 2>errors.log`.
        self._file = _TerminalWrites(sys.__stdout__, self._terminal_lost)
        self._lost_once = threading.Lock()
        self.lost = False

    def _terminal_lost(self) -> None:
        with self._lost_once:
            if self.lost:
                return
            self.lost = True
        self.exit_event.set()  # the input thread stops waiting on a terminal that is gone
        loop = self._app._loop  # Textual keeps its running loop here (a private name: textual is pinned)
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._app.terminal_lost)

    def run_input_thread(self) -> None:
        try:
            super().run_input_thread()
        except OSError:  # EIO reading a hung-up terminal
            self._terminal_lost()
