"""Room kept aside in the state store so that a full disk never leaves records untrue.

An executor allocates ``.reserve`` (real blocks, not a sparse file) before it starts anything. When the disk
fills, the record writer defers what it cannot write; once every child is stopped and waited for, the reserve is
given back and the deferred records — each partition's last word, with the PID that really ran — are written
into the room it leaves. Children are dead by then, so none of their logs can take that room first.
"""

from __future__ import annotations

import contextlib
import errno
import os
from pathlib import Path

RESERVE = ".reserve"
BASE_BYTES = 64 * 1024  # the lease, the summary, the directory's own growth
PER_CHILD_BYTES = 8 * 1024  # a record's temporary copy and the page it lands on, per running attempt
MOST_BYTES = 4 * 1024 * 1024
FULL = (errno.ENOSPC, errno.EDQUOT)


def reserve_size(max_parallel: int) -> int:
    """Bytes to keep aside for an executor running ``max_parallel`` children at once."""
    return min(MOST_BYTES, BASE_BYTES + PER_CHILD_BYTES * max(1, max_parallel))


class SpaceReserve:
    def __init__(self, directory: Path, size: int) -> None:
        self.path = directory / RESERVE
        self.size = size
        self.held = False

    def hold(self) -> None:
        """Allocate the reserve (again, after a crash left one behind); OSError when there is no room for it."""
        descriptor = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            try:
                os.posix_fallocate(descriptor, 0, self.size)
            except OSError as error:
                if error.errno not in (errno.EOPNOTSUPP, errno.EINVAL):  # no fallocate here: write the bytes
                    raise
                os.pwrite(descriptor, b"\0" * self.size, 0)
            os.fsync(descriptor)
        except OSError:
            os.close(descriptor)
            with contextlib.suppress(OSError):
                os.unlink(self.path)
            raise
        os.close(descriptor)
        self.held = True

    def grow(self, size: int) -> None:
        """Make the reserve held ``size`` bytes (more children at once); OSError when there is no room, and the
        reserve already held stays as it was."""
        descriptor = os.open(self.path, os.O_WRONLY | os.O_CLOEXEC)
        try:
            try:
                os.posix_fallocate(descriptor, 0, size)
            except OSError as error:
                if error.errno not in (errno.EOPNOTSUPP, errno.EINVAL):
                    raise
                os.pwrite(descriptor, b"\0" * (size - self.size), self.size)
            os.fsync(descriptor)
        finally:
            os.close(descriptor)
        self.size = size

    def release(self) -> bool:
        """Give the room back; whether there was any to give."""
        if not self.held:
            return False
        self.held = False
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            return False
        return True
