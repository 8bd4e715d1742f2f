"""The audit log's offset index against the log itself: every line found by number, streamed, and by time, and an
index that is missing, short, garbled or another log's rebuilt with nothing lost."""

from __future__ import annotations

import errno
import fcntl
import json
import os
import shutil
import threading
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.base.atomic import FILE_MODE
from engine.dates.instants import to_micros
from engine.store import audit, audit_index
from engine.store.audit_index import AUDIT, AUDIT_INDEX, HEADER, ROW, AuditLines, entry_time

START = datetime(2026, 12, 1, tzinfo=UTC)


def stamp(minutes: int) -> str:
    return (START + timedelta(minutes=minutes)).isoformat(timespec="microseconds").replace("+00:00", "Z")


def mark(minutes: int, reason: str = "r") -> dict:
    return audit.entry(action="MARK", reason=reason, applied_at=stamp(minutes))


def oracle(directory) -> list[bytes]:
    """The log's non-blank lines, read whole."""
    return [line.strip() for line in (directory / AUDIT).read_bytes().split(b"\n") if line.strip()]


def seen(directory) -> list[bytes]:
    with AuditLines(directory) as log:
        by_number = [log.line(number) for number in range(log.count)]
        streamed = list(log.lines())
    assert by_number == streamed
    return streamed


def test_appends_index_every_line_and_lines_are_found_by_number_and_streamed(tmp_path):
    """Three appends of several lines: the index has a row per line, each line is read whole by number, and a
    stream from any line gives the rest."""
    audit.append(tmp_path, [mark(1), mark(2)])
    audit.append(tmp_path, [mark(3)])
    audit.append(tmp_path, [mark(4), mark(5), mark(6)])
    assert (os.path.getsize(tmp_path / AUDIT_INDEX) - HEADER.size) // ROW.size == 6
    assert seen(tmp_path) == oracle(tmp_path)
    with AuditLines(tmp_path) as log:
        assert list(log.lines(4)) == oracle(tmp_path)[4:]
        assert list(log.lines(1, 3)) == oracle(tmp_path)[1:3]


def test_a_missing_audit_log_has_no_line(tmp_path):
    """No audit.jsonl: nothing, and no index made."""
    with AuditLines(tmp_path) as log:
        assert log.count == 0 and list(log.lines()) == []
    assert not (tmp_path / AUDIT_INDEX).exists()


@pytest.mark.parametrize(
    "damage",
    ["deleted", "garbled", "cut mid-row", "short (a crash before its rows)", "another log's", "empty"],
)
def test_a_damaged_or_stale_index_is_rebuilt_or_completed_with_nothing_lost(tmp_path, damage):
    """Whatever happened to audit.idx, every line of the log is found, in order, and the index is whole again."""
    audit.append(tmp_path, [mark(minute) for minute in range(40)])
    index = tmp_path / AUDIT_INDEX
    if damage == "deleted":
        index.unlink()
    elif damage == "garbled":
        index.write_bytes(os.urandom(HEADER.size + 5 * ROW.size))
    elif damage == "cut mid-row":
        os.truncate(index, index.stat().st_size - 3)
    elif damage == "short (a crash before its rows)":
        os.truncate(index, HEADER.size + 7 * ROW.size)
    elif damage == "another log's":
        copy = tmp_path / "copy"
        shutil.copytree(tmp_path, copy)  # a copied directory: new inode, the index's rows as they were
        audit.append(tmp_path, [mark(50)])
        (copy / AUDIT).write_bytes((tmp_path / AUDIT).read_bytes()[::-1].strip() + b"\n")  # same size, other lines
        tmp_path = copy
        index = copy / AUDIT_INDEX
    elif damage == "empty":
        index.write_bytes(b"")
    assert seen(tmp_path) == oracle(tmp_path)
    assert (index.stat().st_size - HEADER.size) // ROW.size == len(oracle(tmp_path))


def test_rows_whose_last_line_the_log_does_not_end_are_rebuilt(tmp_path):
    """An index whose last row points past the log's end (or not at a line's end) is not this log's."""
    audit.append(tmp_path, [mark(minute) for minute in range(10)])
    rows = (tmp_path / AUDIT_INDEX).read_bytes()
    audit.append(tmp_path, [mark(20)])
    log = (tmp_path / AUDIT).read_bytes()
    (tmp_path / AUDIT).write_bytes(log[: len(log) // 2] + b"\n")  # same inode, shorter than the rows say
    (tmp_path / AUDIT_INDEX).write_bytes(rows[: HEADER.size] + rows[HEADER.size :] + ROW.pack(len(log), 0))
    assert seen(tmp_path) == oracle(tmp_path)


def test_a_torn_line_is_a_line_and_the_next_append_starts_after_it(tmp_path):
    """A line torn by a crash mid-append (no newline) is counted and read as written, then an append puts its own
    lines after it; an unterminated line is counted before any append too."""
    audit.append(tmp_path, [mark(1)])
    with open(tmp_path / AUDIT, "ab") as handle:
        handle.write(b'{"action": "MA')
    with AuditLines(tmp_path) as log:
        assert log.count == 2 and log.line(1) == b'{"action": "MA' and list(log.lines(1)) == [b'{"action": "MA']
    audit.append(tmp_path, [mark(2)])
    assert seen(tmp_path) == oracle(tmp_path) and len(oracle(tmp_path)) == 3


def test_blank_lines_are_no_lines(tmp_path):
    """Blank lines (a log edited by hand) are skipped as every reader skips them: line numbers stay the same."""
    audit.append(tmp_path, [mark(1)])
    with open(tmp_path / AUDIT, "ab") as handle:
        handle.write(b"\n  \n\n")
    audit.append(tmp_path, [mark(2)])
    assert seen(tmp_path) == oracle(tmp_path) and len(oracle(tmp_path)) == 2


def test_a_full_disk_while_indexing_costs_the_append_nothing(tmp_path, monkeypatch):
    """The index's write fails with ENOSPC: the append still returns its lines, durably in the log, and the next
    reader indexes them."""

    def full(*_args):
        raise OSError(errno.ENOSPC, "No space left on device")

    audit.append(tmp_path, [mark(1)])
    monkeypatch.setattr(audit_index.os, "pwrite", full)
    assert audit.append(tmp_path, [mark(2), mark(3)]) == 2
    monkeypatch.undo()
    assert seen(tmp_path) == oracle(tmp_path) and len(oracle(tmp_path)) == 3


def test_a_reader_waits_for_an_append_in_progress(tmp_path):
    """While an appender holds the log's lock (its lines half written), a reader does not index: it waits, then
    sees the whole append."""
    audit.append(tmp_path, [mark(1)])
    descriptor = os.open(tmp_path / AUDIT, os.O_RDWR | os.O_APPEND)
    fcntl.flock(descriptor, fcntl.LOCK_EX)
    os.write(descriptor, audit_line(mark(2))[:30])
    counted = []
    reader = threading.Thread(target=lambda: counted.append(AuditLines(tmp_path).count))
    reader.start()
    reader.join(timeout=0.5)
    waited = reader.is_alive()
    os.write(descriptor, audit_line(mark(2))[30:])
    os.close(descriptor)
    reader.join()
    assert waited and counted == [2]


def audit_line(entry: dict) -> bytes:
    import orjson

    return orjson.dumps(entry) + b"\n"


def test_a_line_longer_than_a_read_is_indexed_whole(tmp_path, monkeypatch):
    """Lines of hundreds of bytes read 16 bytes at a time: each is still one line."""
    monkeypatch.setattr(audit_index, "READ_CHUNK", 16)
    audit.append(tmp_path, [mark(minute, "x" * 300) for minute in range(5)])
    (tmp_path / AUDIT_INDEX).unlink()
    assert seen(tmp_path) == oracle(tmp_path)


def test_an_index_that_cannot_be_written_costs_the_append_nothing(tmp_path):
    """audit.idx is a directory (unwritable): appends still land, and readers index the log in memory."""
    (tmp_path / AUDIT_INDEX).mkdir()
    assert audit.append(tmp_path, [mark(1), mark(2)]) == 2
    assert seen(tmp_path) == oracle(tmp_path) and len(oracle(tmp_path)) == 2


def test_a_line_handed_out_whole_or_refused(tmp_path):
    """An index whose rows no longer fall on line ends (the log rewritten in place behind it) is never read as
    lines cut in the middle: the read refuses."""
    audit.append(tmp_path, [mark(minute) for minute in range(3)])
    with AuditLines(tmp_path) as log:
        data = (tmp_path / AUDIT).read_bytes()
        (tmp_path / AUDIT).write_bytes(b"\n".join([b"x" * 10] * (len(data) // 11)).ljust(len(data), b"y"))
        with pytest.raises(IndexError):
            log.line(1)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=500), min_size=1, max_size=40), st.integers(0, 520))
def test_since_starts_at_the_first_line_it_may_keep_whatever_the_order_of_times(tmp_path_factory, minutes, since):
    """Lines applied out of order (an entry made before the lock, appended after a later one): every line before
    the binary search's answer was applied before `since`, so filtering from there by each line's own time keeps
    exactly the lines an oracle reading every line keeps."""
    directory = tmp_path_factory.mktemp("audit")
    for minute in minutes:
        audit.append(directory, [mark(minute)])
    moment = to_micros(START + timedelta(minutes=since))
    with AuditLines(directory) as log:
        first = log.first_at_or_after(moment)
        kept = [line for line in log.lines(first) if audit_index.line_time(line) >= moment]
    assert kept == [line for line in oracle(directory) if audit_index.line_time(line) >= moment]


def test_an_entry_time_is_exact_to_the_microsecond_and_needs_its_offset():
    """applied_at wins over requested_at; a time without its offset is no time (never read as local)."""
    assert entry_time({"applied_at": "2026-12-01T00:00:00.000001Z", "requested_at": "2020-01-01T00:00:00Z"}) == (
        to_micros(START) + 1
    )
    assert entry_time({"requested_at": "2026-12-01T01:00:00+01:00"}) == to_micros(START)
    assert entry_time({"applied_at": "2026-12-01T00:00:00"}) is None
    assert entry_time({"applied_at": 5}) is None and entry_time({}) is None


EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def expected_rows(log: bytes) -> list[tuple[int, int]]:
    """(end offset past the newline, time) of every whole non-blank line, computed without the module: a line's
    own time is its applied_at (else requested_at) with an offset, in µs; a line without one, and any line
    before an earlier-dated one, keeps the time before it (0 at the start)."""
    rows, position, last = [], 0, 0
    for line in log.split(b"\n")[:-1]:
        position += len(line) + 1
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except ValueError:
            value = None
        text = (value.get("applied_at") or value.get("requested_at")) if isinstance(value, dict) else None
        moment = datetime.fromisoformat(text) if isinstance(text, str) else None
        if moment is not None and moment.tzinfo is not None:
            last = max(last, (moment - EPOCH) // timedelta(microseconds=1))
        rows.append((position, last))
    return rows


LINES = st.one_of(
    st.builds(
        lambda m, n: json.dumps({"action": "MARK", "applied_at": stamp(m), "reason": "x" * n}).encode(),
        st.integers(0, 300),
        st.integers(0, 120),
    ),
    st.builds(lambda m: json.dumps({"requested_at": stamp(m)}).encode(), st.integers(0, 300)),
    st.sampled_from([b"[1, 2]", b"3", b'{"applied_at": "2026-12-01T00:00:00"}', b'{"action": "MA', b"  ", b""]),
)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(LINES, max_size=40),
    st.sampled_from([b"", b'{"action": "torn', b"   "]),
    st.integers(1, 200),
    st.sampled_from(["file", "memory"]),
    st.data(),
)
def test_every_line_row_and_time_against_an_oracle_whatever_the_read_size(
    tmp_path_factory, lines, tail, chunk, where, data
):
    """Any log — lines of any length, blank ones, lines that are no JSON object or have no time, times out of
    order, an unterminated last line — read in chunks of 1 to 200 bytes, with the index in a file or (none can be
    written) in memory: the rows are the oracle's, and every line is found by number, by stream, by any range and
    by time."""
    directory = tmp_path_factory.mktemp("audit")
    log = b"".join(line + b"\n" for line in lines) + tail
    (directory / AUDIT).write_bytes(log)
    if where == "memory":
        (directory / AUDIT_INDEX).mkdir()
    rows = expected_rows(log)
    whole = oracle(directory)
    saved = audit_index.READ_CHUNK
    audit_index.READ_CHUNK = chunk
    try:
        with AuditLines(directory) as read:
            assert read.count == len(whole)
            assert [read._row(number) for number in range(len(rows))] == rows
            assert [read.line(number) for number in range(read.count)] == whole == list(read.lines())
            start, stop = data.draw(st.integers(0, len(whole) + 1)), data.draw(st.integers(0, len(whole) + 1))
            assert list(read.lines(start, stop)) == whole[start:stop]
            moment = data.draw(st.integers(0, to_micros(START + timedelta(minutes=301))))
            assert read.first_at_or_after(moment) == next(
                (number for number, (_, at) in enumerate(rows) if at >= moment), len(rows)
            )
            with pytest.raises(IndexError):
                read.line(read.count)
    finally:
        audit_index.READ_CHUNK = saved
    if where == "file":
        stored = (directory / AUDIT_INDEX).read_bytes()
        status = os.stat(directory / AUDIT)
        assert stored[: HEADER.size] == HEADER.pack(audit_index.MAGIC, status.st_dev, status.st_ino)
        assert [ROW.unpack_from(stored, at) for at in range(HEADER.size, len(stored), ROW.size)] == rows


def count_reads(monkeypatch) -> list[int]:
    """The sizes of the module's reads from now on."""
    read_bytes = []
    real_pread = os.pread

    def counted(descriptor, size, offset):
        data = real_pread(descriptor, size, offset)
        read_bytes.append(len(data))
        return data

    monkeypatch.setattr(audit_index.os, "pread", counted)
    return read_bytes


def test_the_first_lines_of_a_long_log_are_read_without_reading_the_rest(tmp_path, monkeypatch):
    """The first screen of a long history reads about its own lines, not the log to its end: ten lines out of
    5,000 read in 256-byte chunks cost their own bytes and at most two chunks more."""
    audit.append(tmp_path, [mark(minute % 500) for minute in range(5_000)])
    monkeypatch.setattr(audit_index, "READ_CHUNK", 256)
    with AuditLines(tmp_path) as log:
        read_bytes = count_reads(monkeypatch)
        assert list(log.lines(100, 110)) == oracle(tmp_path)[100:110]
    assert sum(read_bytes) <= sum(len(line) + 1 for line in oracle(tmp_path)[100:110]) + 2 * 256 + 2 * ROW.size


def test_an_index_that_belongs_to_the_log_is_kept_not_rebuilt(tmp_path):
    """A whole index of this log is used as it is (a time written into its first row by hand is read back), with
    or without an unterminated line after its last row — rebuilding it every time would read the whole log."""
    audit.append(tmp_path, [mark(minute) for minute in range(5)])
    index = tmp_path / AUDIT_INDEX
    for tail in (b"", b'{"action": "torn'):
        with open(tmp_path / AUDIT, "ab") as handle:
            handle.write(tail)
        data = bytearray(index.read_bytes())
        end, _ = ROW.unpack_from(data, HEADER.size)
        ROW.pack_into(data, HEADER.size, end, 7)
        index.write_bytes(bytes(data))
        with AuditLines(tmp_path) as log:
            assert log._row(0) == (end, 7)


@pytest.mark.parametrize("size", [8, HEADER.size + 1])
def test_an_index_cut_inside_its_header_is_rebuilt(tmp_path, size):
    """Cut to 8 bytes (a whole number of rows short of its header) or one byte past it: rebuilt, nothing lost."""
    audit.append(tmp_path, [mark(minute) for minute in range(4)])
    os.truncate(tmp_path / AUDIT_INDEX, size)
    assert seen(tmp_path) == oracle(tmp_path)
    assert (tmp_path / AUDIT_INDEX).stat().st_size == HEADER.size + 4 * ROW.size


def test_an_index_whose_last_row_ends_mid_line_is_rebuilt(tmp_path):
    """The last row points inside the log but not just past a newline: not this log's index any more."""
    audit.append(tmp_path, [mark(minute) for minute in range(4)])
    index = tmp_path / AUDIT_INDEX
    data = bytearray(index.read_bytes())
    end, at = ROW.unpack_from(data, len(data) - ROW.size)
    ROW.pack_into(data, len(data) - ROW.size, end - 5, at)
    index.write_bytes(bytes(data))
    assert seen(tmp_path) == oracle(tmp_path)


def test_a_row_spanning_two_lines_is_refused_naming_the_line(tmp_path):
    """A row whose span ends on a newline but holds another inside (the log rewritten in place behind an open
    reader) is refused, naming the line counted from 1."""
    audit.append(tmp_path, [mark(minute) for minute in range(3)])
    with AuditLines(tmp_path) as log:
        (tmp_path / AUDIT).write_bytes(b"a\n" * (os.path.getsize(tmp_path / AUDIT) // 2))
        with pytest.raises(IndexError, match="at line 2$"):
            log.line(1)


def test_the_index_file_is_private_whoever_makes_it_and_closing_twice_is_harmless(tmp_path):
    """audit.idx is made with the store's file mode by an appender and by a reader alike."""
    audit.append(tmp_path, [mark(1)])
    assert (tmp_path / AUDIT_INDEX).stat().st_mode & 0o777 == FILE_MODE
    (tmp_path / AUDIT_INDEX).unlink()
    log = AuditLines(tmp_path)
    log.close()
    log.close()
    assert (tmp_path / AUDIT_INDEX).stat().st_mode & 0o777 == FILE_MODE


def test_indexing_a_log_reads_each_of_its_bytes_about_once(tmp_path, monkeypatch):
    """Rebuilding the index of 2,000 lines read in 1 KiB chunks reads the log about once over, never a
    chunk's lines one at a time or the rest of the log again for every chunk, and never more than a chunk at once."""
    audit.append(tmp_path, [mark(minute % 500) for minute in range(2_000)])
    (tmp_path / AUDIT_INDEX).unlink()
    monkeypatch.setattr(audit_index, "READ_CHUNK", 1024)
    read_bytes = count_reads(monkeypatch)
    with AuditLines(tmp_path) as log:
        assert log.count == 2_000
    assert sum(read_bytes) <= 1.5 * os.path.getsize(tmp_path / AUDIT)  # each chunk's cut line is read again
    assert max(read_bytes) <= 1024  # a chunk at a time: a history of millions of lines is never in memory whole
