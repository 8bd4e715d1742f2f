"""Many children at once under a low soft open-files limit (a desktop's default 1024, scaled down): the real
command in a process whose limit is set as a shell's ``ulimit -Sn`` would set it."""

from __future__ import annotations

import os
import resource
import subprocess

from tests.backfills import records, state_dirs, wait_for
from tests.conftest import backfill_argv
from tests.guard_flags import GUARD


def _low_soft_limit() -> None:
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (40, hard))


def test_a_low_soft_open_files_limit_is_raised_for_the_children_run_at_once(work, home):
    """40 children of `sleep 1` at once with a soft limit of 40 (the hard one higher): the partition started
    past the limit failed "cannot start 'sleep': Too many open files" and the backfill stopped, exit 1. The
    executor now raises its soft limit within the hard one as far as its children need: every partition
    succeeds, exit 0."""
    result = subprocess.run(
        [*backfill_argv(), *GUARD, "--command", "sleep 1", "--start-date", "2024-01-01", "--end-date", "2024-02-09",
         "--max-parallel", "40", "--no-progress"],
        cwd=work, env={**os.environ, **home}, capture_output=True, text=True, timeout=120, preexec_fn=_low_soft_limit,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    [backfill] = state_dirs(work / "logs" / "backfills")
    assert [r["status"] for r in records(backfill)] == ["succeeded"] * 40


def test_a_live_raise_of_max_parallel_makes_room_first(work, home):
    """The same limit, one child at a time, then `backfill set --max-parallel 70` while it runs: the room made at
    the start (for one child) is too little for 70, so the executor makes room again before starting more, and
    every partition succeeds."""
    environment = {**os.environ, **home}
    running = subprocess.Popen(
        [*backfill_argv(), *GUARD, "--command", "sleep 1", "--start-date", "2024-01-01", "--end-date", "2024-03-30",
         "--max-parallel", "1", "--no-progress"],
        cwd=work, env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=_low_soft_limit,
    )  # fmt: skip
    try:
        [backfill] = wait_for(lambda: state_dirs(work / "logs" / "backfills") or None, timeout=60)
        wait_for(lambda: any(r["status"] == "running" for r in records(backfill)), timeout=60)
        raised = subprocess.run(
            [*backfill_argv(), "set", backfill.name, "--max-parallel", "70", "--reason", "room"],
            cwd=work, env=environment, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert raised.returncode == 0, raised.stdout + raised.stderr
        out, err = running.communicate(timeout=120)
    finally:
        running.kill()
    assert running.returncode == 0, out + err
    assert [r["status"] for r in records(backfill)] == ["succeeded"] * 90
