"""A real pseudo-terminal for benchmarks: run the real ``backfill`` command in it and read what it draws.

The child gets a pty of a chosen size; a reader thread feeds every byte it writes to a pyte screen, and
each chunk is time-stamped when it arrives, so "when did X appear on the screen" is measured from the
terminal's side, exactly as a person would see it (escape sequences parsed, not widgets asked).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import select
import signal
import struct
import subprocess
import termios
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pyte

KEYS = {"pagedown": b"\x1b[6~", "pageup": b"\x1b[5~", "end": b"\x1b[F", "home": b"\x1b[H", "ctrl+c": b"\x03",
        "down": b"\x1b[B", "enter": b"\r"}  # fmt: skip


class Terminal:
    def __init__(self, argv: list[str], *, cols: int = 120, rows: int = 40, cwd: Path, env: dict[str, str]) -> None:
        self.screen = pyte.Screen(cols, rows)
        self.stream = pyte.ByteStream(self.screen)
        self.lock = threading.Condition()
        self.changes = 0  # bumped on every chunk fed
        self.watchers: list[Callable[[float], None]] = []
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

    def _read(self) -> None:
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
            at = time.time()
            with self.lock:
                self.stream.feed(chunk)
                self.changes += 1
                for watch in self.watchers:
                    watch(at)
                self.lock.notify_all()

    def lines(self) -> list[str]:
        with self.lock:
            return list(self.screen.display)

    def wait_for(self, predicate: Callable[[list[str]], bool], timeout: float = 30.0) -> float:
        """The Unix time of the chunk after which ``predicate(screen lines)`` first held."""
        deadline = time.time() + timeout
        with self.lock:
            while True:
                if predicate(list(self.screen.display)):
                    return time.time()
                remaining = deadline - time.time()
                if remaining <= 0:
                    raise TimeoutError("the screen never showed it:\n" + "\n".join(self.screen.display))
                self.lock.wait(min(remaining, 0.05))

    def press(self, key: str) -> float:
        """Send a key; returns when it was sent."""
        sent = time.time()
        os.write(self.master, KEYS.get(key, key.encode()))
        return sent

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
