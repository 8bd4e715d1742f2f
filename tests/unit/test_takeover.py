"""Orphans of a dead executor: a zombie is not alive, so a takeover never waits for one."""

from __future__ import annotations

import subprocess
import time

import psutil

from engine.base.processes import alive, process_started, stop_verified


def test_a_zombie_is_not_alive_and_stopping_it_does_not_wait_for_the_grace():
    """An exited, unreaped child: psutil still lists it, alive() says no, stopping it returns at once."""
    child = subprocess.Popen(["true"])
    deadline = time.monotonic() + 10
    while psutil.Process(child.pid).status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert psutil.pid_exists(child.pid) and not alive(child.pid)
    started = time.monotonic()
    stop_verified([(child.pid, process_started(child.pid))], grace=30)
    assert time.monotonic() - started < 10  # not the 30 s grace: the zombie counts as gone
    child.wait()


def test_a_live_orphan_is_stopped_and_a_stubborn_one_killed():
    """SIGTERM first; whatever ignores it is SIGKILLed after the grace."""
    polite = subprocess.Popen(["sleep", "60"], start_new_session=True)
    stubborn = subprocess.Popen(["sh", "-c", "trap '' TERM; sleep 60"], start_new_session=True)
    time.sleep(0.2)
    stop_verified([(p.pid, process_started(p.pid)) for p in (polite, stubborn)], grace=1)
    assert polite.wait(timeout=10) == -15 and stubborn.wait(timeout=10) == -9
