"""Rows of the partition table → partition indices, with or without a status filter.

Unfiltered, row *r* is partition *r*. Filtered, rows are the partitions whose
status is in the filter, in plan order: a rank/select structure over a 0/1 mask
of the status bytes (counts per block of 4096 partitions, positions of a block
found on demand and cached), so a filter over a million partitions costs a
translate and a few hundred counts per refresh, never a list of a million ints.
"""

from __future__ import annotations

import re
import time
from array import array
from bisect import bisect_right
from enum import StrEnum
from itertools import accumulate

from engine.store.status import Status, StatusBoard

BLOCK = 4096
_ONE = re.compile(b"\x01")
# Past this many rows, a sorted view is sorted again at most every RESORT_SECONDS while statuses change.
RESORT_ROWS = 100_000
RESORT_SECONDS = 2.0


class SortKey(StrEnum):
    """How the table orders its rows (``o`` cycles): plan order, or what an operator looks for first."""

    INTERVAL = "interval"
    DURATION = "duration"  # the longest latest attempt first; never attempted last
    ATTEMPTS = "attempts"  # the most attempts first
    STATUS = "status"  # failed, cancelled, running, queued, skipped, succeeded


STATUS_ORDER = {Status.FAILED: 0, Status.CANCELLED: 1, Status.RUNNING: 2, Status.QUEUED: 3, Status.SKIPPED: 4,
                Status.SUCCEEDED: 5}  # fmt: skip


class RowIndex:
    def __init__(
        self,
        board: StatusBoard,
        statuses: frozenset[Status] | None = None,
        only: frozenset[int] | None = None,
        order: SortKey = SortKey.INTERVAL,
    ) -> None:
        self.board = board
        self.statuses = statuses if statuses is not None or only is None else frozenset(Status)
        self.only = only  # a set of partitions (a kind of failure): rows are those of them with the statuses
        self.order = order
        self._sorted: array[int] | None = None  # row → partition, when not in plan order
        self._rank: array[int] | None = None  # partition → row (-1: not shown)
        self._sorted_at = 0.0
        self._mask = b""
        self._cumulative: list[int] = []
        self._positions: dict[int, list[int]] = {}
        self._count = board.size
        self.rebuild()

    @property
    def filtered(self) -> bool:
        return self.statuses is not None

    @property
    def changes_with_statuses(self) -> bool:
        """Whether a poll that changed statuses can change the rows (a filter, or an order other than the plan's)."""
        return self.statuses is not None or self.order is not SortKey.INTERVAL

    def rebuild(self) -> None:
        """Recompute the rows from the current statuses: the filter's mask, then the order."""
        if (
            self._sorted is not None
            and self._count > RESORT_ROWS
            and time.monotonic() - self._sorted_at < RESORT_SECONDS
        ):
            return  # a large sorted view follows the statuses every few seconds, not on every poll
        self._mask_rows()
        self._sort_rows()

    def _sort_rows(self) -> None:
        if self.order is SortKey.INTERVAL:
            self._sorted = self._rank = None
            return
        shown = self._plan_order_indices()
        board = self.board
        if self.order is SortKey.DURATION:
            shown.sort(key=lambda i: -(seconds if (seconds := board.duration(i)) is not None else -1.0))
        elif self.order is SortKey.ATTEMPTS:
            shown.sort(key=lambda i: -board.attempts(i))
        else:
            raw = board.raw()
            shown.sort(key=lambda i: STATUS_ORDER[Status(raw[i])])
        self._sorted = array("I", shown)
        rank = array("i", [-1]) * board.size
        for row, index in enumerate(shown):
            rank[index] = row
        self._rank = rank
        self._sorted_at = time.monotonic()

    def _mask_rows(self) -> None:
        if self.statuses is None:
            self._count = self.board.size
            return
        table = bytes(1 if code < len(Status) and Status(code) in self.statuses else 0 for code in range(256))
        mask = bytes(self.board.raw()).translate(table)
        if self.only is not None:
            chosen = bytearray(len(mask))
            for index in self.only:
                if 0 <= index < len(mask) and mask[index]:
                    chosen[index] = 1
            mask = bytes(chosen)
        counts = (mask.count(1, start, start + BLOCK) for start in range(0, len(mask), BLOCK))
        self._mask = mask
        self._cumulative = list(accumulate(counts))
        self._positions.clear()
        self._count = self._cumulative[-1] if self._cumulative else 0

    def __len__(self) -> int:
        return self._count

    def index_at(self, row: int) -> int:
        """The partition shown at ``row`` (0 <= row < len)."""
        if not 0 <= row < self._count:
            raise IndexError(f"row {row} is outside 0..{self._count - 1}")
        if self._sorted is not None:
            return self._sorted[row]
        if self.statuses is None:
            return row
        block = bisect_right(self._cumulative, row)
        before = self._cumulative[block - 1] if block else 0
        positions = self._positions.get(block)
        if positions is None:
            start = block * BLOCK
            # finditer with pos/endpos reports positions in the whole mask: already absolute
            positions = [m.start() for m in _ONE.finditer(self._mask, start, start + BLOCK)]
            self._positions[block] = positions
        return positions[row - before]

    def row_of(self, index: int) -> int | None:
        """The row showing partition ``index``, or None when the filter hides it."""
        if self._rank is not None:
            found = self._rank[index] if 0 <= index < len(self._rank) else -1
            return None if found < 0 else found
        if self.statuses is None:
            return index if 0 <= index < self.board.size else None
        if not 0 <= index < len(self._mask) or not self._mask[index]:
            return None
        block = index // BLOCK
        before = self._cumulative[block - 1] if block else 0
        return before + self._mask.count(1, block * BLOCK, index)

    def nearest_row(self, index: int) -> int:
        """The row of ``index``, or of the closest shown partition after (else before) it."""
        row = self.row_of(index)
        if row is not None or self._count == 0 or self._rank is not None:
            return row or 0  # sorted: no "closest after" in another order than the plan's; the first row
        block = index // BLOCK
        before = self._cumulative[block - 1] if block else 0
        return min(self._count - 1, before + self._mask.count(1, block * BLOCK, index))

    def indices(self) -> list[int]:
        """Every partition shown, in row order (for selections such as "those matching the filter")."""
        if self._sorted is not None:
            return list(self._sorted)
        return self._plan_order_indices()

    def _plan_order_indices(self) -> list[int]:
        if self.statuses is None:
            return list(range(self._count))
        return [m.start() for m in _ONE.finditer(self._mask)]

    def find(self, status: Status, from_index: int, *, backwards: bool) -> int | None:
        """The next partition (in plan order, shown by the filter) with ``status`` after/before ``from_index``."""
        if self.statuses is not None and status not in self.statuses:
            return None
        found = self.board.find(status, from_index - 1 if backwards else from_index + 1, backwards=backwards)
        return None if found < 0 else found
