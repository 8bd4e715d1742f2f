"""Watching a backfill another process runs: through its record index only the records of running and pending
partitions are read (without one, each record once), and what is read counts the watched run's own progress."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.dates.formatting import InstantFormatter
from engine.spec.parallelism import Parallelism
from engine.store import records as records_module
from engine.store import state_store as state_store_module
from engine.store.index_watch import BLOCK_ROWS, changed_rows, finished_column
from engine.store.record_index import HEADER_SIZE, INDEX, ROW
from engine.store.records import Attempt, PartitionRecord, RecordStatus
from engine.store.state_store import StateStore
from engine.store.status import Status
from tests.backfills import hold_lock, release, rewrite
from tests.saved_backfills import saved_command_backfill
from tui.app.sources import WatchedSource

RUN_STARTED = 1_764_000_000.0  # 2025-11-24T16:00:00Z


def failed_in_flight(prepared, index) -> None:
    """Partition 3's record renamed in, failed, while its row stays pending (a write in flight); the stamp taken."""
    spec = prepared.spec
    interval = spec.plan.interval(3)
    record = PartitionRecord.fresh(
        spec.ids.of(interval.start, interval.end), interval, InstantFormatter(spec.zone), RecordStatus.FAILED
    )
    record.attempts.append(attempt(RecordStatus.FAILED, "2025-11-24T16:03:00Z"))
    rewrite(path_of(prepared, 3), record.to_bytes())
    index.stamp()


def attempt(status: str, finished: str | None) -> Attempt:
    return Attempt(run_id="r", status=status, started_at="2025-11-24T15:00:00Z", finished_at=finished)


@pytest.fixture
def watched(tmp_path, monkeypatch):
    """Five days: one ended by an earlier run, one ended in the watched run, one running, two queued; the
    generation says the run selected three and when it began. Every record read is counted."""
    prepared = saved_command_backfill(tmp_path, end="2024-01-05")
    store, spec = prepared.store, prepared.spec
    formatter = InstantFormatter(spec.zone)
    for index, status, finished in [
        (0, RecordStatus.SUCCEEDED, "2025-11-24T15:30:00Z"),  # before the run began
        (1, RecordStatus.FAILED, "2025-11-24T16:00:05Z"),  # in the watched run
        (2, RecordStatus.RUNNING, None),
    ]:
        interval = spec.plan.interval(index)
        record = PartitionRecord.fresh(spec.ids.of(interval.start, interval.end), interval, formatter, status)
        record.attempts.append(attempt(status, finished))
        store.write_record(record, durable=False)
    generation = store.write_generation(2, 4242, 1.0, "2025-11-24T15:59:59Z")
    store.record_selection(generation, 3, RUN_STARTED, (2, 2))
    reads: list[str] = []

    def counted(original):
        def read(path, *args, **kwargs):
            reads.append(str(path))
            return original(path, *args, **kwargs)

        return read

    monkeypatch.setattr(state_store_module, "read_record", counted(state_store_module.read_record))
    monkeypatch.setattr(records_module, "read_record", counted(records_module.read_record))
    return prepared, reads


def load(prepared) -> WatchedSource:
    return WatchedSource.load(prepared.spec, prepared.store, prepared.options, Parallelism(2, 2, None))


def poll_now(source: WatchedSource):
    """The next poll, whenever the last scan was (the source rescans at most every 0.3 s)."""
    source._last_scan = 0.0
    return source.poll()


def path_of(prepared, index: int) -> Path:
    interval = prepared.spec.plan.interval(index)
    return prepared.store.record_path(prepared.spec.ids.of(interval.start, interval.end))


def rewrite_record(prepared, index: int, change) -> None:
    """The record of ``index`` changed and written back as the executor does (its index row kept)."""
    store, spec = prepared.store, prepared.spec
    interval = spec.plan.interval(index)
    record = store.read_record(spec.ids.of(interval.start, interval.end), spec.plan, spec.ids.of)
    change(record)
    store.write_record(record, durable=False)


def test_through_the_index_only_the_running_record_is_read_and_the_run_s_own_progress_is_counted(watched):
    """The record index gives the board and each partition's end: only the running partition's record is read
    (not every file); the run selected three and one of them ended since it began (the earlier run's success is
    not counted); the running one is known."""
    prepared, reads = watched
    assert (prepared.store.directory / INDEX).exists()
    source = load(prepared)
    assert set(reads) == {str(path_of(prepared, 2))}
    assert (source.progress.selected, source.progress.finished) == (3, 1)
    state = source.poll()
    assert [p.index for p in state.running] == [2]
    assert (state.selected, state.finished) == (3, 1)
    assert state.counts["succeeded"] == 1 and state.counts["failed"] == 1 and state.counts["queued"] == 2


def test_without_the_index_each_record_is_read_once_and_the_progress_is_the_same(watched):
    """No index to trust: three records, three reads, one each, and the same progress."""
    prepared, reads = watched
    prepared.store.close_index()
    (prepared.store.directory / INDEX).unlink()
    source = load(prepared)
    assert len(reads) == 3 and len(set(reads)) == 3
    assert (source.progress.selected, source.progress.finished) == (3, 1)
    state = source.poll()
    assert [p.index for p in state.running] == [2]
    assert (state.selected, state.finished) == (3, 1)


@pytest.mark.parametrize("with_index", [True, False], ids=["index", "files"])
def test_a_record_written_while_it_was_read_is_read_again_on_the_next_scan(watched, with_index):
    """A record that changes after the source opened is read again by the next scan (through the index's row, or
    the file's time), so the screen never keeps a stale status."""
    prepared, _ = watched
    store = prepared.store
    if not with_index:
        store.close_index()
        (store.directory / INDEX).unlink()
    holder = hold_lock(store.lock_path)  # the executor that runs it, still there
    try:
        source = load(prepared)

        def succeed(record):
            record.status = RecordStatus.SUCCEEDED
            record.attempts[-1] = attempt(RecordStatus.SUCCEEDED, "2025-11-24T16:01:00Z")

        rewrite_record(prepared, 2, succeed)
        path = path_of(prepared, 2)
        before = os.stat(path).st_mtime_ns
        os.utime(path, ns=(before + 1_000_000_000, before + 1_000_000_000))  # a later write, whatever the clock
        os.utime(store.partitions, ns=(before + 2_000_000_000, before + 2_000_000_000))
        if with_index:
            store.index_for_writing().stamp()  # the executor stamps after every record
        state = poll_now(source)
        assert state.state == "running elsewhere"
        assert state.counts["succeeded"] == 2 and not state.running and state.finished == 2
    finally:
        release(holder)


def test_a_running_record_written_again_with_its_child_s_pid_is_read_again(watched):
    """The executor writes a running record twice — before its child starts, then with the child's PID — and
    the index row is the same both times: the watcher still reads the second record and shows the PID."""
    prepared, _ = watched
    holder = hold_lock(prepared.store.lock_path)
    try:
        source = load(prepared)
        assert [p.pid for p in source.poll().running] == [0]

        def started(record):
            record.attempts[-1].pid = 4_321

        rewrite_record(prepared, 2, started)
        assert [p.pid for p in poll_now(source).running] == [4_321]
    finally:
        release(holder)


def test_an_index_removed_while_watched_hands_over_to_the_files(watched):
    """The executor removes an index it cannot write (a full disk): the watcher reads the files from then on
    and still sees every change."""
    prepared, _ = watched
    store = prepared.store
    holder = hold_lock(store.lock_path)
    try:
        source = load(prepared)
        (store.directory / INDEX).unlink()

        def fail(record):
            record.status = RecordStatus.FAILED
            record.attempts[-1] = attempt(RecordStatus.FAILED, "2025-11-24T16:02:00Z")

        rewrite_record(prepared, 2, fail)
        state = poll_now(source)
        assert state.counts["failed"] == 2 and state.counts["running"] == 0 and not state.running
    finally:
        release(holder)


def test_a_row_the_gone_writer_left_pending_is_read_from_its_file_at_the_end(watched):
    """A row that went pending, was read while its record did not exist yet, and whose record was then renamed
    in by a writer that died before writing the row (another record's write stamped the index meanwhile): once
    the lock is free the watcher reads every pending row's file one last time."""
    prepared, _ = watched
    store = prepared.store
    holder = hold_lock(store.lock_path)
    try:
        source = load(prepared)
        index = store.index_for_writing()
        index.pending(3)
        assert poll_now(source).counts["queued"] == 2  # read while pending: no record yet
        failed_in_flight(prepared, index)
    finally:
        release(holder)
    state = poll_now(source)
    assert state.state == "idle"
    assert state.counts["failed"] == 2 and state.counts["queued"] == 1


def test_a_partition_that_ran_and_ended_between_two_looks_is_taken_from_its_row(watched):
    """A quick child's partition goes from queued to ended between two scans, never seen running: its row alone
    gives its status, attempts, duration, verification and end (the run's progress counts it), and its record is
    not read."""
    prepared, reads = watched
    store, spec = prepared.store, prepared.spec
    holder = hold_lock(store.lock_path)
    try:
        source = load(prepared)
        interval = spec.plan.interval(4)
        record = PartitionRecord.fresh(
            spec.ids.of(interval.start, interval.end), interval, InstantFormatter(spec.zone), RecordStatus.SUCCEEDED
        )
        for finished in ("2025-11-24T15:10:00Z", "2025-11-24T16:04:00Z"):
            record.attempts.append(attempt(RecordStatus.SUCCEEDED, finished))
        record.attempts[-1].duration = 12.5
        record.attempts[-1].verification = {"status": "warning"}
        store.write_record(record, durable=False)
        interval = spec.plan.interval(3)  # settled meanwhile, as ended before this run began: not its progress
        earlier = PartitionRecord.fresh(
            spec.ids.of(interval.start, interval.end), interval, InstantFormatter(spec.zone), RecordStatus.CANCELLED
        )
        earlier.attempts.append(attempt(RecordStatus.CANCELLED, "2025-11-24T15:50:00Z"))
        store.write_record(earlier, durable=False)
        reads.clear()
        state = poll_now(source)
    finally:
        release(holder)
    assert str(path_of(prepared, 4)) not in reads
    assert state.counts["succeeded"] == 2 and state.counts["cancelled"] == 1 and state.finished == 2
    board = source.board
    assert (board.attempts(4), board.duration(4), board.verification(4)) == (2, 12.5, 2)


@settings(max_examples=200)
@given(
    st.lists(st.binary(min_size=ROW.size, max_size=ROW.size), max_size=3000),
    st.data(),
)
def test_the_changed_rows_are_exactly_those_that_differ(rows, data):
    """Against a row-by-row comparison: any rows changed, rows added past the end or cut (zeros), across blocks."""
    before = b"".join(rows)
    after_rows = list(rows)
    for _ in range(data.draw(st.integers(0, 5))):
        if after_rows:
            at = data.draw(st.integers(0, len(after_rows) - 1))
            after_rows[at] = data.draw(st.binary(min_size=ROW.size, max_size=ROW.size))
    after_rows += data.draw(st.lists(st.binary(min_size=ROW.size, max_size=ROW.size), max_size=3))
    after = b"".join(after_rows[: data.draw(st.integers(0, len(after_rows)))])
    zero = bytes(ROW.size)
    expected = [
        index
        for index in range(max(len(rows), len(after_rows)))
        if (rows[index] if index < len(rows) else zero) != (after[index * ROW.size : (index + 1) * ROW.size] or zero)
    ]
    assert changed_rows(before, after) == expected


def test_rows_changed_at_the_edges_of_a_block_are_found():
    """The first and last row of a block of rows compared as one slice, and the last row of all, past a block
    with no change; zero rows past either end are no change."""
    before = bytes(ROW.size * 4 * BLOCK_ROWS)
    after = bytearray(before)
    changed = [BLOCK_ROWS, 2 * BLOCK_ROWS - 1, 2 * BLOCK_ROWS, 3 * BLOCK_ROWS - 1, 4 * BLOCK_ROWS - 1]
    for index in changed:
        after[index * ROW.size] = 1
    assert changed_rows(before, bytes(after)) == changed
    zero = bytes(ROW.size)
    assert changed_rows(zero * 2, zero) == [] and changed_rows(zero, zero * 2) == []


@given(st.lists(st.binary(min_size=ROW.size, max_size=ROW.size), max_size=50))
def test_the_finished_column_is_each_row_s_end_time(rows):
    """Against unpacking each row: the last attempt's end, a signed 64-bit number of µs, row by row."""
    data = b"".join(rows)
    assert list(finished_column(data)) == [ROW.unpack(row)[8] for row in rows]


def test_a_stale_stamp_under_a_live_executor_is_trusted_and_no_record_is_read_but_the_running_one(watched):
    """The executor holding the lock has a record in flight (the directory changed after its last stamp): the
    watcher still opens and follows through the index — its in-flight records are pending rows — and reads only
    the running partition's record."""
    prepared, reads = watched
    store = prepared.store
    holder = hold_lock(store.lock_path)
    try:
        os.utime(store.partitions, ns=(1_000_000_000, 1_000_000_000))  # the stamp is behind the directory now
        reads.clear()
        source = load(prepared)
        assert set(reads) == {str(path_of(prepared, 2))}

        def longer(record):
            record.attempts[-1].duration = 0.5

        rewrite_record(prepared, 0, longer)
        os.utime(store.partitions, ns=(2_000_000_000, 2_000_000_000))
        reads.clear()
        poll_now(source)
        assert str(path_of(prepared, 0)) not in reads and source.board.duration(0) == 0.5
    finally:
        release(holder)


def test_a_record_removed_and_the_index_rebuilt_shorter_while_watched_is_queued_again(watched):
    """A takeover rebuilds the index after the running partition's record was moved away (the highest recorded is
    then partition 1): that partition reads as never attempted, and nothing else changes."""
    prepared, _ = watched
    store = prepared.store
    holder = hold_lock(store.lock_path)
    try:
        source = load(prepared)
        store.close_index()
        path_of(prepared, 2).unlink()
        (store.directory / INDEX).unlink()
        StateStore(store.directory).index_for_writing()
        assert (store.directory / INDEX).stat().st_size == HEADER_SIZE + 2 * ROW.size
        state = poll_now(source)
        assert state.counts["queued"] == 3 and state.counts["running"] == 0 and not state.running
        assert (state.counts["succeeded"], state.counts["failed"]) == (1, 1)
    finally:
        release(holder)


def test_a_pending_row_at_opening_counts_its_record_s_end_in_the_run_s_progress(watched):
    """Opened while a record is in flight (its row pending: zeros but the flag): the board and the run's progress
    take that record, which ended in the watched run, from its file — not the row's unknown end."""
    prepared, _ = watched
    store = prepared.store
    holder = hold_lock(store.lock_path)
    try:
        index = store.index_for_writing()
        index.pending(3)
        failed_in_flight(prepared, index)
        source = load(prepared)
        assert source.board.status(3) is Status.FAILED
        assert (source.progress.selected, source.progress.finished) == (3, 2)
    finally:
        release(holder)


def written(prepared, index: int, status: str, finished: str | None, *, stamped: bool) -> None:
    """Partition ``index``'s record written whole as the executor writes it, its file's and the directory's times
    moved on whatever the clock (a scan of the files compares them), the index stamped when there is one."""
    store, spec = prepared.store, prepared.spec
    interval = spec.plan.interval(index)
    record = PartitionRecord.fresh(
        spec.ids.of(interval.start, interval.end), interval, InstantFormatter(spec.zone), status
    )
    record.attempts.append(attempt(status, finished))
    store.write_record(record, durable=False)
    later = time.time_ns() + 10_000_000_000 * (index + 1)
    os.utime(path_of(prepared, index), ns=(later, later))
    os.utime(store.partitions, ns=(later, later))
    if stamped:
        store.index_for_writing().stamp()


@pytest.mark.parametrize("with_index", [True, False], ids=["index", "files"])
def test_a_record_damaged_while_watched_ends_no_watch(watched, with_index):
    """The running partition's record garbled under a watching screen (a bad disk, a hand edit), through the index
    or (the index gone too: a double fault) the files: the screen ended with "the dashboard failed". The row now
    keeps what was last known and other partitions' changes are still seen; the damaged record is read again once
    it is written whole."""
    prepared, reads = watched
    store = prepared.store
    if not with_index:
        store.close_index()
        (store.directory / INDEX).unlink()
    holder = hold_lock(store.lock_path)
    try:
        source = load(prepared)
        before = poll_now(source).version
        rewrite(path_of(prepared, 2), b"{garbled")
        if with_index:
            store.index_for_writing().stamp()
        state = poll_now(source)
        assert state.state == "running elsewhere"
        if with_index:  # its row unchanged, a record that cannot be read changes nothing to repaint
            assert state.version == before
        assert state.counts["running"] == 1 and [p.index for p in state.running] == [2]
        reads.clear()
        again = poll_now(source)  # nothing changed since: the damaged record is not read again, nothing repaints
        assert not reads and again.version == state.version
        written(prepared, 3, RecordStatus.FAILED, "2025-11-24T16:03:00Z", stamped=with_index)
        state = poll_now(source)
        assert state.counts["failed"] == 2 and state.counts["running"] == 1
        written(prepared, 2, RecordStatus.SUCCEEDED, "2025-11-24T16:05:00Z", stamped=with_index)
        state = poll_now(source)
        assert state.counts["succeeded"] == 2 and state.counts["running"] == 0 and not state.running
    finally:
        release(holder)


def test_a_pending_row_over_a_damaged_record_keeps_its_last_status(watched):
    """A row gone pending (a write in flight) whose record then reads damaged: it keeps the status last known
    (failed), not "never written" (queued)."""
    prepared, _ = watched
    store = prepared.store
    holder = hold_lock(store.lock_path)
    try:
        source = load(prepared)
        index = store.index_for_writing()
        index.pending(1)
        rewrite(path_of(prepared, 1), b"{garbled")
        index.stamp()
        state = poll_now(source)
        assert state.counts["failed"] == 1 and state.counts["queued"] == 2
    finally:
        release(holder)
