"""Which front end and colours appear, decided from a real pseudo-terminal: dashboard, progress lines, NO_COLOR."""

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

from tests.conftest import backfill_argv
from tests.guard_flags import GUARD

RANGE = ("--start-date", "2024-01-01", "--end-date", "2024-01-03")


def run_in_pty(args: list[str], cwd: Path, env: dict[str, str], *, stdout_to_pty: bool = True) -> tuple[int, str]:
    """Run backfill with stdin and stderr (and stdout unless told) on a pty; return exit code and pty output.
    A new command backfill gets the guardrail flags of tests/guard_flags.py (a reason, sandbox)."""
    controller, terminal = pty.openpty()
    os.set_blocking(controller, False)
    process = subprocess.Popen(
        [*backfill_argv(), *(GUARD if "--command" in args else ()), *args],
        cwd=cwd,
        env={**os.environ, **env},
        stdin=terminal,
        stdout=terminal if stdout_to_pty else subprocess.DEVNULL,
        stderr=terminal,
        start_new_session=True,
    )
    os.close(terminal)
    output = b""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        ready, _, _ = select.select([controller], [], [], 0.1)
        chunk = b""
        if ready:
            try:
                chunk = os.read(controller, 65536)
            except OSError:  # EIO: every process holding the terminal has closed it
                break
            output += chunk
        if process.poll() is not None and not chunk:
            break
    os.close(controller)
    return process.wait(timeout=10), output.decode("utf-8", "replace")


def clean_env(home: dict[str, str], **extra: str) -> dict[str, str]:
    environment = {**home, "TERM": "xterm-256color", **extra}
    environment.pop("NO_COLOR", None)
    return environment


def test_term_dumb_uses_progress_lines_without_colour(work, home):
    """TERM=dumb on a terminal: no dashboard (no alternate screen), plain progress lines, no colour codes."""
    env = clean_env(home, TERM="dumb")
    code, output = run_in_pty(["--command", "true", *RANGE], work, env)
    assert code == 0
    assert "\x1b[?1049h" not in output, "no alternate screen (no dashboard)"
    assert "[1/3]" in output or "[3/3]" in output
    assert "\x1b[3" not in output


def test_no_progress_on_a_terminal_prints_coloured_lines(work, home):
    """--no-progress on a terminal: progress lines instead of the dashboard, coloured (the terminal supports it)."""
    code, output = run_in_pty(["--command", "true", *RANGE, "--no-progress"], work, {**clean_env(home), "NO_COLOR": ""})
    assert code == 0
    assert "\x1b[?1049h" not in output
    assert "\x1b[32msucceeded" in output


@pytest.mark.parametrize("switch", [("--no-color",), ("NO_COLOR",)])
def test_colour_can_be_turned_off(work, home, switch):
    """--no-color or NO_COLOR turn colours off even on a terminal."""
    env = {**clean_env(home), "NO_COLOR": "1" if switch == ("NO_COLOR",) else ""}
    args = ["--command", "true", *RANGE, "--no-progress", *(s for s in switch if s.startswith("--"))]
    code, output = run_in_pty(args, work, env)
    assert code == 0 and "succeeded" in output
    assert "\x1b[32m" not in output


def test_interactive_terminal_opens_the_dashboard(work, home):
    """stdin and stdout on a terminal with a capable TERM: the full-screen dashboard (alternate screen) runs,
    closes by itself on success, and the summary follows on the normal screen."""
    code, output = run_in_pty(["--command", "true", *RANGE], work, {**clean_env(home), "NO_COLOR": ""})
    assert code == 0
    assert "\x1b[?1049h" in output and "\x1b[?1049l" in output
    after_dashboard = output[output.rindex("\x1b[?1049l") :]
    assert "succeeded" in after_dashboard and "  logs        " in after_dashboard


def test_stdout_to_a_pipe_uses_progress_lines_on_stderr(work, home):
    """stdout not a terminal (a pipe, CI): progress lines on stderr even though stderr is a terminal."""
    code, output = run_in_pty(
        ["--command", "true", *RANGE], work, {**clean_env(home), "NO_COLOR": ""}, stdout_to_pty=False
    )
    assert code == 0
    assert "\x1b[?1049h" not in output and "succeeded" in output


def test_a_terminal_that_closes_without_a_hangup_stops_the_backfill(work, home):
    """The dashboard on a pty that is not the process's controlling terminal (a harness handing it a pty for its
    descriptors alone): when the pty closes no SIGHUP comes, yet the terminal is gone all the same. The backfill
    stops as on SIGHUP — exit 130, no child left, no record left running. It used to take the missing SIGHUP for
    ``nohup`` and run on without a terminal, its `sleep 60` children with it."""
    controller, terminal = pty.openpty()
    process = subprocess.Popen(
        [*backfill_argv(), *GUARD, "--command", "sleep 60", *RANGE, "--max-parallel", "2"],
        cwd=work,
        env={**os.environ, **clean_env(home)},
        stdin=terminal,
        stdout=terminal,
        stderr=terminal,
        start_new_session=True,  # a session of its own, the pty opened before: it never becomes its controller
    )
    os.close(terminal)
    try:
        shown = b""
        deadline = time.monotonic() + 60
        while "▶ running".encode() not in shown and time.monotonic() < deadline:
            ready, _, _ = select.select([controller], [], [], 1.0)
            if ready:
                shown += os.read(controller, 65536)
        assert "▶ running".encode() in shown, "the dashboard never showed a running child"
        children = psutil.Process(process.pid).children(recursive=True)
        assert len(children) == 2
    finally:
        os.close(controller)
    try:
        code = process.wait(timeout=60)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    assert code == 130
    _gone, alive_still = psutil.wait_procs(children, timeout=10)
    assert not alive_still, f"children left running: {alive_still}"
    [backfill] = list((work / "logs" / "backfills").iterdir())
    statuses = sorted(orjson.loads(p.read_bytes())["status"] for p in (backfill / "partitions").glob("*.json"))
    assert statuses == ["cancelled", "cancelled"], statuses
