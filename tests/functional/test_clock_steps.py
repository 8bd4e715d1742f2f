"""A wall-clock step mid-run (``tests/native/wall_step.c``, preloaded, moves the wall clock of the executor, its
children and a reconcile; the monotonic and boot clocks go on, as under a real step): the backfill is not fenced, a
reconcile on the same host finds its lease live, and every duration is what really elapsed.

libfaketime was tried first: with its monotonic clock left alone, Python's ``time.sleep`` fails there with EINVAL."""

from __future__ import annotations

import time

import orjson
import pytest

from tests.backfills import (
    child_command,
    child_running,
    kill_if_running,
    records,
    start_background,
    state_dirs,
    wait_for,
)
from tests.conftest import run_backfill
from tests.guard_flags import GUARD

PLAN = ("--command", child_command(), "--start-date", "2024-01-01", "--end-date", "2024-01-04")
STEPS = {"+1h": 3_600, "+1d": 86_400, "-1h": -3_600}


@pytest.mark.parametrize("step", sorted(STEPS))
def test_a_wall_clock_step_mid_run_fences_nothing_and_no_duration_takes_it_in(work, home, tmp_path, wall_step, step):
    """Two children running under a 30 s lease, then the wall clock steps: a reconcile at once (the lease not yet
    renewed) says the lease is held; the children finish, the run exits 0 with every partition succeeded at its
    first attempt, and no duration is negative or the step's size."""
    clock, go = tmp_path / "clock", tmp_path / "go"
    clock.write_text("0\n")
    env = {
        **home,
        "LD_PRELOAD": str(wall_step),
        "WALL_STEP_FILE": str(clock),
        "CHILD_WAIT_FOR": str(go),
        "BACKFILL_LEASE_SECONDS": "30",
        "BACKFILL_LEASE_RENEW_SECONDS": "10",
    }
    process = start_background(*GUARD, *PLAN, "--max-parallel", "2", "--timeout", "30m", cwd=work, env=env)
    try:
        backfill = wait_for(lambda: (state_dirs(work / "logs" / "backfills") or [None])[0])
        wait_for(lambda: len([r for r in records(backfill) if child_running(r)]) == 2)
        clock.write_text(f"{STEPS[step]}\n")
        seen = run_backfill("reconcile", backfill.name, cwd=work, env=env)
        assert seen.returncode == 0 and "holds its lease until" in seen.stdout, seen.stdout + seen.stderr
        go.touch()
        out, err = process.communicate(timeout=120)
    finally:
        kill_if_running(process)
    assert process.returncode == 0, out + err
    assert "lease" not in out + err
    final = records(backfill)
    assert {r["status"] for r in final} == {"succeeded"}
    assert all(len(r["attempts"]) == 1 for r in final)
    durations = [r["attempts"][0]["duration"] for r in final]
    assert all(0 <= d < 600 for d in durations), durations
    lease = orjson.loads((backfill / "lease.json").read_bytes())
    assert lease["note"] == "ended" and abs(lease["expires_at"] - (time.time() + STEPS[step])) < 600
