"""Taking over a backfill whose dead executor left children on a Dask cluster: they are stopped before anything
new starts, whether the records name them or not, whatever launcher the new invocation uses."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterator

import psutil
import pytest

from engine.store.state_store import Generation
from tests.backfills import child_command, records
from tests.conftest import backfill_argv
from tests.functional.dask_support import (
    alive,
    external_cluster,
    only_backfill,
    running_children,
    silent_port,
    wait_for_text,
)
from tests.guard_flags import GUARD


@pytest.fixture
def scheduler(tmp_path) -> Iterator[str]:
    """The address of a local cluster of two worker processes, started for the test and stopped after it."""
    with external_cluster(tmp_path) as (address, _):
        yield address


def test_a_takeover_stops_a_child_the_records_never_named_and_fences_its_generation(scheduler, tmp_path):
    """A child started by generation 1's task whose identity reached no record is found through its worker and
    stopped; afterwards no task of generation 1 starts a child on that cluster, while generation 2 still can."""
    from distributed import Client, Variable

    from engine.execute.dask_launcher import stop_remote_attempts
    from engine.execute.dask_task import FENCED, run_child

    pid_file = tmp_path / "child.pid"
    child = ["/bin/sh", "-c", f"echo $$ > {pid_file}; exec sleep 120"]
    env = dict(os.environ)
    client = Client(scheduler, set_as_default=False)
    try:
        client.subscribe_topic("t", lambda event: None)
        Variable("beat", client=client).set(time.time() + 3600)  # an executor that never falls silent
        running = client.submit(run_child, child, str(tmp_path), env, "r1", "t", "beat", 60, 60, "b1", 1, pure=False)
        pid = int(wait_for_text(pid_file))
        assert psutil.pid_exists(pid)
        previous = Generation(1, 1, 0.0, "elsewhere", "2024-01-01T00:00:00Z", scheduler, 60.0)
        notes = stop_remote_attempts("b1", [], previous, grace=2)
        assert notes == []
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
        assert running.result(timeout=30) < 0  # the child was killed by a signal
        pid_file.unlink()
        late = client.submit(run_child, child, str(tmp_path), env, "r2", "t", "beat", 60, 60, "b1", 1, pure=False)
        assert late.result(timeout=30) == FENCED
        assert not pid_file.exists()  # its child never started
        newer = client.submit(run_child, ["true"], str(tmp_path), env, "r3", "t", "beat", 60, 60, "b1", 2, pure=False)
        assert newer.result(timeout=30) == 0
    finally:
        client.close()


def test_continue_on_another_launcher_stops_the_dead_executors_cluster_children_first(scheduler, tmp_path):
    """SIGKILL of an executor whose children on an external cluster would outlive it for two minutes (its grace):
    --continue on a local cluster, unable to see those children on its own machine, stops them through the
    scheduler the records name before starting any child; every partition succeeds, none had two live children."""
    work = tmp_path / "work"
    (work / ".git").mkdir(parents=True)
    exclusive = work / "exclusive"
    exclusive.mkdir()
    command = child_command("--exclusive-dir", str(exclusive))  # sleeps CHILD_SLEEP seconds
    env = {**os.environ, "NO_COLOR": "1"}
    process = subprocess.Popen(
        [
            *backfill_argv(),
            "--command",
            command,
            "--start-date",
            "2024-01-01",
            "--end-date",
            "2024-01-02",
            "--launcher",
            "dask",
            "--dask-scheduler",
            scheduler,
            "--max-parallel",
            "2",
            "--no-progress",
            *GUARD,
        ],
        cwd=work,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**env, "CHILD_SLEEP": "300", "BACKFILL_STOP_GRACE": "120"},
    )
    pids = running_children(work, 2)
    backfill = only_backfill(work)
    process.kill()
    process.wait(30)
    assert all(alive(pid) for pid in pids)  # alive: only the takeover stops them
    # The new executor runs in a PID namespace of its own: like an executor on another machine, it cannot find
    # the old children among its own processes, only through the cluster.
    resumed = subprocess.run(
        [
            "unshare",
            "--pid",
            "--fork",
            "--mount-proc",
            *backfill_argv(),
            "--continue",
            backfill.name,
            "--launcher",
            "dask-local:1",
            "--no-progress",
        ],
        cwd=work,
        env={**env, "CHILD_SLEEP": "0.1", "BACKFILL_STOP_GRACE": "2"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert not any(alive(pid) for pid in pids)
    final = records(backfill)
    assert [r["status"] for r in final] == ["succeeded", "succeeded"]
    assert [a["status"] for a in final[0]["attempts"]] == ["cancelled", "succeeded"]
    assert final[0]["attempts"][0]["scheduler"] == scheduler and "cluster" in final[0]["attempts"][1]
    assert not (exclusive / "OVERLAP").exists()


@pytest.mark.parametrize("port_left", ["closed", "silent"])
def test_continue_after_the_cluster_is_gone_waits_its_children_out_and_says_so(tmp_path, port_left):
    """The executor and then its whole cluster are killed: --continue cannot reach the recorded scheduler,
    waits until any child there must have stopped itself, prints one note line saying so, and completes. Also
    when something else took the scheduler's port and never answers there (the takeover waited for its handshake
    for ever)."""
    work = tmp_path / "work"
    (work / ".git").mkdir(parents=True)
    env = {**os.environ, "NO_COLOR": "1", "BACKFILL_STOP_GRACE": "1"}
    with external_cluster(tmp_path) as (scheduler, cluster):
        process = subprocess.Popen(
            [
                *backfill_argv(),
                "--command",
                child_command(),
                "--start-date",
                "2024-01-01",
                "--end-date",
                "2024-01-01",
                "--launcher",
                "dask",
                "--dask-scheduler",
                scheduler,
                "--no-progress",
                *GUARD,
            ],
            cwd=work,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={**env, "CHILD_SLEEP": "300"},
        )
        running_children(work, 1)
        process.kill()
        process.wait(30)
        os.killpg(cluster.pid, signal.SIGKILL)  # the scheduler, its workers and their children
        cluster.wait(30)
    port = int(scheduler.rsplit(":", 1)[1])
    with silent_port(port) if port_left == "silent" else contextlib.nullcontext():
        resumed = subprocess.run(
            [*backfill_argv(), "--continue", only_backfill(work).name, "--launcher", "dask-local:1", "--no-progress"],
            cwd=work,
            env={**env, "CHILD_SLEEP": "0"},
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    notes = [line for line in resumed.stdout.splitlines() if line.startswith("  note    ")]
    assert len(notes) == 1 and f"the Dask scheduler {scheduler} of the previous executor cannot be reached" in notes[0]
    assert "waited 6s" in notes[0]  # two grace periods of 1 s, and 4 s
    assert [r["status"] for r in records(only_backfill(work))] == ["succeeded"]
