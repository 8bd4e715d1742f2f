"""Getting a request applied: by the live executor, or, when none is live, by this command under the lock."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable

from engine.base.errors import Refused
from engine.interventions import requests
from engine.interventions.apply import CommandHolder, Holder, apply
from engine.interventions.requests import Request, Result
from engine.spec.backfill_spec import BackfillSpec
from engine.store.lease import read_lease
from engine.store.live_work import check_no_copy_running
from engine.store.locks import FileLock
from engine.store.ownership import held_by_fenced_owner, live_owner_here
from engine.store.state_store import StateStore

POLL_SECONDS = 0.05


def deliver_request(store: StateStore, spec: BackfillSpec, request: Request, applied_by: str, *, wait: float) -> Result:
    """``request`` applied by the backfill's live executor, or by this command under the lock when none is live
    (the board read then, under the lock)."""

    def hold() -> CommandHolder:
        board, running = store.load_board(spec.plan, spec.ids.of)
        return CommandHolder(store, spec, board, applied_by, left_running=tuple(running))

    return deliver(store, request, hold, wait=wait)


def deliver(
    store: StateStore,
    request: Request,
    hold: Callable[[], Holder],
    *,
    wait: float,
) -> Result:
    """Apply ``request``: take the backfill's lock and apply it here (``hold`` reads the backfill under the
    lock), or hand it to the executor that holds the lock and wait ``wait`` seconds for its answer (a live
    executor answers within 2 s). An executor that ends before claiming the request leaves the lock free, and
    the request is applied here after all."""
    deadline = time.monotonic() + wait
    submitted = False
    while True:
        lock = FileLock(store.lock_path)
        if not owned_elsewhere(store) and lock.try_acquire():
            try:
                # A copy of this store running elsewhere: what this one holds is not what runs, and its records
                # name the copy's live children.
                check_no_copy_running(store.id, store.directory.parent)
                # The lock file removed or replaced beside a live executor: the lock is free, but the executor runs
                # the backfill and still answers requests. Applied here, a cancel would stop its children from
                # under it and settle the records it goes on writing.
                if live_owner_here(store) is None:
                    if submitted and not requests.withdraw(store.directory, request):
                        return _await_answer(store, request, deadline)  # claimed just before the executor ended
                    return apply(request, hold())
            finally:
                lock.release()
        lock.release()
        if held_by_fenced_owner(store):
            # The lock's holder is the executor a reconcile fenced out (frozen, say): it may write nothing and
            # will answer nothing. The lease, not the file lock, says who owns the backfill: nobody does, so the
            # request is applied here, serialized with reconciles and other such requests by their own lock.
            fenced = _apply_past_fenced_holder(store, request, hold, submitted)
            if fenced is not None:
                return fenced
        if not submitted:
            requests.submit(store.directory, request)
            submitted = True
        result = requests.take_result(store.directory, request)
        if result is not None:
            return result
        if time.monotonic() >= deadline:
            if requests.withdraw(store.directory, request):
                raise Refused(
                    f"the executor of backfill {store.id} did not take the request within {wait:g} s: nothing "
                    "changed; it may be stopped (SIGSTOP) or hung — backfill reconcile checks its lease"
                )
            return _await_answer(store, request, time.monotonic() + wait)
        time.sleep(POLL_SECONDS)


def _apply_past_fenced_holder(store: StateStore, request: Request, hold: Callable[[], Holder], submitted: bool):
    """Apply ``request`` under the reconcile lock when a fenced executor still holds ``.lock``; None when, checked
    again under that lock, it no longer does (the request then goes the usual way)."""
    from engine.interventions.reconcile import RECONCILE_LOCK

    lock = FileLock(store.directory / RECONCILE_LOCK)
    if not lock.acquire(timeout=30):
        return None
    try:
        if not held_by_fenced_owner(store) or (submitted and not requests.withdraw(store.directory, request)):
            return None
        return apply(request, hold())
    finally:
        lock.release()


def owned_elsewhere(store: StateStore) -> bool:
    """An executor on another host sharing the state directory owns the backfill (its lease, with the other
    host's grace, runs): our flock cannot see it, so the request goes to it."""
    lease = read_lease(store.directory)
    if lease is None or lease.host is None or lease.host == socket.gethostname():
        return False
    return time.time() < lease.held_elsewhere_until()


def _await_answer(store: StateStore, request: Request, deadline: float) -> Result:
    while time.monotonic() < deadline:
        result = requests.take_result(store.directory, request)
        if result is not None:
            return result
        time.sleep(POLL_SECONDS)
    if requests.withdraw(store.directory, request):  # given back unapplied (its claimer was fenced): never later
        raise Refused(
            f"the executor of backfill {store.id} gave the request back unapplied: nothing changed; backfill "
            "reconcile checks its lease"
        )
    raise Refused(
        f"the executor of backfill {store.id} took the request but gave no answer: see backfill audit {store.id}"
    )
