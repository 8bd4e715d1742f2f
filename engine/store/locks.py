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
from engine.base.errors import StateUnreadable


class FileLock:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd: int | None = None

    def _open(self) -> int:
        if self.fd is None:
            try:
                self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, FILE_MODE)
            except OSError as error:
                raise StateUnreadable(
                    f"{self.path} cannot be used as a lock file ({error.strerror}): it was not made by backfill; "
                    "remove it if no executor runs this backfill"
                ) from None
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
        except OSError:  # not a lock file we can probe (a directory, no permission): nobody holds it through us
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)  # an executor's exclusive lock refuses it
        except BlockingIOError:
            return True
        finally:
            os.close(fd)
        return False
