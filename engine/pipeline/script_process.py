"""A Python asset's script as a process that never outlives its asset: what it prints read line by line, what it
leaves running in its process group stopped when it exits, and it killed if the thread running the asset ends.

The script runs in a session of its own, so that stopping one asset (its timeout) signals its group and never the
run's. That puts it out of reach of the executor's signals to the partition's child: the asset must stop it, and
what it leaves (``subprocess.Popen(["loader"])`` and exit), itself. What it left is found before its zombie is
reaped, while the zombie holds the group's number (``engine/base/processes.py``).
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import threading
import time
from collections.abc import Iterator

from engine.base.parent_death import start_bound_to_thread
from engine.base.processes import TrackedFamily, exited_unreaped, leftovers_of, signal_own_group

POLL_SECONDS = 0.05  # without a pidfd (Linux before 5.3), how often the script's exit is looked for
KILLED_WAIT = 10.0  # after SIGKILL, how long the leftovers' end is waited for (a process in an uninterruptible sleep)


class ScriptProcess:
    """One run of a script: ``lines()`` until it has ended, then ``finish()``; ``signal`` and ``kill_by`` from any
    thread."""

    def __init__(self, argv: list[str], cwd: str, env: dict[str, str], *, leftover_grace: float) -> None:
        self.process = start_bound_to_thread(argv, cwd, env)
        self.pid = self.process.pid
        try:
            self._pidfd: int | None = os.pidfd_open(self.pid)
        except (AttributeError, OSError):
            self._pidfd = None
        self._leftover_grace = leftover_grace
        self._lock = threading.RLock()  # a signal handler's stop may come on a thread that holds it
        self._kill_at: float | None = None  # monotonic: when whatever is left gets SIGKILL (a stop sets it)
        self._leftovers: TrackedFamily | None = None
        # kill_by() wakes a wait that began before the deadline was set; None once finish() closed them
        self._wake_read, self._wake = os.pipe()
        os.set_blocking(self._wake_read, False)

    def signal(self, signum: int) -> None:
        """The script's process group, never after the script is reaped (its group's number may be reused); what
        it left once it has exited."""
        with self._lock:
            signal_own_group(self._pidfd, self.pid, signum, reaped=self.process.returncode is not None)
            if self._leftovers is not None:
                self._leftovers.signal(signum)

    def kill_by(self, deadline: float) -> None:
        """SIGKILL to the script and what it left at ``deadline`` (monotonic) if still running; the earliest wins."""
        with self._lock:
            if self._kill_at is None or deadline < self._kill_at:
                self._kill_at = deadline
                if self._wake is not None:
                    os.write(self._wake, b".")

    def lines(self) -> Iterator[str]:
        """What the script prints, a line at a time, until it has exited and what it left has been stopped: a
        leftover holding the script's output open never keeps the asset waiting."""
        assert self.process.stdout is not None
        out = self.process.stdout.fileno()
        os.set_blocking(out, False)
        pending = b""
        with selectors.DefaultSelector() as selector:
            selector.register(out, selectors.EVENT_READ)
            open_ = True
            while open_:
                self._kill_if_due()
                self._wait(self._wait_seconds(), selector)
                chunk, open_ = _read_available(out)
                pending += chunk
                *complete, pending = pending.split(b"\n")
                yield from (line.decode(errors="replace") for line in complete)
                if open_ and exited_unreaped(self.pid):
                    break  # exited, its output still held open: by what it left, stopped below
        self._stop_leftovers()
        chunk, _ = _read_available(out)  # what was written before the last of them ended
        pending += chunk
        *complete, pending = pending.split(b"\n")
        yield from (line.decode(errors="replace") for line in complete)
        if pending:
            yield pending.decode(errors="replace")

    def finish(self) -> tuple[int, list[int]]:
        """The script's exit status (negative: the signal that killed it), and the PIDs of what it left running that
        was stopped. Call once ``lines()`` is exhausted."""
        self._stop_leftovers()  # a caller that stopped reading early
        code = self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()
        leftovers: TrackedFamily = self._leftovers  # type: ignore[assignment]  # found by _stop_leftovers() above
        with self._lock:
            # The family's refresh of the group finds the script's own zombie too: not something it left.
            stopped = [pid for pid in leftovers.pids if pid != self.pid]
            leftovers.close()
            for fd in (self._pidfd, self._wake_read, self._wake):
                if fd is not None:
                    os.close(fd)
            self._pidfd = self._wake_read = self._wake = None
        return code, stopped

    def _stop_leftovers(self) -> None:
        """Once the script has exited (waited for here, unreaped): what it left in its group gets SIGTERM, SIGKILL
        after the grace (or at the stop's deadline), and is waited for."""
        if self._leftovers is not None:
            return
        while not exited_unreaped(self.pid):
            self._kill_if_due()
            self._wait(self._wait_seconds())
        with self._lock:
            self._leftovers = leftovers_of(self.pid, self._pidfd)
        if not self._leftovers.alive():
            return
        self.signal(signal.SIGTERM)
        self.kill_by(time.monotonic() + self._leftover_grace)
        while self._leftovers.alive() and not self._kill_if_due():
            time.sleep(POLL_SECONDS)
        waited_until = time.monotonic() + KILLED_WAIT
        while self._leftovers.alive() and time.monotonic() < waited_until:
            time.sleep(POLL_SECONDS / 5)

    def _kill_if_due(self) -> bool:
        """SIGKILL to what is left once the stop's deadline has passed; whether it has."""
        with self._lock:
            due = self._kill_at is not None and time.monotonic() >= self._kill_at
        if due:
            self.signal(signal.SIGKILL)
        return due

    def _wait(self, seconds: float | None, selector: selectors.BaseSelector | None = None) -> None:
        """Until the script exits (its pidfd), the selector's descriptors are readable, a deadline is set, or
        ``seconds`` pass."""
        with selectors.DefaultSelector() if selector is None else contextlib.nullcontext(selector) as waiting:
            waiting.register(self._wake_read, selectors.EVENT_READ)
            if self._pidfd is not None:
                waiting.register(self._pidfd, selectors.EVENT_READ)
            try:
                waiting.select(seconds)
            finally:
                waiting.unregister(self._wake_read)
                if self._pidfd is not None:
                    waiting.unregister(self._pidfd)
        with contextlib.suppress(BlockingIOError):
            os.read(self._wake_read, 4096)

    def _wait_seconds(self) -> float | None:
        """How long a wait may last: until the kill deadline, and a poll's period without a pidfd."""
        with self._lock:
            limit = None if self._kill_at is None else max(0.0, self._kill_at - time.monotonic())
        if self._pidfd is None:
            limit = POLL_SECONDS if limit is None else min(limit, POLL_SECONDS)
        return limit


def _read_available(fd: int) -> tuple[bytes, bool]:
    """What can be read without waiting, and whether the pipe is still open."""
    data = b""
    while True:
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            return data, True
        if not chunk:
            return data, False
        data += chunk
