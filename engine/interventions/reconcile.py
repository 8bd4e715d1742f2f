"""Reconcile: settle what an executor whose lease expired left running.

An expired attempt on this host becomes ``lost`` (its outcome is uncertain: its work may have committed) and
its partition ``failed``, after its child — verified by PID *and* start time, never a reused PID — and that
child's descendants are stopped. An owner on another host gets its lease's ``host_grace`` more seconds past its
expiry, since we cannot see its processes. The lease is then left unowned with a higher epoch, which fences
the old owner out: if it wakes up (SIGCONT), it writes nothing and stops itself.
"""

from __future__ import annotations

import socket
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime

from engine.base.errors import Refused, StateWriteFailed
from engine.base.processes import stop_verified
from engine.dates.plan import Plan
from engine.store import audit
from engine.store.lease import Lease, read_lease, write_lease
from engine.store.live_work import check_no_copy_running
from engine.store.locks import FileLock
from engine.store.manifest import now_text
from engine.store.ownership import find_orphans
from engine.store.records import PartitionRecord, RecordStatus
from engine.store.state_store import StateStore
from engine.store.status import Status

LOST_GRACE = 10.0  # seconds a lost attempt's child gets between SIGTERM and SIGKILL
RECONCILE_WAIT = 30.0  # seconds past that grace a reconcile waits for another one to finish
RECONCILE_LOCK = ".reconcile.lock"


@dataclass
class Reconciled:
    backfill_id: str
    verdict: str  # "no lease", "live", "in grace", "lost", "unowned"
    message: str
    lost: list[str] = field(default_factory=list)  # partition IDs whose attempt became lost
    stopped: list[int] = field(default_factory=list)  # PIDs stopped


def _when(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def reconcile(
    store: StateStore,
    plan: Plan,
    id_of,
    *,
    requested_by: str,
    reason: str,
    applied_by: str,
    now: float | None = None,
) -> Reconciled:
    """Settle the backfill's expired lease, if it has one; say what was found either way. Two reconciles at once
    (two operators, a ``mark`` and a ``--continue``) settle it once: the second, waiting on the reconcile lock,
    finds the lease already unowned. The lock is its own (``.reconcile.lock``): ``.lock`` may be held by the
    frozen executor being reconciled."""
    found = _judge(store, read_lease(store.directory), time.time() if now is None else now)
    if not isinstance(found, Lease):
        return found  # nothing to settle: no lock needed (a read-only store can be asked)
    # A copy of a running backfill's store holds a copy of its lease, which nobody renews: it expires there while
    # its executor lives on, and settling it would stop that executor's children.
    check_no_copy_running(store.id, store.directory.parent)
    lock = FileLock(store.directory / RECONCILE_LOCK)
    if not lock.acquire(timeout=LOST_GRACE + RECONCILE_WAIT):
        raise Refused(f"another reconcile of backfill {store.id} has run for over {LOST_GRACE + RECONCILE_WAIT:g} s")
    try:
        now = time.time() if now is None else now
        found = _judge(store, read_lease(store.directory), now)  # again, under the lock: it may be settled now
        if not isinstance(found, Lease):
            return found
        try:
            return _settle(
                store, plan, id_of, found, now, requested_by=requested_by, reason=reason, applied_by=applied_by
            )
        except OSError as error:  # a full disk: the lease first, so nothing was settled, or some records were
            raise StateWriteFailed(
                f"backfill {store.id} could not be reconciled: its state store {store.directory} could not be "
                f"written ({error.strerror or error}); free space or fix the disk, then run the command again"
            ) from None
    finally:
        lock.release()


def _judge(store: StateStore, lease: Lease | None, now: float) -> Reconciled | Lease:
    """What a reconcile finds: a verdict that settles nothing, or the expired lease to settle."""
    if lease is None or lease.host is None:
        note = f" ({lease.note})" if lease is not None and lease.note else ""
        return Reconciled(store.id, "unowned", f"backfill {store.id}: no executor owns it{note}")
    owner = f"executor PID {lease.pid} on {lease.host}"
    if not lease.expired(now):
        return Reconciled(
            store.id, "live", f"backfill {store.id}: {owner} holds its lease until {_when(lease.expires_at)}"
        )
    here = lease.host == socket.gethostname()
    if not here and now < lease.held_elsewhere_until():
        return Reconciled(
            store.id,
            "in grace",
            f"backfill {store.id}: the lease of {owner} expired at {_when(lease.expires_at)}; another host gets "
            f"{lease.host_grace:g} s more, until {_when(lease.held_elsewhere_until())}",
        )
    return lease


def _settle(
    store: StateStore,
    plan: Plan,
    id_of,
    lease: Lease,
    now: float,
    *,
    requested_by: str,
    reason: str,
    applied_by: str,
) -> Reconciled:
    owner = f"executor PID {lease.pid} on {lease.host}"
    here = lease.host == socket.gethostname()
    board, running = store.load_board(plan, id_of)
    stopped = _stop_lost_children(store, lease, running) if here else []
    # The old owner is fenced out before anything is written: from here on, none of its writes is valid.
    write_lease(
        store.directory,
        Lease(
            lease.epoch + 1,
            None,
            None,
            None,
            now,
            (),
            f"reconciled at {_when(now)}: {owner}'s lease expired",
            fenced=(lease.pid, lease.pid_started or 0.0) if lease.pid is not None else None,
        ),
    )
    finished = now_text()
    message = (
        f"lost: the lease of {owner} expired at {_when(lease.expires_at)} while it ran; its outcome is uncertain "
        "(its work may have committed): check the target before running it again"
    )
    starting = (
        f"lost: the lease of {owner} expired at {_when(lease.expires_at)} while it was starting this attempt's "
        "child: whether the child ran is unknown; check the target before running it again"
    )
    lines = []
    for record in running:
        store.settle_running(
            record, board, attempt_status=RecordStatus.LOST, status=Status.FAILED, error=message, starting=starting
        )
        lines.append(
            audit.entry(
                backfill_id=store.id,
                partition_id=record.id,
                action="RECONCILE_LOST",
                from_status=RecordStatus.RUNNING,
                to_status=RecordStatus.FAILED,
                previous_message=None,
                reason=reason,
                requested_by=requested_by,
                requested_at=finished,
                applied_at=finished,
                applied_by=applied_by,
            )
        )
    audit.append(store.directory, lines)
    lost = [record.id for record in running]
    stopped_text = f", stopped PIDs {', '.join(map(str, stopped))}" if stopped else ""
    return Reconciled(
        store.id,
        "lost" if lost else "unowned",
        f"backfill {store.id}: the lease of {owner} expired at {_when(lease.expires_at)}; "
        f"{len(lost)} running attempt{'s' if len(lost) != 1 else ''} marked lost{stopped_text}; "
        "it can be resumed",
        lost,
        stopped,
    )


def _stop_lost_children(store: StateStore, lease: Lease, running: list[PartitionRecord]) -> list[int]:
    """Stop each child of the expired owner that verifiably still is that child, with its group and descendants;
    every signal, the last SIGKILL too, goes through a handle on the process verified, never to a bare PID. The
    lease and the records name children; a child started just before the owner froze (its attempt still
    ``starting``, in no lease yet) is found by ``BACKFILL_ID`` in its environment, as a takeover finds it."""
    candidates = {(a.pid, a.pid_started, a.pid_birth) for a in lease.attempts}
    found, _ = find_orphans(store, running)
    return stop_verified(candidates | found, LOST_GRACE)
