"""--verify-command runs as a second child of its attempt: stopped, timed and waited for like the first, while the
executor goes on starting and ending other partitions. Each test is a verification that gets it wrong."""

from __future__ import annotations

import contextlib
import signal
from pathlib import Path

import psutil
import pytest

from tests.backfills import kill_if_running, records, start_background, state_dirs, wait_for
from tests.conftest import run_backfill
from tests.guard_flags import GUARD

# A verification that says it started (with its PID), then never ends on its own.
STUCK = "sh -c 'echo $$ > {start_date}.verifying; exec sleep 600'"


def pid_in(path: Path) -> int:
    return int(path.read_text())


@pytest.fixture(autouse=True)
def no_verification_left(work):
    """Whatever a failing test left of a stuck verification is killed at its end."""
    yield
    for marker in work.glob("*.verifying"):
        with contextlib.suppress(psutil.NoSuchProcess, ValueError):
            process = psutil.Process(int(marker.read_text()))
            if process.cmdline() == ["sleep", "600"]:  # still the verification, not a process that reused its PID
                process.kill()


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_sigterm_stops_a_verify_command_within_the_grace(work, home):
    """SIGTERM while a partition's verification runs: the verification is stopped (it does not end on its own), the
    backfill exits 130 and the partition is cancelled, resumable; it used to wait for the verification to end."""
    env = {**home, "BACKFILL_STOP_GRACE": "2"}
    process = start_background(
        "--command", "true", "--start-date", "2024-01-01", "--end-date", "2024-01-01", *GUARD,
        "--verify-command", STUCK, "--no-progress", cwd=work, env=env,
    )  # fmt: skip
    try:
        marker = wait_for(lambda: (work / "2024-01-01.verifying").exists() and work / "2024-01-01.verifying")
        verifying = pid_in(marker)
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=60)
    finally:
        kill_if_running(process)
    assert process.returncode == 130
    assert gone(verifying)
    [backfill] = state_dirs(work / "logs" / "backfills")
    [record] = records(backfill)
    assert record["status"] == "cancelled"
    assert record["attempts"][-1]["exit_code"] == 0  # the command's own, not its verification's


def test_the_partition_timeout_bounds_its_verification(work, home):
    """--timeout 2s: a verification that never ends fails its partition "timed out after 2s", and is stopped."""
    result = run_backfill(
        "--command", "true", "--start-date", "2024-01-01", "--end-date", "2024-01-01", *GUARD,
        "--verify-command", STUCK, "--timeout", "2s", "--no-progress", cwd=work,
        env={**home, "BACKFILL_STOP_GRACE": "2"},
    )  # fmt: skip
    assert result.returncode == 1, result.stderr
    [backfill] = state_dirs(work / "logs" / "backfills")
    [record] = records(backfill)
    assert record["status"] == "failed"
    assert record["attempts"][-1]["error"] == "timed out after 2s"
    assert gone(pid_in(work / "2024-01-01.verifying"))


# The third day's child writes a file; the first day's verification waits for it (up to a minute, a hang guard).
WAITS_FOR_THE_THIRD = (
    "sh -c 'test {start_date} != 2024-01-01 && exit 0; i=0; while [ ! -e 2024-01-03.ran ] && [ $i -lt 600 ]; "
    "do sleep 0.1; i=$((i+1)); done; test -e 2024-01-03.ran'"
)


def test_other_partitions_start_and_end_while_one_is_verified(work, home):
    """--max-parallel 2 over three days: the first day's verification waits for the third day's child, which can
    start only once the second has ended and been reaped. It passes: the executor goes on while a verification
    runs (it used to wait for it, and the verification for the third day, which never came)."""
    result = run_backfill(
        "--command", "touch {start_date}.ran", "--start-date", "2024-01-01", "--end-date", "2024-01-03", *GUARD,
        "--max-parallel", "2", "--verify-command", WAITS_FOR_THE_THIRD, "--no-progress", cwd=work, env=home,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    [backfill] = state_dirs(work / "logs" / "backfills")
    verified = [r["attempts"][-1]["verification"] for r in records(backfill)]
    assert [v["status"] for v in verified] == ["verified", "verified", "verified"]


def test_a_verify_command_that_cannot_start_fails_its_partition(work, home):
    """A verification whose program does not exist: the partition fails "cannot start" and nothing after it
    starts; the command's own exit code (0) stays on its attempt."""
    result = run_backfill(
        "--command", "true", "--start-date", "2024-01-01", "--end-date", "2024-01-03", *GUARD, "--max-parallel", "1",
        "--verify-command", str(work / "nowhere") + " {start_date}", "--no-progress", cwd=work, env=home,
    )  # fmt: skip
    assert result.returncode == 1, result.stderr
    [backfill] = state_dirs(work / "logs" / "backfills")
    [record] = records(backfill)
    attempt = record["attempts"][-1]
    assert record["status"] == "failed"
    assert attempt["error"] == "verification: --verify-command cannot start: No such file or directory"
    assert attempt["exit_code"] == 0
