"""The executor's stopping and waiting, in-process over real children: escalation after the grace period,
leftovers, a bug of ours in the loop, pauses and an operator's end."""

from __future__ import annotations

import shlex
import signal
import sys
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


def test_a_stop_asked_again_sends_sigterm_then_sigkill_at_once(work):
    """An operator's second stop (Ctrl+C again) sends SIGTERM to every child now, the third SIGKILL now, however
    long the grace: a child deaf to SIGINT ends on the SIGTERM, one deaf to both on the SIGKILL; while stopping,
    each running partition says when SIGKILL is due (the grace's end), and the snapshot how far it escalated."""
    signals = work / "signals"
    script = work / "deaf_to_sigint.py"
    script.write_text("import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\ntime.sleep(60)\n")
    deaf_to_int = shlex.join([sys.executable, str(script)])
    deaf = child_command("--sleep", "60", "--ignore-signals", "--record-signals", str(signals))
    template = f"sh -c 'case {{start}} in 2024-01-01*) exec {deaf} ;; *) exec {deaf_to_int} ;; esac'"
    prepared = prepare(work, template, 2, max_parallel=2)
    executor = prepared.executor(grace=300.0)
    thread = threading.Thread(target=executor.run)
    thread.start()
    try:
        wait_until(lambda: len(executor.snapshot().running) == 2)
        assert all(r.kill_at is None for r in executor.snapshot().running)
        asked = time.time()
        executor.operator_stop("operator said so")
        wait_until(lambda: signals.exists() and signals.read_text().split() == ["SIGINT"])
        running = executor.snapshot().running
        assert len(running) == 2 and executor.snapshot().escalation == 0
        assert all(asked + 290 <= r.kill_at <= time.time() + 300 for r in running)  # the grace's end
        executor.request_stop("a second caller, not a person: no escalation")
        assert executor.escalation == 0
        executor.operator_stop("again")
        wait_until(lambda: signals.read_text().split() == ["SIGINT", "SIGTERM"])
        wait_until(lambda: len(executor.snapshot().running) == 1)  # the one deaf to SIGINT alone ended
        assert executor.snapshot().escalation == 1 and executor.snapshot().running[0].index == 0
        executor.operator_stop("and again")
        thread.join(60)
        assert not thread.is_alive()  # long before the 300 s grace
    finally:
        executor.operator_stop("test over")
        executor.operator_stop("test over")
        executor.operator_stop("test over")
        thread.join(60)
    first, second = records(prepared.store.directory)
    assert (first["status"], first["attempts"][-1]["exit_code"]) == ("cancelled", -9)
    assert (second["status"], second["attempts"][-1]["exit_code"]) == ("cancelled", -15)
    assert executor.snapshot().escalation == 2
    executor.operator_stop("more")  # no level past SIGKILL
    assert executor.escalation == 2


def test_a_timed_out_child_that_ignores_sigint_is_killed_after_the_grace(work):
    """--timeout on a child ignoring SIGINT: failed, "timed out after 1s", ended by SIGKILL. (The shell ignores
    SIGINT before it execs sleep, which inherits that: a Python child could still be starting when a short timeout
    fired under load, and die of the SIGINT.)"""
    prepared = prepare(work, "sh -c 'trap \"\" INT; exec sleep 30'", 1, timeout=1_000_000)
    outcome = prepared.executor(grace=0.3).run()
    [record] = records(prepared.store.directory)
    attempt = record["attempts"][-1]
    assert (outcome.status, record["status"], attempt["error"], attempt["exit_code"]) == (
        "failed",
        "failed",
        "timed out after 1s",
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
    monkeypatch.setenv("CHILD_SLEEP", "1.5")  # still running on the loop's next turn, however loaded the machine
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
    monkeypatch.setenv("CHILD_SLEEP", "1.5")  # still running on the loop's next turn, however loaded the machine
    prepared = prepare(work, child_command(), 3, max_parallel=1)

    def poll(executor: Executor) -> None:
        if executor.running_indices():
            executor.end_for("succeeded", "marked succeeded by tester")

    outcome = with_poll(prepared.executor(grace=5), poll).run()
    assert (outcome.status, outcome.intervention) == ("succeeded", "marked succeeded by tester")
    assert [r["index"] for r in records(prepared.store.directory)] == [0]


def test_a_stop_sends_the_signal_it_was_asked_for(work):
    """request_stop with SIGTERM (the executor was terminated): children get SIGTERM, not SIGINT."""
    signals = work / "signals"
    prepared = prepare(work, child_command("--sleep", "30", "--record-signals", str(signals)), 1)
    executor = prepared.executor(grace=5)
    thread = threading.Thread(target=executor.run)
    thread.start()
    wait_until(lambda: len(executor.snapshot().running) == 1)
    executor.request_stop("terminated", signal.SIGTERM)
    thread.join(30)
    assert signals.read_text().split() == ["SIGTERM"]
    [record] = records(prepared.store.directory)
    assert (record["status"], record["attempts"][-1]["error"]) == ("cancelled", "cancelled: terminated")


def test_the_state_is_stopping_while_stubborn_children_finish(work):
    """Between the stop and the SIGKILL of a child that ignores it, the executor reports "stopping"."""
    prepared = prepare(work, child_command("--sleep", "30", "--ignore-signals"), 1)
    executor = prepared.executor(grace=1.0)
    thread = threading.Thread(target=executor.run)
    thread.start()
    wait_until(lambda: len(executor.snapshot().running) == 1)
    executor.request_stop("operator said so")
    wait_until(lambda: executor.snapshot().state != "running")
    assert executor.snapshot().state == "stopping"
    thread.join(30)
    assert executor.snapshot().state == "finished"


def test_a_setup_failure_launches_nothing_and_the_outcome_is_failed(work):
    """A snapshot that cannot be taken before the first launch: run() raises it, no child started, and the
    executor's outcome is failed (not succeeded: the partitions were never run)."""
    from engine.base.errors import Refused

    prepared = prepare(work, child_command(), 3)
    executor = prepared.executor(grace=5)

    def refuse() -> None:
        raise Refused("no snapshot")

    executor.hooks.before_first_launch = refuse
    with pytest.raises(Refused, match="no snapshot"):
        executor.run()
    assert executor.snapshot().outcome == "failed"
    assert records(prepared.store.directory) == []


class _NoExitFd:
    """A launcher whose children offer no exit descriptor (as on kernels without pidfds): the executor polls."""

    name = "exec"

    def __init__(self) -> None:
        from engine.execute.launcher import ForkExecLauncher

        self.inner = ForkExecLauncher()

    def launch(self, spec):
        child = self.inner.launch(spec)
        child.close()  # the pidfd is not used
        child.exit_fd = lambda: None
        return child

    def shutdown(self) -> None:
        return None


def test_children_without_an_exit_descriptor_are_polled_to_the_end(work, monkeypatch):
    """Without pidfds the loop sleeps briefly between polls: every partition still runs and succeeds."""
    monkeypatch.setenv("CHILD_SLEEP", "0.1")
    prepared = prepare(work, child_command(), 3, max_parallel=2)
    outcome = prepared.executor(grace=5, launcher=_NoExitFd()).run()
    assert outcome.status == "succeeded"
    assert [r["status"] for r in records(prepared.store.directory)] == ["succeeded"] * 3


class _Verdict:
    """A verification as the guardrails return it: fails the partition when ``failing``."""

    def __init__(self, failing: bool) -> None:
        self.fails_partition = failing
        self.detail = "2 rows, history says 100" if failing else "ok"

    def to_json(self) -> dict:
        return {"status": "failed" if self.fails_partition else "verified", "detail": self.detail}


def test_a_failed_verification_fails_the_partition_and_stops_without_retrying(work):
    """verify sees each succeeded partition with its interval; a failing verdict fails the partition with the
    detail, is kept in the attempt, is not retried (the same data would fail again) and launches nothing more."""
    prepared = prepare(work, child_command(), 3, max_parallel=1, retries=2, on_failure="continue")
    seen: list[tuple[int, int, int]] = []
    executor = prepared.executor(grace=5)

    def verify(index, interval, attempt, partition_id):
        seen.append((index, interval.start, interval.end))
        return _Verdict(failing=index == 1)

    executor.hooks.verify = verify
    outcome = executor.run()
    plan = prepared.spec.plan
    assert seen == [(i, plan.interval(i).start, plan.interval(i).end) for i in (0, 1)]
    first, second = records(prepared.store.directory)
    assert first["status"] == "succeeded" and first["attempts"][-1]["verification"]["status"] == "verified"
    assert len(second["attempts"]) == 1
    attempt = second["attempts"][-1]
    assert (second["status"], attempt["status"], attempt["error"]) == (
        "failed",
        "failed",
        "verification: 2 rows, history says 100",
    )
    assert attempt["verification"] == {"status": "failed", "detail": "2 rows, history says 100"}
    assert outcome.status == "failed" and outcome.counts["queued"] == 1


def test_an_attempt_records_how_long_its_child_ran_and_a_timeout_not_reached_changes_nothing(work, monkeypatch):
    """A 0.3 s child under a 30 s timeout succeeds, and its attempt's duration covers its run."""
    monkeypatch.setenv("CHILD_SLEEP", "0.3")
    prepared = prepare(work, child_command(), 1, timeout=30_000_000)
    assert prepared.executor(grace=5).run().status == "succeeded"
    [record] = records(prepared.store.directory)
    assert record["status"] == "succeeded" and record["attempts"][-1]["duration"] >= 0.3


def test_a_failed_pipeline_partition_names_the_failing_asset_from_its_run_record(tmp_path):
    """A pipeline child that fails: the attempt's error is read from its own run record (by run ID), naming the
    asset and the database's error, not the child's last output line."""
    from engine.execute.launcher import ForkExecLauncher
    from tests.builder import Repo

    repo = Repo(tmp_path / "repo")
    repo.sql("s.t", "SELECT * FROM nowhere", materialization={"type": "table"})
    prepared = prepare(repo.root, None, 1, target="p")
    outcome = prepared.executor(grace=5, launcher=ForkExecLauncher()).run()
    assert outcome.status == "failed"
    [record] = records(prepared.store.directory)
    assert record["attempts"][-1]["error"].startswith("s.t failed: Catalog Error: Table with name nowhere")
