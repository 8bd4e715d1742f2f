"""A stop signal that lands while the main thread holds the executor's lock (the progress lines read a snapshot
under it several times a second) must still stop the run: a handler that waited for that lock hung the process
for good (found by the kill campaign under load: SIGTERM, then no exit)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = """
import os, signal, sys
sys.path.insert(0, {root!r})
from pathlib import Path
from tests.unit.test_scheduling import prepare
from tui.cli.stop_signals import install_stop_handlers

prepared = prepare(Path({work!r}), "true", 2)
executor = prepared.executor()
install_stop_handlers(executor)
with executor._lock:  # where the signal lands: inside a snapshot taken by the main thread
    os.kill(os.getpid(), signal.SIGTERM)
    for _ in range(1000):  # bytecodes: the handler runs here, in this thread
        pass
print(executor._stop_reason, flush=True)
prepared.release()
"""


def test_a_stop_signal_inside_a_snapshot_still_stops(tmp_path):
    """SIGTERM delivered while the main thread holds the executor's lock: the handler records the stop and the
    process goes on (it printed the reason); before the fix it waited for the lock forever."""
    (tmp_path / ".git").mkdir()
    root = str(Path(__file__).resolve().parents[2])
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT.format(root=root, work=str(tmp_path))],
        capture_output=True, text=True, timeout=30, cwd=root,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "terminated (SIGTERM)"
