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
REASON_FIELDS = struct.Struct("<I16xq")  # signature ID and reason offset, from byte 12 of a row
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


def reason_of(record: PartitionRecord) -> str | None:
    """The reason the record's last attempt ended with, as triage and the text filter read it."""
    return record.attempts[-1].error if record.attempts else None


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


def trusted_index(directory: Path, partitions: Path, size: int, *, writer_alive: bool) -> tuple[bytes, bytes] | None:
    """The index's rows (whole rows only, at most ``size``) and its token when it can be trusted (see the module's
    docstring), else None."""
    try:
        with open(directory / INDEX, "rb") as handle:
            header = _header_of(handle.read(HEADER_SIZE), size)
            if header is None or (header[0] != stamp_of(partitions) and not writer_alive):
                return None
            rows = handle.read(size * ROW.size)  # the rows alone, read once: 40 MB at a million, never copied
    except OSError:
        return None
    if len(rows) % ROW.size:  # cut mid-row: the whole rows only
        rows = rows[: len(rows) // ROW.size * ROW.size]
    return (rows, header[1]) if _plausible(rows) else None


def trusted_rows(directory: Path, partitions: Path, size: int, *, writer_alive: bool) -> bytes | None:
    """The rows of a trusted index (``trusted_index``), else None."""
    trusted = trusted_index(directory, partitions, size, writer_alive=writer_alive)
    return None if trusted is None else trusted[0]


def read_indexed(directory: Path, partitions: Path, size: int, *, writer_alive: bool) -> IndexedBoard | None:
    """The board from the index when it can be trusted, else None."""
    rows = trusted_rows(directory, partitions, size, writer_alive=writer_alive)
    return None if rows is None else IndexedBoard(*board_of(rows, size))


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
    statuses = bytearray(rows[1 :: ROW.size])
    statuses.extend(bytes(size - count))
    attempts = array("H")
    attempts.frombytes(bytes(column(rows, 4, 2, count)))
    attempts.extend(array("H", [0]) * (size - count))
    durations = array("f")
    durations.frombytes(bytes(column(rows, 8, 4, count)))
    durations.extend(array("f", [-1.0]) * (size - count))
    verification = bytearray(rows[2 :: ROW.size])
    verification.extend(bytes(size - count))
    board = StatusBoard.from_columns(size, statuses, attempts, durations, verification)
    to_read = pending_rows(rows)
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
    rows = trusted_rows(directory, partitions, size, writer_alive=False)
    return rows is not None and not pending_rows(rows)


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
                fields = REASON_FIELDS.pack(*self._reasons.add(index, reason))
            except OSError:
                self.abandon()
                return
            row = row[:12] + fields + row[12 + REASON_FIELDS.size :]
        self._write(row[1:], at + 1)
        self._write(row[:1], at)
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
        body[at : at + ROW.size] = row
        if index in placed:
            REASON_FIELDS.pack_into(body, at + 12, *placed[index])
    write_atomic(directory / INDEX, bytes(body), durable=False)
