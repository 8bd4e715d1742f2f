"""The reasons the record index points at (reasons.log, signatures.log): triage and the text filter read them
instead of every failed record, and get exactly what the records say — whatever was cut short, damaged, swapped
or marked behind the index's back."""

from __future__ import annotations

import shutil
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.base.atomic import write_atomic
from engine.store import reason_log, state_store
from engine.store.bulk_marks import BulkMark, write_bulk_mark
from engine.store.failure_groups import failed_reasons, failure_groups, group_failures
from engine.store.indexed_reasons import IndexedReasons
from engine.store.reason_log import REASONS, SIGNATURES
from engine.store.record_index import HEADER_SIZE, INDEX, ROW
from engine.store.records import read_record
from engine.store.state_store import StateStore
from engine.store.status import Status
from tests.backfills import hold_lock, release, run_until_killed
from tests.unit.test_record_index import PLAN, SIZE, count_record_reads, id_of, new_store, record, trusted

SHOWN = (Status.FAILED, Status.CANCELLED)  # the statuses whose reasons the text filter searches
SPEC = SimpleNamespace(plan=PLAN, ids=SimpleNamespace(of=id_of))
REASONS_POOL = [
    None,
    "",
    "mid.orders failed: Conversion Error at line 12 in /data/2024-01-03.csv",
    "mid.orders failed: Conversion Error at line 907 in /data/2024-01-09.csv",
    "child killed by SIGKILL after 3600 s",
    'ünïcödé "quoted"\nsecond line\ttab',
    "timeout after 30 s",
]


def failed(index: int, status: str, reason: str | None, attempts: int = 1):
    made = record(index, status, attempts)
    if made.attempts:
        made.attempts[-1].error = reason
    return made


def truth(store: StateStore, status: Status = Status.FAILED) -> list[tuple[int, str | None]]:
    """(index, reason) of every ``status`` partition, read from the record files one by one."""
    board, _ = store.load_board(PLAN, id_of, visit=lambda _record: None)
    found = []
    for index in range(SIZE):
        if board.status(index) is status:
            interval = PLAN.interval(index)
            made = read_record(store.record_path(id_of(interval.start, interval.end)), PLAN, id_of)
            found.append((index, made.attempts[-1].error if made.attempts else None))
    return found


def through_index(store: StateStore):
    """A fresh reader's groups and reasons (a store object of its own: no writer)."""
    reader = StateStore(store.directory)
    board, _ = reader.load_board(PLAN, id_of)
    reasons = {
        status: list(failed_reasons(SPEC, reader, board, status)) for status in (Status.FAILED, Status.CANCELLED)
    }
    return failure_groups(SPEC, reader, board), reasons


def assert_as_the_records_say(store: StateStore) -> None:
    groups, reasons = through_index(store)
    assert groups == group_failures(truth(store))
    assert reasons[Status.FAILED] == truth(store)
    assert reasons[Status.CANCELLED] == truth(store, Status.CANCELLED)


def records_read(store: StateStore, monkeypatch) -> list[int]:
    """The partitions whose records a fresh reader's triage and reasons read."""
    with monkeypatch.context() as patched:
        read = count_record_reads(patched)
        through_index(store)
    return read


writes = st.lists(
    st.tuples(
        st.integers(0, SIZE - 1),
        st.sampled_from(["failed", "cancelled", "succeeded", "running"]),
        st.sampled_from(REASONS_POOL),
        st.integers(1, 3),
    ),
    max_size=40,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(writes)
def test_triage_through_the_index_is_what_the_records_say_after_any_writes(tmp_path_factory, monkeypatch, sequence):
    """Any writes and rewrites of failed, cancelled, succeeded and running records with any reasons (none, empty,
    multi-line, quoted, non-ASCII): the groups, examples and reasons read through the index equal those grouped
    from the record files, and no failed or cancelled record file is opened to get them."""
    store = new_store(tmp_path_factory.mktemp("s"))
    store.index_for_writing(PLAN, id_of)
    for index, status, reason, attempts in sequence:
        store.write_record(failed(index, status, reason, attempts), durable=False)
    assert trusted(store)
    with monkeypatch.context() as patched:
        read = count_record_reads(patched)
        groups, reasons = through_index(store)
        running = {index for index, status, _, _ in sequence if status == "running"}
        assert set(read) <= running  # the board's running records only: no reason came from a file
    assert groups == group_failures(truth(store))
    assert reasons[Status.FAILED] == truth(store)
    assert reasons[Status.CANCELLED] == truth(store, Status.CANCELLED)


def test_a_rebuilt_index_holds_the_reasons_of_the_files(tmp_path, monkeypatch):
    """Records written with no index at all (an older version): the next writer's rebuild puts their reasons and
    signatures in new reason files, and triage then reads no record."""
    store = new_store(tmp_path)
    for index, reason in enumerate(REASONS_POOL):
        made = failed(index, "failed", reason)
        write_atomic(store.record_path(made.id), made.to_bytes(), durable=False)
    StateStore(store.directory).index_for_writing(PLAN, id_of)
    read = count_record_reads(monkeypatch)
    groups, _ = through_index(store)
    assert read == [] and groups == group_failures(truth(store))
    assert ("mid.orders failed: Conversion Error at line <n> in <path>", (2, 3)) in [
        (group.signature, group.indices) for group in groups
    ]


KILLED_WRITER = """
import os, signal, sys
sys.path[:0] = [{root!r}]
from engine.store import reason_log
from engine.store.state_store import StateStore
from tests.unit.test_reason_log import failed
from tests.unit.test_record_index import PLAN, id_of

where = sys.argv[1]
store = StateStore(__import__("pathlib").Path(sys.argv[2]))
store.index_for_writing(PLAN, id_of)
real = reason_log.ReasonLog._append
appends = []

def append(fd, data, offset):
    appends.append(data)
    if where == "mid signature line" and len(appends) == 1:
        os.pwrite(fd, data[: len(data) // 2], offset)
        os.kill(os.getpid(), signal.SIGKILL)
    real(fd, data, offset)
    if where == "after the signature line" and len(appends) == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    if where == "after the reason line" and len(appends) == 2:
        os.kill(os.getpid(), signal.SIGKILL)

reason_log.ReasonLog._append = staticmethod(append)
store.write_record(failed(6, "failed", "brand new kind of failure 42", 2), durable=True)
"""


@pytest.mark.parametrize("where", ["mid signature line", "after the signature line", "after the reason line"])
def test_a_writer_killed_while_appending_a_reason_loses_nothing(tmp_path, monkeypatch, where):
    """A real process SIGKILLed halfway through a new signature's line, after it, and after the reason's line (its
    row still pending): readers group what the files say; the next writer cuts the unfinished line off, and the
    signatures it appends next get the right IDs."""
    store = new_store(tmp_path)
    store.index_for_writing(PLAN, id_of)
    store.write_record(failed(1, "failed", "timeout after 30 s"), durable=True)
    store.write_record(failed(6, "failed", "timeout after 31 s"), durable=True)
    store.close_index()
    run_until_killed(KILLED_WRITER, where, store.directory)
    holder = hold_lock(store.lock_path)  # as if the killed writer's lock were still held: the index is trusted
    try:
        assert_as_the_records_say(store)
        assert set(records_read(store, monkeypatch)) == {6}  # the pending row's; every other reason from the files
    finally:
        release(holder)
    writer = StateStore(store.directory)
    writer.index_for_writing(PLAN, id_of)
    assert (store.directory / SIGNATURES).read_bytes().endswith(b"\n")
    writer.write_record(failed(8, "failed", "yet another kind"), durable=True)
    writer.write_record(failed(9, "failed", "timeout after 99 s"), durable=True)
    assert trusted(store)
    assert_as_the_records_say(store)
    groups, _ = through_index(store)
    assert sorted((group.signature, group.indices) for group in groups) == [
        ("brand new kind of failure <n>", (6,)),  # its record was renamed in before the kill
        ("timeout after <n> s", (1, 9)),
        ("yet another kind", (8,)),
    ]


@pytest.mark.parametrize("how", ["removed", "another index's", "reasons.log alone another index's"])
def test_reason_files_that_are_not_the_index_s_are_never_read(tmp_path, monkeypatch, how):
    """Reason files removed, or swapped for another backfill's (another token): readers read the failed records
    instead and group what they say; the next writer rebuilds the files, and readers use them again."""
    store = new_store(tmp_path / "a")
    store.index_for_writing(PLAN, id_of)
    for index in (2, 3, 4):
        store.write_record(failed(index, "failed", f"disk full at {index}"), durable=False)
    other = new_store(tmp_path / "b")
    other.index_for_writing(PLAN, id_of)
    for index in (2, 3, 4):
        other.write_record(failed(index, "failed", "something else entirely"), durable=False)
    store.close_index()
    for name in (REASONS, SIGNATURES):
        if how == "removed":
            (store.directory / name).unlink()
        elif name == REASONS or how == "another index's":
            shutil.copyfile(other.directory / name, store.directory / name)
    assert trusted(store)  # the rows are trusted: only the reasons are not
    assert IndexedReasons.of(StateStore(store.directory), SIZE) is None
    assert_as_the_records_say(store)
    StateStore(store.directory).index_for_writing(PLAN, id_of)
    assert IndexedReasons.of(StateStore(store.directory), SIZE) is not None
    read = count_record_reads(monkeypatch)
    groups, _ = through_index(store)
    assert read == [] and [(group.signature, group.count) for group in groups] == [("disk full at <n>", 3)]


def test_a_damaged_reason_line_sends_the_reader_to_the_record(tmp_path):
    """A row pointing at another partition's line, a line whose JSON was overwritten, a line holding a number:
    those partitions' reasons are read from their records, the others' from the file."""
    store = new_store(tmp_path)
    store.index_for_writing(PLAN, id_of)
    for index in (2, 3, 4, 5):
        store.write_record(failed(index, "failed", f"disk full at {index}"), durable=False)
    store.close_index()
    data = bytearray((store.directory / REASONS).read_bytes())
    data[data.index(b'\n5 "') + 3] = ord("{")  # the line of partition 5 is no JSON now
    at = data.index(b'\n2 "') + 3
    data[at : at + 16] = b"42".ljust(16)  # the line of partition 2, its group's first, holds a number
    (store.directory / REASONS).write_bytes(bytes(data))
    index = bytearray((store.directory / INDEX).read_bytes())
    row_4, row_3 = HEADER_SIZE + 4 * ROW.size, HEADER_SIZE + 3 * ROW.size
    index[row_3 + 32 : row_3 + 40] = index[row_4 + 32 : row_4 + 40]  # row 3 points at partition 4's line
    (store.directory / INDEX).write_bytes(bytes(index))
    assert trusted(store)
    assert_as_the_records_say(store)


def test_a_bulk_mark_s_reason_is_the_mark_s_not_the_row_s(tmp_path):
    """A failed partition marked failed again with another message, the index still trusted (its writer alive):
    triage groups it under the mark's message, as reading its record with the mark merged does."""
    store = new_store(tmp_path)
    store.index_for_writing(PLAN, id_of)
    for index in (2, 3):
        store.write_record(failed(index, "failed", "disk full at 9"), durable=False)
    mark = BulkMark("20240101T000000-0001", "failed", "upstream was wrong for 3 days", "2024-01-01T00:00:00Z",
                    "ops", None, None, {3: 2})  # fmt: skip
    write_bulk_mark(store.directory, mark)
    holder = hold_lock(store.lock_path)
    try:
        groups, _ = through_index(store)
    finally:
        release(holder)
    assert sorted((group.signature, group.indices) for group in groups) == [
        ("disk full at <n>", (2,)),
        ("upstream was wrong for <n> days", (3,)),
    ]


def test_a_row_behind_the_board_is_read_from_its_record(tmp_path):
    """The board says failed where the index's row still says running (a watcher's board ahead of the index): the
    reason comes from the record, never from an older row."""
    store = new_store(tmp_path)
    store.index_for_writing(PLAN, id_of)
    store.write_record(failed(5, "failed", "old reason 1"), durable=False)
    store.write_record(record(5, "running", 2), durable=False)
    later = failed(5, "failed", "the new reason", 2)
    write_atomic(store.record_path(later.id), later.to_bytes(), durable=False)  # behind the index's back
    reader = StateStore(store.directory)
    holder = hold_lock(store.lock_path)
    try:
        board, _ = reader.load_board(PLAN, id_of)
        board.set(5, Status.FAILED)
        groups = failure_groups(SPEC, reader, board)
    finally:
        release(holder)
    assert [(group.signature, group.example) for group in groups] == [("the new reason", "the new reason")]
    holder = hold_lock(store.lock_path)
    try:
        assert list(failed_reasons(SPEC, reader, board)) == [(5, "the new reason")]
    finally:
        release(holder)


def test_a_full_disk_appending_a_reason_costs_the_index_not_the_record(tmp_path, monkeypatch):
    """The disk fills while a reason is appended: the record is written, the index and its reason files removed
    (readers read the files and group right), and the next writer rebuilds all three."""
    store = new_store(tmp_path)
    store.index_for_writing(PLAN, id_of)
    store.write_record(failed(1, "failed", "disk full at 1"), durable=False)

    def full(fd, data, offset):
        raise OSError(28, "No space left on device")

    with monkeypatch.context() as patched:
        patched.setattr(reason_log.ReasonLog, "_append", staticmethod(full))
        store.write_record(failed(2, "failed", "disk full at 2"), durable=False)
    assert not any((store.directory / name).exists() for name in (INDEX, REASONS, SIGNATURES))
    assert_as_the_records_say(store)
    StateStore(store.directory).index_for_writing(PLAN, id_of)
    assert trusted(store) and IndexedReasons.of(StateStore(store.directory), SIZE) is not None
    assert_as_the_records_say(store)


def test_a_signature_line_a_killed_writer_left_unfinished_is_cut_off(tmp_path, monkeypatch):
    """A writer killed halfway through a signature's line while the index stayed trusted (it was re-writing a
    pending row; nothing was renamed): readers never take the half line for a signature, and the next writer cuts it
    off before appending, so the next signature gets the next ID and readers read no record."""
    store = new_store(tmp_path)
    store.index_for_writing(PLAN, id_of)
    store.write_record(failed(1, "failed", "timeout after 30 s"), durable=False)
    store.close_index()
    with open(store.directory / SIGNATURES, "ab") as signatures:
        signatures.write(b'"a much longer signature that never got its end')  # no newline: cut by a kill
    assert trusted(store)
    assert_as_the_records_say(store)
    token = (store.directory / REASONS).read_bytes().split(b"\n")[0]
    writer = StateStore(store.directory)
    writer.index_for_writing(PLAN, id_of)
    assert (store.directory / SIGNATURES).read_bytes().endswith(b'"timeout after <n> s"\n')
    assert (store.directory / REASONS).read_bytes().split(b"\n")[0] == token  # cut off, not rebuilt
    writer.write_record(failed(2, "failed", "short"), durable=False)
    assert_as_the_records_say(store)
    assert records_read(store, monkeypatch) == []


def test_without_failures_neither_the_index_nor_a_record_is_read(tmp_path, monkeypatch):
    """A backfill with no failed (or cancelled) partition: grouping and the reasons answer at once, reading neither
    the index (40 MB at a million partitions) nor any record."""
    from engine.store import record_index

    store = new_store(tmp_path)
    store.index_for_writing(PLAN, id_of)
    store.write_record(failed(1, "succeeded", None), durable=False)
    reader = StateStore(store.directory)
    board, _ = reader.load_board(PLAN, id_of)
    opened: list[int] = []
    real = record_index.trusted_columns
    monkeypatch.setattr(state_store, "trusted_columns", lambda *a, **k: opened.append(1) or real(*a, **k))
    read = count_record_reads(monkeypatch)
    assert failure_groups(SPEC, reader, board) == []
    assert [list(failed_reasons(SPEC, reader, board, status)) for status in SHOWN] == [[], []]
    assert opened == [] and read == []


def test_a_lost_signature_line_sends_its_partitions_to_their_records(tmp_path):
    """signatures.log without its last line (a row's signature ID past its end): those partitions' reasons and
    signatures come from their records; the others' from the files."""
    store = new_store(tmp_path)
    store.index_for_writing(PLAN, id_of)
    store.write_record(failed(1, "failed", "timeout after 30 s"), durable=False)
    store.write_record(failed(2, "failed", "disk full at 2"), durable=False)
    store.close_index()
    signatures = (store.directory / SIGNATURES).read_bytes()
    (store.directory / SIGNATURES).write_bytes(signatures[: signatures.rstrip(b"\n").rfind(b"\n") + 1])
    assert_as_the_records_say(store)


def test_triage_through_the_index_computes_no_signature(tmp_path, monkeypatch):
    """The signatures were computed when the reasons were written: grouping 50 failures through the index computes
    none again (100,000 of them took 0.9 s)."""
    from engine.store import failure_groups as groups_module

    store = new_store(tmp_path)
    store.index_for_writing(PLAN, id_of)
    for index in range(30):
        store.write_record(failed(index, "failed", f"disk full at {index % 3}"), durable=False)
    reader = StateStore(store.directory)
    board, _ = reader.load_board(PLAN, id_of)
    expected = group_failures(truth(store))
    monkeypatch.setattr(groups_module, "signature", lambda reason: pytest.fail("a signature computed again"))
    assert failure_groups(SPEC, reader, board) == expected


def row_in_index(store: StateStore, index: int) -> tuple:
    return ROW.unpack_from((store.directory / INDEX).read_bytes(), HEADER_SIZE + index * ROW.size)


def test_a_row_with_a_reason_keeps_every_other_field(tmp_path):
    """A failed record's row, as the writer writes it and as a rebuild does: status, attempts, exit code, duration,
    start and end exactly as ``row_of`` packs them, with the reason's signature ID and line offset beside them."""
    from engine.store.record_index import row_of

    store = new_store(tmp_path)
    store.index_for_writing(PLAN, id_of)
    made = failed(4, "failed", "disk full at 4", 2)
    made.attempts[-1].exit_code = 3
    store.write_record(made, durable=False)
    expected = ROW.unpack(row_of(made))
    for how in ("written", "rebuilt"):
        if how == "rebuilt":
            store.close_index()
            (store.directory / INDEX).unlink()
            StateStore(store.directory).index_for_writing(PLAN, id_of)
        got = row_in_index(store, 4)
        assert got[:6] + got[7:9] == expected[:6] + expected[7:9], how
        assert got[7:9] == (1_704_067_200_000_001, 1_704_067_260_000_000), how
        assert got[6] == 1 and got[9] > 0, how  # the first signature; its line after the header


def test_the_index_is_read_once_for_all_the_statuses_and_never_again_for_a_fallback(tmp_path, monkeypatch):
    """The text filter's reasons of failed and cancelled partitions read the index once for both; grouping over
    reason files that are not the index's reads the index once, then the records — not the index a second time."""
    from engine.store import record_index
    from tui.app.text_filter import rows_matching

    store = new_store(tmp_path)
    store.index_for_writing(PLAN, id_of)
    store.write_record(failed(1, "failed", "disk full at 1"), durable=False)
    store.write_record(failed(2, "cancelled", "stopped by ops"), durable=False)
    reader = StateStore(store.directory)
    board, _ = reader.load_board(PLAN, id_of)
    opened: list[int] = []
    real = record_index.trusted_columns
    monkeypatch.setattr(state_store, "trusted_columns", lambda *a, **k: opened.append(1) or real(*a, **k))
    assert list(failed_reasons(SPEC, reader, board, Status.FAILED, Status.CANCELLED)) == [
        (1, "disk full at 1"),
        (2, "stopped by ops"),
    ]
    found = rows_matching("by ops", spec=SPEC, store=reader, board=board, interval_text=lambda _index: "")
    assert found.indices == frozenset({2}) and opened == [1, 1]
    opened.clear()
    (store.directory / REASONS).unlink()
    assert [(group.signature, group.indices) for group in failure_groups(SPEC, reader, board)] == [
        ("disk full at <n>", (1,))
    ]
    assert opened == [1]
