"""End to end in a real terminal: tmux runs a backfill at 120×40, keys navigate, q stops, the summary shows."""

from __future__ import annotations

import shlex
import signal
import sys
import time

import orjson
import psutil
import pytest

from tests.backfills import alive
from tests.conftest import backfill_argv
from tests.guard_flags import GUARD
from tests.tui.tmux import Tmux


def test_dashboard_in_a_real_terminal(tmp_path, home):
    """Rows, follow, navigation, details and q in tmux: q asks before cancelling running children, another key keeps
    them, q q stops; the shell then shows the summary and no child is left."""
    work = tmp_path / "work"
    (work / ".git").mkdir(parents=True)
    child = shlex.join([sys.executable, "-c", "import time; print('hello from the child', flush=True); time.sleep(60)"])
    command = shlex.join(
        [
            *backfill_argv(),
            *GUARD,
            "--command",
            child,
            "--start-date",
            "2024-01-01",
            "--end-date",
            "2024-03-31",
            "--max-parallel",
            "3",
        ]
    )
    tmux = Tmux(120, 40, command, work, {**home, "TERM": "xterm-256color"})
    try:
        screen = tmux.wait_for("follow on")
        # Waited for, not read from one capture: a capture can catch the screen between two halves of a repaint.
        tmux.wait_for("0  2024-01-01 00:00 → 2024-01-02 00:00  ▶ running")
        screen = tmux.wait_for("3  2024-01-04 00:00 → 2024-01-05 00:00  · queued")
        assert "3 parallel  " in screen and "workers" not in screen and "(end exclusive)" in screen
        tmux.keys("Down", "Down")
        screen = tmux.wait_for("follow off — press f to follow execution")
        assert "▸  2  2024-01-03 00:00" in screen
        tmux.keys("End")
        screen = tmux.wait_for("90  2024-03-31 00:00 → 2024-04-01 00:00")
        tmux.keys("Home", "Enter")
        screen = tmux.wait_for("partition 0")
        assert "2024-01-01T00:00:00Z → 2024-01-02T00:00:00Z" in screen
        tmux.wait_for("hello from the child")
        backfill = next((work / "logs" / "backfills").iterdir())
        pids = [orjson.loads(p.read_bytes())["attempts"][-1]["pid"] for p in (backfill / "partitions").glob("*.json")]
        assert len(pids) == 3 and all(alive(pid) for pid in pids)
        tmux.keys("q")
        tmux.wait_for("Stop the backfill? 3 running children will be cancelled")
        assert all(alive(pid) for pid in pids), "one q only asks"
        tmux.keys("Down")
        tmux.wait_for("the backfill keeps running")
        assert all(alive(pid) for pid in pids)
        tmux.keys("q", "q")
        screen = tmux.wait_for("EXIT=130", timeout=60)
        assert f"backfill {backfill.name} cancelled after" in screen
        assert "partitions  91: 88 queued, 3 cancelled" in screen
        assert f"resume      backfill --continue {backfill.name}" in screen
        assert not any(alive(pid) for pid in pids)
        leftovers = []
        for process in psutil.process_iter(["pid"]):
            try:
                if process.environ().get("BACKFILL_ID") == backfill.name:
                    leftovers.append(process.pid)
            except (psutil.Error, OSError):
                continue
        assert leftovers == []
    finally:
        tmux.close()


def test_every_row_on_the_terminal_matches_the_records_when_the_run_ends(tmp_path, home):
    """What reaches the terminal, not what a widget would draw: after a run whose rows all stay on screen, every
    row shows the status its record holds (no '▶ running' left above 'done'), with follow off and on."""
    import re

    work = tmp_path / "work"
    (work / ".git").mkdir(parents=True)
    child = shlex.join(
        [
            sys.executable,
            "-c",
            "import sys, time; time.sleep(0.4); sys.exit(sys.argv[1][:10] == '2024-01-12')",
            "{start}",
        ]
    )
    command = shlex.join(
        [
            *backfill_argv(),
            *GUARD,
            "--command",
            child,
            "--start-date",
            "2024-01-01",
            "--end-date",
            "2024-01-12",
            "--max-parallel",
            "3",
            "--on-failure",
            "continue",
        ]
    )
    tmux = Tmux(120, 40, command, work, {**home, "TERM": "xterm-256color"})
    try:
        tmux.wait_for("▶ running")
        tmux.keys("Home")  # follow off: only in-place repaints can update these rows now
        screen = tmux.wait_for("Backfill failed", timeout=60)
        backfill = next((work / "logs" / "backfills").iterdir())
        on_disk = {
            orjson.loads(p.read_bytes())["index"]: orjson.loads(p.read_bytes())["status"]
            for p in (backfill / "partitions").glob("*.json")
        }

        def shown_now() -> dict[int, str]:
            rows = re.finditer(r"^[▸ ][● ]\s*(\d+)\s+2024-\S+ \S+ → \S+ \S+\s+\S (\w+)", tmux.screen(), re.M)
            return {int(m.group(1)): m.group(2) for m in rows}

        deadline = time.monotonic() + 15  # the last repaints reach the terminal (a loaded machine is slow to)
        while (shown := shown_now()) != on_disk and time.monotonic() < deadline:
            time.sleep(0.1)
        screen = tmux.screen()
        assert len(shown) == 12 and shown == on_disk, (shown, on_disk)
        assert "▶ running" not in screen and "12/12 done" in screen
    finally:
        tmux.close()


@pytest.mark.parametrize("front_end", ["dashboard", "browser"])
def test_sigterm_ends_the_process_whatever_the_front_end(tmp_path, home, front_end):
    """SIGTERM to a backfill showing the dashboard (or to backfill show) stops the children and ends the
    process (130 for a run, within seconds), instead of leaving the screen open waiting for q."""
    from tests.conftest import run_backfill

    work = tmp_path / "work"
    (work / ".git").mkdir(parents=True)
    child = shlex.join([sys.executable, "-c", "import time; time.sleep(60)"])
    days = ["--start-date", "2024-01-01", "--end-date", "2024-01-05"]
    argv = [*backfill_argv(), *GUARD, "--command", child, *days, "--max-parallel", "2"]
    if front_end == "browser":
        assert run_backfill(*GUARD, "--command", "true", *days, cwd=work, env=home).returncode == 0
        argv = [*backfill_argv(), "show", next((work / "logs" / "backfills").iterdir()).name]
    pidfile = work / "pid"
    command = writing_its_pid(argv, pidfile)
    tmux = Tmux(120, 40, command, work, {**home, "TERM": "xterm-256color"})
    try:
        tmux.wait_for("▶ running" if front_end == "dashboard" else "✓ succeeded")
        process = psutil.Process(int(pidfile.read_text()))
        children = process.children(recursive=True)
        assert len(children) == (2 if front_end == "dashboard" else 0)
        process.send_signal(signal.SIGTERM)
        screen = tmux.wait_for("EXIT=", timeout=20)
        assert ("EXIT=130" if front_end == "dashboard" else "EXIT=0") in screen, screen
        assert not any(alive(child.pid) for child in children)
    finally:
        tmux.close()


def test_the_summary_duration_is_the_runs_not_the_time_the_dashboard_stayed_open(tmp_path, home):
    """A failed run keeps the dashboard open; quitting 4 s later prints the run's own duration, not 4 s more."""
    import re

    work = tmp_path / "work"
    (work / ".git").mkdir(parents=True)
    command = shlex.join(
        [*backfill_argv(), *GUARD, "--command", "false", "--start-date", "2024-01-01", "--end-date", "2024-01-01"]
    )
    tmux = Tmux(100, 30, command, work, {**home, "TERM": "xterm-256color"})
    try:
        tmux.wait_for("Backfill failed")
        time.sleep(4)
        tmux.keys("q")
        screen = tmux.wait_for("EXIT=1")
        seconds = float(re.search(r"failed after ([\d.]+)s", screen).group(1))
        assert seconds < 3, screen
    finally:
        tmux.close()


def writing_its_pid(argv: list[str], pidfile) -> str:
    """A shell line that runs ``argv`` as the same process after writing its PID to ``pidfile``."""
    return shlex.join(["sh", "-c", f'echo $$ > {shlex.quote(str(pidfile))}; exec "$@"', "sh", *argv])


@pytest.mark.parametrize("moment", ["running", "finished"])
def test_a_closed_terminal_ends_the_dashboard_and_leaves_nothing_running(tmp_path, home, moment):
    """The terminal disappears (tmux killed, like a closed window or a dropped SSH connection) while children run,
    or while a failed backfill waits for q: the process ends by itself, no child outlives it, and no record is
    left `running` (it used to hang for ever, its screen writer blocked on the lost terminal)."""
    work = tmp_path / "work"
    (work / ".git").mkdir(parents=True)
    child = "sleep 60" if moment == "running" else "false"
    days = ["--start-date", "2024-01-01", "--end-date", "2024-01-05"]
    argv = [*backfill_argv(), *GUARD, "--command", child, *days, "--max-parallel", "2"]
    pidfile = work / "pid"
    command = writing_its_pid(argv, pidfile)
    tmux = Tmux(120, 40, command, work, {**home, "TERM": "xterm-256color"})
    try:
        tmux.wait_for("▶ running" if moment == "running" else "Backfill failed")
        process = psutil.Process(int(pidfile.read_text()))
        children = process.children(recursive=True)
        assert len(children) == (2 if moment == "running" else 0)
        tmux.kill_server()
        _gone, alive_still = psutil.wait_procs([process, *children], timeout=30)
        assert not alive_still, f"still alive after the terminal closed: {alive_still}"
        [backfill] = list((work / "logs" / "backfills").iterdir())
        statuses = [orjson.loads(p.read_bytes())["status"] for p in (backfill / "partitions").glob("*.json")]
        assert "running" not in statuses and statuses, statuses
    finally:
        tmux.close()


@pytest.mark.parametrize("ending", ["finish", "SIGTERM", "SIGINT"])
def test_with_sighup_ignored_a_closed_terminal_lets_the_backfill_go_on_and_signals_still_stop_it(
    tmp_path, home, ending
):
    """SIGHUP ignored from the start (nohup, ``trap '' HUP``), the terminal closes while two children run: the
    backfill goes on; released, it finishes and exits 0 with every partition succeeded once; or SIGTERM or SIGINT
    stops it (exit 130), no child outlives it and nothing is left running. It used to finish and then sit for ever
    in futex waits, deaf to SIGTERM and SIGINT (Textual's writer dead on the lost terminal, its queue full)."""
    from tests.backfills import child_command

    work = tmp_path / "work"
    (work / ".git").mkdir(parents=True)
    go, pidfile, exitfile = tmp_path / "go", tmp_path / "pid", tmp_path / "exit"
    days = ["--start-date", "2024-01-01", "--end-date", "2024-01-05"]
    argv = [*backfill_argv(), *GUARD, "--command", child_command(), *days, "--max-parallel", "2"]
    script = f'trap "" HUP; echo $$ > {shlex.quote(str(pidfile))}; "$@"; echo $? > {shlex.quote(str(exitfile))}'
    command = shlex.join(["sh", "-c", script, "sh", *argv])
    tmux = Tmux(120, 40, command, work, {**home, "TERM": "xterm-256color", "CHILD_WAIT_FOR": str(go)})
    try:
        tmux.wait_for("▶ running")
        [process] = psutil.Process(int(pidfile.read_text())).children()
        children = process.children(recursive=True)
        tmux.kill_server()
        deadline = time.monotonic() + 30
        while process.is_running() and process.status() != psutil.STATUS_ZOMBIE and time.monotonic() < deadline:
            if ending == "finish":
                go.touch()
            else:
                process.send_signal(getattr(signal, ending))
            if exitfile.exists():
                break
            time.sleep(0.5)
        deadline = time.monotonic() + 60
        while not exitfile.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert exitfile.exists(), f"the backfill never exited (status {process.status()})"
        code = int(exitfile.read_text())
        _gone, alive_still = psutil.wait_procs(children, timeout=10)
        assert not alive_still
        [backfill] = list((work / "logs" / "backfills").iterdir())
        final = [orjson.loads(p.read_bytes()) for p in (backfill / "partitions").glob("*.json")]
        if ending == "finish":
            assert code == 0
            assert [r["status"] for r in final] == ["succeeded"] * 5 and all(len(r["attempts"]) == 1 for r in final)
        else:
            assert code == 130
            assert "running" not in [r["status"] for r in final]
    finally:
        tmux.close()


def test_with_sighup_ignored_a_closed_terminal_at_the_preflight_screen_approves_nothing(tmp_path, home):
    """SIGHUP ignored, the terminal closes while the pre-flight screen waits for the digest: nobody is left to
    answer, so the backfill is not approved (exit 4) and nothing ran."""
    work = tmp_path / "work"
    (work / ".git").mkdir(parents=True)
    pidfile, exitfile = tmp_path / "pid", tmp_path / "exit"
    argv = [*backfill_argv(), "--reason", "test", "--command", "true", "--start-date", "2024-01-01",
            "--end-date", "2024-01-05"]  # fmt: skip
    script = f'trap "" HUP; echo $$ > {shlex.quote(str(pidfile))}; "$@"; echo $? > {shlex.quote(str(exitfile))}'
    tmux = Tmux(120, 40, shlex.join(["sh", "-c", script, "sh", *argv]), work, {**home, "TERM": "xterm-256color"})
    try:
        tmux.wait_for("digest")
        tmux.kill_server()
        deadline = time.monotonic() + 30
        while not exitfile.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert exitfile.exists(), "the pre-flight screen never left its lost terminal"
        assert int(exitfile.read_text()) == 4
        assert not (work / "logs" / "backfills").exists() or not any((work / "logs" / "backfills").iterdir())
    finally:
        tmux.close()


def test_a_child_s_escape_sequences_never_reach_the_terminal(tmp_path, home):
    """A child whose output sets the window title, colours text and clears the screen: opening its log in the
    details pane wrote those sequences to the terminal (tmux took the title, the screen went blank but for the
    line). The log now shows their text only: the title is the terminal's own, the table is still on screen."""
    work = tmp_path / "work"
    (work / ".git").mkdir(parents=True)
    go = tmp_path / "go"
    script = (
        "import os, time\n"
        "print('line one', flush=True)\n"
        "print('\\x1b]0;PWNED-BY-LOG\\x07\\x1b[31mred text\\x1b[0m and \\x1b[2J\\x9b2Jcleared?', flush=True)\n"
        f"while not os.path.exists({str(go)!r}):\n"
        "    time.sleep(0.05)\n"
    )
    child = shlex.join([sys.executable, "-c", script])
    command = shlex.join([*backfill_argv(), *GUARD, "--command", child, "--start-date", "2024-01-01", "--end-date",
                          "2024-01-02"])  # fmt: skip
    tmux = Tmux(120, 30, command, work, {**home, "TERM": "xterm-256color"})
    try:
        tmux.wait_for("0  2024-01-01 00:00 → 2024-01-02 00:00  ▶ running")
        title = tmux.title()
        tmux.keys("Home", "Enter")
        screen = tmux.wait_for("red text and cleared?")
        assert "line one" in screen and "1  2024-01-02 00:00 → 2024-01-03 00:00" in screen and "PWNED" not in screen
        assert tmux.title() == title and "PWNED" not in tmux.title()
        go.write_text("go")
        tmux.wait_for("2 succeeded", timeout=60)
    finally:
        go.write_text("go")
        tmux.close()


def test_with_stderr_redirected_the_dashboard_is_drawn_on_the_terminal(tmp_path, home):
    """``backfill … 2>errors.log`` on a terminal: the dashboard draws on the terminal (stdout, as it was chosen
    for), not into the file. Textual's driver wrote to stderr: the screen went into errors.log as escape
    sequences and the terminal stayed blank for the whole run."""
    work = tmp_path / "work"
    (work / ".git").mkdir(parents=True)
    errors = tmp_path / "errors.log"
    days = ["--start-date", "2024-01-01", "--end-date", "2024-01-03"]
    argv = [*backfill_argv(), *GUARD, "--command", "sleep 60", *days]
    command = f"{shlex.join(argv)} 2>{shlex.quote(str(errors))}"
    tmux = Tmux(120, 40, command, work, {**home, "TERM": "xterm-256color"})
    try:
        screen = tmux.wait_for("▶ running")
        assert "2024-01-02 00:00" in screen and "· queued" in screen
        assert "\x1b" not in errors.read_text(errors="replace")
    finally:
        tmux.close()
