"""Which partitions an invocation runs: all of a new backfill, or those a resume selects by status or ID."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum

from engine.store.status import DONE, Status, StatusBoard


class RerunMode(StrEnum):
    """Which partitions a resume runs (``--rerun``; ``default`` without it)."""

    DEFAULT = "default"  # everything not succeeded or skipped
    FAILED = "failed"
    MISSING = "missing"  # queued or interrupted
    ALL = "all"


MODES = tuple(RerunMode)


@dataclass(frozen=True)
class AssetRerun:
    """``--continue --ids … --asset NAME [--with-downstream]``: those partitions run this asset (and what is
    downstream of it) again, as new attempts of kind ``rerun``, without their upstream being checked."""

    name: str
    downstream: bool = False


@dataclass(frozen=True)
class PartitionSelection:
    """``mode``: default (everything not succeeded or skipped), failed, missing (queued or interrupted), all;
    or exactly ``indices`` when given."""

    mode: RerunMode = RerunMode.DEFAULT
    indices: frozenset[int] | None = None

    def wants(self, status: Status) -> bool:
        if self.mode == RerunMode.ALL:
            return True
        if self.mode == RerunMode.FAILED:
            return status is Status.FAILED
        if self.mode == RerunMode.MISSING:
            return status in (Status.QUEUED, Status.CANCELLED, Status.RUNNING)
        return status not in DONE

    def count(self, board: StatusBoard) -> int:
        if self.indices is not None:
            return len(self.indices)
        return sum(board.count(status) for status in Status if self.wants(status))

    def mask(self, board: StatusBoard) -> bytes:
        """One byte per partition: 1 when this invocation runs it (computed before anything runs)."""
        if self.indices is not None:
            selected = bytearray(board.size)
            for index in self.indices:
                selected[index] = 1
            return bytes(selected)
        table = bytes(1 if index < len(Status) and self.wants(Status(index)) else 0 for index in range(256))
        return bytes(board.raw()).translate(table)

    def iterate(self, board: StatusBoard, *, reverse: bool) -> Iterator[int]:
        """Selected indices in execution order, each judged when reached (its status cannot change before)."""
        if self.indices is not None:
            yield from sorted(self.indices, reverse=reverse)
            return
        size = board.size
        raw = board.raw()
        positions = range(size - 1, -1, -1) if reverse else range(size)
        if self.mode == RerunMode.ALL:
            yield from positions
            return
        wanted = bytes(status for status in Status if self.wants(status))
        for index in positions:
            if raw[index] in wanted:
                yield index
