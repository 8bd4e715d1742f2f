"""A child the executor's loop is running: its partition, attempt and process, and how far stopping it has gone."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from engine.dates.plan import Interval
from engine.execute.launcher import Child, ChildSpec
from engine.store.records import Attempt, PartitionRecord, RecordStatus
from engine.store.split_tree import SplitNode


@dataclass(frozen=True)
class VerifyingChild:
    """``--verify-command`` of one attempt whose child exited 0: run as the attempt's second child, so that it is
    stopped, timed and waited for as the first was, while other children start and end. ``judge`` turns its exit
    status into a verification, ``cannot_start`` an error starting it."""

    spec: ChildSpec
    judge: Callable[[int], Any]
    cannot_start: Callable[[OSError], Any]


@dataclass
class ActiveChild:
    index: int
    interval: Interval
    record: PartitionRecord
    attempt: Attempt
    child: Child
    started: float  # monotonic
    started_wall: float  # Unix seconds
    attempts_left: int
    stop_reason: str | None = None  # set when we are stopping it
    stop_status: RecordStatus = RecordStatus.CANCELLED
    stop_started: float = 0.0
    kill_sent: bool = False
    escalated: int = 0  # how many of the operator's repeated stop requests this child has been sent
    identity_pending: bool = False  # a remote child whose PID and worker are not known yet
    node: SplitNode | None = None  # a half of a split partition (docs/splitting.md); None: the partition itself
    timed_out: bool = False  # our --timeout stopped it
    verifying: VerifyingChild | None = None  # its child exited 0 and ``child`` is now its --verify-command
    verify_failure: OSError | None = None  # the --verify-command could not start
