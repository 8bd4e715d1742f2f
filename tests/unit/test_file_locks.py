"""Advisory file locks over real files and real processes: one holder at a time, released when the holder
closes or dies, probed read-only without taking them, and a path that cannot be a lock refused with a way on."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import time

import pytest

from engine.base.atomic import FILE_MODE
from engine.base.errors import StateUnreadable
from engine.store.locks import FileLock

HOLD = (
    "import fcntl, os, sys, time\nfd = os.open(sys.argv[1], os.O_RDWR)\nfcntl.flock(fd, fcntl.LOCK_EX)\n"
    "print('held', flush=True)\ntime.sleep(60)\n"
)


def test_one_holder_at_a_time_until_it_releases(tmp_path):
    """The first taker holds it; a second is refused without waiting; after the release the second takes it.
    The file is made with the store's mode."""
    first, second = FileLock(tmp_path / ".lock"), FileLock(tmp_path / ".lock")
    assert first.try_acquire() and not second.try_acquire()
    assert stat.S_IMODE(os.stat(tmp_path / ".lock").st_mode) == FILE_MODE & ~_umask()
    assert second.is_held_elsewhere()
    first.release()
    assert first.fd is None
    assert second.try_acquire() and not first.try_acquire()
    second.release()
    second.release()  # twice is nothing


def test_a_lock_is_released_when_its_holder_dies(tmp_path):
    """A process killed while it holds the lock holds it no more: the operating system let it go."""
    (tmp_path / ".lock").touch()
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(tmp_path / ".lock")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "held\n"
        lock = FileLock(tmp_path / ".lock")
        assert lock.is_held_elsewhere() and not lock.try_acquire()
        assert not lock.acquire(0.2)
    finally:
        holder.kill()
        holder.wait()
    assert lock.acquire(10)
    lock.release()


def test_acquire_waits_for_a_release(tmp_path):
    """acquire() takes the lock once its holder lets it go within the time given."""
    holder = FileLock(tmp_path / ".lock")
    assert holder.try_acquire()
    waiter = subprocess.Popen(
        [sys.executable, "-c", "import sys\nfrom engine.store.locks import FileLock\n"
         "print(FileLock(__import__('pathlib').Path(sys.argv[1])).acquire(30), flush=True)\n", str(tmp_path / ".lock")],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    time.sleep(0.3)  # deliberate: the waiter is waiting while the lock is held
    holder.release()
    assert waiter.communicate(timeout=30)[0] == "True\n"


def test_probing_takes_nothing_and_creates_nothing(tmp_path):
    """is_held_elsewhere: no file is nobody holding it (and none is created); a free lock stays free."""
    lock = FileLock(tmp_path / ".lock")
    assert not lock.is_held_elsewhere() and not (tmp_path / ".lock").exists()
    (tmp_path / ".lock").touch()
    assert not lock.is_held_elsewhere()
    other = FileLock(tmp_path / ".lock")
    assert other.try_acquire()
    other.release()


def test_a_path_that_cannot_be_a_lock_is_refused_with_a_way_on(tmp_path):
    """A directory where the lock file should be: StateUnreadable saying what to do; probing it is not an
    error (nobody holds it through us)."""
    (tmp_path / ".lock").mkdir()
    lock = FileLock(tmp_path / ".lock")
    with pytest.raises(StateUnreadable, match="cannot be used as a lock file .*: it was not made by backfill; remove"):
        lock.try_acquire()
    assert not lock.is_held_elsewhere()


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


def test_acquire_in_this_process_waits_for_the_holder_to_let_go(tmp_path):
    """Two locks of one file in this process are two holders: acquire() waits for the other's release (a timer
    here) and takes the lock, well within its time."""
    import threading

    holder, waiter = FileLock(tmp_path / ".lock"), FileLock(tmp_path / ".lock")
    assert holder.try_acquire()
    threading.Timer(0.3, holder.release).start()
    assert waiter.acquire(30)
    waiter.release()
