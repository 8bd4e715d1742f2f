"""The fork + exec launcher, in-process against real children: where a child runs and writes, what it holds, how
its end is seen and what it left is found before it is reaped, and how it is signalled."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from engine.base.atomic import FILE_MODE
from engine.base.processes import alive, process_group, process_identity
from engine.execute.launcher import (
    ChildSpec,
    ForkExecLauncher,
    describe_exit,
    group_alive,
    open_log,
    start_failure,
)


def spec(tmp_path: Path, *argv: str, **fields) -> ChildSpec:
    fields.setdefault("cwd", str(tmp_path))
    fields.setdefault("env", {"PATH": os.environ["PATH"], "GREETING": "hello"})
    return ChildSpec(list(argv), log_path=tmp_path / "children" / "run-1.log", **fields)


def wait_exited(pid: int) -> None:
    """Until our child ``pid`` has exited, leaving it unreaped."""
    os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)


def finish(child) -> int:
    wait_exited(child.pid)
    code = child.poll()
    assert code is not None
    child.close()
    return code


def test_a_child_runs_in_its_directory_and_environment_in_a_session_of_its_own_writing_to_its_log(tmp_path):
    """The child runs in the spec's directory with the spec's environment only, stdin empty, stdout and stderr
    appended to its log (made with the store's file mode, ``children/`` made when missing), as the leader of its
    own session and group; its identity is read once, at its start."""
    script = (
        "import os, sys; print(os.getcwd(), os.environ.get('GREETING'), os.environ.get('HOME')); "
        "print(repr(sys.stdin.read()), file=sys.stderr); print(os.getsid(0) == os.getpid() == os.getpgid(0))"
    )
    (tmp_path / "children").mkdir()
    (tmp_path / "children" / "run-1.log").write_text("earlier\n")
    (tmp_path / "children" / "run-1.log").chmod(FILE_MODE)
    child = launched_with_stdin(b"not for the child", spec(tmp_path, sys.executable, "-u", "-c", script))
    identity = child.identity()
    assert identity == process_identity(child.pid)
    assert finish(child) == 0
    assert child.identity() == identity
    log = tmp_path / "children" / "run-1.log"
    assert log.read_text().splitlines() == ["earlier", f"{tmp_path} hello None", "''", "True"]


def launched_with_stdin(data: bytes, child_spec: ChildSpec):
    """The child launched while this process's standard input holds ``data``: a child that inherited it would
    read it."""
    read, write = os.pipe()
    os.write(write, data)
    os.close(write)
    saved = os.dup(0)
    os.dup2(read, 0)
    try:
        return ForkExecLauncher().launch(child_spec)
    finally:
        os.dup2(saved, 0)
        os.close(saved)
        os.close(read)


def test_a_log_is_made_with_the_store_s_mode_and_again_when_its_directory_was_removed(tmp_path):
    """A new log has the store's file mode; ``children/`` removed while the backfill ran is made again by the next
    log, rather than fail the start."""
    os.close(open_log(tmp_path / "first.log"))
    assert stat.S_IMODE((tmp_path / "first.log").stat().st_mode) == FILE_MODE & ~_umask()
    path = tmp_path / "children" / "run-2.log"
    descriptor = open_log(path)
    os.write(descriptor, b"x")
    os.close(descriptor)
    descriptor = open_log(path)
    os.write(descriptor, b"y")
    os.close(descriptor)
    assert path.read_text() == "xy"
    assert stat.S_IMODE(path.stat().st_mode) == FILE_MODE & ~_umask()


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_a_child_holds_the_descriptors_it_is_given_and_no_other(tmp_path):
    """The descriptors a child inherits (``.children.lock``, the live-work entry) stay open in it; others of this
    process do not."""
    given_read, given_write = os.pipe()
    other_read, other_write = os.pipe()
    try:
        script = f"import os; print(sorted(set(os.listdir('/proc/self/fd')) & {{'{given_write}', '{other_write}'}}))"
        child = ForkExecLauncher().launch(spec(tmp_path, sys.executable, "-c", script, inherit_fds=(given_write,)))
        assert finish(child) == 0
        assert (tmp_path / "children" / "run-1.log").read_text().strip() == repr([str(given_write)])
    finally:
        for descriptor in (given_read, given_write, other_read, other_write):
            os.close(descriptor)


@pytest.mark.parametrize("missing", ["program", "directory"])
def test_a_child_that_cannot_start_says_why_in_its_log_and_raises(tmp_path, missing):
    """A program or working directory that is not there: the error is raised for the executor to record, and the
    log says why in one line, naming the program or the directory."""
    if missing == "program":
        child_spec = spec(tmp_path, str(tmp_path / "gone"))
        line = f"backfill: cannot start {str(tmp_path / 'gone')!r}: No such file or directory\n"
    else:
        child_spec = spec(tmp_path, "true", cwd=str(tmp_path / "moved"))
        line = f"backfill: cannot enter its working directory {str(tmp_path / 'moved')!r}: No such file or directory\n"
    with pytest.raises(OSError) as raised:
        ForkExecLauncher().launch(child_spec)
    assert start_failure(child_spec, raised.value) + "\n" == line.removeprefix("backfill: ")
    assert (tmp_path / "children" / "run-1.log").read_text() == line


def test_a_running_child_is_polled_without_being_reaped_and_its_end_is_read_once(tmp_path):
    """Polling a running child returns nothing and leaves it running; once it exited, poll returns its code (and
    again), and it was reaped; its exit descriptor becomes readable when it ends."""
    import select

    child = ForkExecLauncher().launch(spec(tmp_path, "sh", "-c", "sleep 60; exit 3"))
    try:
        assert child.poll() is None and alive(child.pid)
        assert child.exit_fd() is not None
        assert select.select([child.exit_fd()], [], [], 0)[0] == []
        child.signal_group(signal.SIGTERM)
        assert select.select([child.exit_fd()], [], [], 30)[0] == [child.exit_fd()]
        wait_exited(child.pid)
        assert child.poll() == -signal.SIGTERM
        assert child.poll() == -signal.SIGTERM
        assert not os.path.exists(f"/proc/{child.pid}") or process_identity(child.pid) != child.identity()
    finally:
        child.close()
        child.close()
        assert child.exit_fd() is None


def test_what_a_child_left_in_its_group_is_found_before_it_is_reaped(tmp_path):
    """``sh -c 'sleep 60 & echo $!'`` exits at once, leaving its sleep: found when its end is seen (before the
    reap), and none for a child that left nothing."""
    child = ForkExecLauncher().launch(spec(tmp_path, "sh", "-c", "sleep 60 & echo $!"))
    try:
        assert finish(child) == 0
        left = int((tmp_path / "children" / "run-1.log").read_text())
        family = child.leftovers()
        assert family is not None and family.pids == [left]
        family.stop(grace=10)
        assert not alive(left)
    finally:
        if alive(left):
            os.kill(left, signal.SIGKILL)
    clean = ForkExecLauncher().launch(spec(tmp_path, "true"))
    assert finish(clean) == 0
    assert clean.leftovers() is not None and clean.leftovers().pids == []


def test_a_child_s_group_is_signalled_while_it_is_ours_and_never_after_its_reap(tmp_path):
    """The signal reaches the child's whole group (its background sleep too); once the child is reaped, its
    group's number may be anyone's, and nothing is sent."""
    child = ForkExecLauncher().launch(spec(tmp_path, "sh", "-c", "sleep 60 & echo $!; wait"))
    log = tmp_path / "children" / "run-1.log"
    while not log.read_text().strip():
        os.sched_yield()
    member = int(log.read_text())
    child.signal_group(signal.SIGTERM)
    assert finish(child) == -signal.SIGTERM
    while group_alive(child.pid):
        os.sched_yield()
    assert not alive(member)
    stranger = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        child.signal_group(signal.SIGTERM)  # reaped: not sent, whoever holds the number now
        assert alive(stranger.pid)
    finally:
        stranger.kill()
        stranger.wait()


def test_a_group_is_alive_while_any_of_it_lives():
    """``group_alive``: a group with a member is alive, one with none is not; asking sends the group nothing (a
    SIGTERM sent after it is what ends the leader)."""
    leader = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        assert group_alive(leader.pid) and process_group(leader.pid) == leader.pid
        leader.terminate()
        assert leader.wait(timeout=30) == -signal.SIGTERM
    finally:
        leader.kill()
        leader.wait()
    assert not group_alive(leader.pid)


@pytest.mark.parametrize(
    ("code", "said"),
    [(0, "exited with code 0"), (3, "exited with code 3"), (-9, "killed by SIGKILL"), (-15, "killed by SIGTERM"),
     (-200, "killed by signal 200")],
)  # fmt: skip
def test_an_exit_is_described_in_words(code, said):
    """An exit code, or the signal that killed the child by name (or number, for one without a name)."""
    assert describe_exit(code) == said
