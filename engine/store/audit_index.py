"""``audit.idx``: where each line of ``audit.jsonl`` ends and when it was in the log, so a reader of a long history
starts at the line it wants instead of reading every line before it.

It is derived, never the source of truth. Rows are appended under the audit log's own ``flock`` by whoever
appends to the log (and by a reader that finds lines not indexed yet); the index is not fsynced: a crash leaves
it short, and the next reader or writer indexes the lines after its last row. It is bound to the log file's
device and inode and checked where it is used (its last row ends a line of the log; every line it hands out is
whole), and rebuilt from the log when it fails either check: replaced by a restore, copied, truncated, garbled.

Layout: ``MAGIC``, the log's ``st_dev`` and ``st_ino`` (8 bytes each), then one row of two signed 64-bit integers
per non-blank line: the offset just past the line's ``\\n`` and the time it was in the log, in microseconds since
the epoch (``applied_at``, else ``requested_at``; never earlier than the row before, so the column is sorted
and ``--since`` is a binary search; 0 for a torn line at the start).
"""

from __future__ import annotations

import fcntl
import os
import struct
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import orjson

from engine.base.atomic import FILE_MODE
from engine.dates.instants import to_micros

AUDIT = "audit.jsonl"
AUDIT_INDEX = "audit.idx"
MAGIC = b"BFAUDIX1"
HEADER = struct.Struct("<8sqq")
ROW = struct.Struct("<qq")
READ_CHUNK = 1 << 20


def line_time(line: bytes) -> int | None:
    """The microseconds since the epoch at which an audit line was applied (or requested); None when the line
    is torn or holds neither time."""
    try:
        value = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    return entry_time(value) if isinstance(value, dict) else None


def entry_time(entry: dict) -> int | None:
    """When an audit entry was applied (else requested), in microseconds since the epoch; None without either."""
    text = entry.get("applied_at") or entry.get("requested_at")
    if not isinstance(text, str):
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    if moment.tzinfo is None:
        return None
    return to_micros(moment)


def index_lines(data: bytes, base: int, last_at: int) -> list[tuple[int, int]]:
    """Rows for the whole lines of ``data``, which starts at offset ``base`` of the log just after a line's end;
    ``last_at`` is the time of the row before (times never go back)."""
    rows = []
    start = 0
    while True:
        end = data.find(b"\n", start)
        if end < 0:
            return rows
        line = data[start:end]
        if line.strip():
            own = line_time(line)
            last_at = last_at if own is None else max(last_at, own)
            rows.append((base + end + 1, last_at))
        start = end + 1


class AuditLines:
    """The non-blank lines of one audit log, numbered from 0 in the order they were appended, read through the
    index: :attr:`count` without reading the log, any line by number, a run of lines streamed, the first line
    at or after a time by binary search."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / AUDIT
        self.index_path = directory / AUDIT_INDEX
        self._log: int | None = None
        self._index: int | None = None
        self._disk_rows = 0  # rows read from the index file
        self._rows: list[tuple[int, int]] = []  # rows no index file could keep (a read-only store)
        self._tail = b""  # an unterminated last line (being written, or torn at the end): one line more
        try:
            self._log = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return
        try:
            self._index = os.open(self.index_path, os.O_RDWR | os.O_CREAT, FILE_MODE)
        except OSError:
            self._rows, self._tail = _rows_from(self._log, 0, 0, os.fstat(self._log).st_size)
            return
        fcntl.flock(self._log, fcntl.LOCK_EX)  # the appenders' lock: no line and no row is added meanwhile
        try:
            self._disk_rows, self._tail = refresh(self._log, self._index)
        finally:
            fcntl.flock(self._log, fcntl.LOCK_UN)

    def close(self) -> None:
        for descriptor in (self._log, self._index):
            if descriptor is not None:
                os.close(descriptor)
        self._log = self._index = None

    def __enter__(self) -> AuditLines:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def count(self) -> int:
        return self._indexed + (1 if self._tail.strip() else 0)

    @property
    def _indexed(self) -> int:
        return self._disk_rows + len(self._rows)

    def line(self, number: int) -> bytes:
        """Line ``number`` (0-based) as stored, without its ``\\n``."""
        begin, end = self._span(number)
        if end is None:
            return self._tail.strip()
        assert self._log is not None
        data = os.pread(self._log, end - begin, begin)
        if not data.endswith(b"\n") or b"\n" in data.strip():
            raise IndexError(f"audit index {self.index_path} does not match the log at line {number + 1}")
        return data.strip()

    def lines(self, start: int = 0, stop: int | None = None) -> Iterator[bytes]:
        """Lines ``start`` up to ``stop`` (every one after ``start`` when None), read a chunk at a time."""
        stop = self.count if stop is None else min(stop, self.count)
        if start >= stop:
            return
        assert self._log is not None
        position, number, pending = self._span(start)[0], start, b""
        while number < stop:
            data = os.pread(self._log, READ_CHUNK, position)
            if not data:
                break
            position += len(data)
            *whole, pending = (pending + data).split(b"\n")
            for line in whole:
                if line.strip() and number < stop:
                    number += 1
                    yield line.strip()
        if number < stop and pending.strip():
            yield pending.strip()

    def first_at_or_after(self, moment_us: int) -> int:
        """The number of the first line whose time in the log is ``moment_us`` or later (``count`` when none
        but the unterminated last line): every line before it was in the log before that moment."""
        low, high = 0, self._indexed
        while low < high:
            middle = (low + high) // 2
            if self._row(middle)[1] < moment_us:
                low = middle + 1
            else:
                high = middle
        return low

    def _row(self, number: int) -> tuple[int, int]:
        """Row ``number``: from the index file, or from memory when no index file could be kept (never both)."""
        return self._rows[number] if self._index is None else _row(self._index, number)

    def _span(self, number: int) -> tuple[int, int | None]:
        """[begin, end) of line ``number`` in the log; end None for the unterminated last line."""
        if not 0 <= number < self.count:
            raise IndexError(number)
        begin = self._row(number - 1)[0] if number else 0
        return (begin, None) if number == self._indexed else (begin, self._row(number)[0])


def refresh(log: int, index: int) -> tuple[int, bytes]:
    """Bring the index up to the log's last whole line, rebuilding it when it is not this log's (the caller holds
    the log's ``flock``): (its rows, the unterminated tail of the log)."""
    stat = os.fstat(log)
    if not _usable(log, index, stat):
        os.ftruncate(index, 0)
        os.pwrite(index, HEADER.pack(MAGIC, stat.st_dev, stat.st_ino), 0)
    rows = (os.fstat(index).st_size - HEADER.size) // ROW.size
    covered, last_at = _row(index, rows - 1) if rows else (0, 0)
    added, tail = _rows_from(log, covered, last_at, stat.st_size)
    if added:
        os.pwrite(index, b"".join(ROW.pack(*row) for row in added), HEADER.size + rows * ROW.size)
    return rows + len(added), tail


def index_appended(log: int, directory: Path) -> None:
    """Index what an appender just wrote (it holds the log's ``flock``). A failure here never fails the append:
    the index is derived, and the next reader indexes the lines it lacks."""
    try:
        index = os.open(directory / AUDIT_INDEX, os.O_RDWR | os.O_CREAT, FILE_MODE)
    except OSError:
        return
    try:
        refresh(log, index)
    except OSError:
        pass
    finally:
        os.close(index)


def _row(index: int, number: int) -> tuple[int, int]:
    return ROW.unpack(os.pread(index, ROW.size, HEADER.size + number * ROW.size))


def _usable(log: int, index: int, stat: os.stat_result) -> bool:
    """The index belongs to this log and its last row ends one of the log's lines."""
    size = os.fstat(index).st_size
    if size < HEADER.size or (size - HEADER.size) % ROW.size:
        return False
    if HEADER.unpack(os.pread(index, HEADER.size, 0)) != (MAGIC, stat.st_dev, stat.st_ino):
        return False
    if size == HEADER.size:
        return True
    end, _ = ROW.unpack(os.pread(index, ROW.size, size - ROW.size))
    return 0 < end <= stat.st_size and os.pread(log, 1, end - 1) == b"\n"


def _rows_from(log: int, covered: int, last_at: int, size: int) -> tuple[list[tuple[int, int]], bytes]:
    """Rows for the whole lines from offset ``covered`` to ``size``, and what follows the last ``\\n``."""
    rows: list[tuple[int, int]] = []
    position = covered
    while position < size:
        data = os.pread(log, min(READ_CHUNK, size - position), position)
        cut = data.rfind(b"\n") + 1
        if cut == 0 and position + len(data) < size:  # a line longer than a chunk: read on to its end
            data = os.pread(log, size - position, position)
            cut = data.rfind(b"\n") + 1
        if cut == 0:
            break
        rows += index_lines(data[:cut], position, rows[-1][1] if rows else last_at)
        position += cut
    return rows, os.pread(log, size - position, position) if position < size else b""
