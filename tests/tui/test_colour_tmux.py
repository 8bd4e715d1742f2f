"""Colourless terminals, for real: NO_COLOR and --no-color in tmux give a working screen with no colour codes."""

from __future__ import annotations

import re
import shlex
import sys

from tests.conftest import backfill_argv, run_backfill
from tests.guard_flags import GUARD
from tests.tui.tmux import Tmux

GREYS_256 = {0, 7, 8, 15, 16, 231, *range(232, 256)}


def colour_codes(screen: str) -> list[str]:
    """SGR sequences that set a chromatic foreground or background; greys (NO_COLOR's monochrome shading, which
    keeps the cursor row visible), bold, dim and reverse are allowed."""
    found = []
    for sequence in re.findall(r"\x1b\[([0-9;]*)m", screen):
        parts = [int(p or 0) for p in sequence.split(";")]
        i = 0
        while i < len(parts):
            code = parts[i]
            if code in (38, 48) and i + 1 < len(parts):
                if parts[i + 1] == 5:
                    if parts[i + 2] not in GREYS_256:
                        found.append(sequence)
                    i += 3
                    continue
                if parts[i + 1] == 2:
                    r, g, b = parts[i + 2 : i + 5]
                    if not (r == g == b):
                        found.append(sequence)
                    i += 5
                    continue
            if 31 <= code <= 36 or 41 <= code <= 46 or 91 <= code <= 96 or 101 <= code <= 106:
                found.append(sequence)
            i += 1
    return found


def saved_backfill(work, home) -> str:
    result = run_backfill(
        *GUARD, "--command", "true", "--start-date", "2024-01-01", "--end-date", "2024-01-05", cwd=work, env=home
    )
    assert result.returncode == 0, result.stderr
    return next((work / "logs" / "backfills").iterdir()).name


def test_no_color_environment_shows_a_working_browser(work, home):
    """NO_COLOR=1 on a terminal: backfill show draws its rows (no crash) and sends no colour at all."""
    backfill = saved_backfill(work, home)
    command = shlex.join([*backfill_argv(), "show", backfill])
    tmux = Tmux(100, 30, command, work, {**home, "TERM": "xterm-256color", "NO_COLOR": "1"})
    try:
        screen = tmux.wait_for("4  2024-01-05 00:00 → 2024-01-06 00:00  ✓ succeeded")
        assert "Traceback" not in screen and "Error" not in screen
        tmux.keys("Down", "Enter")
        tmux.wait_for("partition 1")
        assert colour_codes(tmux.screen(escapes=True)) == []
        tmux.keys("q")
        tmux.wait_for("EXIT=0")
    finally:
        tmux.close()


def test_no_color_flag_gives_a_colourless_dashboard_and_browser(work, home):
    """--no-color is honoured by the live dashboard and by show, where colours are otherwise on."""
    backfill = saved_backfill(work, home)
    plain = {**home, "TERM": "xterm-256color"}
    tmux = Tmux(100, 30, shlex.join([*backfill_argv(), "show", backfill]), work, plain)
    try:
        tmux.wait_for("✓ succeeded")
        assert colour_codes(tmux.screen(escapes=True)), "colours should be on without --no-color"
        tmux.keys("q")
    finally:
        tmux.close()
    for command in (
        [*backfill_argv(), "show", backfill, "--no-color"],
        [
            *backfill_argv(),
            *GUARD,
            "--command",
            shlex.join([sys.executable, "-c", "import time; time.sleep(60)"]),
            "--start-date",
            "2024-02-01",
            "--end-date",
            "2024-02-05",
            "--no-color",
        ],
    ):
        tmux = Tmux(100, 30, shlex.join(command), work, plain)
        try:
            tmux.wait_for("2024-02-01 00:00 → 2024-02-02 00:00  ▶ running" if "--command" in command else "✓ succeeded")
            assert colour_codes(tmux.screen(escapes=True)) == []
            tmux.keys("C-c")
            tmux.wait_for("EXIT=")
        finally:
            tmux.close()
