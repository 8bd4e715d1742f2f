"""Partition records as the store reads them back: every field of every kind of attempt kept, every damage and
every record of another plan refused with one line naming the file, and the record writer that keeps order and
never swallows an error."""

from __future__ import annotations

import threading

import orjson
import pytest

from engine.base.errors import StateUnreadable
from engine.dates.formatting import InstantFormatter
from engine.dates.instants import load_zone
from engine.dates.plan import Plan, parse_unit
from engine.store import record_writer as writer_module
from engine.store.record_writer import RecordWriter
from engine.store.records import (
    ATTEMPT_STATUSES,
    PARTITION_STATUSES,
    Attempt,
    PartitionRecord,
    RecordStatus,
    read_record,
    status_of,
)
from engine.store.status import Status
from tests.hang_guard import finishes

DAY = 86_400_000_000
UTC = load_zone("UTC")
PLAN = Plan(0, 3 * DAY, UTC, parse_unit("daily"))


def id_of(start: int, end: int) -> str:
    return f"{start:016x}{end:016x}"


def fresh(index: int = 1, status: str = "succeeded") -> PartitionRecord:
    interval = PLAN.interval(index)
    return PartitionRecord.fresh(id_of(interval.start, interval.end), interval, InstantFormatter(UTC), status)


RUN = Attempt(
    run_id="run-1", status=RecordStatus.FAILED, started_at="2024-01-02T00:00:01Z", finished_at="2024-01-02T00:00:09Z",
    exit_code=3, error="exit 3", log="logs/run-1.log", pid=4321, pid_started=1.5, pid_birth="0f3c:150",
    generation=2, duration=8.25, launcher="warm", verification={"status": "failed", "rows": 0},
)  # fmt: skip
MARK = Attempt(
    run_id="mark-1", status=RecordStatus.SUCCEEDED, started_at="2024-01-03T00:00:00Z", kind="mark", rows=12,
    asset="mid.daily", by="ops@host",
)  # fmt: skip
REMOTE = Attempt(
    run_id="run-2", status=RecordStatus.LOST, started_at="2024-01-03T00:00:00Z", launcher="dask",
    remote={"scheduler": "tcp://s:8786", "worker": "tcp://w:1", "host": "w", "pgid": 99},
)  # fmt: skip


def test_a_fresh_record_holds_its_interval_as_text_and_microseconds():
    """The interval is kept both ways, so reading never parses dates; no attempt yet."""
    record = fresh(1, "queued")
    assert (record.index, record.start_us, record.end_us, record.status, record.attempts) == (
        1,
        DAY,
        2 * DAY,
        "queued",
        [],
    )
    assert (record.start, record.end) == ("1970-01-02T00:00:00Z", "1970-01-03T00:00:00Z")
    assert record.id == id_of(DAY, 2 * DAY)


def test_every_kind_of_attempt_reads_back_as_written(tmp_path):
    """A failed warm run with its verification, an operator's mark of one asset, a lost Dask attempt: every
    field survives the file."""
    record = fresh()
    record.attempts = [RUN, MARK, REMOTE]
    path = tmp_path / f"{record.id}.json"
    path.write_bytes(record.to_bytes())
    assert read_record(path, PLAN, id_of) == record


def test_the_file_holds_the_documented_keys(tmp_path):
    """A run attempt carries no mark fields; a mark carries who and what; a remote one its worker's place."""
    record = fresh()
    record.attempts = [RUN, MARK, REMOTE]
    data = orjson.loads(record.to_bytes())
    assert set(data) == {"format", "id", "index", "start", "end", "start_us", "end_us", "status", "attempts"}
    assert data["format"] == 1
    run, mark, remote = data["attempts"]
    assert run == {
        "run_id": "run-1", "status": "failed", "started_at": "2024-01-02T00:00:01Z",
        "finished_at": "2024-01-02T00:00:09Z", "exit_code": 3, "error": "exit 3", "log": "logs/run-1.log",
        "pid": 4321, "pid_started": 1.5, "pid_birth": "0f3c:150", "generation": 2, "duration": 8.25, "launcher": "warm",
        "verification": {"status": "failed", "rows": 0},
    }  # fmt: skip
    assert (mark["kind"], mark["rows"], mark["asset"], mark["by"]) == ("mark", 12, "mid.daily", "ops@host")
    assert (remote["scheduler"], remote["worker"], remote["host"], remote["pgid"]) == (
        "tcp://s:8786",
        "tcp://w:1",
        "w",
        99,
    )
    assert "kind" not in remote and "cluster" not in remote


def test_an_attempt_of_an_older_version_gets_the_defaults():
    """Fields a record of an earlier version lacks read as their defaults; a verification that is not an
    object is dropped."""
    attempt = Attempt.from_json({"run_id": "r", "status": "running", "started_at": "t", "verification": "passed"})
    assert attempt == Attempt(run_id="r", status="running", started_at="t")
    assert (attempt.generation, attempt.launcher, attempt.kind, attempt.remote, attempt.verification) == (
        0, "exec", "run", None, None
    )  # fmt: skip
    cluster = Attempt.from_json({"run_id": "r", "status": "lost", "started_at": "t", "cluster": "local"})
    assert cluster.remote == {"cluster": "local"}


def test_statuses_on_disk_are_the_partitions_and_the_attempts():
    """A partition is never ``lost`` (an attempt is); an attempt is never ``queued``."""
    assert "lost" not in PARTITION_STATUSES and "queued" in PARTITION_STATUSES
    assert "queued" not in ATTEMPT_STATUSES and "lost" in ATTEMPT_STATUSES
    assert set(PARTITION_STATUSES) | set(ATTEMPT_STATUSES) == set(RecordStatus)
    record = fresh(0, "cancelled")
    assert status_of(record) is Status.parse("cancelled")


def write(tmp_path, data: dict, name: str | None = None):
    record = fresh()
    path = tmp_path / f"{name or record.id}.json"
    path.write_bytes(orjson.dumps({**orjson.loads(record.to_bytes()), **data}))
    return path


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"index": 7}, "has index 7, outside this backfill's plan of 3"),
        ({"index": 3}, "has index 3, outside this backfill's plan of 3"),
        ({"index": -1}, "has index -1, outside this backfill's plan of 3"),
        ({"index": "1"}, "has index '1', outside this backfill's plan of 3"),
        ({"start_us": 5}, "does not belong to this backfill's plan (its interval or ID does not match partition 1)"),
        ({"end_us": 5}, "does not belong to this backfill's plan (its interval or ID does not match partition 1)"),
        ({"id": "other"}, "does not belong to this backfill's plan (its interval or ID does not match partition 1)"),
        ({"status": "lost"},
         "has unknown status 'lost' (known: queued, running, succeeded, failed, cancelled, skipped)"),
        ({"attempts": [{"run_id": "r", "status": "queued", "started_at": "t"}]},
         "has an attempt with unknown status 'queued'"),
        ({"attempts": {"run_id": "r"}}, "lacks the field attempts: it was not written by backfill"),
        ({"attempts": [{"status": "failed"}]},
         "lacks the field 'attempts[0].run_id': it was not written by backfill"),
        ({"attempts": [7]}, ": attempts[0] is 7, not an object"),
    ],
)  # fmt: skip
def test_a_record_that_is_not_this_plan_s_is_refused(tmp_path, change, message):
    """Another plan's interval or ID, an index outside the plan, an unknown status: one line naming the file."""
    path = write(tmp_path, change)
    with pytest.raises(StateUnreadable) as raised:
        read_record(path, PLAN, id_of)
    assert str(raised.value) == f"partition file {path}{'' if message.startswith(':') else ' '}{message}"


@pytest.mark.parametrize("missing", ["index", "start_us", "end_us", "status", "id", "attempts"])
def test_a_record_missing_a_field_is_refused(tmp_path, missing):
    """Each required field: the line names it."""
    record = fresh()
    data = orjson.loads(record.to_bytes())
    del data[missing]
    path = tmp_path / f"{record.id}.json"
    path.write_bytes(orjson.dumps(data))
    with pytest.raises(StateUnreadable) as raised:
        read_record(path, PLAN, id_of)
    assert str(raised.value) == f"partition file {path} lacks the field '{missing}': it was not written by backfill"


def test_a_record_under_another_name_is_refused(tmp_path):
    """A record copied to another partition's file name does not belong there."""
    path = write(tmp_path, {}, name=id_of(0, DAY))
    with pytest.raises(StateUnreadable, match="does not belong to this backfill's plan"):
        read_record(path, PLAN, id_of)


def test_text_without_start_and_end_reads_as_empty(tmp_path):
    """The text forms are for people: a record without them still reads, with empty text."""
    record = fresh(status="queued")
    data = orjson.loads(record.to_bytes())
    del data["start"], data["end"]
    path = tmp_path / f"{record.id}.json"
    path.write_bytes(orjson.dumps(data))
    read = read_record(path, PLAN, id_of)
    assert (read.start, read.end, read.start_us) == ("", "", DAY)


def test_a_torn_or_unreadable_record_is_refused(tmp_path):
    """Bad JSON says how to let the partition run again; an unreadable file names the reason."""
    path = tmp_path / "x.json"
    path.write_bytes(b'{"index": 1')
    with pytest.raises(StateUnreadable) as raised:
        read_record(path, PLAN, id_of)
    assert str(raised.value).startswith(f"partition file {path} is not valid JSON (")
    assert str(raised.value).endswith("): move it away to let the partition run again")
    path.unlink()
    path.mkdir()
    with pytest.raises(StateUnreadable) as raised:
        read_record(path, PLAN, id_of)
    assert str(raised.value) == f"cannot read partition file {path}: Is a directory"


def test_the_writer_keeps_the_order_of_a_partition_s_records(tmp_path):
    """A running record queued before the final one never overtakes it; drain waits for both."""
    writer = RecordWriter(tmp_path)
    path = tmp_path / "p.json"
    for n in range(200):
        writer.put(path, b"%d" % n, durable=n % 50 == 0)
    finishes(writer.drain)
    assert path.read_bytes() == b"199"
    finishes(writer.close)


def test_the_writer_s_error_reaches_the_executor(tmp_path):
    """A write that fails (its directory replaced by a file) is raised by drain, by the next put and by
    close: a record is never silently lost."""
    writer = RecordWriter(tmp_path)
    blocked = tmp_path / "blocked"
    blocked.write_text("a file, not a directory")
    writer.put(blocked / "p.json", b"{}", durable=True)
    with pytest.raises(NotADirectoryError):
        finishes(writer.drain)
    with pytest.raises(NotADirectoryError):
        writer.put(tmp_path / "q.json", b"{}", durable=False)
    with pytest.raises(NotADirectoryError):
        finishes(writer.close)
    assert not (tmp_path / "q.json").exists()


def test_a_failed_write_in_the_closing_batch_still_ends_the_writer(tmp_path):
    """A failed record, records behind it and the close in one batch (a full disk at the end of a run): close()
    raises the error instead of waiting forever, and nothing behind the failure is written."""
    writer = RecordWriter(tmp_path)
    gate = threading.Event()
    writer._queue.put((tmp_path / "gate.json", b"{}", False, None, None))  # a first batch, to hold the thread...
    blocked = tmp_path / "blocked"
    blocked.write_text("x")
    original = writer_module.write_atomic

    def held(path, data, **kwargs):
        if path.name == "gate.json":
            gate.wait(10)  # ...while the failing record, the next one and the close queue up behind it
        return original(path, data, **kwargs)

    writer_module.write_atomic = held
    try:
        writer.put(blocked / "p.json", b"{}", durable=False)
        writer.put(tmp_path / "after.json", b"{}", durable=False)
        raised: list[BaseException] = []

        def close() -> None:
            try:
                writer.close()
            except BaseException as error:
                raised.append(error)

        closing = threading.Thread(target=close, daemon=True)
        closing.start()
        gate.set()
        closing.join(10)
        assert not closing.is_alive(), "close() never returned"
    finally:
        writer_module.write_atomic = original
    assert [type(error) for error in raised] == [NotADirectoryError]
    assert not (tmp_path / "after.json").exists()


def test_a_closed_writer_has_written_everything(tmp_path):
    """close() returns once every queued record is on disk."""
    writer = RecordWriter(tmp_path)
    for n in range(20):
        writer.put(tmp_path / f"{n}.json", b"x", durable=True)
    finishes(writer.close)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(f"{n}.json" for n in range(20))


def test_durable_records_are_synced_once_per_batch_and_others_not(tmp_path, monkeypatch):
    """Each record is written atomically without syncing its directory; a batch holding a durable record
    syncs the directory once (a power loss cannot lose a final status), a batch of progress records never."""
    calls: list[tuple] = []
    gate = threading.Event()
    original_write = writer_module.write_atomic

    def write(path, data, **kwargs):
        if path.name == "gate.json":
            gate.wait(10)  # hold the thread while a batch queues up behind
        calls.append(("write", path.name, kwargs))
        original_write(path, data, **kwargs)

    monkeypatch.setattr(writer_module, "write_atomic", write)
    monkeypatch.setattr(writer_module, "sync_directory", lambda directory: calls.append(("sync", directory)))
    writer = RecordWriter(tmp_path)
    writer.put(tmp_path / "gate.json", b"{}", durable=False)
    writer.put(tmp_path / "a.json", b"{}", durable=False)
    writer.put(tmp_path / "b.json", b"{}", durable=True)
    writer.put(tmp_path / "c.json", b"{}", durable=False)
    gate.set()
    finishes(writer.drain)
    writer.put(tmp_path / "d.json", b"{}", durable=False)
    finishes(writer.close)
    assert calls == [
        ("write", "gate.json", {"durable": False, "sync_parent": False}),
        ("write", "a.json", {"durable": False, "sync_parent": False}),
        ("write", "b.json", {"durable": True, "sync_parent": False}),
        ("write", "c.json", {"durable": False, "sync_parent": False}),
        ("sync", tmp_path),
        ("write", "d.json", {"durable": False, "sync_parent": False}),
    ]


def test_init_this_process_and_its_parent_are_never_the_same_process_as_a_record():
    """PID 1, our own PID and our parent's, with their true start times: never taken for a recorded child."""
    import os

    from engine.base.processes import process_started, same_process

    for pid in (1, os.getpid(), os.getppid()):
        assert not same_process(pid, process_started(pid)), pid
    assert not same_process(0, 0.0)


def test_an_attempt_names_its_child_only_when_it_could_be_one():
    """A child that started before its attempt was launched is no child; a warm runner predates attempts and keeps
    its identity; a Dask child (another machine) is never named here."""
    from engine.store.records import Attempt, RecordStatus

    def attempt(**fields) -> Attempt:
        return Attempt(run_id="r", status=RecordStatus.RUNNING, started_at="2024-01-01T00:00:10Z", pid=42, **fields)

    launched = 1704067210.0
    assert attempt(pid_started=launched, pid_birth="b:7").child() == (42, launched, "b:7")
    assert attempt(pid_started=launched - 1.5).child() == (42, launched - 1.5, None)  # within the clock's slack
    assert attempt(pid_started=launched - 3).child() is None
    assert attempt(pid_started=launched - 3600, launcher="warm").child() == (42, launched - 3600, None)
    assert attempt(pid_started=launched, launcher="dask").child() is None
    assert attempt(pid_started=None).child() is None
