"""Taking a backfill over: orphans of a dead executor (a zombie is not alive, so a takeover never waits for one), and
a live executor whose lock file is gone."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from datetime import UTC, datetime

import psutil
import pytest

from engine.base.errors import Refused, StateWriteFailed
from engine.base.processes import alive, process_identity, process_started, stop_verified
from engine.dates.instants import load_zone
from engine.dates.plan import Plan, parse_unit
from engine.execute import takeover
from engine.execute.takeover import check_no_live_owner_here
from engine.store.lease import LEASE, Lease, read_lease, write_lease
from engine.store.live_work import join, read_live
from engine.store.locks import FileLock
from engine.store.manifest import now_text
from engine.store.records import Attempt, PartitionRecord, RecordStatus
from engine.store.state_store import StateStore
from engine.store.status import Status, StatusBoard
from tests.backfills import hold_lock, release
from tests.unit.test_live_work import work


def test_a_zombie_is_not_alive_and_stopping_it_does_not_wait_for_the_grace():
    """An exited, unreaped child: psutil still lists it, alive() says no, stopping it returns at once."""
    child = subprocess.Popen(["true"])
    deadline = time.monotonic() + 10
    while psutil.Process(child.pid).status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert psutil.pid_exists(child.pid) and not alive(child.pid)
    started = time.monotonic()
    stop_verified([(child.pid, *process_identity(child.pid))], grace=30)
    assert time.monotonic() - started < 10  # not the 30 s grace: the zombie counts as gone
    child.wait()


def test_a_live_orphan_is_stopped_and_a_stubborn_one_killed():
    """SIGTERM first; whatever ignores it is SIGKILLed after the grace."""
    polite = subprocess.Popen(["sleep", "60"], start_new_session=True)
    stubborn = subprocess.Popen(["sh", "-c", "trap '' TERM; sleep 60"], start_new_session=True)
    time.sleep(0.2)
    stop_verified([(p.pid, *process_identity(p.pid)) for p in (polite, stubborn)], grace=1)
    assert polite.wait(timeout=10) == -15 and stubborn.wait(timeout=10) == -9


def test_a_recorded_child_is_known_by_its_birth_after_the_boot_time_moved(monkeypatch):
    """The kernel's boot time follows the wall clock (a clock step): a child recorded before the step is still
    recognised, by its birth, and stopped; its start time alone no longer matches."""
    from engine.base import processes

    child = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        started, birth = process_identity(child.pid)
        assert birth is not None and started is not None
        monkeypatch.setattr(processes, "_BOOT_TIME", processes._boot_time() + 1.0)  # read after the step
        assert not processes.same_process(child.pid, started)  # the start time alone: a stranger now
        assert processes.same_process(child.pid, started, birth)
        assert stop_verified([(child.pid, started, birth)], grace=5) == [child.pid]
        assert child.wait(timeout=10) == -15
    finally:
        child.kill()
        child.wait()


def test_a_matching_start_time_with_another_birth_is_not_the_recorded_process():
    """A PID reused by a process that whose start time matches the record: the birth decides, and nothing is
    signalled."""
    from engine.base import processes

    child = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        started, birth = process_identity(child.pid)
        boot, _, ticks = birth.rpartition(":")
        stranger = f"{boot}:{int(ticks) + 1}"
        assert processes.same_process(child.pid, started)
        assert not processes.same_process(child.pid, started, stranger)
        assert stop_verified([(child.pid, started, stranger)], grace=1) == []
        assert child.poll() is None
    finally:
        child.kill()
        child.wait()


def test_a_live_executor_the_lease_or_generation_names_owns_the_backfill_whatever_its_lock(tmp_path):
    """With its lock file gone the lock is free beside a live executor: the lease names the owner (a live process
    here: refused), none once its run ended or a reconcile cleared it (its process may live on, its dashboard
    open: allowed) or once it expired (its holder fences itself), another host's (left to the other-host check);
    without a lease the generation names it; a dead process or a reused PID (another start time) owns nothing."""
    store = StateStore(tmp_path / f"20240101-000000-{os.urandom(3).hex()}")
    store.create({"format": 1})
    owner = subprocess.Popen(["sleep", "60"])
    try:
        started, _birth = process_identity(owner.pid)
        here = socket.gethostname()

        def lease(host: str | None, pid: int | None, pid_started: float | None) -> None:
            write_lease(store.directory, Lease(3, host, pid, pid_started, time.time() + 60))

        def refused() -> bool:
            try:
                check_no_live_owner_here(store)
            except Refused as error:
                assert str(error) == (
                    f"backfill {store.id} is already running by executor PID {owner.pid} (its lock file .lock was "
                    "removed or replaced): wait for it, or stop it with Ctrl+C there"
                )
                return True
            return False

        store.write_generation(2, owner.pid, started, "2024-01-01T00:00:00Z")
        lease(here, owner.pid, started)
        assert refused()
        lease(None, None, None)  # ended, or reconciled
        assert not refused()
        lease("elsewhere", owner.pid, started)
        assert not refused()
        lease(here, owner.pid, started - 100)  # the PID, reused by another process
        assert not refused()
        write_lease(store.directory, Lease(3, here, owner.pid, started, time.time() - 1))  # expired: it fences itself
        assert not refused()
        (store.directory / LEASE).unlink()
        assert refused()
        store.write_generation(2, owner.pid, started - 100, "2024-01-01T00:00:00Z")
        assert not refused()
    finally:
        owner.kill()
        owner.wait()
    store.write_generation(2, owner.pid, started, "2024-01-01T00:00:00Z")
    assert not refused()  # dead


def test_a_takeover_fences_an_unnamed_executor_before_it_stops_any_child(tmp_path, monkeypatch):
    """An executor nothing names (lock files, lease and generation removed) goes on launching until it sees its
    lease replaced; the children it starts after the search for them would run beside the new owner's. So the
    takeover's own lease is on disk, with a higher epoch, before any child is stopped."""
    store = StateStore(tmp_path / f"20240101-000000-{os.urandom(3).hex()}")
    store.create({"format": 1})
    write_lease(store.directory, Lease(7, None, None, None, time.time(), (), "ended"))
    seen = []
    monkeypatch.setattr(
        takeover, "stop_verified", lambda orphans, grace: seen.append(read_lease(store.directory)) or []
    )
    before = time.time()
    taken = takeover.take_over(store, StatusBoard(1), [], grace=0.1, lease_seconds=7.0)
    taken.release()
    [lease] = seen
    assert (lease.epoch, lease.host, lease.pid, lease.note) == (8, socket.gethostname(), os.getpid(), "taking over")
    assert before + 7 <= lease.expires_at <= time.time() + 7  # the lease BACKFILL_LEASE_SECONDS sets, as any


DAY = 86_400_000_000
PLAN = Plan(0, 4 * DAY, load_zone("UTC"), parse_unit("daily"))


def id_of(start: int, end: int) -> str:
    return f"{start:016x}{end:016x}"


def running_record(index: int, attempt: Attempt) -> PartitionRecord:
    interval = PLAN.interval(index)
    return PartitionRecord(id_of(interval.start, interval.end), index, "", "", interval.start, interval.end,
                           "running", [attempt])  # fmt: skip


def new_store(tmp_path) -> StateStore:
    """A store whose ID is this test's own: a takeover stops every process whose environment names its ID, and
    tests run side by side."""
    store = StateStore(tmp_path / f"20240101-000000-{os.urandom(3).hex()}")
    store.create({"format": 1})
    return store


def wait_for_environment(pid: int, backfill_id: str) -> None:
    """Until ``pid`` has exec'd and its environment names the backfill (psutil reads it from /proc)."""
    while psutil.Process(pid).environ().get("BACKFILL_ID") != backfill_id:
        os.sched_yield()


def test_a_takeover_stops_what_the_dead_executor_left_and_settles_its_records(tmp_path):
    """A dead executor left: a child its record names (PID, start time, birth), a child whose attempt was still
    ``starting`` (found by ``BACKFILL_ID`` in its environment, its run ID by ``BACKFILL_RUN_ID``), and an attempt
    ``starting`` whose child never ran. The takeover stops both children, settles the first two as cancelled
    ("previous executor interrupted") and the third as lost, and becomes the next generation."""
    store = new_store(tmp_path)
    launched = now_text()
    named = subprocess.Popen(["sleep", "60"], start_new_session=True)
    bystander = subprocess.Popen(["sleep", "60"], start_new_session=True)
    zombie = subprocess.Popen(["true"])  # its environment cannot be read: the search goes on past it
    os.waitid(os.P_PID, zombie.pid, os.WEXITED | os.WNOWAIT)
    environment = {**os.environ, "BACKFILL_ID": store.id, "BACKFILL_RUN_ID": "run-1"}
    unnamed = subprocess.Popen(["sleep", "60"], start_new_session=True, env=environment)
    try:
        started, birth = process_identity(named.pid)
        attempt = Attempt(run_id="run-0", status=RecordStatus.RUNNING, started_at=launched, pid=named.pid,
                          pid_started=started, pid_birth=birth)  # fmt: skip
        # An ended attempt names no child of ours, whatever its (damaged) record says.
        other, other_birth = process_identity(bystander.pid)
        ended = Attempt(run_id="run-0-a0", status=RecordStatus.FAILED, started_at=launched, pid=bystander.pid,
                        pid_started=other, pid_birth=other_birth)  # fmt: skip
        record = running_record(0, attempt)
        record.attempts.insert(0, ended)
        store.write_record(record, durable=False)
        for index in (1, 2):
            attempt = Attempt(run_id=f"run-{index}", status=RecordStatus.STARTING, started_at=launched)
            store.write_record(running_record(index, attempt), durable=False)
        store.write_generation(4, 1, 0.0, launched)
        board, running = store.load_board(PLAN, id_of)
        assert sorted(r.index for r in running) == [0, 1, 2]
        wait_for_environment(unnamed.pid, store.id)
        taken = takeover.take_over(store, board, running, grace=10)
        try:
            assert taken.stopped_orphans == sorted([named.pid, unnamed.pid])
            assert named.wait(timeout=30) == unnamed.wait(timeout=30) == -15
            assert bystander.poll() is None
            assert (taken.generation.number, taken.generation.pid) == (5, os.getpid())
            assert store.read_generation() == taken.generation
            assert taken.inherited_fds() == (taken.children_lock.fd,)
            settled, still = StateStore(store.directory).load_board(PLAN, id_of)
            assert still == []
            assert [settled.status(i) for i in range(4)] == [Status.CANCELLED] * 3 + [Status.QUEUED]
            assert [board.status(i) for i in range(3)] == [Status.CANCELLED] * 3
            ended = {r.index: r.attempts[-1] for r in running}
            assert [(ended[i].status, ended[i].error) for i in (0, 1)] == [
                (RecordStatus.CANCELLED, takeover.INTERRUPTED)
            ] * 2
            assert ended[2].status == RecordStatus.LOST
            assert ended[2].error == "previous executor interrupted while starting it: whether its child ran is unknown"
        finally:
            taken.release()
    finally:
        for child in (named, unnamed, bystander, zombie):
            child.kill()
            child.wait()


def test_a_new_backfill_signals_no_process_and_a_resumed_one_stops_what_carries_its_id(tmp_path):
    """A backfill just created has had no executor, so no child of one can carry its ID: its takeover does not look
    through other processes, and a stranger whose environment names that ID is left alone. Once the store may
    have been run (any later takeover), the same process is taken for an orphan and stopped."""
    from engine.base.settings import Settings
    from engine.execute.backfill import create_backfill, state_root_for
    from engine.pipeline.options import RunOptions
    from engine.spec.backfill_spec import ExecutionOptions
    from engine.spec.planning import plan_request

    planned = plan_request(target=None, command="true", name=None, start="2024-01-01", end="2024-01-02",
                           timezone="UTC", partition="daily", environment=None, config_file=None,
                           run_options=RunOptions(), options=ExecutionOptions(), force=False, cwd=tmp_path)  # fmt: skip
    chosen = f"20240101-000000-{os.urandom(3).hex()}"
    stranger = subprocess.Popen(["sleep", "60"], start_new_session=True, env={**os.environ, "BACKFILL_ID": chosen})
    try:
        wait_for_environment(stranger.pid, chosen)
        root = state_root_for(planned.spec, str(tmp_path / "states"), tmp_path)
        prepared = create_backfill(planned, root=root, cwd=tmp_path, settings=Settings(), backfill_id=chosen)
        assert prepared.store.id == chosen
        assert prepared.takeover.stopped_orphans == []
        prepared.takeover.release()
        assert stranger.poll() is None
        again = takeover.take_over(StateStore(prepared.store.directory), StatusBoard(2), [], grace=10)
        try:
            assert again.stopped_orphans == [stranger.pid]
            assert stranger.wait(timeout=30) == -15
        finally:
            again.release()
    finally:
        stranger.kill()
        stranger.wait()


def test_a_held_lock_refuses_the_takeover_naming_its_holder(tmp_path):
    """Another executor holds ``.lock``: refused, naming it from the generation file when there is one; once it
    lets go, the takeover goes through."""
    store = new_store(tmp_path)
    first = takeover.take_over(store, StatusBoard(4), [], grace=1)
    holder = first.generation
    with pytest.raises(Refused) as refused:
        takeover.take_over(StateStore(store.directory), StatusBoard(4), [], grace=1)
    assert str(refused.value) == (
        f"backfill {store.id} is already running by executor PID {holder.pid} on {holder.host} since "
        f"{holder.started_at}: wait for it, or stop it with Ctrl+C there"
    )
    store.generation_path.unlink()
    with pytest.raises(Refused) as refused:
        takeover.take_over(StateStore(store.directory), StatusBoard(4), [], grace=1)
    assert str(refused.value) == f"backfill {store.id} is already running: wait for it, or stop it with Ctrl+C there"
    first.release()
    second = takeover.take_over(StateStore(store.directory), StatusBoard(4), [], grace=1)
    assert second.generation.number == 1  # its generation file was gone: the count starts again
    second.release()


def test_a_lease_held_on_another_host_refuses_until_its_grace_has_run_out(tmp_path):
    """An executor on another host sharing the state directory: refused while its lease and the other host's grace
    run (the time given), the lock let go; past them, taken over with the next epoch."""
    store = new_store(tmp_path)
    until = time.time() + 60
    write_lease(store.directory, Lease(2, "elsewhere", 4321, 1.0, until, host_grace=30.0))
    with pytest.raises(Refused) as refused:
        takeover.take_over(store, StatusBoard(4), [], grace=1)
    when = datetime.fromtimestamp(until + 30, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    assert str(refused.value) == (
        f"backfill {store.id} is owned by executor PID 4321 on elsewhere (its lease runs, with another host's grace, "
        f"until {when}): wait for it, or cancel it from here (backfill cancel)"
    )
    free = FileLock(store.lock_path)
    assert free.try_acquire()  # refused: the lock was let go
    free.release()
    write_lease(store.directory, Lease(2, "elsewhere", 4321, 1.0, time.time() - 31, host_grace=30.0))
    taken = takeover.take_over(store, StatusBoard(4), [], grace=1)
    assert read_lease(store.directory).epoch == 3
    taken.release()


def test_a_takeover_released_before_anything_ran_gives_its_lease_back(tmp_path):
    """A takeover released without running (refused, not approved) in a process that lives on (a browser that
    started a rerun): its lease no longer names that process, so requests are not sent to it and the next takeover
    is not refused as beside a live owner. A lease that no longer names this process is left as it is."""
    store = new_store(tmp_path)
    taken = takeover.take_over(store, StatusBoard(4), [], grace=1)
    assert read_lease(store.directory).pid == os.getpid()
    taken.release()
    lease = read_lease(store.directory)
    assert (lease.host, lease.pid, lease.note) == (None, None, "a takeover gave up") and lease.expired(time.time())
    again = takeover.take_over(store, StatusBoard(4), [], grace=1)
    ended = Lease(read_lease(store.directory).epoch, None, None, None, time.time(), (), "ended")
    write_lease(store.directory, ended)  # a run's own end gives its lease back first
    again.release()
    assert read_lease(store.directory).note == "ended"
    third = takeover.take_over(store, StatusBoard(4), [], grace=1)
    others = Lease(read_lease(store.directory).epoch, socket.gethostname(), 4242, 1.0, time.time() + 60)
    write_lease(store.directory, others)  # another process of this host holds it: not ours to give back
    third.release()
    assert read_lease(store.directory).pid == 4242
    fourth = takeover.take_over(store, StatusBoard(4), [], grace=1)
    (store.directory / "lease.json").write_text("{")  # damaged since the takeover: the locks are let go all the same
    fourth.release()
    assert FileLock(store.lock_path).try_acquire() and FileLock(store.children_lock_path).try_acquire()


def test_a_takeover_that_gives_up_leaves_the_lease_unowned_and_the_lock_free(tmp_path):
    """Stopping the children an earlier executor left on a cluster fails: the takeover's own lease is given back
    (no owner, "a takeover gave up", the same epoch) and the lock let go, so the next try is not refused."""
    store = new_store(tmp_path)
    write_lease(store.directory, Lease(4, None, None, None, time.time(), (), "ended"))

    def unreachable(records, generation):
        raise RuntimeError("the scheduler cannot be reached")

    with pytest.raises(RuntimeError):
        takeover.take_over(store, StatusBoard(4), [], grace=1, stop_remote=unreachable)
    lease = read_lease(store.directory)
    assert (lease.epoch, lease.host, lease.pid, lease.note) == (5, None, None, "a takeover gave up")
    assert lease.expired(time.time())
    taken = takeover.take_over(store, StatusBoard(4), [], grace=1, stop_remote=lambda records, generation: ["noted"])
    assert taken.notes == ["noted"]
    taken.release()


def test_the_records_are_read_again_once_the_lock_is_held(tmp_path):
    """What was read before the lock may predate a dead executor's last writes: the takeover reads again and shows
    that on the board; a read that fails lets the lock go."""
    store = new_store(tmp_path)
    fresh = StatusBoard(4)
    fresh.set(2, Status.SUCCEEDED)
    board = StatusBoard(4)
    taken = takeover.take_over(store, board, [], grace=1, reload=lambda: (fresh, []))
    assert [board.status(i) for i in range(4)] == [Status.QUEUED, Status.QUEUED, Status.SUCCEEDED, Status.QUEUED]
    taken.release()

    def unreadable():
        raise OSError(5, "Input/output error")

    with pytest.raises(OSError):
        takeover.take_over(store, StatusBoard(4), [], grace=1, reload=unreadable)
    free = FileLock(store.lock_path)
    assert free.try_acquire()
    free.release()


def test_a_takeover_that_cannot_write_its_lease_says_so_and_lets_the_lock_go(tmp_path, monkeypatch):
    """The disk is full when the takeover writes its lease: one line with the way on, nothing started, the lock
    free."""
    store = new_store(tmp_path)

    def full(directory, lease):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(takeover, "write_lease", full)
    with pytest.raises(StateWriteFailed) as failed:
        takeover.take_over(store, StatusBoard(4), [], grace=1)
    assert str(failed.value) == (
        f"the state store {store.directory} could not be written (No space left on device) while taking backfill "
        f"{store.id} over: nothing was started; free space or fix the disk, then backfill --continue {store.id}"
    )
    free = FileLock(store.lock_path)
    assert free.try_acquire()
    free.release()


def dead_pid() -> int:
    """The PID of a process that has exited."""
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, check=True)
    return int(done.stdout)


def test_a_takeover_is_the_next_generation_and_owns_the_lease_as_this_process(tmp_path):
    """The first takeover: lease epoch 1, the next one epoch 2, each naming this process by PID and start time;
    the generation likewise, with when it began; no note of a cluster; the live-work entry, once joined, is held by
    every child with ``.children.lock``."""
    store = new_store(tmp_path)
    me = os.getpid()
    for number in (1, 2):
        before = time.time()
        taken = takeover.take_over(StateStore(store.directory), StatusBoard(4), [], grace=1)
        lease = read_lease(store.directory)
        assert (lease.epoch, lease.pid, lease.pid_started) == (number, me, process_started(me))
        generation = taken.generation
        assert (generation.number, generation.pid, generation.pid_started) == (number, me, process_started(me))
        assert before - 1 <= datetime.fromisoformat(generation.started_at).timestamp() <= time.time() + 1
        assert taken.notes == []
        registry = tmp_path / "live"
        taken.live = join(work(backfill_id=store.id, state_dir=str(store.directory.parent), pid=me), registry)
        assert taken.inherited_fds() == (taken.children_lock.fd, taken.live.fd)
        taken.release()
        assert read_live(registry) == []


def test_a_takeover_hands_a_cluster_s_stopper_every_record_and_the_last_generation(tmp_path):
    """The children an earlier executor left on a cluster are stopped by the launcher given: it is handed the
    running records and the generation that started them, and what it says becomes the takeover's notes."""
    store = new_store(tmp_path)
    store.write_generation(3, 1, 0.0, now_text())
    attempt = Attempt(run_id="run-0", status=RecordStatus.RUNNING, started_at=now_text(), launcher="dask")
    store.write_record(running_record(0, attempt), durable=False)
    board, running = store.load_board(PLAN, id_of)
    handed = []

    def stop_remote(records, generation):
        handed.append(([r.index for r in records], generation.number))
        return ["2 children stopped on the cluster"]

    taken = takeover.take_over(store, board, running, grace=1, stop_remote=stop_remote)
    assert handed == [([0], 3)]
    assert taken.notes == ["2 children stopped on the cluster"]
    taken.release()


def test_a_child_nothing_can_find_holding_the_children_lock_refuses_the_takeover(tmp_path):
    """``.children.lock`` held by a process no record or environment names (it is not stopped): after the grace
    (and 5 s more) the takeover refuses, saying how to find it; the lease is given back and the lock let go."""
    store = new_store(tmp_path)
    holder = hold_lock(store.children_lock_path)
    try:
        with pytest.raises(Refused) as refused:
            takeover.take_over(store, StatusBoard(4), [], grace=0)
        assert str(refused.value) == (
            f"children of a previous executor of backfill {store.id} are still alive and could not be found or "
            f"stopped: find processes with BACKFILL_ID={store.id} in their environment and stop them"
        )
        assert holder.poll() is None  # not ours to stop: nothing names it
        assert read_lease(store.directory).note == "a takeover gave up"
        free = FileLock(store.lock_path)
        assert free.try_acquire()
        free.release()
    finally:
        release(holder)


def test_a_takeover_that_gives_up_on_a_full_disk_keeps_its_own_error(tmp_path, monkeypatch):
    """Giving the lease back fails too (the disk is full): the takeover's own error is what is raised."""
    store = new_store(tmp_path)
    real = takeover.write_lease
    writes = []

    def full_after_the_first(directory, lease):
        writes.append(lease.note)
        if len(writes) > 1:
            raise OSError(28, "No space left on device")
        real(directory, lease)

    monkeypatch.setattr(takeover, "write_lease", full_after_the_first)

    def unreachable(records, generation):
        raise RuntimeError("the scheduler cannot be reached")

    with pytest.raises(RuntimeError, match="the scheduler cannot be reached"):
        takeover.take_over(store, StatusBoard(4), [], grace=1, stop_remote=unreachable)
    assert writes == ["taking over", "a takeover gave up"]


def test_a_takeover_that_cannot_settle_the_last_run_says_so_and_lets_both_locks_go(tmp_path, monkeypatch):
    """The disk fills while the running records are settled: one line with the way on, both locks free."""
    store = new_store(tmp_path)
    attempt = Attempt(run_id="run-0", status=RecordStatus.STARTING, started_at=now_text())
    store.write_record(running_record(0, attempt), durable=False)
    board, running = store.load_board(PLAN, id_of)

    def full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(store, "settle_running", full)
    with pytest.raises(StateWriteFailed) as failed:
        takeover.take_over(store, board, running, grace=1)
    assert str(failed.value) == (
        f"the state store {store.directory} could not be written (No space left on device) while taking backfill "
        f"{store.id} over: nothing was started; free space or fix the disk, then backfill --continue {store.id}"
    )
    for path in (store.lock_path, store.children_lock_path):
        free = FileLock(path)
        assert free.try_acquire(), path
        free.release()


def test_a_takeover_removes_what_dead_writers_left_half_written(tmp_path):
    """A writer killed between creating its temporary file and renaming it leaves the file: in the store's own
    directory, ``records/`` and the split trees, a dead writer's temporaries are removed; a live writer's stays."""
    store = new_store(tmp_path)
    dead, live = dead_pid(), os.getpid()
    left = []
    for directory in (store.directory, store.directory / "records", store.splits):
        directory.mkdir(exist_ok=True)
        for pid in (dead, live):
            path = directory / f".file.json.{pid}.140000.tmp"
            path.write_text("{")
            left.append(path)
    taken = takeover.take_over(store, StatusBoard(4), [], grace=1)
    taken.release()
    assert [path.exists() for path in left] == [False, True] * 3


def test_a_copy_of_the_backfill_running_from_another_state_root_refuses_the_takeover(tmp_path, monkeypatch):
    """The same backfill running from a copy of its directory (a repository copied with its ``logs/``): its
    children carry our ID, which the search for orphans would stop. Refused, the lock let go."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    store = new_store(tmp_path)
    copy = tmp_path / "copy" / "logs"
    running = join(work(backfill_id=store.id, state_dir=str(copy), pid=4242))
    try:
        with pytest.raises(Refused) as refused:
            takeover.take_over(store, StatusBoard(4), [], grace=1)
        assert str(refused.value).startswith(
            f"backfill {store.id} is running from another copy of its state, {copy}/{store.id} (executor PID 4242"
        )
        free = FileLock(store.lock_path)
        assert free.try_acquire()
        free.release()
    finally:
        running.release()
