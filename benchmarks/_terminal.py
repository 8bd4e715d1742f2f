"""A real pseudo-terminal for benchmarks: run the real ``backfill`` command in it and read what it draws.

The child gets a pty of a chosen size; a reader thread time-stamps every chunk it writes as it arrives, and a
parser thread feeds the chunks to a pyte screen, so "when did X appear on the screen" is measured from the
terminal's side, exactly as a person would see it (escape sequences parsed, not widgets asked): the time of the
chunk after which it showed. Not the time pyte finished parsing it: pyte, in Python, takes about 1 ms for each
kilobyte of escape sequences, where a person's terminal takes microseconds, so waiting for the parse charged a
large frame (the dashboard's first, 17 KB) some 20 ms more than a small one (until 2026-12-07).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import queue
import select
import signal
import struct
import subprocess
import sys
import termios
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pyte

sys.setswitchinterval(0.0002)  # the reader stamps a chunk as it arrives, not when the parser lets it run

KEYS = {"pagedown": b"\x1b[6~", "pageup": b"\x1b[5~", "end": b"\x1b[F", "home": b"\x1b[H", "ctrl+c": b"\x03",
        "down": b"\x1b[B", "enter": b"\r"}  # fmt: skip


class _Wait:
    """A predicate someone waits for, and the arrival time of the chunk after which it first held."""

    def __init__(self, predicate: Callable[[list[str]], bool]) -> None:
        self.predicate = predicate
        self.shown_at: float | None = None


class Terminal:
    def __init__(self, argv: list[str], *, cols: int = 120, rows: int = 40, cwd: Path, env: dict[str, str]) -> None:
        self.screen = pyte.Screen(cols, rows)
        self.stream = pyte.ByteStream(self.screen)
        self.lock = threading.Condition()
        self.changes = 0  # bumped on every chunk fed
        self.fed_at = 0.0  # when the last chunk fed arrived
        self.watchers: list[Callable[[float], None]] = []  # called after each chunk, with when it arrived
        self._waiting: list[_Wait] = []
        self._arrivals: queue.SimpleQueue[tuple[float, bytes] | None] = queue.SimpleQueue()
        master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        self.launched = time.time()
        self.process = subprocess.Popen(
            argv,
            stdin=slave,
            stdout=slave,
            stderr=slave,
            cwd=cwd,
            env={**env, "TERM": "xterm-256color", "COLUMNS": str(cols), "LINES": str(rows)},
            start_new_session=True,
        )
        os.close(slave)
        self.master = master
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        self.parser = threading.Thread(target=self._parse, daemon=True)
        self.parser.start()

    def _read(self) -> None:
        """Each chunk with the time it arrived, and nothing else: the parser may be busy meanwhile."""
        try:
            while True:
                try:
                    ready, _, _ = select.select([self.master], [], [], 0.5)
                    if not ready:
                        if self.process.poll() is not None:
                            return
                        continue
                    chunk = os.read(self.master, 65536)
                except OSError:
                    return
                if not chunk:
                    return
                self._arrivals.put((time.time(), chunk))
        finally:
            self._arrivals.put(None)

    def _parse(self) -> None:
        while (arrival := self._arrivals.get()) is not None:
            at, chunk = arrival
            with self.lock:
                self.stream.feed(chunk)
                self.changes += 1
                self.fed_at = at
                for watch in self.watchers:
                    watch(at)
                if self._waiting:
                    display = list(self.screen.display)
                    for wait in self._waiting:
                        if wait.shown_at is None and wait.predicate(display):
                            wait.shown_at = at
                self.lock.notify_all()

    def lines(self) -> list[str]:
        with self.lock:
            return list(self.screen.display)

    def wait_for(self, predicate: Callable[[list[str]], bool], timeout: float = 30.0) -> float:
        """The Unix time the chunk arrived after which ``predicate(screen lines)`` first held (the screen is
        tested after every chunk); if it holds already, when the last chunk arrived."""
        deadline = time.time() + timeout
        with self.lock:
            if predicate(list(self.screen.display)):
                return self.fed_at or time.time()
            wait = _Wait(predicate)
            self._waiting.append(wait)
            try:
                while wait.shown_at is None:
                    remaining = deadline - time.time()
                    if remaining <= 0:
                        raise TimeoutError("the screen never showed it:\n" + "\n".join(self.screen.display))
                    self.lock.wait(min(remaining, 0.05))
                return wait.shown_at
            finally:
                self._waiting.remove(wait)

    def press(self, key: str) -> float:
        """Send a key; returns when it was sent."""
        sent = time.time()
        os.write(self.master, KEYS.get(key, key.encode()))
        return sent

    def key_to(self, key: str, predicate: Callable[[list[str]], bool], timeout: float = 30.0) -> float:
        """Seconds from sending ``key`` to the arrival of the chunk after which ``predicate`` first held. What the
        key should bring must not be on the screen already: that would measure nothing (or less than nothing, the
        chunk that drew it having come before the key), so it is an error, not a figure."""
        if predicate(self.lines()):
            raise RuntimeError(f"what {key!r} should bring is already on the screen: nothing to measure")
        sent = self.press(key)
        return self.wait_for(predicate, timeout) - sent

    def rss_peak_mb(self) -> float:
        """Peak resident memory of the command's process (VmHWM), in MB."""
        with open(f"/proc/{self.process.pid}/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
        return 0.0

    def close(self) -> None:
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        with contextlib.suppress(OSError):
            os.close(self.master)
