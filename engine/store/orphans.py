"""The live children an executor of this backfill left behind, found whatever the records and lock files say.

Two ways, both needed: a child whose attempt is recorded ``running`` is named by its record (PID, start time and
birth, so a reused PID is never taken for it); a child started just before its executor died, its attempt still
``starting`` or its record damaged, is found by ``BACKFILL_ID`` in its environment. A takeover stops both before
anything new starts, and so does ``backfill cancel`` of a backfill no executor runs.
"""

from __future__ import annotations

import os

from engine.base.processes import process_identity, same_process
from engine.store.locks import FileLock
from engine.store.records import PartitionRecord, RecordStatus
from engine.store.state_store import StateStore

Identity = tuple[int, float, str | None]  # PID, start time, birth


def find_orphans(store: StateStore, running: list[PartitionRecord]) -> tuple[set[Identity], frozenset[str]]:
    """Identities of live children of an earlier executor of this backfill, and the run IDs their environment
    names (a child whose attempt was still ``starting`` in the records is found by it)."""
    found = set()
    run_ids = set()
    for record in running:
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
