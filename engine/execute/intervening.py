"""The live executor's side of interventions: it picks up requests from the backfill's ``requests/`` folder
at most every half second (well within the 2 s operators are promised) and applies them as their holder."""

from __future__ import annotations

import time
from dataclasses import dataclass

from engine.base.errors import Fenced
from engine.execute.executor import Executor
from engine.interventions import requests
from engine.interventions.requests import Result
from engine.spec.backfill_spec import BackfillSpec
from engine.store.state_store import StateStore
from engine.store.status import Status, StatusBoard

POLL_SECONDS = 0.5


@dataclass
class ExecutorHolder:
    """The running executor as the holder of its backfill while it applies a request."""

    executor: Executor
    writes: int = 0  # writes allowed so far: a request fenced before its first write is given back whole
    live: bool = True
    left_on_dask: int = 0  # its own Dask attempts it stops itself

    @property
    def store(self) -> StateStore:
        return self.executor.store

    @property
    def spec(self) -> BackfillSpec:
        return self.executor.spec

    @property
    def board(self) -> StatusBoard:
        return self.executor.board

    @property
    def applied_by(self) -> str:
        generation = self.executor.takeover.generation
        return f"executor generation {generation.number} (PID {generation.pid} on {generation.host})"

    def running(self) -> frozenset[int]:
        return self.executor.running_indices()

    def requested_parallel(self) -> int:
        return self.executor.requested_parallel

    def set_parallel(self, value: int) -> str:
        return self.executor.set_parallel(value)

    def stop_partitions(self, indices: list[int], message: str) -> None:
        self.executor.stop_partitions(indices, message)

    def flush(self) -> None:
        self.executor.flush_records()

    def update(self, changes: list[tuple[int, Status, int]]) -> None:
        self.executor.apply_marks(changes)

    def cancel(self, message: str) -> int:
        running = len(self.running())
        self.executor.cancel_for(message)
        return running

    def pause(self, paused: bool, message: str) -> None:
        self.executor.pause_for(message if paused else None)

    def end(self, status: str, message: str) -> None:
        self.executor.end_for(status, message)

    def before_write(self) -> None:
        if not self.executor.owns():
            raise Fenced(f"executor of backfill {self.store.id} no longer owns its lease")
        self.writes += 1


class RequestPoller:
    """``ExecutorHooks.poll``: apply every waiting request, oldest first, at most every POLL_SECONDS."""

    def __init__(self) -> None:
        self._next = 0.0

    def __call__(self, executor: Executor) -> None:
        now = time.monotonic()
        if now < self._next:
            return
        self._next = now + POLL_SECONDS
        directory = executor.store.directory
        for request_id in requests.pending(directory):
            # Fenced (its lease lapsed or was taken): the request is left, untouched, for the owner or its sender.
            if not executor.owns():
                return
            request = requests.claim(directory, request_id)
            if request is None:
                continue
            from engine.interventions.apply import apply  # with the first request: a run without any never loads it

            holder = ExecutorHolder(executor)
            try:
                result = apply(request, holder)
            except Fenced:
                if holder.writes == 0:
                    requests.unclaim(directory, request_id)
                    return
                result = Result(1, "the executor lost its lease part-way through: see backfill audit")
            except OSError as error:  # the store cannot be written: the request is refused, said why
                result = Result(1, f"the request could not be applied ({error.strerror or error}): nothing changed")
            if not executor.owns():
                return  # the answer is a write too: the sender says it got none and points to the audit
            requests.answer(directory, request_id, result)
