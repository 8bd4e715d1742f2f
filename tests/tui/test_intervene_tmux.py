"""In a real terminal: a backfill shows its dashboard in tmux while a second terminal cancels it."""

from __future__ import annotations

import getpass
import shlex
import socket
import sys

from tests.backfills import alive, child_running, records, state_dirs, wait_for
from tests.conftest import backfill_argv, run_backfill
from tests.guard_flags import GUARD
from tests.tui.tmux import Tmux


def test_cancel_from_a_second_terminal_reaches_the_dashboard_with_who_and_why(tmp_path, home):
    """`backfill cancel` from another process: the dashboard's status line says the backfill was cancelled, by
    whom and why; q leaves with exit 1 and the summary repeats it; no child is left."""
    work = tmp_path / "work"
    (work / ".git").mkdir(parents=True)
    child = shlex.join([sys.executable, "-c", "import time; time.sleep(60)"])
    command = shlex.join(
        [
            *backfill_argv(),
            *GUARD,
            "--command",
            child,
            "--start-date",
            "2024-01-01",
            "--end-date",
            "2024-01-20",
            "--max-parallel",
            "2",
        ]
    )
    tmux = Tmux(120, 40, command, work, {**home, "TERM": "xterm-256color"})
    try:
        tmux.wait_for("▶ running")
        [backfill] = state_dirs(work / "logs" / "backfills")
        pids = wait_for(lambda: [r["attempts"][-1]["pid"] for r in records(backfill) if child_running(r)])
        cancel = run_backfill("cancel", backfill.name, "--reason", "wrong source file", cwd=work, env=home)
        assert cancel.returncode == 0, cancel.stderr
        who = f"{getpass.getuser()}@{socket.gethostname()}"
        screen = tmux.wait_for(f"Backfill cancelled — cancelled by {who}: wrong source file")
        assert "⊘ cancelled" in screen
        assert not [pid for pid in pids if alive(pid)]
        tmux.keys("q")
        screen = tmux.wait_for("EXIT=1", timeout=30)
        assert f"stepped in  cancelled by {who}: wrong source file" in screen
    finally:
        tmux.kill_server()
