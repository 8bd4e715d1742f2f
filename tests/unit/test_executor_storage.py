"""How the executor writes its store, in-process over real children (engine/execute/executor_storage.py): the
record index and the counts cache kept with the records, the reserve a full disk falls back on (a real tmpfs), and
a store that cannot be written stopping the run with one clear reason."""

from __future__ import annotations

import errno
import os
import threading
from pathlib import Path

import orjson
import pytest

from engine.base.errors import StateWriteFailed
from engine.store.catalog import partitions_stamp
from engine.store.record_index import read_indexed
from engine.store.status import Status
from tests.backfills import child_command, read_spans, records, wait_for
from tests.conftest import tmpfs
from tests.unit.test_scheduling import prepare

FULL = "cancelled: the state store could not be written (No space left on device)"


@pytest.fixture
def work(tmp_path) -> Path:
    (tmp_path / ".git").mkdir()
    return tmp_path


@pytest.fixture
def small_states(work):
    """``work/states`` on a 256 KiB tmpfs (root only, as CI runs)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root (CI runs as root)")
    with tmpfs(work / "states", "256k") as disk:
        yield disk


def _fill(directory: Path, leave: int = 0) -> None:
    """Write a file in ``directory`` until its disk is full, then give ``leave`` bytes back."""
    descriptor = os.open(directory / "filler", os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        while True:
            os.write(descriptor, b"\0" * 4096)
    except OSError as error:
        assert error.errno == errno.ENOSPC
        os.ftruncate(descriptor, max(0, os.fstat(descriptor).st_size - leave))
    finally:
        os.close(descriptor)


def test_the_record_index_and_the_counts_cache_say_what_the_records_say(work):
    """Four partitions, two failing: at the end the record index holds each partition's status with no row left
    pending, and the counts cache is stamped with the records' directory time and counts what they say."""
    command = child_command("--fail-on", "2024-01-02", "--fail-on", "2024-01-04")
    prepared = prepare(work, command, 4, max_parallel=2, on_failure="continue")
    outcome = prepared.executor(grace=5.0).run()
    assert outcome.status == "failed"
    store = prepared.store
    statuses = [Status.parse(record["status"]) for record in records(store.directory)]
    assert statuses == [Status.SUCCEEDED, Status.FAILED, Status.SUCCEEDED, Status.FAILED]
    indexed = read_indexed(store.directory, store.partitions, 4, writer_alive=False)
    assert indexed is not None and indexed.to_read == []
    assert [indexed.board.status(index) for index in range(4)] == statuses
    summary = orjson.loads((store.directory / ".summary.json").read_bytes())
    assert summary["partitions_mtime_ns"] == partitions_stamp(store)
    assert (summary["counts"]["succeeded"], summary["counts"]["failed"]) == (2, 2)


def test_the_counts_cache_is_refreshed_while_a_child_runs(work, monkeypatch):
    """A child that runs until the test lets it end: within a few seconds the counts cache says one partition
    runs (it is refreshed every two seconds, not only at the start and the end); at the end, none does."""
    gate = work / "gate"
    monkeypatch.setenv("CHILD_WAIT_FOR", str(gate))
    prepared = prepare(work, child_command(), 1)
    executor = prepared.executor(grace=5.0)
    outcome: list = []
    runner = threading.Thread(target=lambda: outcome.append(executor.run()))
    runner.start()
    summary = prepared.store.directory / ".summary.json"
    try:
        wait_for(lambda: summary.exists() and orjson.loads(summary.read_bytes())["counts"]["running"] == 1, 15)
    finally:
        gate.touch()
        runner.join(60)
    assert outcome[0].status == "succeeded"
    counts = orjson.loads(summary.read_bytes())["counts"]
    assert (counts["running"], counts["succeeded"]) == (0, 1)


def test_no_room_for_the_reserve_starts_nothing_and_says_what_to_do(work, small_states):
    """The disk has 32 KiB left before the run, less than the reserve (64 KiB and 8 KiB per child at once): nothing
    starts, and the one line names the store, the reserve's size, the disk's own words and the command that
    resumes."""
    spans = work / "spans.jsonl"
    prepared = prepare(work, child_command("--spans", str(spans)), 3)
    _fill(small_states, leave=32 * 1024)
    store = prepared.store
    with pytest.raises(StateWriteFailed) as raised:
        prepared.executor(grace=5.0).run()
    assert str(raised.value) == (
        f"the state store {store.directory} has no room for its 72 KiB reserve (No space left on device): nothing "
        f"was started; free space, then backfill --continue {store.id}"
    )
    assert not spans.exists()


def test_a_disk_that_fills_mid_run_stops_every_child_and_leaves_every_record_final(work, small_states):
    """Children whose logs fill the store's disk: the run ends with one line saying the store could not be written
    and that every child was stopped; each record is final (written into the reserve's room once the children
    were stopped), those stopped say why, and a child that ran has its attempt."""
    prepared = prepare(work, child_command("--output-bytes", "10000", "--sleep", "0.3"), 30, max_parallel=3)
    store = prepared.store
    with pytest.raises(StateWriteFailed, match=r"could not be written \(No space left on device\): every child was"):
        prepared.executor(grace=5.0).run()
    found = records(store.directory)
    assert found and {record["status"] for record in found} <= {"succeeded", "failed", "cancelled"}
    errors = {attempt.get("error") for record in found for attempt in record["attempts"]}
    assert FULL in errors


def test_an_io_error_writing_a_record_stops_the_run_naming_it(work, monkeypatch):
    """The store answers an I/O error to a record (not a full disk): the run stops starting children and ends
    with one line naming the error, the children it ran stopped and waited for."""
    spans = work / "spans.jsonl"
    prepared = prepare(work, child_command("--spans", str(spans)), 6, max_parallel=1)
    executor = prepared.executor(grace=5.0)
    writer = executor._writer
    original, calls = writer.put, []

    def failing_put(path, data, *, durable, row=None):
        calls.append(path)
        if len(calls) == 3:
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        return original(path, data, durable=durable, row=row)

    monkeypatch.setattr(writer, "put", failing_put)
    with pytest.raises(StateWriteFailed, match=r"could not be written \(Input/output error\): every child was"):
        executor.run()
    assert len(read_spans(spans)) < 6
