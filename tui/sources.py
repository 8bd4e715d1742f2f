"""Where the dashboard's data comes from: a live executor, or a saved backfill on disk.

Every source exposes the plan (``spec``), the store, the shared status board and
a :meth:`poll` returning a small immutable state. The dashboard never gets a
message per partition; it polls a few times a second.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Protocol

from engine.executor import Executor
from engine.parallelism import Parallelism
from engine.snapshot import FINISHED, RunningPartition
from engine.spec import BackfillSpec, ExecutionOptions
from engine.status import StatusBoard
from engine.store import StateStore

IDLE = "idle"  # a saved backfill nobody is running


@dataclass(frozen=True)
class SourceState:
    version: int
    counts: dict[str, int]
    total: int
    selected: int
    finished: int
    running: tuple[RunningPartition, ...]
    state: str  # starting, running, stopping, finished, idle
    stop_reason: str | None
    outcome: str | None
    started_at: float | None


class BackfillSource(Protocol):
    spec: BackfillSpec
    store: StateStore
    board: StatusBoard
    options: ExecutionOptions
    parallelism: Parallelism
    can_stop: bool

    def poll(self) -> SourceState: ...

    def stop(self, reason: str) -> None: ...


class ExecutorSource:
    """A backfill this process is running."""

    can_stop = True

    def __init__(self, executor: Executor, *, options: ExecutionOptions, parallelism: Parallelism) -> None:
        self.executor = executor
        self.spec = executor.spec
        self.store = executor.store
        self.board = executor.board
        self.options = options
        self.parallelism = parallelism

    def poll(self) -> SourceState:
        snap = self.executor.snapshot()
        return SourceState(
            snap.version,
            snap.counts,
            snap.total,
            snap.selected,
            snap.finished,
            snap.running,
            snap.state,
            snap.stop_reason,
            snap.outcome,
            snap.started_at,
        )

    def stop(self, reason: str) -> None:
        self.executor.request_stop(reason)


class SavedSource:
    """A saved backfill read once from disk (nothing runs it)."""

    can_stop = False

    def __init__(
        self,
        spec: BackfillSpec,
        store: StateStore,
        board: StatusBoard,
        running: list,
        options: ExecutionOptions,
        parallelism: Parallelism,
        started_at: float | None = None,
    ) -> None:
        self.spec = spec
        self.store = store
        self.board = board
        self.options = options
        self.parallelism = parallelism
        self.started_at = started_at
        self._running = tuple(
            RunningPartition(
                r.index,
                r.id,
                r.attempts[-1].run_id,
                len(r.attempts),
                _unix(r.attempts[-1].started_at),
                r.attempts[-1].pid or 0,
            )
            for r in running
            if r.attempts
        )

    def poll(self) -> SourceState:
        board = self.board
        counts = board.counts()
        return SourceState(
            0,
            counts,
            board.size,
            board.size,
            board.size - counts["queued"],
            self._running,
            IDLE,
            None,
            None,
            self.started_at,
        )

    def stop(self, reason: str) -> None:
        raise RuntimeError("a saved backfill that nothing runs cannot be stopped")


def _unix(text: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def is_finished(state: SourceState) -> bool:
    return state.state == FINISHED


def wall_clock() -> float:
    return time.time()
