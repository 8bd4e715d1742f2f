"""Reconcile in-process, with real processes: what an expired lease left running is settled lost, its child
stopped — only when PID *and* start time match, never a process that merely has the recorded PID."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import orjson
import psutil
import pytest

from engine.base.processes import process_started
from engine.dates.instants import load_zone
from engine.dates.plan import Plan, parse_unit
from engine.interventions.reconcile import reconcile
from engine.store.lease import OTHER_HOST_GRACE, Lease, LeasedAttempt, read_lease, write_lease
from engine.store.records import Attempt, PartitionRecord
from engine.store.state_store import StateStore

DAY = 86_400_000_000
PLAN = Plan(0, 3 * DAY, load_zone("UTC"), parse_unit("daily"))
NOW = 1_800_000_000.0  # the lease expired at NOW - 1 in every test that reconciles


def id_of(start: int, end: int) -> str:
    return f"{start:016x}{end:016x}"


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@pytest.fixture
def sleeper():
    """Start ``sleep`` processes (their own sessions); every one is killed and reaped after the test."""
    started: list[subprocess.Popen] = []

    def start(*argv: str) -> subprocess.Popen:
        process = subprocess.Popen(argv or ("sleep", "300"), start_new_session=True)
        started.append(process)
        return process

    yield start
    for process in started:
        if process.poll() is None:
            process.kill()
        process.wait()


def own_id() -> str:
    """A backfill ID of this test's own: a reconcile stops every process of its host whose environment names the
    ID, and tests run side by side (a fixed ID let one test's reconcile stop another's child)."""
    return f"20240101-000000-{os.urandom(3).hex()}"


def store_with(tmp_path, running: dict[int, tuple[int | None, float | None]], *, host: str | None = None,
               expires: float = NOW - 1) -> StateStore:  # fmt: skip
    """A backfill whose executor (PID 1 on ``host``) holds an expired lease while ``running`` (index → the
    child's PID and start time) are recorded running."""
    store = StateStore(tmp_path / "states" / own_id())
    store.create({"format": 1})
    for index, (pid, started) in running.items():
        interval = PLAN.interval(index)
        attempt = Attempt(run_id=f"run-{index}", status="running", started_at="2024-01-01T00:00:00Z", pid=pid,
                          pid_started=started)  # fmt: skip
        record = PartitionRecord(id_of(interval.start, interval.end), index, "", "", interval.start, interval.end,
                                 "running", [attempt])  # fmt: skip
        store.write_record(record, durable=True)
    attempts = tuple(LeasedAttempt(f"run-{i}", i, pid, started) for i, (pid, started) in running.items())
    write_lease(store.directory, Lease(4, host or socket.gethostname(), 1, 0.0, expires, attempts, None))
    return store


def when(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def settle(store: StateStore, now: float = NOW):
    return reconcile(store, PLAN, id_of, requested_by="ops@host", reason="lease expired", applied_by="test", now=now)


def on_disk(store: StateStore) -> dict[int, tuple[str, list[str]]]:
    found = {}
    for path in store.partitions.glob("*.json"):
        data = orjson.loads(path.read_bytes())
        found[data["index"]] = (data["status"], [a["status"] for a in data["attempts"]])
    return found


def test_an_expired_lease_settles_every_running_attempt_lost_and_stops_its_child(tmp_path, sleeper):
    """The child recorded (PID and start time) is stopped; both attempts are lost, their partitions failed;
    the lease is fenced (epoch + 1, no owner); one RECONCILE_LOST line per attempt."""
    child = sleeper()
    store = store_with(tmp_path, {0: (child.pid, process_started(child.pid)), 2: (None, None)})
    result = settle(store)
    assert result.verdict == "lost"
    assert sorted(result.lost) == sorted(id_of(PLAN.interval(i).start, PLAN.interval(i).end) for i in (0, 2))
    assert result.stopped == [child.pid]
    assert child.wait(timeout=15) is not None and not alive(child.pid)
    assert on_disk(store) == {0: ("failed", ["lost"]), 2: ("failed", ["lost"])}
    lease = read_lease(store.directory)
    assert (lease.epoch, lease.host, lease.pid, lease.attempts) == (5, None, None, ())
    assert lease.note.endswith(f"executor PID 1 on {socket.gethostname()}'s lease expired")
    lines = [orjson.loads(line) for line in (store.directory / "audit.jsonl").read_bytes().splitlines()]
    assert [(x["action"], x["from_status"], x["to_status"]) for x in lines] == [
        ("RECONCILE_LOST", "running", "failed")
    ] * 2
    for line in lines:
        assert (line["backfill_id"], line["reason"], line["requested_by"], line["applied_by"]) == (
            store.id, "lease expired", "ops@host", "test"
        )  # fmt: skip
        assert line["requested_at"] == line["applied_at"] and line["applied_at"].endswith("Z")
        assert line["previous_message"] is None
    assert sorted(line["partition_id"] for line in lines) == sorted(result.lost)
    owner = f"executor PID 1 on {socket.gethostname()}"
    expired = when(NOW - 1)
    assert result.backfill_id == store.id
    assert result.message == (
        f"backfill {store.id}: the lease of {owner} expired at {expired}; 2 running attempts marked lost, "
        f"stopped PIDs {child.pid}; it can be resumed"
    )
    for path in store.partitions.glob("*.json"):
        [attempt] = orjson.loads(path.read_bytes())["attempts"]
        assert attempt["error"] == (
            f"lost: the lease of {owner} expired at {expired} while it ran; its outcome is uncertain "
            "(its work may have committed): check the target before running it again"
        )


def test_a_process_that_reused_the_recorded_pid_is_never_signalled(tmp_path, sleeper):
    """The recorded PID is alive but started at another time (the PID was reused): it is left running, and
    the attempt is settled lost all the same."""
    stranger = sleeper()
    store = store_with(tmp_path, {1: (stranger.pid, process_started(stranger.pid) - 1000.0)})
    result = settle(store)
    assert result.verdict == "lost" and result.stopped == []
    time.sleep(0.2)  # a SIGTERM would have landed by now (a "nothing happens" check)
    assert alive(stranger.pid)
    assert on_disk(store) == {1: ("failed", ["lost"])}
    assert result.message.endswith("1 running attempt marked lost; it can be resumed")


def test_a_child_without_a_recorded_start_time_is_not_trusted(tmp_path, sleeper):
    """A PID with no start time cannot be verified: never signalled."""
    stranger = sleeper()
    result = settle(store_with(tmp_path, {0: (stranger.pid, None)}))
    assert result.stopped == [] and alive(stranger.pid)


def test_the_stopped_child_takes_its_descendants_with_it(tmp_path, sleeper):
    """A verified child's descendants, two deep (found when the reconcile starts), are stopped too; a process
    of ours that is not one of them is never touched."""
    inner = "import subprocess, time; subprocess.Popen(['sleep', '300']); time.sleep(300)"
    script = f"import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', {inner!r}]); time.sleep(300)"
    parent = sleeper(sys.executable, "-c", script)
    bystander = sleeper()
    deadline = time.monotonic() + 20
    while len(psutil.Process(parent.pid).children(recursive=True)) < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    family = [p.pid for p in psutil.Process(parent.pid).children(recursive=True)]
    assert len(family) == 2  # a child and its child
    result = settle(store_with(tmp_path, {0: (parent.pid, process_started(parent.pid))}))
    assert result.stopped == sorted([parent.pid, *family])
    parent.wait(timeout=15)
    deadline = time.monotonic() + 15
    while any(alive(pid) for pid in family) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not any(alive(pid) for pid in family)
    assert alive(bystander.pid)


def test_a_child_known_only_to_the_lease_or_only_to_the_records_is_stopped(tmp_path, sleeper):
    """The lease lists the attempts it supervised, the records those that were running: either is enough."""
    in_lease, in_record = sleeper(), sleeper()
    store = StateStore(tmp_path / "states" / own_id())
    store.create({"format": 1})
    interval = PLAN.interval(0)
    attempt = Attempt(run_id="run-0", status="running", started_at="2024-01-01T00:00:00Z", pid=in_record.pid,
                      pid_started=process_started(in_record.pid))  # fmt: skip
    store.write_record(PartitionRecord(id_of(interval.start, interval.end), 0, "", "", interval.start, interval.end,
                                       "running", [attempt]), durable=True)  # fmt: skip
    leased = (LeasedAttempt("run-1", 1, in_lease.pid, process_started(in_lease.pid)),)
    write_lease(store.directory, Lease(1, socket.gethostname(), 1, 0.0, NOW - 1, leased, None))
    result = settle(store)
    assert result.stopped == sorted([in_lease.pid, in_record.pid])
    assert in_lease.wait(timeout=15) is not None and in_record.wait(timeout=15) is not None


def test_a_finished_attempt_s_pid_is_not_a_candidate(tmp_path, sleeper):
    """Only running attempts name children: the PID of an attempt that ended is left alone."""
    done = sleeper()
    store = store_with(tmp_path, {0: (None, None)})
    interval = PLAN.interval(1)
    ended = Attempt(run_id="run-1", status="failed", started_at="2024-01-01T00:00:00Z", pid=done.pid,
                    pid_started=process_started(done.pid))  # fmt: skip
    store.write_record(PartitionRecord(id_of(interval.start, interval.end), 1, "", "", interval.start, interval.end,
                                       "failed", [ended]), durable=True)  # fmt: skip
    assert settle(store).stopped == [] and alive(done.pid)


def test_without_a_clock_given_the_real_time_decides(tmp_path):
    """``now`` defaults to the wall clock: a lease that expired ten seconds ago is settled."""
    store = store_with(tmp_path, {0: (None, None)}, expires=time.time() - 10)
    result = reconcile(store, PLAN, id_of, requested_by="ops@host", reason="r", applied_by="test")
    assert result.verdict == "lost"


def test_a_live_lease_is_left_alone(tmp_path, sleeper):
    """Before its expiry the owner is live: nothing is written, nothing is signalled."""
    child = sleeper()
    store = store_with(tmp_path, {0: (child.pid, process_started(child.pid))}, expires=NOW + 30)
    before = (store.directory / "lease.json").read_bytes()
    result = settle(store)
    assert result.verdict == "live" and result.backfill_id == store.id
    assert result.message == (
        f"backfill {store.id}: executor PID 1 on {socket.gethostname()} holds its lease until {when(NOW + 30)}"
    )
    assert (store.directory / "lease.json").read_bytes() == before
    assert on_disk(store) == {0: ("running", ["running"])} and alive(child.pid)
    assert settle(store, now=NOW + 30).verdict == "lost"  # the expiry itself is past


def test_an_owner_on_another_host_gets_its_grace_and_its_processes_are_not_looked_for(tmp_path, sleeper):
    """Another host's owner: within OTHER_HOST_GRACE past expiry it is 'in grace'; after it, its attempts are
    settled lost, and no local process is signalled (the PIDs are another machine's)."""
    child = sleeper()
    store = store_with(tmp_path, {0: (child.pid, process_started(child.pid))}, host="elsewhere")
    held = settle(store, now=NOW - 1 + OTHER_HOST_GRACE - 0.5)
    assert held.verdict == "in grace" and held.backfill_id == store.id
    assert held.message == (
        f"backfill {store.id}: the lease of executor PID 1 on elsewhere expired at {when(NOW - 1)}; another host "
        f"gets {OTHER_HOST_GRACE:g} s more, until {when(NOW - 1 + OTHER_HOST_GRACE)}"
    )
    assert on_disk(store) == {0: ("running", ["running"])}
    result = settle(store, now=NOW - 1 + OTHER_HOST_GRACE)
    assert result.verdict == "lost" and result.stopped == [] and alive(child.pid)
    assert on_disk(store) == {0: ("failed", ["lost"])}


def test_no_lease_or_an_unowned_one_is_nothing_to_settle(tmp_path):
    """Without a lease, or with the lease a reconcile (or the end of a run) left unowned: 'unowned', with its note."""
    store = StateStore(tmp_path / "states" / own_id())
    store.create({"format": 1})
    none = settle(store)
    assert (none.verdict, none.backfill_id, none.message) == (
        "unowned",
        store.id,
        f"backfill {store.id}: no executor owns it",
    )
    write_lease(store.directory, Lease(2, None, None, None, NOW, (), "ended at noon"))
    result = settle(store)
    assert result.verdict == "unowned" and result.message.endswith("no executor owns it (ended at noon)")


def test_an_expired_lease_with_nothing_running_is_fenced_and_unowned(tmp_path):
    """An executor that died between runs: its lease is fenced; nothing was lost."""
    store = store_with(tmp_path, {})
    result = settle(store)
    assert result.verdict == "unowned" and result.lost == [] and result.backfill_id == store.id
    assert result.message.endswith("0 running attempts marked lost; it can be resumed")
    assert read_lease(store.directory).host is None


def test_a_child_whose_attempt_was_still_starting_is_found_by_its_environment(tmp_path, sleeper):
    """The owner froze between a child's start and its running record: no lease or record names the child, but its
    environment carries the backfill's ID, so the reconcile stops it before it marks the attempt lost. A process of
    another backfill is left alone."""
    store = store_with(tmp_path, {})
    interval = PLAN.interval(0)
    attempt = Attempt(run_id="run-0", status="starting", started_at="2024-01-01T00:00:00Z")
    store.write_record(PartitionRecord(id_of(interval.start, interval.end), 0, "", "", interval.start, interval.end,
                                       "running", [attempt]), durable=True)  # fmt: skip
    ours = subprocess.Popen(["sleep", "300"], start_new_session=True,
                            env={**os.environ, "BACKFILL_ID": store.id, "BACKFILL_RUN_ID": "run-0"})  # fmt: skip
    other = subprocess.Popen(["sleep", "300"], start_new_session=True, env={**os.environ, "BACKFILL_ID": "x"})
    try:
        result = settle(store)
        assert result.stopped == [ours.pid] and ours.wait(timeout=15) == -15
        assert other.poll() is None
        assert on_disk(store) == {0: ("failed", ["lost"])}
    finally:
        for process in (ours, other):
            process.kill()
            process.wait()
