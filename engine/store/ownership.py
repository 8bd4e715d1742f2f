"""Who runs a backfill on this host, whatever the lock files say: its live owner, and the live children an
executor of it left behind.

``.lock`` excludes another executor only while its file is the one that executor locked: removed or replaced (a
cleanup of dot files), it is free beside a live executor, so the lease (or the last generation) names the owner.
Children are found two ways, both needed: a child whose attempt is recorded ``running`` is named by its record
(PID, start time and birth, so a reused PID is never taken for it); a child started just before its executor
died, its attempt still ``starting`` or its record damaged, is found by ``BACKFILL_ID`` in its environment. A
takeover stops both before anything new starts, and so does ``backfill cancel`` of a backfill no executor runs.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterable

from engine.base.processes import process_identity, running_process, same_process
from engine.store.lease import read_lease
from engine.store.locks import FileLock
from engine.store.records import PartitionRecord, RecordStatus
from engine.store.state_store import StateStore

Identity = tuple[int, float, str | None]  # PID, start time, birth


def find_orphans(store: StateStore, running: Iterable[PartitionRecord]) -> tuple[set[Identity], frozenset[str]]:
    """Identities of live children of an earlier executor of this backfill, and the run IDs their environment
    names (a child whose attempt was still ``starting`` in the records is found by it). ``running``: the records
    left running; a split partition's halves are read here, their children looked for too."""
    found = set()
    run_ids = set()
    for record in (part for top in running for part in store.tree_records(top)):
        for attempt in record.attempts:
            child = attempt.child() if attempt.status == RecordStatus.RUNNING else None
            if child is not None and same_process(*child):
                found.add(child)
    import psutil  # here alone: a new backfill, which has no orphans to look for, never loads it

    me = os.getpid()
    for process in psutil.process_iter(["pid"]):
        if process.pid == me:
            continue
        try:
            environment = process.environ()
            if environment.get("BACKFILL_ID") == store.id:  # pragma: no mutate (`!=` stops every process here)
                # Its identity as our records take it (not psutil's create_time, which reads the boot time again)
                started, birth = process_identity(process.pid)
                if started is None:
                    continue
                found.add((process.pid, started, birth))
                if environment.get("BACKFILL_RUN_ID"):
                    run_ids.add(environment["BACKFILL_RUN_ID"])
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess, OSError):
            continue
    return found, frozenset(run_ids)


def children_still_run(store: StateStore) -> bool:
    """Whether a child of some executor of this backfill lives: every child inherits ``.children.lock`` and holds it
    while it lives, whatever its environment or its record says."""
    return store.children_lock_path.exists() and FileLock(store.children_lock_path).is_held_elsewhere()


def live_owner_here(store: StateStore) -> tuple[int, float | None] | None:
    """The live executor of this host that owns the backfill (PID, start time), whoever holds ``.lock``; None.
    The lease names the owner (none once its run ended, a reconcile fenced it out or it expired; an executor's
    process may live on after its run, its dashboard open); without a lease, the last generation does. A zombie
    (killed, its parent not yet waiting for it) owns nothing."""
    lease = read_lease(store.directory)
    here = socket.gethostname()
    if lease is not None:  # an expired lease's holder fences itself before it writes or starts anything
        owner = (lease.pid, lease.pid_started) if lease.host == here and not lease.expired(time.time()) else None
    else:
        generation = store.read_generation()
        owner = (generation.pid, generation.pid_started) if generation is not None and generation.host == here else None
    if owner is None or owner[0] is None or not running_process(*owner):
        return None
    return owner[0], owner[1]


def held_by_fenced_owner(store: StateStore) -> bool:
    """Whether ``.lock`` is held by the executor a reconcile fenced out: the lease is unowned and names it as the
    one it fenced, and no executor took the backfill over since (``.generation.json`` still names it: a takeover
    rewrites it under the lock)."""
    lease = read_lease(store.directory)
    if lease is None or lease.host is not None or lease.fenced is None:
        return False
    generation = store.read_generation()
    return generation is not None and (generation.pid, generation.pid_started) == lease.fenced
