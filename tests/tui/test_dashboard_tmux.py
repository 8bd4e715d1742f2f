"""End to end in a real terminal: tmux runs a backfill at 120×40, keys navigate, q stops, the summary shows."""

from __future__ import annotations

import shlex
import sys

import orjson
import psutil

from tests.backfills import alive
from tests.conftest import backfill_argv
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
        tmux.wait_for("▶ running")
        screen = tmux.screen()
        assert "0  2024-01-01 00:00 → 2024-01-02 00:00  ▶ running" in screen
        assert "3  2024-01-04 00:00 → 2024-01-05 00:00  · queued" in screen
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
