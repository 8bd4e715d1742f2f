"""A stop signal sent again after a backfill has stopped does not change its exit code."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from tests.guard_flags import GUARD

SCRIPT = """
import os, signal, sys
sys.argv = ["backfill", *sys.argv[1:]]
from tui.cli.main import main
code = main()
os.kill(os.getpid(), signal.SIGTERM)  # the supervisor's SIGTERM again, as the interpreter finishes
sys.exit(code)
"""


@pytest.mark.parametrize("stop", ["SIGTERM", "SIGINT"])
def test_a_signal_repeated_after_a_signal_stop_keeps_exit_130(work, home, stop):
    """Seen in CI: a SIGTERM repeated while a stopped backfill's interpreter finished killed it (143, not 130)."""
    argv = [sys.executable, "-c", SCRIPT, *GUARD, "--command", "sleep 30", "--start-date", "2024-01-01",
            "--end-date", "2024-01-02", "--no-progress"]  # fmt: skip
    process = subprocess.Popen(
        argv, cwd=work, env={**os.environ, **home, "NO_COLOR": "1"}, stderr=subprocess.PIPE, text=True
    )
    for line in process.stderr:  # the progress lines: the child has started
        if "running" in line or "started" in line:
            break
    process.send_signal(getattr(signal, stop))
    process.stderr.read()
    assert process.wait(timeout=60) == 130
