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

import contextlib
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from engine.base.atomic import ensure_directory, remove_stale_temporaries
from engine.base.errors import Refused, StateUnreadable, StateWriteFailed
from engine.base.processes import process_started, stop_verified
from engine.base.settings import DEFAULT_LEASE_SECONDS
from engine.store.lease import Lease, read_lease, write_lease
from engine.store.live_work import Registration, check_no_copy_running
from engine.store.locks import FileLock
from engine.store.manifest import now_text
from engine.store.ownership import find_orphans, live_owner_here
from engine.store.records import PartitionRecord, RecordStatus
from engine.store.state_store import Generation, StateStore
from engine.store.status import Status, StatusBoard

INTERRUPTED = "previous executor interrupted"


@dataclass
class Takeover:
    lock: FileLock
    children_lock: FileLock
    generation: Generation
    stopped_orphans: list[int]
    notes: list[str] = field(default_factory=list)  # what the operator should know of the takeover (one line each)
    live: Registration | None = None  # our entry in the live-work registry, once the invocation starts
    store: StateStore | None = None  # whose lease the takeover wrote

    def inherited_fds(self) -> tuple[int, ...]:
        """What every child holds while it lives: ``.children.lock`` (a later executor waits for it) and the
        live-work entry (work is running while a child of it runs, even after a crash of its executor)."""
        held = (self.children_lock.fd, self.live.fd if self.live is not None else None)
        return tuple(fd for fd in held if fd is not None)

    def release(self) -> None:
        """Leave the registry, give back a lease that still names this process, then let the locks go. A takeover
        whose backfill never ran (refused, not approved) would otherwise leave its lease naming a process that may
        live on (a browser that started a rerun): requests would be sent to it, and a takeover refused, until it
        expired. A run's own end has given its lease back already."""
        try:
            if self.live is not None:
                self.live.release()
            if self.store is not None:
                with contextlib.suppress(StateUnreadable):  # damaged since: it names nobody to give it back for
                    lease = read_lease(self.store.directory)
                    if lease is not None and lease.pid == os.getpid() and lease.host == socket.gethostname():
                        _give_back(self.store, lease)
        finally:
            self.children_lock.release()
            self.lock.release()


def check_not_owned_elsewhere(store: StateStore) -> None:
    """Our lock only excludes executors on this host: one on another host sharing the state directory owns
    the backfill while its lease runs, and for its grace for other hosts after (it may only be slow)."""
    lease = read_lease(store.directory)
    if lease is None or lease.host is None or lease.host == socket.gethostname():
        return
    until = lease.held_elsewhere_until()
    if time.time() < until:
        when = datetime.fromtimestamp(until, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
        raise Refused(
            f"backfill {store.id} is owned by executor PID {lease.pid} on {lease.host} (its lease runs, with "
            f"another host's grace, until {when}): wait for it, or cancel it from here (backfill cancel)"
        )


def check_no_live_owner_here(store: StateStore) -> None:
    """A takeover never runs the backfill beside its live owner, whose lock file was removed or replaced."""
    owner = live_owner_here(store)
    if owner is not None:
        raise Refused(
            f"backfill {store.id} is already running by executor PID {owner[0]} (its lock file "
            f"{store.lock_path.name} was removed or replaced): wait for it, or stop it with Ctrl+C there"
        )


def take_over(
    store: StateStore,
    board: StatusBoard,
    running: list[PartitionRecord],
    *,
    grace: float,
    lease_seconds: float = DEFAULT_LEASE_SECONDS,
    reload: Callable[[], tuple[StatusBoard, list[PartitionRecord]]] | None = None,
    stop_remote: Callable[[list[PartitionRecord], Generation | None], list[str]] | None = None,
    new: bool = False,
) -> Takeover:
    """Become the one executor of a backfill. ``reload`` reads the records again once the lock is ours: what
    was read before may predate the last writes of an executor that died in between, and writing a stale
    "running" record back as cancelled would erase a success. ``new``: the store was created by this process a
    moment ago (``create_backfill``), so no executor ever ran it and no child of one can carry its ID: the look
    through every process's environment is left out (0.2 ms a process, before the first child and the first
    frame), and a stranger whose environment happens to name the ID is never signalled."""
    lock = FileLock(store.lock_path)
    if not lock.try_acquire():
        holder = store.read_generation()
        who = f" by executor PID {holder.pid} on {holder.host} since {holder.started_at}" if holder else ""
        raise Refused(f"backfill {store.id} is already running{who}: wait for it, or stop it with Ctrl+C there")
    try:
        check_not_owned_elsewhere(store)
        # A copy of our directory has locks of its own, and its children carry our ID, which the search for
        # orphans below would stop.
        check_no_copy_running(store.id, store.directory.parent)
        check_no_live_owner_here(store)
    except BaseException:
        lock.release()
        raise
    if reload is not None:
        try:
            fresh, running = reload()
        except BaseException:
            lock.release()
            raise
        board.copy_from(fresh)
    try:
        fence = _fence_earlier_owner(store, lease_seconds)
    except OSError as error:
        lock.release()
        raise _unwritable(store, error) from None
    children_lock = FileLock(store.children_lock_path)
    # Orphans are looked for on every takeover of a store an executor may have run, from the records (PID + start
    # time) and from the environment of live processes, whatever the lock files say: a deleted or unreadable
    # .children.lock must never let new attempts run beside live old ones.
    # Each is verified again when it is held, and signalled only through that hold: a PID reused meanwhile is
    # never hit, the last SIGKILL included.
    orphans: set[tuple[int, float, str | None]] = set()
    started: frozenset[str] = frozenset()
    if not new:
        orphans, started = find_orphans(store, running)
    stopped = stop_verified(orphans, grace)
    notes: list[str] = []
    if stop_remote is not None:  # children an earlier executor ran on other machines (the Dask launcher)
        try:
            every = [part for record in running for part in store.tree_records(record)]  # a split one's halves too
            notes = stop_remote(every, store.read_generation())
        except BaseException:
            _give_back(store, fence)
            lock.release()
            raise
    if not children_lock.try_acquire() and not children_lock.acquire(timeout=grace + 5):
        _give_back(store, fence)
        lock.release()
        raise Refused(
            f"children of a previous executor of backfill {store.id} are still alive and could not be found "
            "or stopped: find processes with BACKFILL_ID=" + store.id + " in their environment and stop them"
        )
    try:
        generation = _settle_previous(store, board, running, started)
    except OSError as error:  # a full disk, say: what was settled stays settled; nothing starts
        children_lock.release()
        lock.release()
        raise _unwritable(store, error) from None
    return Takeover(lock, children_lock, generation, stopped, notes, store=store)


def _unwritable(store: StateStore, error: OSError) -> StateWriteFailed:
    return StateWriteFailed(
        f"the state store {store.directory} could not be written ({error.strerror or error}) while taking "
        f"backfill {store.id} over: nothing was started; free space or fix the disk, then "
        f"backfill --continue {store.id}"
    )


def _fence_earlier_owner(store: StateStore, lease_seconds: float) -> Lease:
    """A lease of ours, written before anything is stopped: an executor still running that nothing named (its lock
    files, lease and generation removed) sees its lease replaced within milliseconds and starts nothing more,
    before the search for its children, which would miss any it started after."""
    previous = read_lease(store.directory)
    me = os.getpid()
    lease = Lease(
        (previous.epoch + 1) if previous is not None else 1, socket.gethostname(), me, process_started(me),
        time.time() + lease_seconds, note="taking over",
    )  # fmt: skip
    write_lease(store.directory, lease)
    return lease


def _give_back(store: StateStore, fence: Lease) -> None:
    """A takeover that starts nothing leaves the backfill unowned, not held by a process about to end."""
    with contextlib.suppress(OSError):
        write_lease(store.directory, Lease(fence.epoch, None, None, None, time.time(), (), "a takeover gave up"))


def _settle_previous(
    store: StateStore, board: StatusBoard, running: list[PartitionRecord], started: frozenset[str]
) -> Generation:
    """Settle what the previous executor left running and become the next generation."""
    # A writer killed between creating its temporary file and renaming it leaves the file behind. In partitions/
    # such a writer leaves its row pending or the index's stamp behind the directory: a settled index spares the
    # listing of every record.
    for directory in (store.directory, store.directory / "records", store.splits):
        remove_stale_temporaries(directory)
    if not store.partitions_settled(board.size):
        remove_stale_temporaries(store.partitions)
    # Logs are evidence, not state: a deleted children/ is made again (old logs are gone) rather than
    # failing every new attempt with a misleading "cannot start".
    ensure_directory(store.children)
    for record in running:
        store.settle_running(
            record,
            board,
            attempt_status=RecordStatus.CANCELLED,
            status=Status.CANCELLED,
            error=INTERRUPTED,
            started=started,
        )
    previous = store.read_generation()
    me = os.getpid()
    return store.write_generation((previous.number if previous else 0) + 1, me, process_started(me) or 0.0, now_text())
