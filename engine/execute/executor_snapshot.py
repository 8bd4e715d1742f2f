"""What front ends see of a running backfill: an immutable snapshot they poll a few times a second.

There is no message per partition. Counts, the running partitions and a window
of recent events (with increasing sequence numbers, so a poller can tell what it
has not seen) are copied out under the executor's lock. The status board is
shared read-only: front ends read statuses of visible rows straight from it.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engine.store.status import StatusBoard


class ExecutorState(StrEnum):
    STARTING = "starting"
    RUNNING = "running"
    STOPPING = "stopping"
    FINISHED = "finished"


STARTING, RUNNING, STOPPING, FINISHED = ExecutorState


@dataclass(frozen=True)
class RunningPartition:
    index: int
    partition_id: str
    run_id: str
    attempt: int  # 1-based number of this attempt in the partition's whole history
    started_at: float  # Unix seconds
    pid: int
    kill_at: float | None = None  # being stopped: when SIGKILL reaches it (Unix seconds); None while it runs on


@dataclass(frozen=True)
class Event:
    sequence: int
    kind: str  # started, succeeded, failed, cancelled, retrying, split
    index: int
    run_id: str
    at: float  # Unix seconds
    duration: float | None = None
    error: str | None = None
    final: bool = True  # it ends its partition in this run (not a retry, a split, or a half with others to go)
    span: tuple[int, int] | None = None  # a half of a split partition: its interval


@dataclass(frozen=True)
class Snapshot:
    version: int
    total: int
    selected: int  # partitions this invocation runs
    finished: int  # of those, how many reached a final status in this invocation
    counts: dict[str, int]
    running: tuple[RunningPartition, ...]
    events: tuple[Event, ...]
    started_at: float
    state: str
    stop_reason: str | None
    outcome: str | None  # succeeded, failed, cancelled or paused once finished
    board: StatusBoard
    intervention: str | None = None  # an operator's cancel, pause or mark: who and why
    escalation: int = 0  # stop requests after the first: 1 sent SIGTERM to every child, 2 SIGKILL
    parallel: tuple[int, int] = (1, 1)  # --max-parallel asked (an operator may change it live), and what runs
