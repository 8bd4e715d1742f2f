"""What a settled dashboard writes to its terminal between keys: only what changed. Each poll (ten a second) that
redrew more — a layout, the table's scrollbar, an unchanged status line — was a frame the next key waited behind
(docs/performance.md, Dashboard, 2026-12-07 fifth session)."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import signal
import struct
import subprocess
import termios
import time

from tests.conftest import backfill_argv
from tests.guard_flags import GUARD

# A move that something is drawn after (text or a colour), not the move that parks the cursor at the end of a frame.
DRAWN_AT = re.compile(rb"\x1b\[(\d+);(\d+)H(?=[^\x1b]|\x1b\[[\d;]*m)")
ELAPSED = re.compile(rb"elapsed (\d+)\.(\d)s")
# Rows 1-2: what runs (fixed); 3-4: the completion bar with its clock; 5: the column titles; 6: partition 0, the one
# running child, whose seconds tick; 39: the status line; 40: the footer.
CLOCK_ROWS = {3, 4}
RUNNING_ROW = 6


def test_a_settled_dashboard_repaints_its_clock_and_running_row_alone(work, home):
    """One child sleeping, nothing else changing: from 1.5 s to 2.5 s of elapsed time (ten polls, the running row's
    second ticking once), the dashboard draws only on the clock's rows and the running partition's row,
    never to the rest of the table, its scrollbar or the status line."""
    controller, terminal = pty.openpty()
    fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    argv = [*backfill_argv(), *GUARD, "--command", "sleep 1000", "--start-date", "2024-01-01"]
    argv += ["--end-date", "2024-03-31", "--max-parallel", "1"]
    env = {**os.environ, **home, "TERM": "xterm-256color", "COLUMNS": "120", "LINES": "40"}
    env.pop("NO_COLOR", None)
    process = subprocess.Popen(
        argv, cwd=work, env=env, stdin=terminal, stdout=terminal, stderr=terminal, start_new_session=True
    )
    os.close(terminal)
    window = b""
    collecting = False
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            ready, _, _ = select.select([controller], [], [], 1.0)
            if not ready:
                assert process.poll() is None, "the backfill ended before its dashboard settled"
                continue
            chunk = os.read(controller, 65536)
            clocks = [int(whole) * 10 + int(tenth) for whole, tenth in ELAPSED.findall(chunk)]
            if collecting:
                window += chunk
            if clocks and max(clocks) >= 25:
                break
            if clocks and max(clocks) >= 15:
                collecting = True
        else:
            raise AssertionError("the dashboard's clock never reached 2.5 s")
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=60)
        os.close(controller)
    rows = {int(row) for row, _ in DRAWN_AT.findall(window)}
    assert rows >= CLOCK_ROWS, f"the clock was not repainted between 1.5 s and 2.5 s: rows {sorted(rows)}"
    assert rows <= CLOCK_ROWS | {RUNNING_ROW}, f"rows repainted though nothing on them changed: {sorted(rows)}"
