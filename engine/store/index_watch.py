"""Following the record index of a backfill another process runs.

A watching screen looks a few times a second. Each look reads ``partitions.idx`` (one file, 40 bytes a
partition) only when it changed, and says which partitions' rows changed since the last look: the watcher then
reads the records of those that are running or pending (a write in flight) and takes the others' status,
attempts, duration, verification and end time from their rows — never every record file. See ``docs/state.md``.
"""

from __future__ import annotations

import os
from array import array
from dataclasses import dataclass
from pathlib import Path

from engine.store.record_index import INDEX, PENDING, ROW, IndexedBoard, board_of, pending_rows, trusted_rows
from engine.store.status import Status

BLOCK_ROWS = 1024  # rows compared as one slice first: a look at an unchanged million rows costs ~1,000 compares


@dataclass(frozen=True)
class IndexRow:
    """One partition's row as the index holds it now."""

    index: int
    pending: bool  # the record is being written (or its writer died mid-way): read its file instead
    status: Status
    verification: int
    attempts: int
    duration: float  # seconds; negative when unknown (as the board keeps it)
    finished_us: int  # when the latest attempt ended, µs since the epoch; 0 unknown

    @property
    def finished_at(self) -> float | None:
        return self.finished_us / 1_000_000 if self.finished_us else None


def row_at(rows: bytes, index: int) -> IndexRow:
    """Row ``index`` of ``rows`` (which reach at least that far)."""
    flags, status, verification, attempts, _exit, duration, _signature, _started, finished, _reason = ROW.unpack_from(
        rows, index * ROW.size
    )
    return IndexRow(index, bool(flags & PENDING), Status(status), verification, attempts, duration, finished)


def finished_column(rows: bytes) -> array:
    """When each row's latest attempt ended (µs since the epoch, 0 unknown), one signed 64-bit value per row."""
    count = len(rows) // ROW.size
    out = bytearray(8 * count)
    for byte in range(8):
        out[byte::8] = rows[24 + byte :: ROW.size]
    column = array("q")
    column.frombytes(bytes(out))
    return column


def changed_rows(before: bytes, now: bytes) -> list[int]:
    """The partitions whose rows differ between two readings of the index (a row past the end of one is zeros)."""
    width = max(len(before), len(now))
    before, now = before.ljust(width, b"\0"), now.ljust(width, b"\0")
    block = BLOCK_ROWS * ROW.size
    changed = []
    for start in range(0, width, block):
        if before[start : start + block] == now[start : start + block]:
            continue
        for at in range(start, min(start + block, width), ROW.size):
            if before[at : at + ROW.size] != now[at : at + ROW.size]:
                changed.append(at // ROW.size)
    return changed


class IndexWatch:
    """The index of one backfill as a watcher last saw it."""

    def __init__(self, directory: Path, partitions: Path, size: int, rows: bytes, identity: tuple | None) -> None:
        self.directory = directory
        self.partitions = partitions
        self.size = size
        self.rows = rows
        self._identity = identity

    @classmethod
    def first(
        cls, directory: Path, partitions: Path, size: int, *, writer_alive: bool
    ) -> tuple[IndexWatch, IndexedBoard] | None:
        """The watch and the whole board when the index can be trusted now, else None (read the files)."""
        identity = _identity(directory)  # before the rows: a write after them is seen by the next look
        rows = trusted_rows(directory, partitions, size, writer_alive=writer_alive)
        if rows is None:
            return None
        return cls(directory, partitions, size, rows, identity), IndexedBoard(*board_of(rows, size))

    def look(self, *, writer_alive: bool, again: bool) -> list[IndexRow] | None:
        """The rows that changed since the last look; None when the index cannot be trusted now (read the files).
        ``again`` reads the index even when its file looks unchanged, and returns every pending row too (the
        writer has gone: a row it left pending will not change any more)."""
        identity = _identity(self.directory)
        if identity == self._identity and not again:
            return []
        self._identity = identity
        rows = trusted_rows(self.directory, self.partitions, self.size, writer_alive=writer_alive)
        if rows is None:
            return None
        changed = set(changed_rows(self.rows, rows))
        if again:
            changed.update(pending_rows(rows))
        whole = rows.ljust(len(self.rows), b"\0")  # rows past a shorter index's end read as never attempted
        self.rows = rows
        return [row_at(whole, index) for index in sorted(changed)]


def _identity(directory: Path) -> tuple[int, int, int] | None:
    try:
        found = os.stat(directory / INDEX)
    except OSError:
        return None
    return (found.st_ino, found.st_size, found.st_mtime_ns)
