"""What other threads ask of a running executor: stop, the operators' interventions, and its snapshot.

Front ends (the dashboard, progress lines, a signal handler) and the interventions' poll call these while the
executor's own thread runs its loop (:mod:`engine.execute.executor`); each takes the executor's lock where it
changes what the loop reads. A mixin of :class:`engine.execute.executor.Executor`: the state it reads is made
there.
"""

from __future__ import annotations

import signal
import time
from collections import deque
from typing import Any

from engine.base.open_files import make_room
from engine.execute.executor_snapshot import RunningPartition, Snapshot
from engine.store.lease import LeasedAttempt
from engine.store.records import RecordStatus
from engine.store.space_reserve import reserve_size
from engine.store.status import Status

# What a stop asked again sends, at once, to every child still running: SIGTERM the second time, SIGKILL the third.
ESCALATION = (signal.SIGTERM, signal.SIGKILL)


class ExecutorControls:
    # ---------------------------------------------------------------- front-end API

    def request_stop(self, reason: str = "cancelled", signum: int = signal.SIGINT) -> None:
        """Stop scheduling and cancel active children (thread-safe, idempotent): each child's process group
        gets ``signum`` at once (SIGINT for Ctrl+C and the dashboard, SIGTERM when we were terminated), and
        SIGKILL only after the grace period."""
        with self._lock:
            if self._stop_reason is None:
                self._stop_reason = reason
                self._stop_signal = signum
                self._version += 1

    def operator_stop(self, reason: str, signum: int = signal.SIGINT) -> None:
        """A person's stop (Ctrl+C, the dashboard's stop, a SIGTERM): the first is ``request_stop``; asked again
        while stopping, it escalates — the second sends SIGTERM to every child still running, the third
        SIGKILL, now, whatever is left of the grace."""
        with self._lock:
            if self._stop_reason is not None:
                self._escalation = min(self._escalation + 1, len(ESCALATION))
                self._version += 1
                return
        self.request_stop(reason, signum)

    @property
    def escalation(self) -> int:
        """How many times a stop was asked again (0: once or not at all)."""
        return self._escalation

    # ---------------------------------------------------------------- interventions (called from hooks.poll)

    def running_indices(self) -> frozenset[int]:
        with self._lock:
            return frozenset(active.index for active in self._active.values())

    def flush_records(self) -> None:
        """Wait until every record queued is on disk (a mark reads them next)."""
        try:
            self._writer.drain()
        except OSError as error:
            self._storage_failed(error)

    def apply_marks(self, changes: list[tuple[int, Status, int]]) -> None:
        """Partitions an operator marked: the board shows them, and a retry waiting for one is dropped."""
        marked = {index for index, _, _ in changes}
        with self._lock:
            for index, status, attempts in changes:
                self.board.set(index, status)
                self.board.set_attempts(index, attempts)
            self._version += 1
        self._retries = deque(pending for pending in self._retries if pending.index not in marked)

    def cancel_for(self, message: str) -> None:
        """An operator's cancel: every running child is stopped (the usual sequence), nothing more starts."""
        self._intervention = message
        self.request_stop(message.removeprefix("cancelled "))  # each child's error reads "cancelled: by …"

    def pause_for(self, message: str | None) -> None:
        """Pause (``message``) or resume (None): while paused, running children finish and none start."""
        with self._lock:
            self._paused = message
            self._intervention = message
            self._version += 1

    def set_parallel(self, requested: int) -> str:
        """An operator's ``--max-parallel`` while it runs: more children start at the next turn of the loop;
        fewer, and none starts until enough have ended (none is stopped for it). The reserve grows with it
        first (an OSError when the disk has no room for it: nothing changes)."""
        cap = self.parallel_cap
        effective = max(1, min(requested, cap[0])) if cap is not None else max(1, requested)
        size = reserve_size(requested)
        if self._reserve.held and size > self._reserve.size:
            self._reserve.grow(size)
        make_room(effective)  # more children at once: room for their descriptors first
        with self._lock:
            self.requested_parallel, self.parallel = requested, effective
            self._version += 1
        if self.owns():  # what the screens of other processes show
            self.takeover.generation = self.store.record_parallel(self.takeover.generation, (requested, effective))
        if effective < requested:
            return f"{effective} at once now (capped: {cap[1]})" if cap is not None else f"{effective} at once now"
        return f"{effective} at once now"

    def stop_partitions(self, indices: list[int], message: str) -> None:
        """An operator's stop of single partitions: each is stopped as a cancel stops it (SIGINT, SIGKILL after
        the grace), recorded cancelled and not retried; the others go on."""
        with self._lock:
            wanted = set(indices)
            for active in list(self._active.values()):
                if active.index in wanted:
                    self._stopped.add(active.index)
                    self._begin_stop(active, f"cancelled: {message}", RecordStatus.CANCELLED)
            self._intervention = message
            self._version += 1

    def halt_for(self, message: str) -> None:
        """Launch nothing more (the running children finish): the run ends unfinished, resumable, saying why."""
        with self._lock:
            self._intervention, self._halted = message, True
            self._version += 1

    def end_for(self, status: str, message: str) -> None:
        """An operator's mark of the whole backfill (no child runs): launch nothing more and end as ``status``."""
        self._intervention, self._ended_as, self._halted = message, status, True

    def _leased_attempts(self) -> tuple[LeasedAttempt, ...]:
        with self._lock:
            return tuple(
                LeasedAttempt(a.attempt.run_id, a.index, a.child.pid, a.attempt.pid_started, a.attempt.pid_birth)
                for a in self._active.values()
            )

    def _fenced_out(self, message: str) -> None:
        """Our lease lapsed or was taken away (a reconcile marked our attempts lost): stop every child and
        write nothing more, whatever they do."""
        self._fenced = message
        self._intervention = f"stopped itself without recording anything: {message}"
        self.request_stop(f"lease lost: {message}")

    def owns(self) -> bool:
        """Whether this executor may still write as the backfill's owner: asked of the lease right before each
        write, never a flag cached earlier (a process frozen past its lease wakes up believing it owns it)."""
        return self.lease is None or self.lease.owns()

    @property
    def paused(self) -> str | None:
        return self._paused

    def _kill_due(self, active: Any, now: float) -> float | None:
        """When SIGKILL reaches a child being stopped (Unix seconds; ``now`` once sent), None when not stopping."""
        if active.stop_reason is None:
            return None
        if active.kill_sent:
            return now
        return now + max(0.0, active.stop_started + self.grace - time.monotonic())

    def snapshot(self) -> Snapshot:
        now = time.time()
        with self._lock:
            running = tuple(
                RunningPartition(
                    a.index,
                    a.record.id,
                    a.attempt.run_id,
                    len(a.record.attempts),
                    a.started_wall,
                    a.child.pid,
                    self._kill_due(a, now),
                )
                for a in sorted(self._active.values(), key=lambda a: a.index)
            )
            return Snapshot(
                version=self._version,
                total=len(self.plan),
                selected=self._selected,
                finished=self._finished,
                counts=self.board.counts(),
                running=running,
                events=tuple(self._events),
                started_at=self._started_at,
                state=self._state,
                stop_reason=self._stop_reason,
                outcome=self._outcome,
                board=self.board,
                intervention=self._intervention,
                escalation=self._escalation,
                parallel=(self.requested_parallel, self.parallel),
            )
