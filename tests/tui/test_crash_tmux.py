"""A fault of the screen never costs work: in a real terminal the backfill outlives its crashed dashboard."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import orjson

from tests.guard_flags import GUARD
from tests.tui.tmux import Tmux

ROOT = Path(__file__).resolve().parents[2]


def test_a_crashed_dashboard_restores_the_terminal_and_the_backfill_runs_to_its_end(work, home):
    """The dashboard raises mid-run: one line names the cause and the traceback file, progress lines take over,
    every partition succeeds and the command exits 0 — not "cancelled", not 130."""
    child = shlex.join([sys.executable, "-c", "import time; time.sleep(1.5)"])
    command = shlex.join(
        [
            sys.executable,
            str(ROOT / "tests" / "tui" / "crashing_dashboard.py"),
            *GUARD,
            "--command",
            child,
            "--start-date",
            "2024-01-01",
            "--end-date",
            "2024-01-06",
            "--max-parallel",
            "2",
        ]
    )
    tmux = Tmux(120, 40, command, work, {**home, "TERM": "xterm-256color", "PYTHONPATH": str(ROOT)})
    try:
        screen = tmux.wait_for("EXIT=", timeout=90)
        assert "EXIT=0" in screen, screen
        assert "the dashboard failed (ZeroDivisionError: planted dashboard fault); full traceback in" in screen
        assert "The backfill goes on with progress lines; Ctrl+C stops it." in screen
        assert "succeeded" in screen and "cancelled" not in screen.split("the dashboard failed")[1]
        assert "Traceback" not in screen  # one line, not a screenful
        [backfill] = list((work / "logs" / "backfills").iterdir())
        statuses = [orjson.loads(p.read_bytes())["status"] for p in (backfill / "partitions").glob("*.json")]
        assert statuses == ["succeeded"] * 6
        [crash] = list(backfill.glob("dashboard-crash-*.txt"))
        assert "ZeroDivisionError: planted dashboard fault" in crash.read_text()
    finally:
        tmux.close()


def test_a_crashed_browser_says_so_in_one_line_and_exits_non_zero(work, home):
    """backfill show whose screen raises: one line with the cause and the traceback file, exit 1 (not 0)."""
    from tests.conftest import run_backfill

    result = run_backfill(
        *GUARD, "--command", "true", "--start-date", "2024-01-01", "--end-date", "2024-01-03", cwd=work, env=home
    )
    assert result.returncode == 0, result.stderr
    [backfill] = list((work / "logs" / "backfills").iterdir())
    command = shlex.join([sys.executable, str(ROOT / "tests" / "tui" / "crashing_dashboard.py"), "show", backfill.name])
    tmux = Tmux(100, 30, command, work, {**home, "TERM": "xterm-256color", "PYTHONPATH": str(ROOT)})
    try:
        screen = tmux.wait_for("EXIT=", timeout=60)
        assert "EXIT=1" in screen and "Traceback" not in screen
        assert "the dashboard failed (ZeroDivisionError: planted dashboard fault); full traceback in" in screen
        assert list(backfill.glob("dashboard-crash-*.txt"))
    finally:
        tmux.close()
