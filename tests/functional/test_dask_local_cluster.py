"""--launcher dask-local:N: its cluster lives in a process of its own, dies with its executor, ignores the
terminal's Ctrl+C (the executor stops the children), and streams a failing child's whole output back."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tests.backfills import child_command, records, state_dirs
from tests.conftest import backfill_argv, run_backfill
from tests.guard_flags import GUARD


@pytest.fixture
def work(tmp_path) -> Path:
    (tmp_path / ".git").mkdir()
    return tmp_path


def _start(work: Path, command: str, *extra: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            *backfill_argv(),
            "--command",
            command,
            "--start-date",
            "2024-01-01",
            "--end-date",
            "2024-01-02",
            "--launcher",
            "dask-local:2",
            "--max-parallel",
            "2",
            "--no-progress",
            *GUARD,
            *extra,
        ],
        cwd=work,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # a terminal's foreground process group of its own
        env=env,
    )


def _running_children(work: Path, count: int) -> list[int]:
    deadline = time.monotonic() + 60
    pids: list[int] = []
    while len(pids) < count and time.monotonic() < deadline:
        time.sleep(0.2)
        try:
            [backfill] = state_dirs(work / "logs" / "backfills")
            pids = [r["attempts"][-1]["pid"] for r in records(backfill) if r["status"] == "running"]
            pids = [pid for pid in pids if pid]
        except ValueError:
            pids = []
    assert len(pids) == count
    return pids


def _alive(pid: int) -> bool:
    return psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE


def test_a_killed_executor_takes_its_local_cluster_and_the_children_with_it(work):
    """SIGKILL of the executor: the cluster's process, its workers and every child on them are gone within
    seconds (the parent-death signal), with no successor needed to stop them."""
    process = _start(work, child_command("--sleep", "120"))
    pids = _running_children(work, 2)
    cluster = [p for p in psutil.Process(process.pid).children() if "engine.execute.local_cluster" in p.cmdline()]
    assert len(cluster) == 1
    workers = [p.pid for p in cluster[0].children(recursive=True)]
    process.kill()
    process.wait(30)
    deadline = time.monotonic() + 20
    everything = [*pids, cluster[0].pid, *workers]
    while any(_alive(pid) for pid in everything) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [pid for pid in everything if _alive(pid)]


def test_ctrl_c_at_the_terminal_stops_the_children_gracefully_and_not_the_cluster_first(work, tmp_path):
    """SIGINT to the whole foreground process group, as a terminal's Ctrl+C sends it: the cluster ignores it,
    the executor forwards SIGINT to each child through its worker (the child records it), waits for them and
    records the partitions cancelled."""
    signals = tmp_path / "signals"
    env = {**os.environ, "BACKFILL_STOP_GRACE": "2"}  # the children go on after SIGINT: SIGKILL after 2 s
    process = _start(work, child_command("--sleep", "60", "--record-signals", str(signals)), env=env)
    pids = _running_children(work, 2)
    os.killpg(process.pid, signal.SIGINT)
    process.communicate(timeout=60)
    assert process.returncode == 130
    assert not any(_alive(pid) for pid in pids)
    [backfill] = state_dirs(work / "logs" / "backfills")
    assert [r["status"] for r in records(backfill)] == ["cancelled", "cancelled"]
    assert signals.read_text().split().count("SIGINT") == 2  # each child was asked, not killed with its worker


def test_a_failing_childs_whole_output_is_in_its_log_before_its_end_is_recorded(work, tmp_path):
    """A child that writes 400 KiB (seven 64 KiB events and more) and fails: its log holds every line in order,
    and the failure's reason quotes its last line."""
    script = tmp_path / "talk.py"
    script.write_text(
        "import sys\n"
        "for i in range(20000): print(f'line {i:05d} ' + 'x' * 12)\n"
        "print('the last words', flush=True)\n"
        "sys.exit(3)\n"
    )
    result = run_backfill(
        "--command",
        f"{sys.executable} {script}",
        "--start-date",
        "2024-01-01",
        "--end-date",
        "2024-01-01",
        "--launcher",
        "dask-local:1",
        *GUARD,
        "--no-progress",
        cwd=work,
    )
    assert result.returncode == 1, result.stdout + result.stderr
    [backfill] = state_dirs(work / "logs" / "backfills")
    [record] = records(backfill)
    attempt = record["attempts"][-1]
    assert attempt["exit_code"] == 3
    lines = (backfill / attempt["log"]).read_text().splitlines()
    assert lines[:-1] == [f"line {i:05d} " + "x" * 12 for i in range(20000)]
    assert lines[-1] == "the last words"
    assert "the last words" in attempt["error"]
