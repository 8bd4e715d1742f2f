"""Bulk marks as record-index rows: after a mark of thousands of partitions the index stays trusted, and what a
reader gets through it (board, reasons, groups) is what the records with the marks merged say — also when the
marking process is killed at any point of it."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.store.bulk_marks import BulkMark
from engine.store.failure_groups import failed_reasons, failure_groups, group_failures
from engine.store.state_store import StateStore
from engine.store.status import Status
from tests.backfills import hold_lock, release, run_until_killed
from tests.unit.test_reason_log import SPEC, count_record_reads, failed
from tests.unit.test_record_index import PLAN, SIZE, columns, from_files, id_of, new_store, trusted

MARK_STATUSES = {"failed": Status.FAILED, "succeeded": Status.SUCCEEDED, "skipped": Status.SKIPPED}


def bulk_mark(store: StateStore, indices, to: str, message: str, stem: str, asset: str | None = None) -> BulkMark:
    """A mark as ``backfill mark`` makes it: each partition's next entry number, its status after the mark."""
    board, _ = store.load_board(PLAN, id_of, visit=lambda _record: None)
    numbers = {index: board.attempts(index) + 1 for index in indices}
    mark = BulkMark(stem, to, message, "2024-02-01T00:00:00Z", "ops@host", None, asset, numbers)
    after = {index: (MARK_STATUSES[to] if asset is None else board.status(index)) for index in indices}
    store.add_bulk_mark(mark, after)
    return mark


def truth_reasons(store: StateStore, status: Status) -> list[tuple[int, str | None]]:
    board, _ = from_files(store)
    found = []
    for index in range(SIZE):
        if board.status(index) is status:
            interval = PLAN.interval(index)
            made = store.read_record(id_of(interval.start, interval.end), PLAN, id_of)
            found.append((index, made.attempts[-1].error if made.attempts else None))
    return found


def assert_as_merged(store: StateStore) -> None:
    """A fresh reader through the index: the board, the failed reasons and the groups the files with the marks
    merged give."""
    truth, _ = from_files(StateStore(store.directory))
    reader = StateStore(store.directory)
    board, _ = reader.load_board(PLAN, id_of)
    assert columns(board) == columns(truth)
    expected = truth_reasons(StateStore(store.directory), Status.FAILED)
    assert list(failed_reasons(SPEC, reader, board)) == expected
    assert failure_groups(SPEC, reader, board) == group_failures(expected)


marks = st.lists(
    st.tuples(
        st.sets(st.integers(0, SIZE - 1), min_size=1, max_size=SIZE),
        st.sampled_from(sorted(MARK_STATUSES)),
        st.sampled_from([None, "mid.orders"]),
    ),
    min_size=1,
    max_size=4,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sets(st.integers(0, SIZE - 1), max_size=SIZE), marks, st.data())
def test_after_any_bulk_marks_the_index_is_trusted_and_says_what_the_merged_records_say(
    tmp_path_factory, monkeypatch, failures, sequence, data
):
    """Records of failures, then bulk marks of any partitions to any status (some of one asset), some records
    rewritten between them: the index stays trusted, and a reader through it gets the board, reasons and groups of
    the records with the marks merged — reading no failed record to get them."""
    store = new_store(tmp_path_factory.mktemp("s"))
    store.index_for_writing(PLAN, id_of)
    for index in sorted(failures):
        store.write_record(failed(index, "failed", f"disk full at {index}"), durable=False)
    for number, (indices, to, asset) in enumerate(sequence):
        bulk_mark(store, sorted(indices), to, f"marked {to}: batch {number}", f"2024020{number}T000000-0001", asset)
        rewritten = data.draw(st.sets(st.sampled_from(sorted(indices))))
        for index in sorted(rewritten):  # an executor folding the mark into a record it writes later
            record = store.read_record(failed(index, "failed", None).id, PLAN, id_of)
            record.attempts.append(failed(index, "failed", f"timeout after {index} s").attempts[-1])
            record.status = "failed"
            store.write_record(record, durable=False)
    assert trusted(store)
    with monkeypatch.context() as patched:
        read = count_record_reads(patched)
        reader = StateStore(store.directory)
        board, _ = reader.load_board(PLAN, id_of)
        failure_groups(SPEC, reader, board)
        assert read == []
    assert_as_merged(store)


KILLED_MARKER = """
import os, signal, sys
sys.path[:0] = [{root!r}]
from engine.store import state_store
from engine.store.state_store import StateStore
from tests.unit.test_bulk_mark_index import bulk_mark
from tests.unit.test_record_index import PLAN, id_of

where = sys.argv[1]
store = StateStore(__import__("pathlib").Path(sys.argv[2]))
store.index_for_writing(PLAN, id_of)

def die(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGKILL)

if where == "before the mark's file":
    state_store.write_bulk_mark = die
elif where == "after the mark's file":
    real = state_store.write_bulk_mark
    def written_then_die(*args, **kwargs):
        real(*args, **kwargs)
        die()
    state_store.write_bulk_mark = written_then_die
elif where == "between the values and the flags":
    from engine.store import record_index
    real_write = record_index.RecordIndex._write
    writes = []
    def write(self, data, offset):
        writes.append(offset)
        real_write(self, data, offset)
        if len(writes) == 3:  # the pending runs (two), then the first run of values: the flags never cleared
            die()
    record_index.RecordIndex._write = write
bulk_mark(store, [1, 2, 3, 10, 11], "failed", "marked failed: the source was wrong", "20240201T000000-0001")
"""


@pytest.mark.parametrize(
    "where", ["before the mark's file", "after the mark's file", "between the values and the flags"]
)
def test_a_marker_killed_at_any_point_loses_nothing(tmp_path, where):
    """A real process SIGKILLed before the mark's file goes in, after it, and between the rows' values and their
    flags: a reader (the marker's lock still held, so a stale stamp is trusted) gets what the records with whatever
    mark is on disk merged say; the next writer's index agrees and is trusted."""
    store = new_store(tmp_path)
    store.index_for_writing(PLAN, id_of)
    for index in (1, 2, 5):
        store.write_record(failed(index, "failed", f"disk full at {index}"), durable=True)
    store.close_index()
    run_until_killed(KILLED_MARKER, where, store.directory)
    holder = hold_lock(store.lock_path)
    try:
        assert_as_merged(store)
    finally:
        release(holder)
    marked = where != "before the mark's file"
    board, _ = StateStore(store.directory).load_board(PLAN, id_of)
    assert (board.status(10), board.attempts(10)) == ((Status.FAILED, 1) if marked else (Status.QUEUED, 0))
    StateStore(store.directory).index_for_writing(PLAN, id_of)
    assert trusted(store)
    assert_as_merged(store)


def test_a_marked_row_holds_the_mark_s_entry_and_time(tmp_path):
    """A row a bulk mark wrote: the mark's status, its entry's number as attempts, no exit code, a duration of 0,
    the mark's time as start and end to the microsecond, and the shared reason's signature and line."""
    from engine.store.record_index import HEADER_SIZE, INDEX, NO_EXIT, ROW

    store = new_store(tmp_path)
    store.index_for_writing(PLAN, id_of)
    store.write_record(failed(7, "failed", "disk full at 7", 3), durable=False)
    bulk_mark(store, [7, 8], "skipped", "marked skipped: not needed", "20240201T000000-0001")
    data = (store.directory / INDEX).read_bytes()
    at = 1_706_745_600_000_000  # 2024-02-01T00:00:00Z
    for index, number in ((7, 4), (8, 1)):
        row = ROW.unpack_from(data, HEADER_SIZE + index * ROW.size)
        assert row[:6] + row[7:9] == (1, Status.SKIPPED, 0, number, NO_EXIT, 0.0, at, at)
        assert row[6] >= 1 and row[9] > 0
