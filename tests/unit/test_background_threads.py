"""The store's and the lease's background threads never hold a process open and say what they are: a front end
that dies without closing them (an exception, a crash of the screen) still exits, and a thread dump names
them."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

from engine.base.settings import Settings
from engine.interventions.leasing import LeaseKeeper
from engine.store.record_writer import RecordWriter
from engine.store.state_store import StateStore

# A process that starts the thread and leaves without closing it: a non-daemon thread would keep it alive.
LEFT_OPEN = {
    "record writer": (
        "from pathlib import Path; from engine.store.record_writer import RecordWriter\n"
        "RecordWriter(Path({directory!r}))\n"
    ),
    "lease": (
        "from pathlib import Path; from engine.base.settings import Settings\n"
        "from engine.interventions.leasing import LeaseKeeper; from engine.store.state_store import StateStore\n"
        "LeaseKeeper(StateStore(Path({directory!r})), 1, Settings(lease_renew_seconds=0.05)).start(tuple, print)\n"
    ),
}


def test_a_process_that_never_closes_them_still_exits(tmp_path: Path):
    """Neither thread keeps its process alive: a front end that dies without closing the writer or stopping the
    lease keeper exits (exit 0 here), as the crash paths rely on."""
    RecordWriter(tmp_path).close()  # the same classes, started here too (so mutation runs tie this test to them)
    (tmp_path / "bf").mkdir()
    keeper = LeaseKeeper(StateStore(tmp_path / "bf"), 1, Settings(lease_renew_seconds=0.05))
    keeper.start(tuple, print)
    keeper.stop()
    for name, source in LEFT_OPEN.items():
        directory = tmp_path / name.replace(" ", "-")
        directory.mkdir()
        finished = subprocess.run(
            [sys.executable, "-c", source.format(directory=str(directory))],
            cwd=Path(__file__).resolve().parents[2],
            capture_output=True,
            text=True,
            timeout=20,
        )
        assert finished.returncode == 0, (name, finished.stderr)


def test_a_thread_dump_names_them(tmp_path: Path):
    """The threads are named for what they do, so a dump (faulthandler, py-spy) of a stuck executor reads."""
    writer = RecordWriter(tmp_path)
    (tmp_path / "bf").mkdir()
    keeper = LeaseKeeper(StateStore(tmp_path / "bf"), 1, Settings(lease_renew_seconds=0.05))
    keeper.start(tuple, print)
    try:
        names = {thread.name for thread in threading.enumerate()}
        assert {"record writer", "lease"} <= names, names
    finally:
        keeper.stop()
        writer.close()
