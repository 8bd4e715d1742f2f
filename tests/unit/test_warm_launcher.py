"""The warm launcher in-process, with real runner processes (``backfill __warm-runner``): a runner serves partition
after partition, is retired after its share and waited for, and one that dies fails only its partition and is
replaced; the shutdown ends every runner, a stuck one by SIGKILL."""

from __future__ import annotations

import contextlib
import os
import select
import signal
import time
from pathlib import Path

import psutil
import pytest

from engine.base.processes import process_identity
from engine.execute import warm_launcher
from engine.execute.children import backfill_program
from engine.execute.launcher import ChildSpec
from engine.execute.warm_launcher import WarmChild, WarmLauncher

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(autouse=True)
def no_runner_left():
    """Whatever a test (or a mutant of the launcher) leaves, its runners are killed and reaped here: an unreaped
    child of the test process would outlive it."""
    yield
    for process in psutil.Process().children():
        with contextlib.suppress(OSError):
            os.killpg(process.pid, signal.SIGKILL)  # each runner leads a session of its own
        with contextlib.suppress(ChildProcessError):
            os.waitpid(process.pid, 0)


def spec(tmp_path: Path, name: str, *args: str, **env: str) -> ChildSpec:
    """A partition whose ``backfill`` arguments are ``args``, its log ``name``.log."""
    environment = {**os.environ, "BACKFILL_TEST_MARK": name, **env}
    return ChildSpec([*backfill_program(), *args], str(tmp_path), environment, tmp_path / "logs" / f"{name}.log")


def finished(child: WarmChild, timeout: float = 60) -> int:
    """The partition's exit code, waiting on the descriptor the executor waits on."""
    deadline = time.monotonic() + timeout
    while (code := child.poll()) is None:
        assert time.monotonic() < deadline, "the partition did not end"
        select.select([child.exit_fd()], [], [], 1)
    return code


def test_one_runner_serves_partition_after_partition_each_into_its_own_log(tmp_path):
    """Partitions one after another go to the same runner (one process, its identity read once), each run as
    ``backfill ARGS`` with its log, working directory and exit code; the log exists from the launch on."""
    launcher = WarmLauncher(runner_partitions=10)
    try:
        first = launcher.launch(spec(tmp_path, "help", "--help"))
        assert (tmp_path / "logs" / "help.log").exists()
        assert finished(first) == 0
        assert (tmp_path / "logs" / "help.log").read_text().startswith("usage: backfill")
        second = launcher.launch(spec(tmp_path, "bad", "--no-such-option"))
        assert finished(second) == 2
        assert "unknown option --no-such-option" in (tmp_path / "logs" / "bad.log").read_text()
        assert first.pid == second.pid and first.identity() == second.identity() == process_identity(first.pid)
        assert "__warm-runner" in psutil.Process(first.pid).cmdline()
        assert first.leftovers() is None and first.close() is None
    finally:
        launcher.shutdown()
    assert not psutil.Process().children()


def test_a_partition_is_run_with_exactly_its_own_arguments(tmp_path):
    """The runner is given the partition's arguments without the program's words: ``backfill list`` of an empty
    state root lists nothing and exits 0 (with the program's path taken for an argument, it would exit 2)."""
    state = {"XDG_STATE_HOME": str(tmp_path / "state"), "HOME": str(tmp_path)}
    launcher = WarmLauncher(runner_partitions=10)
    try:
        for name in ("list", "again"):  # a new runner, then the same one
            listed = launcher.launch(spec(tmp_path, name, "list", "--output", "json", **state))
            assert finished(listed) == 0, (tmp_path / "logs" / f"{name}.log").read_text()
    finally:
        launcher.shutdown()


def test_what_a_runner_says_before_its_first_partition_is_in_that_partition_s_log(tmp_path):
    """A runner's own start-up output (here the interpreter's warning about a bad PYTHONWARNINGS) lands in the log
    of the partition it was started for, not on the executor's terminal."""
    launcher = WarmLauncher(runner_partitions=10)
    try:
        first = launcher.launch(spec(tmp_path, "first", "--help", PYTHONWARNINGS="error::NoSuchWarning"))
        assert finished(first) == 0
        assert "NoSuchWarning" in (tmp_path / "logs" / "first.log").read_text()
    finally:
        launcher.shutdown()


def test_a_runner_that_cannot_start_raises_and_leaves_no_descriptor_open(tmp_path):
    """A runner whose working directory is gone cannot start: the launch raises, and neither of its pipes is left
    open in the executor (run after run, leaked descriptors would exhaust its limit)."""
    launcher = WarmLauncher(runner_partitions=10)
    before = set(os.listdir("/proc/self/fd"))
    gone = spec(tmp_path, "gone", "--help")
    gone = ChildSpec(gone.argv, str(tmp_path / "gone"), gone.env, gone.log_path)
    with pytest.raises(OSError):
        launcher.launch(gone)
    # None opened and left: a descriptor of an earlier test's, closed meanwhile by the collector, is no leak.
    assert set(os.listdir("/proc/self/fd")) - before == set()
    launcher.shutdown()


def test_a_reaped_runner_s_group_is_never_signalled(tmp_path, monkeypatch):
    """Signals reach a runner's group only while the runner is unreaped: once reaped, its number may be another
    process's, and nothing is sent."""
    launcher = WarmLauncher(runner_partitions=10)
    sent: list[tuple[int, int]] = []
    try:
        first = launcher.launch(spec(tmp_path, "first", "--help"))
        assert finished(first) == 0
        monkeypatch.setattr(os, "killpg", lambda group, signum: sent.append((group, signum)))
        first.signal_group(signal.SIGCONT)
        assert sent == [(first.pid, signal.SIGCONT)]
        monkeypatch.undo()
        first.signal_group(signal.SIGKILL)
        psutil.Process(first.pid).wait(timeout=30)
        second = launcher.launch(spec(tmp_path, "second", "--help"))  # finds it dead and reaps it
        assert second.pid != first.pid and finished(second) == 0
        monkeypatch.setattr(os, "killpg", lambda group, signum: sent.append((group, signum)))
        first.signal_group(signal.SIGKILL)
        assert sent == [(first.pid, signal.SIGCONT)]
    finally:
        monkeypatch.undo()
        launcher.shutdown()


def test_a_dead_idle_runner_is_skipped_for_a_live_one(tmp_path, monkeypatch):
    """With two idle runners, the one that died is discarded and the other serves the next partition (no new
    runner is started while a live one waits), whether its death is seen before the request or by its write."""
    for lie in (False, True):
        launcher = WarmLauncher(runner_partitions=10)
        try:
            first = launcher.launch(spec(tmp_path, "first", "--help"))
            second = launcher.launch(spec(tmp_path, "second", "--help"))
            assert finished(first) == 0 and finished(second) == 0
            os.killpg(second.pid, signal.SIGKILL)  # the idle runner the next launch takes first
            psutil.Process(second.pid).wait(timeout=30)
            if lie:  # the check saw it alive; the request's write finds it dead
                monkeypatch.setattr(warm_launcher._Runner, "alive", lambda runner: True)
            third = launcher.launch(spec(tmp_path, "third", "--help"))
            monkeypatch.undo()
            assert third.pid == first.pid and finished(third) == 0
        finally:
            monkeypatch.undo()
            launcher.shutdown()


def test_a_runner_is_retired_after_its_share_and_waited_for_before_the_next_starts(tmp_path):
    """After ``runner_partitions`` partitions a runner ends (its databases closed) and is reaped before the next
    partition starts in a new runner; the descriptor a partition is waited on stays the same to its end."""
    launcher = WarmLauncher(runner_partitions=2)
    try:
        first = launcher.launch(spec(tmp_path, "one", "--help"))
        fd = first.exit_fd()
        assert finished(first) == 0 and first.exit_fd() == fd
        second = launcher.launch(spec(tmp_path, "two", "--help"))
        assert second.pid == first.pid
        assert finished(second) == 0
        with pytest.raises(psutil.NoSuchProcess):  # retired: ended and reaped, not a zombie
            psutil.Process(first.pid).status()
        third = launcher.launch(spec(tmp_path, "three", "--help"))
        assert third.pid != first.pid
        assert finished(third) == 0
    finally:
        launcher.shutdown()


def test_a_runner_killed_mid_partition_fails_that_partition_and_is_replaced(tmp_path):
    """SIGKILL to a runner's group while it serves a partition (a runner stopped, so that it is still serving):
    that partition ends with -9, and the next one gets a new runner."""
    launcher = WarmLauncher(runner_partitions=10)
    try:
        warm = launcher.launch(spec(tmp_path, "warm", "--help"))
        assert finished(warm) == 0
        os.kill(warm.pid, signal.SIGSTOP)  # it will not answer: the partition is still running when killed
        slow = launcher.launch(spec(tmp_path, "slow", "--help"))
        assert slow.pid == warm.pid and slow.poll() is None
        slow.signal_group(signal.SIGKILL)
        assert finished(slow) == -signal.SIGKILL
        assert slow.poll() == -signal.SIGKILL  # the code is kept
        slow.signal_group(signal.SIGKILL)  # reaped: its number may be another's now; nothing is sent
        after = launcher.launch(spec(tmp_path, "after", "--help"))
        assert after.pid != warm.pid and finished(after) == 0
    finally:
        launcher.shutdown()


def test_an_idle_runner_that_died_is_replaced_at_the_next_launch(tmp_path):
    """A runner killed between partitions is noticed at the next launch, discarded, and a new one serves it."""
    launcher = WarmLauncher(runner_partitions=10)
    try:
        first = launcher.launch(spec(tmp_path, "first", "--help"))
        assert finished(first) == 0
        os.killpg(first.pid, signal.SIGKILL)
        psutil.Process(first.pid).wait(timeout=30)  # a zombie now: ended, not reaped
        second = launcher.launch(spec(tmp_path, "second", "--help"))
        assert second.pid != first.pid and finished(second) == 0
        with pytest.raises(psutil.NoSuchProcess):  # the dead runner was reaped when discarded
            psutil.Process(first.pid).status()
    finally:
        launcher.shutdown()


def test_a_runner_whose_requests_cannot_be_written_is_replaced(tmp_path, monkeypatch):
    """A runner that died between the check that it lives and the request's write: the write fails, it is reaped
    and discarded, and a new runner serves the partition."""
    launcher = WarmLauncher(runner_partitions=10)
    try:
        first = launcher.launch(spec(tmp_path, "first", "--help"))
        assert finished(first) == 0
        os.killpg(first.pid, signal.SIGKILL)
        psutil.Process(first.pid).wait(timeout=30)
        monkeypatch.setattr(warm_launcher._Runner, "alive", lambda runner: True)  # the check saw it alive
        second = launcher.launch(spec(tmp_path, "second", "--help"))
        monkeypatch.undo()
        assert second.pid != first.pid and finished(second) == 0
        with pytest.raises(psutil.NoSuchProcess):
            psutil.Process(first.pid).status()
    finally:
        launcher.shutdown()


def test_shutdown_ends_every_runner_and_kills_one_that_does_not_leave(tmp_path, monkeypatch):
    """At the end of the run each runner gets end of file and leaves; one that does not within the shutdown's
    grace (stopped here) is killed with its group. Every runner is reaped; a second shutdown has nothing to do."""
    monkeypatch.setattr(warm_launcher, "SHUTDOWN_SECONDS", 5.0)  # ample for a runner that leaves on its own
    descriptors = set(os.listdir("/proc/self/fd"))
    launcher = WarmLauncher(runner_partitions=10)
    first = launcher.launch(spec(tmp_path, "first", "--help"))
    second = launcher.launch(spec(tmp_path, "second", "--help"))  # the first is busy: a second runner
    assert first.pid != second.pid
    assert finished(first) == 0 and finished(second) == 0
    os.kill(second.pid, signal.SIGSTOP)
    started = time.monotonic()
    launcher.shutdown()
    assert time.monotonic() - started < 30
    for pid in (first.pid, second.pid):
        with pytest.raises(psutil.NoSuchProcess):
            psutil.Process(pid).status()
    assert first._runner.process.returncode == 0  # it left on its own, its databases closed
    assert second._runner.process.returncode == -signal.SIGKILL
    assert set(os.listdir("/proc/self/fd")) - descriptors == set()  # every pipe of both runners closed
    launcher.shutdown()
    assert not psutil.Process().children()
