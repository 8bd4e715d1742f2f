"""Partition statuses in compact arrays indexed by partition number.

A million partitions cost a megabyte of statuses (one byte each) plus two bytes
each for attempt counts once any partition has been attempted. Counts per
status are kept up to date on every change, so totals never need a scan.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator
from enum import IntEnum, StrEnum

from engine.base.errors import BackfillError, BadInput, StateUnreadable


class Status(IntEnum):
    QUEUED = 0
    RUNNING = 1
    SUCCEEDED = 2
    FAILED = 3
    CANCELLED = 4
    SKIPPED = 5  # marked skipped by an operator: done, like succeeded, without data

    @property
    def label(self) -> str:
        return self.name.lower()

    @classmethod
    def parse(cls, text: str) -> Status:
        return cls[text.upper()]


STATUS_NAMES = tuple(status.label for status in Status)
# What verification said of a partition's latest attempt (0: nothing).
VERIFICATION_CODES = {"verified": 1, "warning": 2, "failed": 3, "insufficient history": 4}
FINISHED = frozenset({Status.SUCCEEDED, Status.FAILED, Status.CANCELLED, Status.SKIPPED})
DONE = frozenset({Status.SUCCEEDED, Status.SKIPPED})  # never run again unless asked (--rerun all, --ids)


MAX_PARTITIONS = 50_000_000  # 7 bytes each at most (status, attempts, duration): 350 MB of arrays


def check_plan_size(size: int, error: type[BackfillError] = BadInput) -> None:
    """A plan the status arrays cannot hold is refused before anything is saved or allocated."""
    if size > MAX_PARTITIONS:
        raise error(
            f"the plan has {size:,} partitions; a backfill holds at most {MAX_PARTITIONS:,}: "
            "use a coarser --partition or a shorter range"
        )


class StatusBoard:
    """Status and attempt count of every partition of a plan, plus running totals."""

    def __init__(self, size: int) -> None:
        check_plan_size(size, StateUnreadable)  # a saved plan this large was never created by us
        self.size = size
        self._status = bytearray(size)  # Status.QUEUED is 0
        self._attempts: array[int] | None = None
        self._durations: array[float] | None = None  # seconds of the latest attempt
        self._verification: bytearray | None = None  # VERIFICATION_CODES of the latest attempt, once any
        self._counts = [0] * len(Status)
        self._counts[Status.QUEUED] = size

    @classmethod
    def from_columns(
        cls, size: int, statuses: bytearray, attempts: array, durations: array, verification: bytearray
    ) -> StatusBoard:
        """A board of columns read whole (the record index): counts taken at C speed, nothing per partition."""
        board = cls.__new__(cls)
        check_plan_size(size, StateUnreadable)
        if not len(statuses) == len(attempts) == len(durations) == len(verification) == size:
            raise ValueError(f"columns of {size} partitions expected")  # a bug of the caller, never of the data
        board.size = size
        board._status = statuses
        board._attempts = attempts
        board._durations = durations
        board._verification = verification
        board._counts = [statuses.count(status) for status in Status]
        return board

    def copy_from(self, other: StatusBoard) -> None:
        """Take every status, attempt count, duration and count of ``other`` (same size), in place."""
        assert other.size == self.size
        self._status[:] = other._status
        self._attempts = other._attempts
        self._durations = other._durations
        self._verification = other._verification
        self._counts = list(other._counts)

    def status(self, index: int) -> Status:
        return Status(self._status[index])

    def raw(self) -> bytearray:
        """The status bytes themselves (read-only use: fast scans for the next match)."""
        return self._status

    def set(self, index: int, status: Status) -> None:
        old = self._status[index]
        if old != status:
            self._counts[old] -= 1
            self._counts[status] += 1
            self._status[index] = status

    def attempts(self, index: int) -> int:
        return self._attempts[index] if self._attempts is not None else 0

    def set_attempts(self, index: int, count: int) -> None:
        if self._attempts is None:
            if count == 0:
                return
            self._attempts = array("H", bytes(2 * self.size))
        self._attempts[index] = min(count, 65_535)

    def duration(self, index: int) -> float | None:
        """Seconds the latest attempt took (None when unknown or never attempted)."""
        if self._durations is None or not self.attempts(index):
            return None
        value = self._durations[index]
        return None if value < 0 else value

    def set_duration(self, index: int, seconds: float | None) -> None:
        if self._durations is None:
            if seconds is None:
                return
            self._durations = array("f", [-1.0]) * self.size
        self._durations[index] = -1.0 if seconds is None else seconds

    def verification(self, index: int) -> int:
        return self._verification[index] if self._verification is not None else 0

    def set_verification(self, index: int, verification: dict | None) -> None:
        self.set_verification_code(index, VERIFICATION_CODES.get((verification or {}).get("status", ""), 0))

    def set_verification_code(self, index: int, code: int) -> None:
        if self._verification is None:
            if code == 0:
                return
            self._verification = bytearray(self.size)
        self._verification[index] = code

    def count(self, status: Status) -> int:
        return self._counts[status]

    def counts(self) -> dict[str, int]:
        return {status.label: self._counts[status] for status in Status}

    def indices_with(self, statuses: frozenset[Status]) -> list[int]:
        """Every partition whose status is one of ``statuses``, in plan order."""
        wanted = bytes(sorted(statuses))
        return [index for index, code in enumerate(self._status) if code in wanted]

    def each(self, status: Status) -> Iterator[int]:
        """Every partition with ``status``, in plan order (each found at C speed)."""
        code = bytes((status,))
        index = self._status.find(code)
        while index >= 0:
            yield index
            index = self._status.find(code, index + 1)

    def find(self, status: Status, start: int, *, backwards: bool = False) -> int:
        """Next index at or after ``start`` (before, going backwards) with ``status``; -1 if none."""
        code = bytes((status,))
        if backwards:
            return self._status.rfind(code, 0, start + 1) if start >= 0 else -1
        return self._status.find(code, start)


class RunOutcome(StrEnum):
    """How one invocation's run ended (the executor's outcome)."""

    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    PAUSED = "paused"


class BackfillStatus(StrEnum):
    """The whole backfill's status after an invocation (see :func:`backfill_status`)."""

    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    PAUSED = "paused"
    INCOMPLETE = "incomplete"


def backfill_status(counts: dict[str, int], run_outcome: str | None) -> BackfillStatus:
    """The whole backfill's status after an invocation, from the counts on disk: ``cancelled`` when the
    invocation was stopped, ``failed`` while any partition is failed, ``incomplete`` while any is left to run,
    else ``succeeded``. An invocation that ran only some partitions never makes the backfill look done."""
    if run_outcome in (RunOutcome.CANCELLED, RunOutcome.PAUSED):
        return BackfillStatus(run_outcome)
    if counts.get(Status.FAILED.label):
        return BackfillStatus.FAILED
    if any(counts.get(status.label) for status in (Status.QUEUED, Status.RUNNING, Status.CANCELLED)):
        return BackfillStatus.INCOMPLETE
    return BackfillStatus.SUCCEEDED
