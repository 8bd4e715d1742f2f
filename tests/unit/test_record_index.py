"""The record index (partitions.idx): what readers get from it equals what the files say, whatever was damaged,
cut short or written behind its back."""

from __future__ import annotations

import os
import struct
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.base.atomic import write_atomic
from engine.dates.instants import load_zone
from engine.dates.plan import Plan, parse_unit
from engine.store import record_index, records, state_store
from engine.store.locks import FileLock
from engine.store.record_index import HEADER_SIZE, INDEX, NO_EXIT, ROW, STAMP_OFFSET, read_indexed, row_of
from engine.store.record_writer import RecordWriter
from engine.store.records import Attempt, PartitionRecord
from engine.store.state_store import StateStore
from engine.store.status import Status, StatusBoard
from tests.backfills import hold_lock, release

DAY = 86_400_000_000
SIZE = 40
PLAN = Plan(0, SIZE * DAY, load_zone("UTC"), parse_unit("daily"))
STATUSES = ["succeeded", "failed", "running", "cancelled", "skipped", "queued"]
VERIFICATIONS = [None, {"status": "verified"}, {"status": "failed"}, {"status": "warning"}]


def id_of(start: int, end: int) -> str:
    return f"{start:016x}{end:016x}"


def record(index: int, status: str, attempts: int = 1, verification=None, duration=1.5) -> PartitionRecord:
    interval = PLAN.interval(index)
    attempts = 0 if status == "queued" else max(1, attempts)
    last = "running" if status == "running" else ("succeeded" if status in ("succeeded", "skipped") else "failed")
    return PartitionRecord(
        id_of(interval.start, interval.end),
        index,
        "",
        "",
        interval.start,
        interval.end,
        status,
        [
            Attempt(
                run_id=f"run-{index}-{n}",
                status=last if n == attempts else "failed",
                started_at="2024-01-01T00:00:00.000001+00:00",
                finished_at=None if last == "running" and n == attempts else "2024-01-01T00:01:00Z",
                exit_code=0,
                duration=None if last == "running" and n == attempts else duration * n,
                verification=verification if n == attempts else None,
            )
            for n in range(1, attempts + 1)
        ],
    )


def new_store(root) -> StateStore:
    store = StateStore(root / "20240101-000000-abcdef")
    store.create({"format": 1})
    return store


def from_files(store: StateStore):
    """The board as the files say, read one by one (a visitor makes load_board skip the index)."""
    return store.load_board(PLAN, id_of, visit=lambda _record: None)


def columns(board) -> list[tuple]:
    return [(board.status(i), board.attempts(i), board.duration(i), board.verification(i)) for i in range(board.size)]


def assert_same(store: StateStore) -> None:
    """A fresh reader (another store object: no writer of its own) sees through the index what the files say."""
    reader = StateStore(store.directory)
    board, running = reader.load_board(PLAN, id_of)
    truth, truly_running = from_files(StateStore(store.directory))
    assert columns(board) == columns(truth)
    assert board.counts() == truth.counts()
    assert sorted(r.id for r in running) == sorted(r.id for r in truly_running)


def count_record_reads(monkeypatch) -> list[int]:
    """The partitions whose record files the store reads from now on, in order."""
    read: list[int] = []
    real = state_store.read_record

    def counted(path, plan, id_of_):
        found = real(path, plan, id_of_)
        read.append(found.index)
        return found

    monkeypatch.setattr(state_store, "read_record", counted)
    return read


def trusted(store: StateStore) -> bool:
    return read_indexed(store.directory, store.partitions, SIZE, writer_alive=False) is not None


writes = st.lists(
    st.tuples(
        st.integers(0, SIZE - 1),
        st.sampled_from(STATUSES),
        st.integers(0, 3),
        st.sampled_from(VERIFICATIONS),
        st.floats(0, 10_000, allow_nan=False, width=32),
    ),
    max_size=30,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(writes)
def test_the_index_says_what_the_files_say_after_any_writes(tmp_path_factory, sequence):
    """Any writes of any statuses, attempts, durations and verifications: a reader gets from the index exactly the
    board the files give, and the index is trusted (no file read but the running partitions')."""
    store = new_store(tmp_path_factory.mktemp("s"))
    store.index_for_writing(PLAN, id_of)
    for index, status, attempts, verification, duration in sequence:
        store.write_record(record(index, status, attempts, verification, duration), durable=False)
    assert trusted(store)
    assert_same(store)


def test_a_reader_reads_only_the_running_records(tmp_path, monkeypatch):
    """Thirty records on disk, two of them running: a reader through the index opens those two files, no other."""
    store = new_store(tmp_path)
    store.index_for_writing(PLAN, id_of)
    for index in range(30):
        store.write_record(record(index, "running" if index in (4, 9) else "succeeded"), durable=False)
    read = count_record_reads(monkeypatch)
    board, running = StateStore(store.directory).load_board(PLAN, id_of)
    assert sorted(read) == [4, 9] and [r.index for r in running] == [4, 9]
    assert board.count(Status.SUCCEEDED) == 28 and board.count(Status.QUEUED) == SIZE - 30


DAMAGE = {
    "cut header": lambda data: data[:20],
    "garbage": lambda data: b"\xff" * len(data),
    "another plan's size": lambda data: data[:8] + struct.pack("<q", SIZE + 1) + data[16:],
    "another boot": lambda data: data[:24] + b"0" * 16 + data[40:],
    "a status no one writes": lambda data: data[: HEADER_SIZE + 1] + b"\x09" + data[HEADER_SIZE + 2 :],
    "a flag no one writes": lambda data: data[:HEADER_SIZE] + b"\x07" + data[HEADER_SIZE + 1 :],
    "a verification no one writes": lambda data: data[: HEADER_SIZE + 2] + b"\x09" + data[HEADER_SIZE + 3 :],
    "a stale stamp": lambda data: data[:STAMP_OFFSET] + struct.pack("<q", 12345) + data[STAMP_OFFSET + 8 :],
    "rows cut mid-row": lambda data: data[: HEADER_SIZE + 3 * ROW.size + 5],
    "empty": lambda data: b"",
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_damaged_index_is_never_trusted_and_the_next_writer_rebuilds_it(tmp_path, damage):
    """Each kind of damage: readers read the files instead (the same board), and the next writer (the lock's
    holder) rebuilds the index from them with nothing lost; trusted again afterwards."""
    store = new_store(tmp_path)
    store.index_for_writing(PLAN, id_of)
    for index in range(12):
        store.write_record(record(index, STATUSES[index % 5], 1 + index % 3), durable=False)
    store.close_index()
    path = store.directory / INDEX
    path.write_bytes(DAMAGE[damage](path.read_bytes()))
    if damage == "rows cut mid-row":  # rows beyond a cut read as never attempted: only the stamp can tell
        cut = path.read_bytes()
        path.write_bytes(cut[:STAMP_OFFSET] + struct.pack("<q", 1) + cut[STAMP_OFFSET + 8 :])
    assert not trusted(store)
    assert_same(store)
    writer = StateStore(store.directory)
    writer.index_for_writing(PLAN, id_of)
    assert trusted(store)
    assert_same(store)


def test_a_record_renamed_in_by_another_tool_is_seen(tmp_path):
    """A record replaced behind the index's back (renamed into place, as any careful tool writes): the directory's
    time no longer matches the stamp, so readers read the files and see it."""
    store = new_store(tmp_path)
    store.index_for_writing(PLAN, id_of)
    store.write_record(record(3, "succeeded"), durable=False)
    store.close_index()
    changed = record(3, "failed", 2)
    write_atomic(store.record_path(changed.id), changed.to_bytes())
    assert not trusted(store)
    board, _ = StateStore(store.directory).load_board(PLAN, id_of)
    assert board.status(3) is Status.FAILED and board.attempts(3) == 2


KILLED_WRITER = """
import os, signal, sys
sys.path.insert(0, {root!r})
sys.path.insert(0, {tests!r})
from test_record_index import PLAN, id_of, record
from engine.store import record_index, state_store
from engine.store.state_store import StateStore

where = sys.argv[1]
store = StateStore(__import__("pathlib").Path(sys.argv[2]))
store.index_for_writing(PLAN, id_of)
real_write_atomic = state_store.write_atomic

def die(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGKILL)

if where == "before the rename":
    state_store.write_atomic = die
elif where == "after the rename":
    record_index.RecordIndex.written = die
elif where == "between the values and the flag":
    real_pwrite = os.pwrite
    calls = []
    def pwrite(fd, data, offset):
        calls.append(offset)
        if len(calls) == 3:  # pending, then the values: the flag's write never happens
            os.kill(os.getpid(), signal.SIGKILL)
        return real_pwrite(fd, data, offset)
    record_index.os.pwrite = pwrite
store.write_record(record(5, "failed", 2), durable=True)
"""


@pytest.mark.parametrize("lock_held", [False, True], ids=["writer gone", "lock held"])
@pytest.mark.parametrize("where", ["before the rename", "after the rename", "between the values and the flag"])
def test_a_writer_killed_between_its_record_and_its_row_loses_nothing(tmp_path, where, lock_held):
    """A real process SIGKILLed at each point between a record and its index row: a reader sees exactly what the
    record file holds (the old record before the rename, the new one after) — also while another process holds
    the lock, when a stale stamp is trusted and only the pending flag sends the reader to the file — and the next
    writer's index agrees."""
    store = new_store(tmp_path)
    store.index_for_writing(PLAN, id_of)
    store.write_record(record(5, "succeeded", 1), durable=True)
    store.close_index()
    script = tmp_path / "writer.py"
    tests = os.path.dirname(__file__)
    script.write_text(KILLED_WRITER.format(root=os.path.dirname(os.path.dirname(tests)), tests=tests))
    child = subprocess.run([sys.executable, str(script), where, str(store.directory)], capture_output=True, timeout=60)
    assert child.returncode == -9, child.stderr.decode()
    holder = hold_lock(store.lock_path) if lock_held else None
    try:
        board, _ = StateStore(store.directory).load_board(PLAN, id_of)
    finally:
        if holder is not None:
            release(holder)
    expected = (Status.SUCCEEDED, 1) if where == "before the rename" else (Status.FAILED, 2)
    assert (board.status(5), board.attempts(5)) == expected
    assert_same(store)
    StateStore(store.directory).index_for_writing(PLAN, id_of)
    assert trusted(store)
    assert_same(store)
    # the next writer settled the pending row: readers no longer read its file
    assert read_indexed(store.directory, store.partitions, SIZE, writer_alive=False).to_read == []


def test_a_live_writers_pending_row_is_read_from_its_file(tmp_path):
    """While another process holds the backfill's lock, a stamp behind the directory is the live writer's
    (between its rename and its stamp): rows are trusted, but a pending row is read from its file."""
    store = new_store(tmp_path)
    store.index_for_writing(PLAN, id_of)
    store.write_record(record(2, "succeeded"), durable=False)
    index = store.index_for_writing()
    index.pending(7)
    later = record(7, "failed", 3)
    write_atomic(store.record_path(later.id), later.to_bytes())  # renamed in; row and stamp not yet written
    holder = hold_lock(store.lock_path)
    try:
        assert FileLock(store.lock_path).is_held_elsewhere()
        assert read_indexed(store.directory, store.partitions, SIZE, writer_alive=True) is not None
        board, _ = StateStore(store.directory).load_board(PLAN, id_of)
        assert (board.status(7), board.attempts(7), board.status(2)) == (Status.FAILED, 3, Status.SUCCEEDED)
    finally:
        release(holder)
    assert not trusted(store)  # the writer gone, a stale stamp is not trusted
    assert_same(store)


def test_an_index_that_cannot_be_written_is_removed_and_costs_no_record(tmp_path, monkeypatch):
    """A full disk growing the index: the record is written all the same, the index removed (readers read the
    files), and the next writer builds it again."""
    store = new_store(tmp_path)
    store.index_for_writing(PLAN, id_of)
    store.write_record(record(1, "succeeded"), durable=False)
    real = os.pwrite

    def full(fd, data, offset):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(record_index.os, "pwrite", full)
    store.write_record(record(30, "failed", 2), durable=False)
    monkeypatch.setattr(record_index.os, "pwrite", real)
    assert not (store.directory / INDEX).exists()
    store.write_record(record(31, "failed"), durable=False)  # this writer has given up its index: files only
    board, _ = StateStore(store.directory).load_board(PLAN, id_of)
    assert (board.status(30), board.attempts(30), board.status(31)) == (Status.FAILED, 2, Status.FAILED)
    StateStore(store.directory).index_for_writing(PLAN, id_of)
    assert trusted(store)
    assert_same(store)


def test_a_store_whose_manifest_cannot_give_a_plan_writes_its_records_without_an_index(tmp_path):
    """A writer that cannot build the index (here: no plan in the manifest) still writes every record."""
    store = new_store(tmp_path)
    store.write_record(record(0, "succeeded"), durable=True)
    assert records.read_record(store.record_path(record(0, "succeeded").id), PLAN, id_of).status == "succeeded"
    assert not (store.directory / INDEX).exists()


def test_the_executors_record_writer_keeps_the_index(tmp_path):
    """Records written as the executor writes them (queued, batched, and written ahead on the calling thread):
    the index is trusted afterwards and says what the files say."""
    store = new_store(tmp_path)
    writer = RecordWriter(store.partitions, index=store.index_for_writing(PLAN, id_of))
    for index in range(10):
        first = record(index, "running")
        writer.write_ahead(store.record_path(first.id), first.to_bytes(), (index, row_of(first)))
        final = record(index, STATUSES[index % 5], 1 + index % 3, VERIFICATIONS[index % 4])
        writer.put(store.record_path(final.id), final.to_bytes(), durable=index % 2 == 0, row=(index, row_of(final)))
    writer.drain()
    writer.close()
    assert trusted(store)
    assert_same(store)


def test_a_batch_written_ahead_leaves_its_rows_written_not_pending(tmp_path):
    """Three attempts written ahead together (their records running): right after the call, with the writer still
    open, the index holds them as running rows, none left pending (a reader would read those files)."""
    store = new_store(tmp_path)
    writer = RecordWriter(store.partitions, index=store.index_for_writing(PLAN, id_of))
    batch = {index: record(index, "running") for index in (4, 5, 6)}
    writer.write_ahead_many([(store.record_path(r.id), r.to_bytes(), (i, row_of(r))) for i, r in batch.items()])
    found = record_index.trusted_columns(store.directory, store.partitions, SIZE, ((1, 1),), writer_alive=True)
    assert found is not None and found.pending == []
    assert [found.columns[0][index] for index in batch] == [Status.RUNNING] * 3
    writer.close()


def test_a_batch_queued_behind_another_write_still_writes_its_rows(tmp_path):
    """A batch written ahead while one of its files has a write queued (the writer's thread held on it): once
    the call returns, every record of the batch is the index's running row, none pending; a writer without an
    index (none could be built) takes the same batch with its rows and writes the files alone."""
    store = new_store(tmp_path)
    gate, entered = threading.Event(), threading.Event()

    def may_write() -> bool:
        entered.set()
        return gate.wait(30)

    writer = RecordWriter(store.partitions, may_write, index=store.index_for_writing(PLAN, id_of))
    old = record(5, "failed")
    writer.put(store.record_path(old.id), old.to_bytes(), durable=False, row=(5, row_of(old)))
    assert entered.wait(10)
    batch = {index: record(index, "running") for index in (4, 5, 6)}
    entries = [(store.record_path(r.id), r.to_bytes(), (i, row_of(r))) for i, r in batch.items()]
    done = threading.Thread(target=writer.write_ahead_many, args=(entries,))
    done.start()
    gate.set()
    done.join(30)
    found = record_index.trusted_columns(store.directory, store.partitions, SIZE, ((1, 1),), writer_alive=True)
    assert found is not None and found.pending == []
    assert [found.columns[0][index] for index in batch] == [Status.RUNNING] * 3
    writer.close()
    bare = RecordWriter(tmp_path / "elsewhere")
    bare.write_ahead_many([(tmp_path / "elsewhere" / "r.json", b"{}", entries[0][2])])
    assert (tmp_path / "elsewhere" / "r.json").read_bytes() == b"{}"
    bare.close()


def test_a_reader_during_the_executors_write_in_flight_reads_the_file(tmp_path, monkeypatch):
    """The executor's writer thread between a record's rename and its row (held there), its lock held: a reader
    trusts the index but reads the pending partition's file, so it sees the new record, not the row's old one."""
    store = new_store(tmp_path)
    writer = RecordWriter(store.partitions, index=store.index_for_writing(PLAN, id_of))
    old = record(3, "succeeded")
    writer.put(store.record_path(old.id), old.to_bytes(), durable=False, row=(3, row_of(old)))
    writer.drain()
    renamed, go_on = threading.Event(), threading.Event()
    real = record_index.RecordIndex.written

    def held(self, index, row):
        renamed.set()
        go_on.wait(30)
        real(self, index, row)

    monkeypatch.setattr(record_index.RecordIndex, "written", held)
    new = record(3, "failed", 2)
    writer.put(store.record_path(new.id), new.to_bytes(), durable=False, row=(3, row_of(new)))
    assert renamed.wait(30)
    holder = hold_lock(store.lock_path)
    try:
        board, _ = StateStore(store.directory).load_board(PLAN, id_of)
    finally:
        release(holder)
        go_on.set()
        writer.drain()
        writer.close()
    assert (board.status(3), board.attempts(3)) == (Status.FAILED, 2)


def test_a_row_holds_the_last_attempts_exit_code_and_times_to_the_microsecond():
    """The row keeps what the issue asks of it beyond the board: the last attempt's exit code, and its start and
    finish as exact microseconds since the epoch (0 when unknown, as for a running attempt's finish)."""
    done = record(2, "failed", 2)
    done.attempts[-1].exit_code = 3
    flags, status, _, attempts, exit_code, _, _, started, finished, _ = ROW.unpack(row_of(done))
    assert (flags, status, attempts, exit_code) == (1, Status.FAILED, 2, 3)
    assert (started, finished) == (1_704_067_200_000_001, 1_704_067_260_000_000)
    running = ROW.unpack(row_of(record(2, "running")))
    assert (running[7], running[8]) == (1_704_067_200_000_001, 0)


def test_the_header_names_this_boot_by_the_first_16_hex_digits_of_its_id(tmp_path, monkeypatch):
    """The kernel's boot ID without its dashes, cut to 16 bytes; a machine that has none writes 16 zero bytes."""
    store = new_store(tmp_path)
    store.index_for_writing(PLAN, id_of)
    store.close_index()
    header = (store.directory / INDEX).read_bytes()[:HEADER_SIZE]
    kernel = Path("/proc/sys/kernel/random/boot_id").read_text().strip().replace("-", "")
    assert header[24:40] == kernel[:16].encode()
    monkeypatch.setattr(record_index, "boot_id", lambda: None)
    (store.directory / INDEX).unlink()
    store.index_for_writing(PLAN, id_of)
    store.close_index()
    assert (store.directory / INDEX).read_bytes()[24:40] == bytes(16)
    assert trusted(store)


def test_a_row_says_unknown_as_the_format_does_and_keeps_what_fits():
    """Never attempted: status, no exit code, duration -1, times 0; an attempt without a duration or with a time
    that is no instant reads unknown; an exit code or attempt count past its 16 bits is kept as far as it fits."""
    never = record(3, "queued")
    assert ROW.unpack(row_of(never)) == (1, Status.QUEUED, 0, 0, NO_EXIT, -1.0, 0, 0, 0, 0)
    odd = record(3, "failed")
    odd.attempts[-1].duration, odd.attempts[-1].started_at = None, "yesterday"
    odd.attempts[-1].finished_at = "2024-01-01T00:01:00"  # no offset: not an instant
    assert ROW.unpack(row_of(odd))[5:] == (-1.0, 0, 0, 0, 0)
    for code, kept in [(32_767, 32_767), (32_768, NO_EXIT), (-32_767, -32_767), (-32_769, NO_EXIT), (None, NO_EXIT)]:
        odd.attempts[-1].exit_code = code
        assert ROW.unpack(row_of(odd))[4] == kept
    many = record(3, "failed")
    many.attempts = many.attempts * 65_536
    assert ROW.unpack(row_of(many))[3] == 65_535


def test_a_pending_row_left_by_a_writer_killed_before_its_rename_is_cleared_by_the_next_writer(tmp_path):
    """In-process, the kill campaign's first point: the row went pending and no record followed. The next writer
    clears the row to zeros (never attempted), and the index is trusted with nothing left to read."""
    store = new_store(tmp_path)
    store.index_for_writing(PLAN, id_of).pending(5)
    store.close_index()
    writer = StateStore(store.directory)
    writer.index_for_writing(PLAN, id_of)
    data = (store.directory / INDEX).read_bytes()
    assert data[HEADER_SIZE + 5 * ROW.size : HEADER_SIZE + 6 * ROW.size] == bytes(ROW.size)
    assert read_indexed(store.directory, store.partitions, SIZE, writer_alive=False).to_read == []
    assert_same(store)


def test_a_rebuilt_index_ends_at_the_highest_recorded_partition(tmp_path):
    """One row per partition up to the highest one recorded, none past it (the rest read as never attempted);
    an empty store's index is its header alone."""
    store = new_store(tmp_path)
    store.index_for_writing(PLAN, id_of)
    store.close_index()
    assert (store.directory / INDEX).stat().st_size == HEADER_SIZE
    store.index_for_writing(PLAN, id_of)
    store.write_record(record(6, "succeeded"), durable=False)
    store.close_index()
    (store.directory / INDEX).unlink()
    store.index_for_writing(PLAN, id_of)
    store.close_index()
    assert (store.directory / INDEX).stat().st_size == HEADER_SIZE + 7 * ROW.size


def test_an_index_already_removed_when_a_write_fails_is_given_up_quietly(tmp_path, monkeypatch):
    """Someone removed partitions.idx, then a row cannot be written: the index is given up without an error and
    the record is written."""
    store = new_store(tmp_path)
    store.index_for_writing(PLAN, id_of)
    (store.directory / INDEX).unlink()

    def full(fd, data, offset):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(record_index.os, "pwrite", full)
    store.write_record(record(4, "failed"), durable=False)
    assert not (store.directory / INDEX).exists()
    assert from_files(store)[0].status(4) is Status.FAILED


def dead_pid() -> int:
    """The PID of a process that has exited."""
    return int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True).stdout)


def test_a_takeover_lists_partitions_for_temporaries_only_when_the_index_is_not_settled(tmp_path, monkeypatch):
    """Every record written through the index to its end: a takeover does not list partitions/ (a million entries
    take most of a second). A temporary file left by a dead writer (the directory moved past the stamp) or a
    pending row under a current stamp (a writer killed between creating its temporary and its rename): it does,
    and the dead writer's file is removed."""
    from engine.execute import takeover

    store = new_store(tmp_path)
    store.index_for_writing(PLAN, id_of)
    for index in range(5):
        store.write_record(record(index, "succeeded"), durable=False)
    store.close_index()
    listed = []
    real = takeover.remove_stale_temporaries
    monkeypatch.setattr(
        takeover, "remove_stale_temporaries", lambda directory: listed.append(directory) or real(directory)
    )

    def lists_partitions() -> bool:
        listed.clear()
        taken = takeover.take_over(StateStore(store.directory), StatusBoard(SIZE), [], grace=1.0)
        taken.children_lock.release()
        taken.lock.release()
        return store.partitions in listed

    assert not lists_partitions()
    litter = store.partitions / f".{id_of(0, DAY)}.json.{dead_pid()}.140000.tmp"
    litter.write_text("{")
    assert lists_partitions() and not litter.exists()
    writer = StateStore(store.directory)
    index = writer.index_for_writing(PLAN, id_of)
    index.pending(7)
    index.stamp()
    writer.close_index()
    assert lists_partitions()


def test_a_rebuild_removes_a_dead_writer_s_temporary_before_it_stamps(tmp_path):
    """A rebuilt index is stamped with the directory's time: a dead writer's temporary file left in partitions/
    is removed first, so that a settled index never hides one from later takeovers."""
    store = new_store(tmp_path)
    litter = store.partitions / f".{id_of(0, DAY)}.json.{dead_pid()}.140000.tmp"
    litter.write_text("{")
    store.index_for_writing(PLAN, id_of)
    store.close_index()
    assert not litter.exists() and store.partitions_settled(SIZE)


valid_rows = st.lists(
    st.tuples(
        st.sampled_from([0, 1, 3]),  # flags: never written, present, pending
        st.sampled_from(list(Status)),
        st.integers(0, 65_535),
        st.floats(-1, 1e6, allow_nan=False, width=32),
    ),
    max_size=25,
)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(valid_rows, st.integers(1, 6), st.integers(0, ROW.size - 1), st.booleans(), st.booleans())
def test_columns_read_a_chunk_at_a_time_are_the_whole_index_s(
    tmp_path_factory, monkeypatch, rows, chunk, cut, damage, beyond
):
    """Read a few rows at a time (any chunk size, the file cut anywhere in its last row): the board and the pending
    rows are those of the whole index read at once, rows past the plan's end ignored; a damaged row in any chunk makes
    the whole index untrusted."""
    store = new_store(tmp_path_factory.mktemp("s"))
    packed = {i: ROW.pack(flags, status, 0, n, NO_EXIT, d, 0, 0, 0, 0) for i, (flags, status, n, d) in enumerate(rows)}
    record_index.write_index(store.directory, SIZE, packed, record_index.stamp_of(store.partitions), {})
    path = store.directory / INDEX
    data = path.read_bytes()
    if rows and cut:
        data = data[: len(data) - ROW.size + cut]  # the last row cut short: only whole rows count
    if beyond:  # whole rows past the plan's last partition (a file of a longer plan, cut to this one's header)
        data = data.ljust(HEADER_SIZE + SIZE * ROW.size, b"\0") + ROW.pack(3, 3, 0, 9, 0, 1.0, 0, 0, 0, 0) * 5
    if len(rows) > 1 and damage:  # a flag no one writes, in the first row (whole, whatever the cut)
        data = data[:HEADER_SIZE] + b"\x09" + data[HEADER_SIZE + 1 :]
    path.write_bytes(data)
    monkeypatch.setattr(record_index, "CHUNK_ROWS", chunk)
    reads: list[int | None] = []
    real_open = open

    def opened(*args, **kwargs):
        handle = real_open(*args, **kwargs)
        real_read = handle.read
        handle.read = lambda size=-1: reads.append(size) or real_read(size)
        return handle

    monkeypatch.setattr(record_index, "open", opened, raising=False)
    found = read_indexed(store.directory, store.partitions, SIZE, writer_alive=True)
    assert all(size is not None and 0 <= size <= chunk * ROW.size for size in reads[1:])  # never the whole index
    monkeypatch.undo()
    whole = record_index.trusted_rows(store.directory, store.partitions, SIZE, writer_alive=True)
    if whole is None:
        assert found is None
        return
    board, to_read = record_index.board_of(whole, SIZE)
    assert found is not None and found.to_read == to_read
    assert columns(found.board) == columns(board) and found.board.counts() == board.counts()
    settled = record_index.settled(store.directory, store.partitions, SIZE)
    assert settled == (not record_index.pending_rows(whole))
