"""Taking a backfill over: orphans of a dead executor (a zombie is not alive, so a takeover never waits for one), and
a live executor whose lock file is gone."""

from __future__ import annotations

import os
import socket
import subprocess
import time

import psutil

from engine.base.errors import Refused
from engine.base.processes import alive, process_identity, stop_verified
from engine.execute import takeover
from engine.execute.takeover import check_no_live_owner_here
from engine.store.lease import LEASE, Lease, read_lease, write_lease
from engine.store.state_store import StateStore
from engine.store.status import StatusBoard


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
    """The kernel's boot time follows the wall clock (a second's NTP slew, a clock step): a child recorded before
    the move is still recognised, by its birth, and stopped; its start time alone no longer matches."""
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
    store = StateStore(tmp_path / "20240101-000000-abcdef")
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
    store = StateStore(tmp_path / "20240101-000000-abcdef")
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
