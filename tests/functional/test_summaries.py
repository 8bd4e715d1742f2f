"""The final summary describes the whole backfill: failures with reasons, exact commands, counts on disk."""

from __future__ import annotations

import re
import shlex
import sys

from tests.backfills import records, state_dirs
from tests.conftest import run_backfill
from tests.guard_flags import GUARD, REASON

FAIL_ALL = shlex.join(
    [sys.executable, "-c", "import sys; print('no data for', sys.argv[1][:10]); sys.exit(4)", "{start}"]
)


def test_the_summary_lists_the_first_ten_failures_with_reasons_and_the_rerun_command(work, home):
    """12 failures: the summary names the first 10 (index, start, reason), counts the rest with the show
    command for them, and prints the exact --continue … --rerun failed command."""
    result = run_backfill(
        *GUARD,
        "--command",
        FAIL_ALL,
        "--start-date",
        "2024-01-01",
        "--end-date",
        "2024-01-12",
        "--on-failure",
        "continue",
        cwd=work,
        env=home,
    )
    assert result.returncode == 1
    [backfill] = state_dirs(work / "logs" / "backfills")
    out = result.stdout
    assert f"backfill {backfill.name} failed after" in out
    assert "  failed      12:" in out
    listed = re.findall(r"^\s+(\d+)  (2024-01-\d\dT00:00:00Z)  no data for (2024-01-\d\d)$", out, re.M)
    assert [int(i) for i, _, _ in listed] == list(range(10))
    assert all(start[:10] == day for _, start, day in listed)
    assert f"… and 2 more: backfill show {backfill.name} --status failed" in out
    assert f"  rerun       backfill --continue {backfill.name} --rerun failed" in out
    assert f"  resume      backfill --continue {backfill.name}" in out


def test_a_partial_continue_that_fails_again_reports_the_whole_backfill(work, home):
    """--continue --ids of the failed partition, failing again: 'failed', the counts on disk (4 still queued),
    what this run did, and both the resume and rerun-failed commands."""
    first = run_backfill(
        *GUARD, "--command", "false", "--start-date", "2024-01-01", "--end-date", "2024-01-05", cwd=work, env=home
    )
    assert first.returncode == 1  # stops after the first failure: 4 queued
    [backfill] = state_dirs(work / "logs" / "backfills")
    [failed] = [r for r in records(backfill) if r["status"] == "failed"]
    again = run_backfill(*REASON, "--continue", backfill.name, "--ids", failed["id"][:10], cwd=work, env=home)
    assert again.returncode == 1
    assert f"backfill {backfill.name} failed after" in again.stdout
    assert "partitions  5: 4 queued, 1 failed" in again.stdout
    assert "this run    1 of 5 partitions failed (1 failed)" in again.stdout
    assert f"  resume      backfill --continue {backfill.name}" in again.stdout
    assert f"  rerun       backfill --continue {backfill.name} --rerun failed" in again.stdout


def test_a_successful_partial_run_is_incomplete_with_exit_0(work, home):
    """--continue --ids of one queued partition that succeeds: exit 0, yet the summary says the backfill is
    incomplete with 3 queued and shows how to resume."""
    marker = work / "fail-everything"
    marker.write_text("on")
    child = shlex.join([sys.executable, "-c", f"import os, sys; sys.exit(1 if os.path.exists({str(marker)!r}) else 0)"])
    first = run_backfill(
        *GUARD, "--command", child, "--start-date", "2024-01-01", "--end-date", "2024-01-04", cwd=work, env=home
    )
    assert first.returncode == 1
    marker.unlink()
    [backfill] = state_dirs(work / "logs" / "backfills")
    [failed] = [r for r in records(backfill) if r["status"] == "failed"]
    result = run_backfill(*REASON, "--continue", backfill.name, "--ids", failed["id"][:10], cwd=work, env=home)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"backfill {backfill.name} incomplete after" in result.stdout
    assert "partitions  4: 3 queued, 1 succeeded" in result.stdout
    assert "this run    1 of 4 partitions succeeded" in result.stdout
    assert f"  resume      backfill --continue {backfill.name}" in result.stdout
    assert "succeeded after" not in result.stdout
