"""Progress lines that nobody can read any more, or that cannot be written: the run never goes on unwatched.

Before, a failed write of a progress line left the command's main thread: the executor's thread ran the rest of the
backfill on in the interpreter's shutdown, with the stop signals' handlers gone — a SIGTERM then killed the process
and left its children running and their records `running`, and a reader gone made the exit code 0 or 1 whatever
the partitions did."""

from __future__ import annotations

import os
import pty
import select
import signal
import subprocess
import time
from pathlib import Path

import orjson
import psutil
import pytest

from tests.backfills import child_command
from tests.conftest import backfill_argv
from tests.guard_flags import GUARD

FORTY_DAYS = ("--start-date", "2024-01-01", "--end-date", "2024-02-09", "--max-parallel", "2", "--no-progress")


def statuses(work: Path) -> list[str]:
    [backfill] = list((work / "logs" / "backfills").iterdir())
    return [orjson.loads(p.read_bytes())["status"] for p in (backfill / "partitions").glob("*.json")]


def started(argv: list[str], work: Path, env: dict[str, str], **streams) -> subprocess.Popen:
    """The command in a session of its own, in ``work``, with ``env`` over this process's environment."""
    return subprocess.Popen(argv, cwd=work, env={**os.environ, **env}, start_new_session=True, **streams)


def on_a_pty_it_does_not_control(argv: list[str], work: Path, home: dict[str, str], *, ignore_hangup: bool):
    """Start the command with stdin, stdout and stderr on a pty that is not its controlling terminal (a session of
    its own, the pty opened before): closing the pty sends it no SIGHUP. Returns the process and the pty's side."""
    controller, terminal = pty.openpty()
    process = started(
        argv,
        work,
        {**home, "TERM": "xterm-256color"},
        stdin=terminal,
        stdout=terminal,
        stderr=terminal,
        preexec_fn=(lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN)) if ignore_hangup else None,
    )
    os.close(terminal)
    return process, controller


def read_until(fd: int, text: bytes, timeout: float = 60) -> bytes:
    seen = b""
    deadline = time.monotonic() + timeout
    while text not in seen and time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 1.0)
        if ready:
            seen += os.read(fd, 65536)
    assert text in seen, f"never saw {text!r} in {seen[-500:]!r}"
    return seen


def finished(process: subprocess.Popen, timeout: float = 60) -> int:
    try:
        return process.wait(timeout=timeout)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)


def test_a_terminal_that_closes_without_a_hangup_stops_a_run_with_progress_lines(work, home):
    """--no-progress on a pty that closes without a SIGHUP reaching the command: its next progress line finds the
    terminal gone, and that is a hangup — the run stops (exit 130), its children stopped and waited for, nothing
    left running, the rest of its forty partitions not started."""
    argv = [*backfill_argv(), *GUARD, "--command", child_command("--sleep", "0.5"), *FORTY_DAYS]
    process, controller = on_a_pty_it_does_not_control(argv, work, home, ignore_hangup=False)
    try:
        read_until(controller, b"started")
        children = psutil.Process(process.pid).children(recursive=True)
    finally:
        os.close(controller)
    assert finished(process) == 130
    _gone, alive_still = psutil.wait_procs(children, timeout=10)
    assert not alive_still
    recorded = statuses(work)
    assert "running" not in recorded and recorded.count("succeeded") < 40, recorded


def test_with_sighup_ignored_a_closed_terminal_lets_a_run_with_progress_lines_finish_with_its_own_exit_code(work, home):
    """The same with SIGHUP ignored (``nohup``, ``trap '' HUP``): the operator asked the run to outlive its
    terminal, so it goes on, its lines going nowhere, and exits 0 with every partition succeeded once (it used to
    end with exit 1, its summary failing on the lost terminal)."""
    six_days = ("--start-date", "2024-01-01", "--end-date", "2024-01-06", "--max-parallel", "2", "--no-progress")
    argv = [*backfill_argv(), *GUARD, "--command", child_command("--sleep", "0.3"), *six_days]
    process, controller = on_a_pty_it_does_not_control(argv, work, home, ignore_hangup=True)
    try:
        read_until(controller, b"started")
    finally:
        os.close(controller)
    assert finished(process) == 0
    assert statuses(work) == ["succeeded"] * 6


def test_progress_lines_on_a_full_disk_stop_the_run_and_leave_nothing_running(work, home):
    """stderr on a full disk (/dev/full): the first progress line cannot be written. The run stops at once, its
    children (`sleep 60`) stopped and waited for, their records `cancelled`, exit 1 — where it used to run the
    whole backfill on unwatched, deaf to Ctrl+C and killed outright by a SIGTERM."""
    argv = [*backfill_argv(), *GUARD, "--command", "sleep 60", *FORTY_DAYS]
    with open("/dev/full", "w") as full:
        process = started(argv, work, home, stdout=subprocess.PIPE, stderr=full)
    announced, _ = process.communicate(timeout=30)
    assert process.returncode == 1
    assert b"resume" in announced  # the announcement went out; the lines did not
    recorded = statuses(work)
    assert recorded and set(recorded) == {"cancelled"}, recorded
    left = [p for p in psutil.process_iter(["cmdline", "cwd"]) if p.info["cmdline"] == ["sleep", "60"]]
    assert not [p for p in left if p.info["cwd"] == str(work)], "a child outlived the command"


def test_a_reader_of_the_progress_lines_that_goes_away_stops_the_run(work, home):
    """``backfill … 2>&1 | head -3``: the reader of the lines leaves; nobody reads the run any more, so it stops as
    on a hangup (exit 130, nothing left running) instead of going on unwatched and exiting 0."""
    argv = [*backfill_argv(), *GUARD, "--command", child_command("--sleep", "0.5"), *FORTY_DAYS]
    process = started(argv, work, home, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    read_until(process.stderr.fileno(), b"started")
    children = psutil.Process(process.pid).children(recursive=True)
    process.stderr.close()
    assert finished(process) == 130
    _gone, alive_still = psutil.wait_procs(children, timeout=10)
    assert not alive_still
    recorded = statuses(work)
    assert "running" not in recorded and recorded.count("succeeded") < 40, recorded


def test_a_summary_nobody_reads_keeps_the_run_s_exit_code(work, home, tmp_path):
    """``backfill … | head -1`` with failing partitions: the summary finds its reader gone once the run is over.
    The exit code stays the run's (1: partitions failed), not 0 for a broken pipe."""
    go = tmp_path / "go"
    one_day = ("--start-date", "2024-01-01", "--end-date", "2024-01-01", "--no-progress")
    failing = child_command("--fail-on", "2024-01-01", "--wait-for", str(go))
    process = started(
        [*backfill_argv(), *GUARD, "--command", failing, *one_day],
        work,
        home,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    read_until(process.stdout.fileno(), b"resume")
    process.stdout.close()
    go.touch()
    assert finished(process) == 1
    assert statuses(work) == ["failed"]


@pytest.mark.parametrize("hangup", ["handled", "ignored"])
def test_an_announcement_nobody_reads_runs_nothing_and_leaves_the_backfill_resumable(work, home, hangup):
    """``backfill … | true``: the reader is gone before the first line. Nobody would see the run, so it does not
    start: exit 130 (it used to exit 0, nothing run), the backfill saved with every partition queued, and
    ``--continue`` then runs them all. With SIGHUP ignored (``nohup``) it runs at once, unseen, and exits 0."""
    five_days = ("--start-date", "2024-01-01", "--end-date", "2024-01-05", "--no-progress")
    process = started(
        [*backfill_argv(), *GUARD, "--command", "true", *five_days],
        work,
        home,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        preexec_fn=(lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN)) if hangup == "ignored" else None,
    )
    process.stdout.close()  # long before the command has planned, judged and saved anything to announce
    if hangup == "ignored":
        assert finished(process) == 0
        assert statuses(work) == ["succeeded"] * 5
        return
    assert finished(process) == 130
    assert statuses(work) == []
    [backfill] = list((work / "logs" / "backfills").iterdir())
    resumed = subprocess.run(
        [*backfill_argv(), "--continue", backfill.name, "--no-progress"],
        cwd=work,
        env={**os.environ, **home},
        capture_output=True,
        timeout=60,
    )
    assert resumed.returncode == 0, resumed.stderr
    assert statuses(work) == ["succeeded"] * 5


def test_a_json_document_nobody_reads_keeps_the_run_s_exit_code(work, home):
    """``backfill --output json … | jq -e …`` where the reader leaves before the end: the run goes on (its lines go
    to stderr), and once it is over the document finds nobody; the exit code stays the run's (1: a partition
    failed), not 0 for a broken pipe."""
    one_day = ("--start-date", "2024-01-01", "--end-date", "2024-01-01", "--output", "json")
    process = started(
        [*backfill_argv(), *GUARD, "--command", child_command("--fail-on", "2024-01-01"), *one_day],
        work,
        home,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    process.stdout.close()
    assert finished(process) == 1
    assert statuses(work) == ["failed"]


@pytest.mark.parametrize("closed", [(0,), (1,), (2,), (0, 1, 2)], ids=["stdin", "stdout", "stderr", "all three"])
def test_a_closed_standard_descriptor_is_nowhere_to_write_not_a_traceback(work, home, closed):
    """``backfill … >&-`` (or ``<&-``, ``2>&-``): the descriptor closed by whoever started us reads and writes as
    /dev/null; the run goes on and exits 0. Python left the stream ``None``: a traceback and exit 1 before the run,
    and any file opened first took the descriptor ``print`` writes to."""
    one_two = ("--start-date", "2024-01-01", "--end-date", "2024-01-02")
    process = subprocess.Popen(
        [*backfill_argv(), *GUARD, "--command", "true", *one_two],
        cwd=work,
        env={**os.environ, **home},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE if 2 not in closed else subprocess.DEVNULL,
        preexec_fn=lambda: [os.close(fd) for fd in closed],
    )
    _out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    assert b"Traceback" not in (err or b"")
    assert statuses(work) == ["succeeded", "succeeded"]
