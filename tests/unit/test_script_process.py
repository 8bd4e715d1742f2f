"""ScriptProcess, in-process and against real processes: a Python asset's script never outlives its asset."""

from __future__ import annotations

import errno
import os
import queue
import signal
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from engine.base.parent_death import start_bound_to_thread
from engine.pipeline.script_process import ScriptProcess

pytestmark = pytest.mark.timeout(30)  # a wait that never ends fails the test (each takes well under a second)

IGNORE_STOPS = (
    "import signal; signal.signal(signal.SIGTERM, signal.SIG_IGN); signal.signal(signal.SIGINT, signal.SIG_IGN)"
)


def start(code: str, *, grace: float = 30.0) -> ScriptProcess:
    return ScriptProcess([sys.executable, "-c", code], os.getcwd(), dict(os.environ), leftover_grace=grace)


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_every_line_reaches_the_asset_the_last_one_without_its_newline_too():
    """Lines in order, bytes that are not UTF-8 replaced, a last line with no newline kept; exit 0, nothing left."""
    script = start(r"import sys; sys.stdout.buffer.write(b'one\ntwo \xff\n\nlast \xff'); sys.stdout.flush()")
    assert list(script.lines()) == ["one", "two \ufffd", "", "last \ufffd"]
    assert script.finish() == (0, [])


@pytest.mark.parametrize(
    ("code", "status"), [("import sys; sys.exit(3)", 3), ("import os; os.kill(os.getpid(), 9)", -9)]
)
def test_the_scripts_own_exit_status_is_given(code, status):
    """A script's exit code, or the signal that killed it (negative)."""
    script = start(code)
    assert list(script.lines()) == []
    assert script.finish() == (status, [])


LEAVES = (
    "import subprocess, sys{ignore}\nchild = subprocess.Popen(['sleep', '600']{output})\nprint(child.pid, flush=True)\n"
)


@pytest.mark.parametrize("ignore", ["", "; " + IGNORE_STOPS], ids=["polite", "ignoring-sigterm"])
@pytest.mark.parametrize("output", [", stdout=subprocess.DEVNULL", ""], ids=["own-output", "holding-the-scripts"])
def test_what_the_script_leaves_in_its_group_is_stopped_before_its_asset_ends(ignore, output):
    """The script exits 0 leaving a sleep (which may hold the script's output, and may ignore SIGTERM, as
    dispositions are inherited): the lines end with the script, the sleep is stopped (SIGKILL after the grace when
    it ignores SIGTERM) and named, and the script's own PID is not."""
    script = start(LEAVES.format(ignore=ignore, output=output), grace=0.2)
    [line] = list(script.lines())
    left = int(line)
    code, stopped = script.finish()
    assert (code, stopped) == (0, [left])
    assert gone(left)


def test_a_script_that_closes_its_output_is_still_waited_for():
    """The output ends before the script does: its end is still waited for, and what it left after it is found."""
    script = start(
        "import os, subprocess, time\n"
        "child = subprocess.Popen(['sleep', '600'], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
        "print(child.pid, flush=True)\n"
        "os.close(1); os.close(2)\n"
        "time.sleep(0.3)\n"
    )
    [line] = list(script.lines())
    code, stopped = script.finish()
    assert (code, stopped) == (0, [int(line)])
    assert gone(int(line))


def consume(script: ScriptProcess) -> tuple[queue.Queue, threading.Thread]:
    """Read the script's lines on a thread (as an asset's thread does); each arrives on the queue, then None."""
    lines: queue.Queue = queue.Queue()

    def read() -> None:
        for line in script.lines():
            lines.put(line)
        lines.put(None)

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    return lines, thread


def test_a_deadline_set_while_the_output_is_being_waited_for_kills_at_once():
    """The script ignores SIGTERM and waits; its reader is already waiting when the stop sets a deadline of now: the
    wait is woken and the script killed, not left until it next prints."""
    script = start(IGNORE_STOPS + "\nimport time; print('ready', flush=True); time.sleep(600)")
    lines, thread = consume(script)
    assert lines.get(timeout=60) == "ready"
    script.signal(15)  # ignored
    script.kill_by(time.monotonic())
    assert lines.get(timeout=60) is None
    thread.join()
    assert script.finish() == (-9, [])


def test_the_earliest_deadline_wins():
    """A later deadline never puts off an earlier one: kill_by(now) then kill_by(in an hour) kills now."""
    script = start(IGNORE_STOPS + "\nimport time; print('ready', flush=True); time.sleep(600)")
    lines, thread = consume(script)
    assert lines.get(timeout=60) == "ready"
    script.kill_by(time.monotonic())
    script.kill_by(time.monotonic() + 3600)
    assert lines.get(timeout=60) is None
    thread.join()
    assert script.finish()[0] == -9


def test_a_far_deadline_leaves_the_script_to_end_on_its_own():
    """A deadline an hour away: the script that ends by itself is not killed."""
    script = start("import time; print('ready', flush=True); time.sleep(0.2)")
    script.kill_by(time.monotonic() + 3600)
    assert list(script.lines()) == ["ready"]
    assert script.finish() == (0, [])


def test_a_stop_signal_reaches_the_script_and_its_group():
    """SIGTERM through signal(): the script and the sleep it started both end; nothing is left to stop."""
    script = start(
        "import subprocess, time\n"
        "child = subprocess.Popen(['sleep', '600'], stdout=subprocess.DEVNULL)\n"
        "print(child.pid, flush=True)\n"
        "time.sleep(600)\n"
    )
    lines, thread = consume(script)
    left = int(lines.get(timeout=60))
    script.signal(15)
    assert lines.get(timeout=60) is None
    thread.join()
    assert script.finish()[0] == -15
    if not gone(left):  # its SIGTERM was sent with the script's: its end may come a moment later
        psutil.Process(left).wait(timeout=60)


def test_finish_lets_go_of_every_descriptor_and_signals_nothing_after(monkeypatch):
    """The pidfd, the output and the wake pipe are closed; a signal after the reap sends nothing (the group's number
    may be another's by then) and raises nothing."""
    before = set(os.listdir("/proc/self/fd"))
    script = start("print('x')")
    list(script.lines())
    script.finish()
    assert set(os.listdir("/proc/self/fd")) - before == set()  # none left open (one closed meanwhile is no leak)
    sent = []
    monkeypatch.setattr(os, "killpg", lambda group, signum: sent.append((group, signum)))
    monkeypatch.setattr(signal, "pidfd_send_signal", lambda *args: sent.append(args))
    script.signal(9)
    script.kill_by(time.monotonic())
    assert sent == []


def test_without_a_pidfd_the_exit_is_polled(monkeypatch):
    """A kernel without pidfd_open: the script's end and what it left are still found."""

    def no_pidfd(pid: int) -> int:
        raise OSError("no pidfd here")

    monkeypatch.setattr(os, "pidfd_open", no_pidfd)
    script = start(LEAVES.format(ignore="", output=""), grace=0.2)
    [line] = list(script.lines())
    assert script.finish() == (0, [int(line)])
    assert gone(int(line))


def started_on_a_thread_that_ends() -> ScriptProcess:
    """A script started on a thread that ends once the script runs (as a killed run's threads do)."""
    started: queue.Queue = queue.Queue()

    def start_and_leave() -> None:
        script = start("import time; print('running', flush=True); time.sleep(600)")
        assert script.process.stdout is not None
        started.put((script, script.process.stdout.readline()))  # the parent-death signal is set by now

    thread = threading.Thread(target=start_and_leave)
    thread.start()
    thread.join()
    script, first = started.get()
    assert first == b"running\n"
    return script


def test_the_script_dies_with_the_thread_that_started_it():
    """The thread that started the script ends: the parent-death signal kills it."""
    script = started_on_a_thread_that_ends()
    assert list(script.lines()) == []
    assert script.finish()[0] == -9


def test_without_setpriv_a_pre_exec_call_sets_the_parent_death_signal(monkeypatch):
    """Where setpriv is missing, the same: the script dies with its thread."""
    from engine.base import parent_death

    monkeypatch.setattr(parent_death, "SETPRIV", None)
    script = started_on_a_thread_that_ends()
    assert script.process.args[0] == sys.executable
    assert list(script.lines()) == []
    assert script.finish()[0] == -9


def test_a_missing_program_is_refused_before_anything_starts():
    """setpriv would start and exit 127 for a program that is not there; it is refused as Popen refuses it."""
    with pytest.raises(FileNotFoundError):
        ScriptProcess(["/nowhere/python"], os.getcwd(), dict(os.environ), leftover_grace=1)


# The leftover: says it is ready on the pipe the script gave it, then waits; SIGTERM makes it print and leave.
PRINTS_WHEN_STOPPED = (
    "import os, signal, sys, time\n"
    "def stopped(*_):\n"
    "    sys.stdout.buffer.write(bytes([97, 10, 98, 32, 255, 10]) + b'last'); sys.stdout.flush(); os._exit(0)\n"
    "signal.signal(signal.SIGTERM, stopped)\n"
    "os.write(int(sys.argv[1]), b'r')\n"
    "time.sleep(600)\n"
)


def test_what_a_leftover_prints_as_it_is_stopped_reaches_the_asset():
    """The script exits once its leftover is ready, the leftover on its output printing when SIGTERM comes: those
    lines (bytes that are not UTF-8 replaced, the last one without a newline) are read after the script's end."""
    script = start(
        "import os, subprocess, sys\n"
        "ready, tell = os.pipe()\n"
        f"subprocess.Popen([sys.executable, '-c', {PRINTS_WHEN_STOPPED!r}, str(tell)], pass_fds=[tell])\n"
        "os.read(ready, 1)\n"
        "print('first', flush=True)\n"
    )
    assert list(script.lines()) == ["first", "a", "b \ufffd", "last"]
    code, stopped = script.finish()
    assert code == 0 and len(stopped) == 1


def bound(argv: list[str], cwd: Path, path: str = "/usr/bin:/bin") -> int:
    """Start ``argv`` as a script is started; its exit status."""
    process = start_bound_to_thread(argv, str(cwd), {"PATH": path})
    process.communicate()
    return process.returncode


def test_a_program_is_looked_for_as_exec_would_look_for_it(tmp_path):
    """With setpriv in front, a program that cannot be run is refused before anything starts (setpriv would exit
    127 for it): a path that is missing, a directory or not executable; a path with a slash is taken from the
    working directory, a bare name from the environment's PATH, not this process's."""
    program = tmp_path / "bin" / "tool"
    program.parent.mkdir()
    program.write_text("#!/bin/sh\nexit 7\n")
    program.chmod(0o755)
    plain = tmp_path / "plain"
    plain.write_text("exit 0\n")
    assert bound([str(program)], tmp_path) == 7
    assert bound(["bin/tool"], tmp_path) == 7
    assert bound(["tool"], tmp_path, path=str(program.parent)) == 7
    for argv, path in (([str(tmp_path / "missing")], "/bin"), ([str(tmp_path)], "/bin"), ([str(plain)], "/bin"),
                       (["./missing"], "/bin"), (["tool"], "/bin")):  # fmt: skip
        with pytest.raises(FileNotFoundError) as refused:
            bound(argv, tmp_path, path)
        assert (refused.value.errno, refused.value.strerror, refused.value.filename) == (
            errno.ENOENT,
            os.strerror(errno.ENOENT),
            argv[0],
        )


def test_the_script_gets_the_environment_given_its_errors_on_the_same_lines_and_no_stdin(tmp_path):
    """The environment given (not this process's), stderr among the lines, and an empty stdin even while this
    process's own stdin holds data."""
    read, write = os.pipe()
    os.write(write, b"this process's input\n")
    saved = os.dup(0)
    os.dup2(read, 0)
    try:
        script = ScriptProcess(
            [sys.executable, "-c", "import os, sys; print(os.environ.get('MARK'), repr(sys.stdin.read()), "
             "'HOME' in os.environ, flush=True); print('to stderr', file=sys.stderr, flush=True)"],
            str(tmp_path), {"MARK": "given", "PATH": os.environ["PATH"]}, leftover_grace=1,
        )  # fmt: skip
    finally:
        os.dup2(saved, 0)
        for fd in (saved, read, write):
            os.close(fd)
    assert list(script.lines()) == ["given '' False", "to stderr"]
    assert script.finish() == (0, [])


def test_what_was_left_lets_go_of_its_handles_and_a_late_deadline_writes_nothing(capfd):
    """After a run that left a process, no descriptor of its handles stays open; a deadline set after the end
    writes nowhere (its wake pipe is closed, not a descriptor number of someone else's)."""
    before = set(os.listdir("/proc/self/fd"))
    script = start(LEAVES.format(ignore="", output=", stdout=subprocess.DEVNULL"), grace=1)
    list(script.lines())
    assert len(script.finish()[1]) == 1
    assert set(os.listdir("/proc/self/fd")) - before == set()  # none left open (one closed meanwhile is no leak)
    capfd.readouterr()
    script.kill_by(time.monotonic())
    assert capfd.readouterr() == ("", "")


def test_a_deadline_a_moment_away_is_kept_by_a_wait_already_begun():
    """The reader waits; a deadline 0.3 s away is set: the wait ends by then and the script is killed, rather than
    the wait going on until the script prints or ends."""
    script = start(IGNORE_STOPS + "\nimport time; print('ready', flush=True); time.sleep(600)")
    lines, thread = consume(script)
    assert lines.get(timeout=8) == "ready"
    script.kill_by(time.monotonic() + 0.3)
    assert lines.get(timeout=8) is None
    thread.join()
    assert script.finish()[0] == -9


def test_a_script_that_closed_its_output_is_killed_at_its_deadline():
    """The script closes its output and ignores SIGTERM; a deadline set before its end is still kept while its
    end is waited for."""
    script = start(IGNORE_STOPS + "\nimport os, time; os.close(1); os.close(2); time.sleep(600)")
    script.kill_by(time.monotonic() + 0.3)
    assert list(script.lines()) == []
    assert script.finish()[0] == -9


def test_without_a_pidfd_a_deadline_is_kept(monkeypatch):
    """A kernel without pidfd_open: the script that ignores SIGTERM is still killed at its deadline."""

    def no_pidfd(pid: int) -> int:
        raise OSError("no pidfd here")

    monkeypatch.setattr(os, "pidfd_open", no_pidfd)
    script = start(IGNORE_STOPS + "\nimport time; time.sleep(600)")
    script.kill_by(time.monotonic() + 0.3)
    assert list(script.lines()) == []
    assert script.finish()[0] == -9


def test_a_burst_longer_than_one_read_arrives_whole():
    """300,000 bytes in a pipe made to hold a megabyte, written at once: more than one read takes, and every line
    arrives, none cut or lost."""
    script = start(
        "import fcntl, sys; fcntl.fcntl(1, 1031, 1 << 20)\n"  # F_SETPIPE_SZ
        "sys.stdout.write(''.join(f'{n:07d}\\n' for n in range(37500))); sys.stdout.flush()"
    )
    lines = list(script.lines())
    assert lines == [f"{n:07d}" for n in range(37500)]
    assert script.finish() == (0, [])


def test_a_bare_name_without_a_path_in_the_environment_is_looked_for_where_exec_would(tmp_path, monkeypatch):
    """An environment without PATH: a bare name is looked for in the system's default path, as exec looks for it,
    never in this process's PATH."""
    program = tmp_path / "only-here"
    program.write_text("#!/bin/sh\nexit 0\n")
    program.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    with pytest.raises(FileNotFoundError):
        start_bound_to_thread(["only-here"], str(tmp_path), {})
