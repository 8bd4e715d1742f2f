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

from tests.backfills import child_command, records
from tests.conftest import backfill_argv, run_backfill
from tests.functional.dask_support import alive, only_backfill, running_children
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


def test_a_killed_executor_takes_its_local_cluster_and_the_children_with_it(work):
    """SIGKILL of the executor: the cluster's process, its workers and every child on them are gone within
    seconds (the parent-death signal), with no successor needed to stop them."""
    process = _start(work, child_command("--sleep", "120"))
    pids = running_children(work, 2)
    cluster = [p for p in psutil.Process(process.pid).children() if "__local-cluster" in p.cmdline()]
    assert len(cluster) == 1
    workers = [p.pid for p in cluster[0].children(recursive=True)]
    process.kill()
    process.wait(30)
    deadline = time.monotonic() + 20
    everything = [*pids, cluster[0].pid, *workers]
    while any(alive(pid) for pid in everything) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [pid for pid in everything if alive(pid)]


def test_ctrl_c_at_the_terminal_stops_the_children_gracefully_and_not_the_cluster_first(work, tmp_path):
    """SIGINT to the whole foreground process group, as a terminal's Ctrl+C sends it: the cluster ignores it,
    the executor forwards SIGINT to each child through its worker (the child records it), waits for them and
    records the partitions cancelled."""
    signals = tmp_path / "signals"
    env = {**os.environ, "BACKFILL_STOP_GRACE": "2"}  # the children go on after SIGINT: SIGKILL after 2 s
    process = _start(work, child_command("--sleep", "60", "--record-signals", str(signals)), env=env)
    pids = running_children(work, 2)
    os.killpg(process.pid, signal.SIGINT)
    process.communicate(timeout=60)
    assert process.returncode == 130
    assert not any(alive(pid) for pid in pids)
    assert [r["status"] for r in records(only_backfill(work))] == ["cancelled", "cancelled"]
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
    backfill = only_backfill(work)
    [record] = records(backfill)
    attempt = record["attempts"][-1]
    assert attempt["exit_code"] == 3
    lines = (backfill / attempt["log"]).read_text().splitlines()
    assert lines[:-1] == [f"line {i:05d} " + "x" * 12 for i in range(20000)]
    assert lines[-1] == "the last words"
    assert "the last words" in attempt["error"]


def test_backfill_cancel_from_another_process_stops_the_remote_children(work):
    """`backfill cancel` while two children run on the cluster: each is stopped through its worker (gone by
    PID), the executor exits 1, and both partitions are recorded cancelled by the operator."""
    env = {**os.environ, "BACKFILL_STOP_GRACE": "2"}
    process = _start(work, child_command("--sleep", "60"), env=env)
    pids = running_children(work, 2)
    cancel = run_backfill("cancel", only_backfill(work).name, "--reason", "wrong range", cwd=work, env=env)
    assert cancel.returncode == 0, cancel.stderr
    process.communicate(timeout=60)
    assert process.returncode == 1
    assert not any(alive(pid) for pid in pids)
    cancelled = records(only_backfill(work))
    assert [r["status"] for r in cancelled] == ["cancelled", "cancelled"]
    assert [r["attempts"][-1]["exit_code"] for r in cancelled] == [-2, -2]  # SIGINT ended them, not a SIGKILL
    assert all(r["attempts"][-1]["error"].endswith(": wrong range") for r in cancelled)


def test_a_timeout_stops_the_remote_child_and_records_a_failure(work):
    """--timeout 500ms on the cluster: the child is stopped through its worker and its attempt fails with
    'timed out after 500ms', as locally."""
    result = run_backfill(
        "--command",
        "sleep 60",
        "--start-date",
        "2024-01-01",
        "--end-date",
        "2024-01-01",
        "--launcher",
        "dask-local:1",
        "--timeout",
        "500ms",
        *GUARD,
        "--no-progress",
        cwd=work,
    )
    assert result.returncode == 1, result.stdout + result.stderr
    [record] = records(only_backfill(work))
    assert record["status"] == "failed"
    assert record["attempts"][0]["error"] == "timed out after 500ms"
    assert record["attempts"][0]["exit_code"] < 0  # ended by the executor's signal, not by running out its 60 s
    assert not alive(record["attempts"][0]["pid"])


def test_a_pipeline_backfill_runs_its_partitions_on_the_cluster(tmp_path, home):
    """A pipeline's partitions run as `backfill run` on the cluster's workers, each started as its backfill's own
    (`--backfill-id` with the run and partition IDs in its environment, which a run by hand is refused without):
    every partition succeeds and writes its day."""
    from tests.builder import Repo

    repo = Repo(tmp_path / "repo")
    day = {"type": "table", "strategy": "time_interval", "incremental_key": "day", "time_granularity": "date"}
    repo.sql("s.t", "SELECT DATE '{{ start_date }}' AS day, 1 AS x", materialization=day)
    result = run_backfill(
        "p", "--start-date", "2024-01-01", "--end-date", "2024-01-03", "--launcher", "dask-local:2", "--reason",
        "test", "--no-progress", cwd=repo.root, env=home,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "on dask local cluster: 2 workers" in result.stdout
    [backfill] = (repo.root / "logs" / "backfills").iterdir()
    assert [r["status"] for r in records(backfill)] == ["succeeded"] * 3
    assert repo.query("SELECT CAST(day AS VARCHAR) FROM s.t ORDER BY day") == [
        ("2024-01-01",), ("2024-01-02",), ("2024-01-03",)
    ]  # fmt: skip
