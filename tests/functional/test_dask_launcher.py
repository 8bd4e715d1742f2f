"""--launcher dask on real local Dask clusters of worker processes: records, logs, retries, stops, lost workers."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil
import pytest

from tests.backfills import child_command, kill_if_running, records, wait_for
from tests.conftest import backfill_argv, run_backfill
from tests.functional.dask_support import alive, external_cluster, only_backfill, running_children, silent_port
from tests.guard_flags import GUARD, REASON

DAYS = ("--start-date", "2024-01-01", "--end-date", "2024-02-09")  # 40 daily partitions


@pytest.fixture
def work(tmp_path) -> Path:
    (tmp_path / ".git").mkdir()
    return tmp_path


def test_forty_partitions_run_on_a_local_cluster_with_records_and_logs(work):
    """dask-local:2: 40 partitions succeed; each attempt names its worker, host, PID and process group, and its
    log holds the child's own output, streamed back from the worker."""
    command = child_command("--sleep", "0.05")
    result = run_backfill(
        "--command",
        command,
        *DAYS,
        "--launcher",
        "dask-local:2",
        "--max-parallel",
        "4",
        *GUARD,
        "--output",
        "json",
        cwd=work,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    backfill = only_backfill(work)
    found = records(backfill)
    assert [r["status"] for r in found] == ["succeeded"] * 40
    workers = set()
    for record in found:
        attempt = record["attempts"][-1]
        assert attempt["launcher"] == "dask" and attempt["pid"] == attempt["pgid"]
        assert attempt["worker"].startswith("tcp://") and attempt["host"]
        workers.add(attempt["worker"])
        log = (backfill / attempt["log"]).read_text()
        assert f"start={record['start'].replace('Z', '.000000Z')}" in log
    assert len(workers) == 2
    shown = run_backfill("show", backfill.name, "--output", "json", "--limit", "40", cwd=work)
    for document in (json.loads(result.stdout), json.loads(shown.stdout)):
        for row, record in zip(document["partitions"], found, strict=True):
            attempt, kept = row["attempts"][-1], record["attempts"][-1]
            where = {
                key: attempt[key] for key in ("cluster", "worker", "host", "pgid", "pid", "pid_started", "pid_birth")
            }
            assert where == {key: kept[key] for key in where} and where["worker"].startswith("tcp://")


def test_a_failing_partition_is_retried_on_the_cluster(work):
    """--retries 1: a partition whose first attempt fails runs again and succeeds; both attempts are kept."""
    marker_dir = work / "first"
    marker_dir.mkdir()
    command = child_command("--fail-first-attempt", str(marker_dir))
    result = run_backfill(
        "--command",
        command,
        "--start-date",
        "2024-01-01",
        "--end-date",
        "2024-01-02",
        "--launcher",
        "dask-local:2",
        "--retries",
        "1",
        *GUARD,
        "--no-progress",
        cwd=work,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    for record in records(only_backfill(work)):
        assert [a["status"] for a in record["attempts"]] == ["failed", "succeeded"]


def test_without_the_extra_the_error_names_it(work, tmp_path):
    """Without Dask distributed installed: one line naming the extra to install, exit 2, nothing created."""
    blocker = tmp_path / "block"
    (blocker / "distributed").mkdir(parents=True)
    (blocker / "distributed" / "__init__.py").write_text("raise ImportError('not installed')\n")
    result = run_backfill(
        "--command",
        "true",
        "--start-date",
        "2024-01-01",
        "--end-date",
        "2024-01-02",
        "--launcher",
        "dask-local:2",
        *GUARD,
        cwd=work,
        env={"PYTHONPATH": str(blocker)},
    )
    assert result.returncode == 2
    assert "pip install 'backfill[dask]'" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize("value", ["dask-local:0", "dask-local:٣", "dask-local:", "dask-remote"])
def test_a_launcher_that_is_not_one_is_bad_input(work, value):
    """Launcher names are checked: dask-local needs 1 to 256 ASCII digits."""
    result = run_backfill(
        "--command",
        "true",
        "--start-date",
        "2024-01-01",
        "--end-date",
        "2024-01-02",
        "--launcher",
        value,
        *GUARD,
        cwd=work,
    )
    assert result.returncode == 2 and f"--launcher {value!r} is not a launcher" in result.stderr


def test_a_dead_worker_makes_its_attempt_lost_and_another_worker_runs_it(work, tmp_path):
    """SIGKILL of the worker process running an attempt: the attempt is lost, --retries runs it on the other
    worker, and no two children of the partition ever ran at once (a per-partition lock)."""
    exclusive = work / "exclusive"
    exclusive.mkdir()
    with external_cluster(tmp_path) as (address, _):
        process = subprocess.Popen(
            [
                *backfill_argv(),
                "--command",
                child_command("--sleep", "4", "--exclusive-dir", str(exclusive)),
                "--start-date",
                "2024-01-01",
                "--end-date",
                "2024-01-01",
                "--launcher",
                "dask",
                "--dask-scheduler",
                address,
                "--retries",
                "1",
                *GUARD,
                "--no-progress",
            ],
            cwd=work,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        [child] = running_children(work, 1)
        os.kill(psutil.Process(child).ppid(), signal.SIGKILL)  # the worker process whose task started it
        out, err = process.communicate(timeout=90)
        assert process.returncode == 0, out + err
        [record] = records(only_backfill(work))
        assert [a["status"] for a in record["attempts"]] == ["lost", "succeeded"]
        assert record["attempts"][0]["worker"] != record["attempts"][1]["worker"]
        assert not (exclusive / "OVERLAP").exists()


def test_a_killed_executor_leaves_no_remote_child_and_continue_completes(work, tmp_path):
    """SIGKILL of the executor: its children on the cluster stop themselves once its heartbeat is silent (within
    the grace); --continue then completes every partition, and no partition ever had two live children."""
    exclusive = work / "exclusive"
    exclusive.mkdir()
    env = {**os.environ, "BACKFILL_STOP_GRACE": "2", "NO_COLOR": "1"}
    with external_cluster(tmp_path) as (address, _):
        process = subprocess.Popen(
            [
                *backfill_argv(),
                "--command",
                child_command("--exclusive-dir", str(exclusive)),  # sleeps CHILD_SLEEP seconds
                "--start-date",
                "2024-01-01",
                "--end-date",
                "2024-01-03",
                "--launcher",
                "dask",
                "--dask-scheduler",
                address,
                "--max-parallel",
                "2",
                "--no-progress",
                *GUARD,
            ],
            cwd=work,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={**env, "CHILD_SLEEP": "30"},
        )
        pids = running_children(work, 2)
        process.kill()
        process.wait(30)
        killed_at = time.monotonic()
        while any(alive(pid) for pid in pids) and time.monotonic() < killed_at + 30:
            time.sleep(0.1)
        assert not any(alive(pid) for pid in pids)  # gone, without any executor to stop them
        resumed = subprocess.run(
            [*backfill_argv(), "--continue", only_backfill(work).name, "--no-progress"],
            cwd=work,
            env={**env, "CHILD_SLEEP": "0.1"},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
        assert [r["status"] for r in records(only_backfill(work))] == ["succeeded"] * 3
        assert not (exclusive / "OVERLAP").exists()


@contextmanager
def cluster_with_a_namespaced_worker(tmp_path: Path, mount: str) -> Iterator[str]:
    """A scheduler, one ordinary worker and one started in a mount namespace of its own after ``mount`` (a shell
    command) changed what it sees; their address, once both joined."""
    from distributed import Client

    schedule = tmp_path / "scheduler.json"
    env = {**os.environ, "DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES": "0"}
    dask = [sys.executable, "-m", "dask"]
    started = [
        subprocess.Popen(
            [*dask, "scheduler", "--scheduler-file", str(schedule), "--port", "0", "--dashboard-address", ":0"],
            env=env,
            stderr=subprocess.DEVNULL,
        ),
    ]
    try:
        wait_for(schedule.exists, timeout=60)
        worker = [*dask, "worker", "--scheduler-file", str(schedule), "--nthreads", "1", "--no-dashboard"]
        started.append(subprocess.Popen(worker, env=env, stderr=subprocess.DEVNULL))
        namespaced = f"{mount} && exec {' '.join(worker)}"
        started.append(subprocess.Popen(["unshare", "-m", "sh", "-c", namespaced], env=env, stderr=subprocess.DEVNULL))
        address = json.loads(schedule.read_text())["address"]
        with Client(address, timeout=30) as client:
            client.wait_for_workers(2, timeout=60)
        yield address
    finally:
        for process in reversed(started):
            process.terminate()
            process.wait(30)


def test_a_worker_that_cannot_see_the_pipeline_is_an_error_before_any_launch(tmp_path):
    """Two workers, one in a mount namespace where the repository is an empty tmpfs: the backfill refuses before
    launching anything, naming that worker (exit 2)."""
    from tests.builder import Repo

    repo = Repo(tmp_path / "repo")
    repo.sql("s.t", "SELECT 1 AS x", materialization={"type": "table"})
    with cluster_with_a_namespaced_worker(tmp_path, f"mount -t tmpfs none {repo.root}") as address:
        result = run_backfill(
            "p", "--start-date", "2024-01-01", "--end-date", "2024-01-02", "--launcher", "dask", "--dask-scheduler",
            address, *REASON, cwd=repo.root,
        )  # fmt: skip
    assert result.returncode == 2, result.stdout + result.stderr
    assert "cannot see" in result.stderr and "shared filesystem" in result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert not list((repo.root / "logs" / "backfills").glob("*/partitions/*.json"))


@pytest.mark.parametrize("drift", ["asset", "config"])
def test_a_worker_reading_another_version_of_the_pipeline_is_an_error_before_any_launch(tmp_path, drift):
    """One worker has its own checkout at the same path (a bind mount over the repository's, in a mount namespace
    of its own) where an asset's SQL, or ``.bruin.yml``'s connection, differs from what was judged: the backfill
    refuses before launching anything (exit 2), naming that worker and the file; nothing is written."""
    from tests.builder import Repo

    repo = Repo(tmp_path / "repo")
    repo.sql("s.t", "SELECT 1 AS x", materialization={"type": "table"})
    other = tmp_path / "other"
    if drift == "asset":
        shutil.copytree(repo.pipeline_dir, other)
        (other / "assets" / "s.t.sql").write_text(
            (other / "assets" / "s.t.sql").read_text().replace("1 AS x", "2 AS x")
        )
        mount, named = f"mount --bind {other} {repo.pipeline_dir}", "(assets/s.t.sql differ)"
    else:
        other.write_text((repo.root / ".bruin.yml").read_text().replace("warehouse.duckdb", "elsewhere.duckdb"))
        mount, named = f"mount --bind {other} {repo.root / '.bruin.yml'}", "(.bruin.yml's environment dev differ)"
    with cluster_with_a_namespaced_worker(tmp_path, mount) as address:
        result = run_backfill(
            "p", "--start-date", "2024-01-01", "--end-date", "2024-01-02", "--launcher", "dask", "--dask-scheduler",
            address, *REASON, cwd=repo.root,
        )  # fmt: skip
    assert result.returncode == 2, result.stdout + result.stderr
    assert "reads another version of the pipeline than was judged " + named in result.stderr
    assert "same repository at the same path on every worker" in result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert not list((repo.root / "logs" / "backfills").glob("*/partitions/*.json"))
    assert not (repo.root / "elsewhere.duckdb").exists() and not repo.database.exists()


def test_a_worker_clock_an_hour_ahead_does_not_take_the_executor_for_silent(work, tmp_path, wall_step):
    """The cluster's wall clock steps an hour ahead of the executor's while two children run: the heartbeat still
    changes, so no task stops its child (the old check compared the two hosts' clocks and stopped both within
    the 2 s grace); released, both finish and the run exits 0 with one attempt per partition."""
    clock, go = tmp_path / "clock", tmp_path / "go"
    clock.write_text("0\n")
    stepped = {"LD_PRELOAD": str(wall_step), "WALL_STEP_FILE": str(clock)}
    env = {**os.environ, "BACKFILL_STOP_GRACE": "2", "NO_COLOR": "1", "CHILD_WAIT_FOR": str(go)}
    with external_cluster(tmp_path, stepped) as (address, _):
        process = subprocess.Popen(
            [
                *backfill_argv(), "--command", child_command(), "--start-date", "2024-01-01", "--end-date",
                "2024-01-03", "--launcher", "dask", "--dask-scheduler", address, "--max-parallel", "2",
                "--no-progress", *GUARD,
            ],
            cwd=work, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        )  # fmt: skip
        try:
            pids = running_children(work, 2)
            clock.write_text("3600\n")
            time.sleep(8)  # deliberate: over twice the silence (2 s) plus the watch's slack, nothing may happen
            assert all(alive(pid) for pid in pids)
            go.touch()
            out, err = process.communicate(timeout=120)
        finally:
            kill_if_running(process)
    assert process.returncode == 0, out + err
    final = records(only_backfill(work))
    assert {r["status"] for r in final} == {"succeeded"} and all(len(r["attempts"]) == 1 for r in final)


def test_a_dead_worker_never_makes_the_scheduler_run_a_finished_attempt_again(work, tmp_path):
    """SIGKILL of one worker after many attempts finished on it: the scheduler recomputes lost results of futures
    a client still holds, so every future is let go once its result is taken (the scheduler keeps no finished
    one), and a task never starts a child for a run ID that already ran. Every child that started (a ledger) ran
    once, under an attempt that names it."""
    ledger = tmp_path / "began"
    with external_cluster(tmp_path) as (address, _):
        process = subprocess.Popen(
            [
                *backfill_argv(), "--command", child_command("--sleep", "0.3", "--began", str(ledger)),
                "--start-date", "2024-01-01", "--end-date", "2024-02-09", "--launcher", "dask", "--dask-scheduler",
                address, "--max-parallel", "2", "--retries", "1", *GUARD, "--no-progress",
            ],
            cwd=work, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            wait_for(lambda: ledger.exists() and len(ledger.read_text().splitlines()) >= 16, timeout=120)

            def kill_a_worker() -> bool:
                """SIGKILL the worker process of a running child (about half of the attempts ran there)."""
                running = [
                    r["attempts"][-1].get("pid") for r in records(only_backfill(work)) if r["status"] == "running"
                ]
                for pid in filter(None, running):
                    try:
                        os.kill(psutil.Process(pid).ppid(), signal.SIGKILL)
                        return True
                    except (psutil.Error, ProcessLookupError):
                        continue
                return False

            from distributed import Client

            with Client(address, set_as_default=False) as watcher:  # the tasks the scheduler still keeps
                kept = watcher.run_on_scheduler(lambda dask_scheduler: [str(key) for key in dask_scheduler.tasks])
            assert len([key for key in kept if "-p" in key]) <= 4, kept  # running ones, and one just ending each
            wait_for(kill_a_worker)
            out, err = process.communicate(timeout=180)
        finally:
            kill_if_running(process)
    assert process.returncode == 0, out + err
    began = [json.loads(line) for line in ledger.read_text().splitlines()]
    run_ids = [entry["run_id"] for entry in began]
    assert len(run_ids) == len(set(run_ids)), sorted(r for r in run_ids if run_ids.count(r) > 1)
    attempts = {a["run_id"]: a for r in records(only_backfill(work)) for a in r["attempts"]}
    assert all(attempts[entry["run_id"]]["pid"] == entry["pid"] for entry in began)


def test_a_task_run_again_for_a_run_id_whose_child_ran_starts_no_child(tmp_path):
    """The scheduler runs an attempt's task a second time (as it does for a result lost with its worker before the
    executor took it): the second run starts no child and returns RAN_ALREADY; the ledger holds one start."""
    from distributed import Client

    from engine.execute.dask_task import RAN_ALREADY, run_child
    from tests.backfills import CHILD

    ledger = tmp_path / "began"
    argv = [sys.executable, str(CHILD), "--partition", "p0", "--start", "2024-01-01", "--began", str(ledger)]
    env = {**os.environ, "BACKFILL_RUN_ID": "bf-p0-a1"}
    args = (argv, str(tmp_path), env, "bf-p0-a1", "bf-topic", "bf-beat", 2.0, 2.0, "bf", 1)
    with external_cluster(tmp_path) as (address, _), Client(address, set_as_default=False) as client:
        assert client.submit(run_child, *args, key="first", pure=False).result(timeout=60) == 0
        assert client.submit(run_child, *args, key="again", pure=False).result(timeout=60) == RAN_ALREADY
    assert len(ledger.read_text().splitlines()) == 1


def test_a_leftover_holding_the_childs_output_is_stopped_and_does_not_keep_its_attempt_waiting(work):
    """`sleep 600 &` in the child's shell holds its output open after the shell exits: the attempt ends with the
    shell (its output whole, exit 0) and the sleep is stopped, as on the local launchers, where it used to last as
    long as the sleep."""
    command = "sh -c 'sleep 600 & echo $! > left-{start_date}; echo done'"
    result = run_backfill(
        "--command", command, "--start-date", "2024-01-01", "--end-date", "2024-01-02", "--launcher", "dask-local:2",
        *GUARD, "--no-progress", cwd=work, timeout=120,
    )  # fmt: skip
    left = [int(path.read_text()) for path in sorted(work.glob("left-*"))]
    try:
        assert result.returncode == 0, result.stdout + result.stderr
        assert len(left) == 2
        assert not [pid for pid in left if alive(pid)]
        logs = sorted((only_backfill(work) / "children").glob("*.log"))
        assert [log.read_text() for log in logs] == ["done\n", "done\n"]
    finally:
        for pid in left:
            with contextlib.suppress(psutil.NoSuchProcess):
                process = psutil.Process(pid)
                if process.cmdline() == ["sleep", "600"]:  # still the leftover, not a process that reused its PID
                    process.kill()


@pytest.mark.parametrize(
    ("greeting", "says"),
    [
        (b"", "the Dask scheduler at {} did not answer within 3 s"),
        (
            b"SSH-2.0-OpenSSH_8.9p1\r\n",
            "{} did not answer as a Dask scheduler (MemoryError reading its handshake): another service's port?",
        ),
    ],
)
def test_a_scheduler_address_that_never_answers_is_an_error_within_the_connect_timeout(work, greeting, says):
    """A port that accepts connections and never answers (a proxy without its backend): Dask's client waited for its
    handshake for ever, and the backfill with it, printing nothing. An SSH server's banner, read as a Dask frame's
    length, was a MemoryError and a traceback. Each is an error line within Dask's connect timeout (2 s here) and
    a second, exit 1, and the saved backfill stays resumable."""
    with silent_port(greeting=greeting) as address:
        result = subprocess.run(
            [*backfill_argv(), *GUARD, "--command", "true", "--start-date", "2024-01-01", "--end-date", "2024-01-02",
             "--launcher", "dask", "--dask-scheduler", address, "--no-progress"],
            cwd=work, capture_output=True, text=True, timeout=60,
            env={**os.environ, "NO_COLOR": "1", "DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT": "2s"},
        )  # fmt: skip
    assert result.returncode == 1, result.stdout + result.stderr
    [line] = result.stderr.splitlines()
    assert line.startswith("backfill: error: " + says.format(address)), line
    assert [r["status"] for r in records(only_backfill(work))] == []


def test_an_address_dask_cannot_use_is_refused_before_anything_is_saved(work):
    """``localhost`` (no scheme, no port), the dashboard's ``http://`` port: Dask took them and failed after the
    backfill was saved, with a traceback. Exit 2 naming the option, and no backfill saved."""
    for address in ("localhost", "http://127.0.0.1:8787"):
        result = run_backfill(*GUARD, "--command", "true", "--start-date", "2024-01-01", "--end-date", "2024-01-02",
                              "--launcher", "dask", "--dask-scheduler", address, "--no-progress", cwd=work)  # fmt: skip
        assert result.returncode == 2, result.stdout + result.stderr
        assert result.stderr == (
            f"backfill: error: --dask-scheduler {address!r} is not a Dask scheduler's address: give tcp://HOST:PORT "
            "(or tls://, ws://, wss://), e.g. tcp://scheduler:8786\n"
        )
        assert not (work / "logs").exists()


def test_a_tls_address_without_dask_s_tls_settings_says_which_settings(work):
    """``tls://`` with no certificates configured: Dask's TypeError was a traceback; it is exit 2 naming the
    settings."""
    result = run_backfill(*GUARD, "--command", "true", "--start-date", "2024-01-01", "--end-date", "2024-01-02",
                          "--launcher", "dask", "--dask-scheduler", "tls://127.0.0.1:1", "--no-progress",
                          cwd=work)  # fmt: skip
    assert result.returncode == 2, result.stdout + result.stderr
    [line] = result.stderr.splitlines()
    assert line == (
        "backfill: error: tls://127.0.0.1:1 needs Dask's TLS settings: distributed.comm.tls.ca-file, .client.cert and "
        ".client.key (or the DASK_DISTRIBUTED__COMM__TLS__… variables)"
    ), line
