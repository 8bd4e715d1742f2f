"""Taking a backfill over: one executor at a time, and never overlapping a dead executor's children.

1. ``.lock`` is taken without waiting; if another executor holds it, we refuse.
2. ``.children.lock`` is held by every child a previous executor started. If it
   cannot be taken, some of them are still alive: they are found by the PID and
   process start time recorded in their attempt (so a reused PID is never
   signalled) and by ``BACKFILL_ID`` in their environment (children started just
   before a crash, before their attempt was recorded), stopped (SIGTERM to their
   process group, SIGKILL after a grace period), and waited for.
3. Attempts still marked running belong to the dead executor: they become
   ``cancelled`` with "previous executor interrupted".
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass

import psutil

from engine.base.atomic import ensure_directory, remove_stale_temporaries
from engine.base.errors import Refused
from engine.store.locks import FileLock
from engine.store.manifest import now_text
from engine.store.records import PartitionRecord
from engine.store.state_store import Generation, StateStore
from engine.store.status import Status, StatusBoard

INTERRUPTED = "previous executor interrupted"


@dataclass
class Takeover:
    lock: FileLock
    children_lock: FileLock
    generation: Generation
    stopped_orphans: list[int]


_BOOT_TIME: float | None = None


def process_started(pid: int) -> float | None:
    """The start time of a live process, as psutil computes it (boot time + start ticks), or None.

    On Linux the boot time is read once and ``/proc/<pid>/stat`` once per call: this runs for
    every child the executor starts.
    """
    global _BOOT_TIME
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            fields = handle.read().rsplit(b")", 1)[1].split()
        if _BOOT_TIME is None:
            _BOOT_TIME = psutil.boot_time()
        return _BOOT_TIME + int(fields[19]) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        pass
    try:
        return psutil.Process(pid).create_time()
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return None


def _same_process(pid: int | None, started: float | None) -> bool:
    if pid is None or started is None:
        return False
    actual = process_started(pid)
    return actual is not None and abs(actual - started) < 0.01


def find_orphans(store: StateStore, running: list[PartitionRecord]) -> set[int]:
    """PIDs of live children of an earlier executor of this backfill."""
    found = set()
    for record in running:
        for attempt in record.attempts:
            if attempt.status == "running" and _same_process(attempt.pid, attempt.pid_started):
                found.add(attempt.pid)
    me = os.getpid()
    for process in psutil.process_iter(["pid"]):
        if process.pid == me:
            continue
        try:
            if process.environ().get("BACKFILL_ID") == store.id:
                found.add(process.pid)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess, OSError):
            continue
    return found


def _signal(pid: int, signum: int) -> None:
    try:
        if os.getpgid(pid) == pid:
            os.killpg(pid, signum)
        else:
            os.kill(pid, signum)
    except (ProcessLookupError, PermissionError):
        pass


def alive(pid: int) -> bool:
    """Running (or stopped), not a zombie: an exited child nobody reaped yet is dead for our purposes."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False


def stop_orphans(pids: set[int], grace: float) -> None:
    """SIGTERM to each orphan's group, SIGKILL to whatever still lives after ``grace``."""
    for pid in pids:
        _signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(alive(pid) for pid in pids):
        time.sleep(0.05)
    for pid in pids:
        if alive(pid):
            _signal(pid, signal.SIGKILL)


def take_over(
    store: StateStore,
    board: StatusBoard,
    running: list[PartitionRecord],
    *,
    grace: float,
    reload: Callable[[], tuple[StatusBoard, list[PartitionRecord]]] | None = None,
) -> Takeover:
    """Become the one executor of a backfill. ``reload`` reads the records again once the lock is ours: what
    was read before may predate the last writes of an executor that died in between, and writing a stale
    "running" record back as cancelled would erase a success."""
    lock = FileLock(store.lock_path)
    if not lock.try_acquire():
        holder = store.read_generation()
        who = f" by executor PID {holder.pid} on {holder.host} since {holder.started_at}" if holder else ""
        raise Refused(f"backfill {store.id} is already running{who}: wait for it, or stop it with Ctrl+C there")
    if reload is not None:
        try:
            fresh, running = reload()
        except BaseException:
            lock.release()
            raise
        board.copy_from(fresh)
    children_lock = FileLock(store.children_lock_path)
    # Orphans are looked for on every takeover, from the records (PID + start time) and from the
    # environment of live processes, whatever the lock files say: a deleted or unreadable
    # .children.lock must never let new attempts run beside live old ones.
    orphans = find_orphans(store, running)
    stop_orphans(orphans, grace)
    stopped = sorted(orphans)
    if not children_lock.try_acquire() and not children_lock.acquire(timeout=grace + 5):
        lock.release()
        raise Refused(
            f"children of a previous executor of backfill {store.id} are still alive and could not be found "
            "or stopped: find processes with BACKFILL_ID=" + store.id + " in their environment and stop them"
        )
    # A writer killed between creating its temporary file and renaming it leaves the file behind.
    for directory in (store.directory, store.partitions, store.directory / "records"):
        remove_stale_temporaries(directory)
    # Logs are evidence, not state: a deleted children/ is made again (old logs are gone) rather than
    # failing every new attempt with a misleading "cannot start".
    ensure_directory(store.children)
    finished_at = now_text()
    for record in running:
        for attempt in record.attempts:
            if attempt.status == "running":
                attempt.status, attempt.finished_at, attempt.error = "cancelled", finished_at, INTERRUPTED
        record.status = "cancelled"
        store.write_record(record, durable=True)
        board.set(record.index, Status.CANCELLED)
    previous = store.read_generation()
    me = os.getpid()
    generation = store.write_generation(
        (previous.number if previous else 0) + 1, me, process_started(me) or 0.0, now_text()
    )
    return Takeover(lock, children_lock, generation, stopped)
