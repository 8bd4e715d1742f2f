"""An operator's walk at 80×24 in a real terminal: a failure appears, n, Enter, the reason, y, r, the summary."""

from __future__ import annotations

import shlex
import subprocess
import sys

import orjson

from tests.conftest import backfill_argv
from tests.guard_flags import GUARD
from tests.tui.tmux import Tmux


def test_failure_to_reason_to_rerun_at_80x24(work, home):
    """At 80×24: the failed partition is found with n, Enter shows its reason without scrolling, y puts its ID
    on the clipboard (OSC 52, read from tmux's buffer), Y shows the run ID and the resume command whole and
    copies the reason and the resume command exactly, r opens a form whose Run button is on screen, the rerun
    succeeds and the summary describes the whole backfill."""
    broken = work / "BROKEN"
    broken.write_text("the bug")
    script = (
        "import os, sys, time\n"
        "time.sleep(0.3)\n"
        "if sys.argv[1][:10] == '2024-01-04' and os.path.exists(sys.argv[2]):\n"
        "    print('loading 2024-01-04', flush=True)\n"
        "    print('KeyError: column order_total missing from source', file=sys.stderr, flush=True)\n"
        "    sys.exit(1)\n"
    )
    child = shlex.join([sys.executable, "-c", script, "{start}", str(broken)])
    command = shlex.join(
        [
            *backfill_argv(),
            *GUARD,
            "--command",
            child,
            "--start-date",
            "2024-01-01",
            "--end-date",
            "2024-01-08",
            "--on-failure",
            "continue",
            "--max-parallel",
            "2",
        ]
    )
    tmux = Tmux(80, 24, command, work, {**home, "TERM": "xterm-256color"})
    try:
        subprocess.run(["tmux", "-L", tmux.socket, "set", "-g", "set-clipboard", "on"], check=True)
        tmux.wait_for("Backfill failed — 1 failed: n jumps to the next one", timeout=60)
        screen = tmux.screen()
        [backfill] = list((work / "logs" / "backfills").iterdir())
        assert f"backfill {backfill.name}" in screen, "the ID is whole in the header at 80 columns"
        tmux.keys("Home", "n")
        tmux.wait_for("▸ 3  2024-01-04 → 2024-01-05")
        tmux.keys("Enter")
        screen = tmux.wait_for("KeyError: column order_total missing from source")
        lines = screen.splitlines()
        assert len(lines) <= 24
        assert any(line.startswith(" partition 3  failed  2024-01-04T00:00:00Z") for line in lines)
        log_lines = [line for line in lines if line.startswith("loading 2024-01-04")]
        assert log_lines, "the log shows below the summary"
        tmux.keys("y")
        [record] = [
            orjson.loads(p.read_bytes())
            for p in (backfill / "partitions").glob("*.json")
            if orjson.loads(p.read_bytes())["index"] == 3
        ]
        tmux.wait_for("copied partition 3's ID")
        buffer = subprocess.run(["tmux", "-L", tmux.socket, "show-buffer"], capture_output=True, text=True).stdout
        assert buffer.strip() == record["id"]
        run_id = record["attempts"][-1]["run_id"]
        tmux.keys("Y")  # everything copyable, whole at 80 columns
        screen = tmux.wait_for("Copy to the clipboard")
        flat = "".join(line.strip(" │") for line in screen.splitlines())
        assert run_id in flat and f"backfill --continue {backfill.name}" in flat, screen
        tmux.keys("r")
        tmux.wait_for("copied partition 3's reason")
        buffer = subprocess.run(["tmux", "-L", tmux.socket, "show-buffer"], capture_output=True, text=True).stdout
        assert buffer == record["attempts"][-1]["error"]
        tmux.keys("Y")
        tmux.wait_for("Copy to the clipboard")
        tmux.keys("c")
        tmux.wait_for("copied the resume command")
        buffer = subprocess.run(["tmux", "-L", tmux.socket, "show-buffer"], capture_output=True, text=True).stdout
        assert buffer == f"backfill --continue {backfill.name}"  # exact from here: the repository's store
        broken.unlink()  # the fix is merged
        tmux.keys("r")
        tmux.wait_for("Rerun backfill")
        screen = tmux.wait_for("^s Run")
        assert "Run" in screen and "Cancel" in screen and "esc Cancel" in screen and "^s Run" in screen
        assert "failed (1)" in screen
        tmux.keys("C-s")
        screen = tmux.wait_for("EXIT=", timeout=60)
        assert "EXIT=0" in screen, screen
        assert f"backfill {backfill.name} succeeded after" in screen
        assert "partitions  8: 8 succeeded" in screen
        assert "resume" not in screen.split(f"backfill {backfill.name} succeeded after")[1]
    finally:
        tmux.close()
