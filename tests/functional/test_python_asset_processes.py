"""A Python asset's script runs in a session of its own, out of reach of the executor's signals to the partition's
child: the run must stop it, and what it leaves running, itself. Each test is the script that gets it wrong."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from pathlib import Path

import psutil
import pytest

from tests.backfills import kill_if_running, records, start_background, state_dirs, wait_for
from tests.builder import Repo
from tests.conftest import backfill_argv, run_backfill
from tests.guard_flags import REASON

ONE_DAY = ("--start-date", "2024-01-01", "--end-date", "2024-01-01")
THREE_DAYS = ("--start-date", "2024-01-01", "--end-date", "2024-01-03")
LAUNCHERS = pytest.mark.parametrize("launcher", ["exec", "warm"])

# The body of an asset that writes each process it is made of to PIDS (one line each: PID and start time), so the
# test can tell afterwards whether any of them still runs. ``{setup}`` runs first, ``{then}`` last.
BODY = """import os, pathlib, psutil, signal, subprocess, sys, time
pids = pathlib.Path(os.environ["PIDS"])
def note(pid):
    with pids.open("a") as file:
        file.write(f"{{pid}} {{psutil.Process(pid).create_time()}}\\n")
{setup}
note(os.getpid())
{then}
"""
IGNORE_STOPS = "signal.signal(signal.SIGTERM, signal.SIG_IGN); signal.signal(signal.SIGINT, signal.SIG_IGN)"
LEAVE_SLEEP = 'note(subprocess.Popen(["sleep", "600"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).pid)'
LEAVE_SLEEP_ON_OUR_OUTPUT = 'note(subprocess.Popen(["sleep", "600"]).pid)'  # it holds the script's stdout open
STARTED = 'pathlib.Path(os.environ["PIDS"] + ".started").write_text("x")'
WAIT = "time.sleep(600)"


def repo_with(root: Path, *, setup: str = "", then: str = "") -> Repo:
    repo = Repo(root)
    repo.python("job", BODY.format(setup=setup, then=then))
    return repo


def still_running(pids_file: Path) -> list[int]:
    """The processes the asset noted that still run (the same PID and start time, not a zombie)."""
    running = []
    for line in pids_file.read_text().splitlines():
        pid, created = line.split()
        try:
            process = psutil.Process(int(pid))
            if process.create_time() == float(created) and process.status() != psutil.STATUS_ZOMBIE:
                running.append(int(pid))
        except psutil.NoSuchProcess:
            continue
    return running


def noted(pids_file: Path) -> int:
    return len(pids_file.read_text().splitlines()) if pids_file.exists() else 0


@pytest.fixture
def cleanup():
    """Whatever a failing test left running is killed at its end."""
    files: list[Path] = []
    yield files
    for pids_file in files:
        if pids_file.exists():
            for pid in still_running(pids_file):
                psutil.Process(pid).kill()


@LAUNCHERS
def test_what_a_python_asset_leaves_running_is_stopped_when_its_script_ends(tmp_path, home, launcher, cleanup):
    """A script that starts `sleep 600` and exits 0: each partition's sleep is stopped before its asset ends, and
    its log says so; nothing is left when the backfill ends."""
    repo = repo_with(tmp_path / "repo", then=LEAVE_SLEEP)
    pids = tmp_path / "pids"
    cleanup.append(pids)
    result = run_backfill(
        *REASON,
        "p",
        *THREE_DAYS,
        "--launcher",
        launcher,
        "--no-progress",
        cwd=repo.root,
        env={**home, "PIDS": str(pids)},
    )
    assert result.returncode == 0, result.stderr
    assert noted(pids) == 6  # three scripts, three sleeps
    assert still_running(pids) == []
    [backfill] = state_dirs(repo.root / "logs" / "backfills")
    logs = sorted((backfill / "children").glob("*.log"))
    assert len(logs) == 3
    for log in logs:
        assert "[job] stopped 1 process the script left running when it ended (PID " in log.read_text()


def test_a_leftover_holding_the_scripts_output_does_not_keep_its_asset_waiting(tmp_path, home, cleanup):
    """The sleep inherits the script's stdout, so the pipe the run reads stays open after the script exits: the
    asset still ends when its script does (the sleep stopped), not when the sleep would have."""
    repo = repo_with(tmp_path / "repo", then=LEAVE_SLEEP_ON_OUR_OUTPUT)
    pids = tmp_path / "pids"
    cleanup.append(pids)
    result = run_backfill(
        *REASON, "p", *ONE_DAY, "--no-progress", cwd=repo.root, env={**home, "PIDS": str(pids)}, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert noted(pids) == 2
    assert still_running(pids) == []


def stop_mid_script(repo: Repo, home: dict, pids: Path, launcher: str, grace: str) -> tuple[int, Path]:
    """Start a one-day backfill, wait until its script has started, SIGINT it; its exit code and state directory."""
    env = {**home, "PIDS": str(pids), "BACKFILL_STOP_GRACE": grace}
    process = start_background(*REASON, "p", *ONE_DAY, "--launcher", launcher, "--no-progress", cwd=repo.root, env=env)
    try:
        wait_for(lambda: Path(f"{pids}.started").exists(), timeout=60)
        process.send_signal(signal.SIGINT)
        process.communicate(timeout=120)
    finally:
        kill_if_running(process)
    [backfill] = state_dirs(repo.root / "logs" / "backfills")
    return process.returncode, backfill


def stopped_with_nothing_left(code: int, backfill: Path, pids: Path, *, processes: int) -> None:
    """The backfill ended 130 with its partition cancelled, and none of the asset's processes runs."""
    assert code == 130
    assert [r["status"] for r in records(backfill)] == ["cancelled"]
    assert noted(pids) == processes
    assert still_running(pids) == []


# A script that stops when asked: SIGTERM writes PIDS.asked and ends it.
POLITE = """def asked(signum, frame):
    pathlib.Path(os.environ["PIDS"] + ".asked").write_text(signal.Signals(signum).name)
    sys.exit(0)
signal.signal(signal.SIGTERM, asked)"""


@LAUNCHERS
def test_ctrl_c_asks_a_python_assets_script_to_stop_and_waits_for_it(tmp_path, home, launcher, cleanup):
    """Ctrl+C while a script runs (it has started a sleep): the backfill ends 130, the partition cancelled; the
    script was sent SIGTERM, not killed, and neither it nor its sleep runs any more."""
    repo = repo_with(tmp_path / "repo", setup=POLITE, then=f"{LEAVE_SLEEP}\n{STARTED}\n{WAIT}")
    pids = tmp_path / "pids"
    cleanup.append(pids)
    stopped_with_nothing_left(*stop_mid_script(repo, home, pids, launcher, grace="30"), pids, processes=2)
    assert Path(f"{pids}.asked").read_text() == "SIGTERM"


@LAUNCHERS
def test_a_script_and_its_leftover_ignoring_every_stop_signal_are_killed_within_the_grace(
    tmp_path, home, launcher, cleanup
):
    """A script that ignores SIGINT and SIGTERM and has started a sleep that ignores them too (dispositions are
    inherited): both are killed before the executor's grace (2 s) runs out, which would SIGKILL only the partition's
    own process and leave them."""
    repo = repo_with(tmp_path / "repo", setup=IGNORE_STOPS, then=f"{LEAVE_SLEEP}\n{STARTED}\n{WAIT}")
    pids = tmp_path / "pids"
    cleanup.append(pids)
    stopped_with_nothing_left(*stop_mid_script(repo, home, pids, launcher, grace="2"), pids, processes=2)


# The first attempt ignores every stop and waits; the second says whether the first's script still runs.
RETRY_CHECK = """first = pathlib.Path(os.environ["PIDS"] + ".first")
if os.environ["BACKFILL_RUN_ID"].endswith("-a1"):
    first.write_text(f"{os.getpid()} {psutil.Process().create_time()}")
    signal.signal(signal.SIGTERM, signal.SIG_IGN); signal.signal(signal.SIGINT, signal.SIG_IGN)
    note(subprocess.Popen(["sleep", "600"], stdout=subprocess.DEVNULL).pid)
    time.sleep(600)
pid, created = first.read_text().split()
try:
    beside = psutil.Process(int(pid)).create_time() == float(created) and psutil.Process(int(pid)).status() != "zombie"
except psutil.NoSuchProcess:
    beside = False
print("the first attempt's script runs beside this one" if beside else "alone")
sys.exit(3 if beside else 0)
"""


@LAUNCHERS
def test_a_retry_after_a_timeout_never_runs_beside_the_first_attempts_script(tmp_path, home, launcher, cleanup):
    """--timeout 2s --retries 1: the first attempt's script ignores the stop; by the time the second attempt runs,
    it and what it started are gone (never two live children of one partition)."""
    repo = repo_with(tmp_path / "repo", then=RETRY_CHECK)
    pids = tmp_path / "pids"
    cleanup.append(pids)
    env = {**home, "PIDS": str(pids), "BACKFILL_STOP_GRACE": "2"}
    result = run_backfill(
        *REASON, "p", *ONE_DAY, "--timeout", "2s", "--retries", "1", "--launcher", launcher, "--no-progress",
        cwd=repo.root, env=env,
    )  # fmt: skip
    [backfill] = state_dirs(repo.root / "logs" / "backfills")
    [record] = records(backfill)
    assert [a["status"] for a in record["attempts"]] == ["failed", "succeeded"], result.stderr
    assert "alone" in (backfill / "children" / f"{record['attempts'][1]['run_id']}.log").read_text()
    assert still_running(pids) == []


def test_a_killed_run_takes_its_script_with_it(tmp_path, home, cleanup):
    """`backfill run` killed with SIGKILL (nothing of it can act): its script dies with it (the parent-death
    signal), where before it ran on in its own session."""
    repo = repo_with(tmp_path / "repo", then=f"{STARTED}\n{WAIT}")
    pids = tmp_path / "pids"
    cleanup.append(pids)
    env = {**os.environ, **home, "PIDS": str(pids), "NO_COLOR": "1"}
    run = subprocess.Popen(
        [*backfill_argv(), "run", "p", "--start-date", "2024-01-01", "--end-date", "2024-01-01"],
        cwd=repo.root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        wait_for(lambda: Path(f"{pids}.started").exists(), timeout=60)
        [script] = [int(line.split()[0]) for line in pids.read_text().splitlines()]
        run.kill()
        run.wait()
        with contextlib.suppress(psutil.NoSuchProcess):
            psutil.Process(script).wait(timeout=30)  # raises TimeoutExpired if it outlives its run
    finally:
        kill_if_running(run)
    assert still_running(pids) == []
