"""Orphans of a dead executor: a zombie is not alive, so a takeover never waits for one."""

from __future__ import annotations

import subprocess
import time

import psutil

from engine.base.processes import alive, process_identity, stop_verified


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
