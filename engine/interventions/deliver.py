"""Getting a request applied: by the live executor, or, when none is live, by this command under the lock."""

from __future__ import annotations

import time
from collections.abc import Callable

from engine.base.errors import Refused
from engine.interventions import requests
from engine.interventions.apply import Holder, apply
from engine.interventions.requests import Request, Result
from engine.store.locks import FileLock
from engine.store.state_store import StateStore

WAIT_SECONDS = 15.0  # a live executor answers within 2 s; beyond this something is wrong with it
POLL_SECONDS = 0.05


def deliver(
    store: StateStore,
    request: Request,
    hold: Callable[[], Holder],
    *,
    wait: float = WAIT_SECONDS,
) -> Result:
    """Apply ``request``: take the backfill's lock and apply it here (``hold`` reads the backfill under the
    lock), or hand it to the executor that holds the lock and wait for its answer. An executor that ends
    before claiming the request leaves the lock free, and the request is applied here after all."""
    deadline = time.monotonic() + wait
    submitted = False
    while True:
        lock = FileLock(store.lock_path)
        if lock.try_acquire():
            try:
                if submitted and not requests.withdraw(store.directory, request):
                    return _await_answer(store, request, deadline)  # claimed just before the executor ended
                return apply(request, hold())
            finally:
                lock.release()
        lock.release()
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


def _await_answer(store: StateStore, request: Request, deadline: float) -> Result:
    while time.monotonic() < deadline:
        result = requests.take_result(store.directory, request)
        if result is not None:
            return result
        time.sleep(POLL_SECONDS)
    raise Refused(
        f"the executor of backfill {store.id} took the request but gave no answer: see backfill audit {store.id}"
    )
