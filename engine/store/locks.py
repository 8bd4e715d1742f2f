"""Advisory file locks (flock) that the operating system releases when the holder dies.

``.lock`` is held exclusively by the one executor of a backfill. ``.children.lock``
is held by the executor and inherited by every child it starts, so a later
executor can tell whether children of an earlier one are still alive: it cannot
take the lock until the last of them has exited.
"""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path

from engine.base.atomic import FILE_MODE


class FileLock:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd: int | None = None

    def _open(self) -> int:
        if self.fd is None:
            self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, FILE_MODE)
        return self.fd

    def try_acquire(self) -> bool:
        """Take the lock exclusively without waiting; False if someone holds it."""
        fd = self._open()
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True

    def acquire(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for the lock."""
        deadline = time.monotonic() + timeout
        while not self.try_acquire():
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)
        return True

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)  # closing the last descriptor of our open file releases the lock
            self.fd = None

    def is_held_elsewhere(self) -> bool:
        """Whether another open file description holds the lock (we do not keep it). Read-only: it works on a
        read-only mount and for another user, and creates nothing."""
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)  # an executor's exclusive lock refuses it
        except BlockingIOError:
            return True
        finally:
            os.close(fd)
        return False
