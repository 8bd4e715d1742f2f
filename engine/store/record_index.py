"""``partitions.idx``: a derived index of the partition records, so that no reader reads them all.

One fixed-size row per partition number (after a 64-byte header), written by whoever writes the record: the
row's *pending* flag before the record file is renamed into place, the row's values once it is, the flag
cleared last. A row never written reads as zeros: never attempted. The files stay the truth; the index is
trusted only when

- its header names this plan's size, this row format and this boot (a machine that crashed may have lost
  page-cache writes to either file: the index is rebuilt after a reboot), and
- its stamp (the ``partitions/`` directory's modification time, written after every row) equals the
  directory's now, or a live executor holds the backfill's lock (it stamps after each record it writes, and
  any of its records in flight is pending).

A pending row is read from its file, whatever the row says: a writer killed between its record and its row
loses nothing. An index that is untrusted, damaged or missing is rebuilt from the files by the next writer
(which holds the backfill's lock: ``open_for_writing``); a reader then reads the files itself and writes
nothing. A row whose last attempt has a reason points at its line in ``reasons.log`` and at its signature
(``reason_log``): the header's token names the reason files built with the index. See ``docs/state.md``.
"""

from __future__ import annotations

import contextlib
import os
import re
import struct
import threading
from array import array
from datetime import datetime
from pathlib import Path
from typing import BinaryIO

from engine.base.atomic import write_atomic
from engine.base.boot_clock import boot_id
from engine.dates.instants import to_micros
from engine.store.reason_log import ReasonLog, ReasonsMismatch, remove_reason_logs, write_reason_logs
from engine.store.records import PartitionRecord, status_of
from engine.store.status import VERIFICATION_CODES, Status, StatusBoard

INDEX = "partitions.idx"
MAGIC = b"BFRECIX2"
# magic, plan size, row size, boot ID, stamp (partitions/ mtime in ns), token (names the reason files)
HEADER = struct.Struct("<8sqq16sq8s")
HEADER_SIZE = 64
STAMP_OFFSET = HEADER.size - 16  # the stamp, then the token
TOKEN_OFFSET = STAMP_OFFSET + 8
# flags, status, verification, attempts, exit code, duration (s, -1 unknown), the last attempt's reason's signature
# ID (0: none), last attempt started and finished (µs since the epoch, 0 unknown), its reason's offset in
# reasons.log (0: none)
ROW = struct.Struct("<BBBxHhfIqqq")
SIGNATURE_FIELD, REASON_FIELD = struct.Struct("<I"), struct.Struct("<q")  # at bytes 12 and 32 of a row


def with_reason(row: bytes, signature_id: int, offset: int) -> bytes:
    """``row`` pointing at its reason's signature and line; every other field as it was."""
    return row[:12] + SIGNATURE_FIELD.pack(signature_id) + row[16:32] + REASON_FIELD.pack(offset)


IndexRow = tuple[int, bytes, "str | None"]  # a partition number, its row, its last attempt's reason
PRESENT, PENDING = 1, 2
NO_EXIT = -32768
PENDING_ROW = bytes((PRESENT | PENDING,)) + bytes(ROW.size - 1)  # the values are the file's until written
_PENDING_ROWS = re.compile(rb"[\x02\x03]")


def _boot() -> bytes:
    return (boot_id() or "").replace("-", "").encode()[:16].ljust(16, b"\0")


def stamp_of(partitions: Path) -> int:
    try:
        return os.stat(partitions).st_mtime_ns
    except FileNotFoundError:
        return 0


def _micros(text: str | None) -> int:
    """An attempt's time as exact µs since the epoch; 0 when unknown."""
    try:
        moment = datetime.fromisoformat(text) if text else None
    except ValueError:
        return 0
    return to_micros(moment) if moment is not None and moment.tzinfo is not None else 0


def row_of(record: PartitionRecord) -> bytes:
    """The index row of ``record`` as it is written now (pending cleared)."""
    attempts = record.attempts
    if not attempts:
        return ROW.pack(PRESENT, status_of(record), 0, 0, NO_EXIT, -1.0, 0, 0, 0, 0)
    last = attempts[-1]
    verification = VERIFICATION_CODES.get((last.verification or {}).get("status"), 0)
    exit_code = last.exit_code if last.exit_code is not None and -32768 < last.exit_code < 32768 else NO_EXIT
    duration = -1.0 if last.duration is None else float(last.duration)
    return ROW.pack(
        PRESENT,
        status_of(record),
        verification,
        min(len(attempts), 65_535),
        exit_code,
        duration,
        0,
        _micros(last.started_at),
        _micros(last.finished_at),
        0,
    )


def mark_row(status: Status, number: int, at: str) -> bytes:
    """The row of a partition a bulk mark made its ``number``-th entry, at ``at``: as its record reads with the mark
    merged (no exit code, no verification, a duration of 0)."""
    moment = _micros(at)
    return ROW.pack(PRESENT, status, 0, min(number, 65_535), NO_EXIT, 0.0, 0, moment, moment, 0)


def _runs(indices: list[int]) -> list[tuple[int, int]]:
    """Sorted partition numbers as (first, count) runs of consecutive ones: one write per run."""
    runs: list[tuple[int, int]] = []
    for index in indices:
        if runs and runs[-1][0] + runs[-1][1] == index:
            runs[-1] = (runs[-1][0], runs[-1][1] + 1)
        else:
            runs.append((index, 1))
    return runs


def reason_of(record: PartitionRecord) -> str | None:
    """The reason the record's last attempt ended with, as triage and the text filter read it."""
    return record.reason


def index_row(record: PartitionRecord) -> IndexRow:
    """What the index's writer needs of ``record``: its number, its row, its reason."""
    return record.index, row_of(record), reason_of(record)


class IndexedBoard:
    """What a trusted index says: the board, and the partitions whose records must still be read (pending rows:
    a write in flight or cut short; running ones: readers need their attempts)."""

    def __init__(self, board: StatusBoard, to_read: list[int]) -> None:
        self.board = board
        self.to_read = to_read


def _header_of(header: bytes, size: int) -> tuple[int, bytes] | None:
    """The stamp and token of an index of this plan's size, row format and boot; None for any other."""
    if len(header) < HEADER_SIZE:
        return None
    magic, plan_size, row_size, boot, stamp, token = HEADER.unpack_from(header)
    ours = magic == MAGIC and plan_size == size and row_size == ROW.size and boot == _boot()
    return (stamp, token) if ours else None


def _trusted_token(handle: BinaryIO, partitions: Path, size: int, writer_alive: bool) -> bytes | None:
    """Read the header of the index open as ``handle``: its token when it can be trusted, else None."""
    header = _header_of(handle.read(HEADER_SIZE), size)
    if header is None or (header[0] != stamp_of(partitions) and not writer_alive):
        return None
    return header[1]


def trusted_rows(directory: Path, partitions: Path, size: int, *, writer_alive: bool) -> bytes | None:
    """The index's rows (whole rows only, at most ``size``) when it can be trusted (see the module's docstring),
    else None: what a watcher keeps to compare with its next look."""
    try:
        with open(directory / INDEX, "rb") as handle:
            if _trusted_token(handle, partitions, size, writer_alive) is None:
                return None
            rows = handle.read(size * ROW.size)  # the rows alone, read once: 40 MB at a million, never copied
    except OSError:
        return None
    if len(rows) % ROW.size:  # cut mid-row: the whole rows only
        rows = rows[: len(rows) // ROW.size * ROW.size]
    return rows if _plausible(rows) else None


CHUNK_ROWS = 65_536  # rows read at a time by column readers: 2.5 MB, never the whole index at once


class Columns:
    """Columns of a trusted index, read a chunk of rows at a time (a million rows are 40 MB; the columns a reader
    needs are a few): ``count`` rows, the token, each wanted column's bytes, and the pending rows."""

    def __init__(self, count: int, token: bytes, columns: list[bytearray], pending: list[int]) -> None:
        self.count = count
        self.token = token
        self.columns = columns
        self.pending = pending


def trusted_columns(
    directory: Path, partitions: Path, size: int, wanted: tuple[tuple[int, int], ...], *, writer_alive: bool
) -> Columns | None:
    """The ``wanted`` columns ((offset, width) in a row) of the index when it can be trusted, else None."""
    outs = [bytearray() for _ in wanted]
    pending: list[int] = []
    count = 0
    try:
        with open(directory / INDEX, "rb") as handle:
            token = _trusted_token(handle, partitions, size, writer_alive)
            if token is None:
                return None
            while count < size:
                asked = min(CHUNK_ROWS, size - count)
                chunk = handle.read(asked * ROW.size)
                rows = len(chunk) // ROW.size
                if len(chunk) % ROW.size:  # cut mid-row: the whole rows only
                    chunk = chunk[: rows * ROW.size]
                if not _plausible(chunk):
                    return None
                for out, (offset, width) in zip(outs, wanted, strict=True):
                    out += column(chunk, offset, width, rows)
                pending.extend(count + row for row in pending_rows(chunk))
                count += rows
                if rows < asked:
                    break
    except OSError:
        return None
    return Columns(count, token, outs, pending)


BOARD_COLUMNS = ((1, 1), (4, 2), (8, 4), (2, 1))  # status, attempts, duration, verification


def read_indexed(directory: Path, partitions: Path, size: int, *, writer_alive: bool) -> IndexedBoard | None:
    """The board from the index when it can be trusted, else None."""
    found = trusted_columns(directory, partitions, size, BOARD_COLUMNS, writer_alive=writer_alive)
    return None if found is None else IndexedBoard(*_board_of_columns(found.columns, found.count, size, found.pending))


_FLAGS = bytes((0, PRESENT, PRESENT | PENDING))
_STATUSES = bytes(Status)
_VERIFICATIONS = bytes((0, *VERIFICATION_CODES.values()))


def _plausible(rows: bytes) -> bool:
    """Flags, statuses and verification codes each one that is written (a damaged index is not trusted); each
    column checked at C speed (what ``translate`` leaves was never written)."""
    return not (
        rows[0 :: ROW.size].translate(None, _FLAGS)
        or rows[1 :: ROW.size].translate(None, _STATUSES)
        or rows[2 :: ROW.size].translate(None, _VERIFICATIONS)
    )


def column(rows: bytes, offset: int, width: int, count: int) -> bytearray:
    """``width`` bytes at ``offset`` of every row, side by side (a column of a row-major table, at C speed)."""
    out = bytearray(width * count)
    for byte in range(width):
        out[byte::width] = rows[offset + byte :: ROW.size]
    return out


def board_of(rows: bytes, size: int) -> tuple[StatusBoard, list[int]]:
    """The board of trusted ``rows``, and the partitions whose records must be read (pending and running rows)."""
    count = len(rows) // ROW.size
    columns = [column(rows, offset, width, count) for offset, width in BOARD_COLUMNS]
    return _board_of_columns(columns, count, size, pending_rows(rows))


def _board_of_columns(
    columns: list[bytearray], count: int, size: int, to_read: list[int]
) -> tuple[StatusBoard, list[int]]:
    statuses, attempts_bytes, durations_bytes, verification = columns
    statuses.extend(bytes(size - count))
    attempts = array("H")
    attempts.frombytes(attempts_bytes)
    attempts.extend(array("H", [0]) * (size - count))
    durations = array("f")
    durations.frombytes(durations_bytes)
    durations.extend(array("f", [-1.0]) * (size - count))
    verification.extend(bytes(size - count))
    board = StatusBoard.from_columns(size, statuses, attempts, durations, verification)
    pending = set(to_read)
    start = statuses.find(Status.RUNNING)
    while start >= 0:
        if start not in pending:
            to_read.append(start)
        start = statuses.find(Status.RUNNING, start + 1)
    return board, sorted(to_read)


def settled(directory: Path, partitions: Path, size: int) -> bool:
    """Whether every change to ``partitions/`` went through the index to its end: the stamp is the directory's time
    and no row is pending. Then no writer died between creating a record's temporary file and writing its row, and
    the directory need not be listed for such files (a million entries take most of a second)."""
    found = trusted_columns(directory, partitions, size, (), writer_alive=False)
    return found is not None and not found.pending


def pending_rows(rows: bytes) -> list[int]:
    """The partitions whose rows are pending (a record being written, or whose writer died mid-way)."""
    return [match.start() for match in _PENDING_ROWS.finditer(rows[0 :: ROW.size])]


class RecordIndex:
    """The index as its one writer (the holder of the backfill's lock) keeps it: :meth:`pending` before a record
    is renamed into place, :meth:`written` after. Thread-safe: the executor writes records from two threads.

    The index never costs a record: when it cannot be written (a full disk growing it, an I/O error) it is
    removed, so that readers read the files, and the next writer rebuilds it."""

    def __init__(self, directory: Path, partitions: Path) -> None:
        self.path = directory / INDEX
        self.directory = directory
        self.partitions = partitions
        self._fd: int | None = os.open(self.path, os.O_RDWR | os.O_CLOEXEC)
        self._stamping = threading.Lock()
        self._reasons: ReasonLog | None = None
        try:
            self._reasons = ReasonLog(directory, os.pread(self._fd, 8, TOKEN_OFFSET))
        except ReasonsMismatch:
            self.close()
            raise

    @property
    def usable(self) -> bool:
        return self._fd is not None

    def close(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)
            if self._reasons is not None:
                self._reasons.close()

    def pending(self, index: int) -> None:
        """Before the record of ``index`` changes: readers read its file until :meth:`written`."""
        self._write(PENDING_ROW, HEADER_SIZE + index * ROW.size)  # a whole row: the file never ends mid-row

    def written(self, index: int, row: bytes, reason: str | None = None) -> None:
        """The record of ``index`` is in place: its reason's lines, its values, then the flag cleared, then the
        stamp."""
        at = HEADER_SIZE + index * ROW.size
        if reason is not None and self._reasons is not None and self._fd is not None:
            try:
                placed = self._reasons.add(index, reason)
            except OSError:
                self.abandon()
                return
            row = with_reason(row, *placed)
        self._write(row[1:], at + 1)
        self._write(row[:1], at)
        self.stamp()

    def pending_many(self, indices: list[int]) -> None:
        """:meth:`pending` for many sorted partitions (a bulk mark's), one write per run of consecutive ones."""
        for first, count in _runs(indices):
            self._write(PENDING_ROW * count, HEADER_SIZE + first * ROW.size)

    def written_many(self, rows: dict[int, bytes], reason: str) -> None:
        """A bulk mark is in place: each partition's row (``rows``, sorted by partition), all sharing ``reason``'s
        one line; the values first with the rows still pending, then the same rows with the flag cleared (a reader
        never sees a cleared flag before its values, however a write is torn), then the stamp."""
        if self._reasons is None or self._fd is None:
            return
        try:
            placed = self._reasons.add_shared(reason)
        except OSError:
            self.abandon()
            return
        numbers = sorted(rows)
        final = {index: with_reason(rows[index], *placed) for index in numbers}
        for flags in (PRESENT | PENDING, PRESENT):
            for first, count in _runs(numbers):
                run = b"".join(bytes((flags,)) + final[index][1:] for index in range(first, first + count))
                self._write(run, HEADER_SIZE + first * ROW.size)
        self.stamp()

    def forget(self, index: int) -> None:
        """No record of ``index`` after all: never attempted."""
        self._write(bytes(ROW.size), HEADER_SIZE + index * ROW.size)
        self.stamp()

    def stamp(self) -> None:
        """The directory's time after every write so far: taken and written under one lock, so that the last
        stamp written is the newest."""
        with self._stamping:
            self._write(struct.pack("<q", stamp_of(self.partitions)), STAMP_OFFSET)

    def _write(self, data: bytes, offset: int) -> None:
        fd = self._fd
        if fd is None:
            return
        try:
            written = os.pwrite(fd, data, offset)
        except OSError:
            written = -1
        if written != len(data):  # a failure or a short write (a full disk): never half an index
            self.abandon()

    def abandon(self) -> None:
        """Stop keeping the index and remove it: readers read the files until a writer rebuilds it."""
        self.close()
        with contextlib.suppress(OSError):
            os.unlink(self.path)
        remove_reason_logs(self.directory)


def write_index(directory: Path, size: int, rows: dict[int, bytes], stamp: int, reasons: dict[int, str]) -> None:
    """A whole new index of ``rows`` (partition number → row) and ``reasons`` (partition number → its last
    attempt's reason), stamped with ``stamp`` (the directory's time taken before its files were read): the reason
    files first, then the index renamed into place."""
    token = os.urandom(8)
    placed = write_reason_logs(directory, token, reasons)
    high = max(rows, default=-1) + 1
    body = bytearray(HEADER_SIZE + high * ROW.size)
    HEADER.pack_into(body, 0, MAGIC, size, ROW.size, _boot(), stamp, token)
    for index, row in rows.items():
        at = HEADER_SIZE + index * ROW.size
        body[at : at + ROW.size] = with_reason(row, *placed[index]) if index in placed else row
    write_atomic(directory / INDEX, bytes(body), durable=False)
