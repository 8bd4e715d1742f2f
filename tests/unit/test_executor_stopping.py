"""The executor's stopping and waiting, in-process over real children: escalation after the grace period,
leftovers, a bug of ours in the loop, pauses and an operator's end."""

from __future__ import annotations

import threading
import time
from datetime import datetime
from pathlib import Path

import psutil
import pytest

from engine.execute.executor import Executor
from tests.backfills import child_command, records
from tests.unit.test_scheduling import prepare


@pytest.fixture
def work(tmp_path) -> Path:
    (tmp_path / ".git").mkdir()
    return tmp_path


def wait_until(condition, seconds: float = 20) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.02)


def with_poll(executor: Executor, poll) -> Executor:
    """The executor with ``poll`` in place of the operators' request poller (called on every turn of its loop)."""
    executor.hooks.poll = poll
    return executor


def test_a_bug_in_the_loop_still_stops_and_waits_for_every_child(work):
    """A hook raising while two stubborn children run: run() re-raises, but only after both were stopped (SIGKILL
    after the grace) and reaped; their records say cancelled by the executor stopping."""
    prepared = prepare(work, child_command("--sleep", "30", "--ignore-signals"), 4, max_parallel=2)
    pids: list[int] = []

    def poll(executor: Executor) -> None:
        running = executor.snapshot().running
        if len(running) == 2:
            pids.extend(r.pid for r in running)
            raise RuntimeError("a bug of ours")

    executor = with_poll(prepared.executor(grace=0.5), poll)
    with pytest.raises(RuntimeError, match="a bug of ours"):
        executor.run()
    assert len(pids) == 2
    assert not any(psutil.pid_exists(pid) for pid in pids)
    found = records(prepared.store.directory)
    assert [(r["index"], r["status"], r["attempts"][-1]["error"]) for r in found] == [
        (0, "cancelled", "cancelled: executor stopped"),
        (1, "cancelled", "cancelled: executor stopped"),
    ]
    assert [r["attempts"][-1]["exit_code"] for r in found] == [-9, -9]
    assert executor.snapshot().running == ()


def test_a_child_ignoring_the_stop_signal_gets_sigkill_only_after_the_grace(work):
    """request_stop: the stubborn child receives SIGINT at once and SIGKILL once the 1 s grace is over, not before;
    a well-behaved sibling ends on the SIGINT alone."""
    signals = work / "signals"
    stubborn = child_command("--sleep", "30", "--ignore-signals", "--record-signals", str(signals))
    polite = child_command("--sleep", "30")
    template = f"sh -c 'case {{start}} in 2024-01-01*) exec {stubborn} ;; *) exec {polite} ;; esac'"
    prepared = prepare(work, template, 2, max_parallel=2)
    executor = prepared.executor(grace=1.0)
    thread = threading.Thread(target=executor.run)
    thread.start()
    wait_until(lambda: len(executor.snapshot().running) == 2)
    stopped_at = time.time()
    executor.request_stop("operator said so")
    thread.join(30)
    first, second = records(prepared.store.directory)
    assert signals.read_text().split() == ["SIGINT"]
    assert first["attempts"][-1]["exit_code"] == -9 and first["status"] == "cancelled"
    assert second["attempts"][-1]["exit_code"] != -9 and second["status"] == "cancelled"
    killed = datetime.fromisoformat(first["attempts"][-1]["finished_at"].replace("Z", "+00:00")).timestamp()
    assert killed - stopped_at >= 1.0  # SIGKILL waited for the whole grace period


def test_a_timed_out_child_that_ignores_sigint_is_killed_after_the_grace(work):
    """--timeout on a child ignoring SIGINT: failed, "timed out after 200ms", ended by SIGKILL."""
    prepared = prepare(work, child_command("--sleep", "30", "--ignore-signals"), 1, timeout=200_000)
    outcome = prepared.executor(grace=0.3).run()
    [record] = records(prepared.store.directory)
    attempt = record["attempts"][-1]
    assert (outcome.status, record["status"], attempt["error"], attempt["exit_code"]) == (
        "failed",
        "failed",
        "timed out after 200ms",
        -9,
    )


def test_processes_left_behind_by_a_finished_child_are_stopped(work):
    """A child that exits 0 leaving `sleep 30 &` in its group: the attempt succeeds and the sleeper is gone
    once the run is over."""
    pid_file = work / "sleeper.pid"
    prepared = prepare(work, f"sh -c 'sleep 30 & echo $! > {pid_file}; exit 0' {{start}}", 1)
    outcome = prepared.executor(grace=0.5).run()
    assert outcome.status == "succeeded"
    sleeper = int(pid_file.read_text())
    assert not psutil.pid_exists(sleeper) or psutil.Process(sleeper).status() == psutil.STATUS_ZOMBIE


def test_a_pause_lets_running_children_finish_and_starts_none(work, monkeypatch):
    """pause_for while the first two of five run: those two succeed, nothing else starts, the outcome is
    paused; the rest stay queued."""
    monkeypatch.setenv("CHILD_SLEEP", "0.3")
    prepared = prepare(work, child_command(), 5, max_parallel=2)

    def poll(executor: Executor) -> None:
        if executor.running_indices() and executor.paused is None:
            executor.pause_for("paused by tester")

    executor = with_poll(prepared.executor(grace=5), poll)
    outcome = executor.run()
    assert outcome.status == "paused" and outcome.intervention == "paused by tester"
    statuses = {r["index"]: r["status"] for r in records(prepared.store.directory)}
    assert statuses == {0: "succeeded", 1: "succeeded"}
    assert outcome.counts["queued"] == 3


def test_an_operators_end_launches_nothing_more_and_ends_with_the_marked_status(work, monkeypatch):
    """end_for (a mark of the whole backfill) after the first launch: the running child finishes, nothing else
    starts, and the outcome is the marked status even though partitions remain."""
    monkeypatch.setenv("CHILD_SLEEP", "0.2")
    prepared = prepare(work, child_command(), 3, max_parallel=1)

    def poll(executor: Executor) -> None:
        if executor.running_indices():
            executor.end_for("succeeded", "marked succeeded by tester")

    outcome = with_poll(prepared.executor(grace=5), poll).run()
    assert (outcome.status, outcome.intervention) == ("succeeded", "marked succeeded by tester")
    assert [r["index"] for r in records(prepared.store.directory)] == [0]
