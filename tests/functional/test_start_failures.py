"""A program that cannot start: refused at planning (exit 2), and under --on-failure at run time."""

from __future__ import annotations

import pytest

from tests.backfills import records, state_dirs
from tests.conftest import run_backfill
from tests.guard_flags import GUARD

TEN_DAYS = ("--start-date", "2024-01-01", "--end-date", "2024-01-10")


@pytest.mark.parametrize("dry_run", [True, False])
def test_a_missing_program_is_bad_input_before_anything_is_saved(work, home, dry_run):
    """--command naming a program not on PATH: one line naming it, exit 2, no backfill saved (dry run or not)."""
    extra = ("--dry-run",) if dry_run else ()
    result = run_backfill(*GUARD, "--command", "etl-that-does-not-exist {start}", *TEN_DAYS, *extra, cwd=work, env=home)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "backfill: error: --command program 'etl-that-does-not-exist' is not on PATH: give its path, "
        "or check the spelling and PATH"
    ]
    assert not (work / "logs" / "backfills").exists() or not list((work / "logs" / "backfills").iterdir())


def test_a_program_that_is_not_executable_is_bad_input(work, home):
    """A path to a file without the execute bit is refused with what to do about it."""
    (work / "etl.sh").write_text("#!/bin/sh\nexit 0\n")
    result = run_backfill("--command", "./etl.sh {start}", *TEN_DAYS, "--dry-run", cwd=work, env=home)
    assert result.returncode == 2
    assert "--command program './etl.sh' is not executable" in result.stderr


@pytest.mark.parametrize(("policy", "attempted"), [("stop", 1), ("fail-fast", 1), ("continue", 10)])
def test_start_failures_honour_the_failure_policy(work, home, policy, attempted):
    """A program chosen per partition (``./etl-{start_date}.sh``) cannot be checked before it is substituted;
    none exists: under stop and fail-fast one partition fails to start and the rest stay queued; under
    continue each one is tried."""
    result = run_backfill(
        *GUARD, "--command", "./etl-{start_date}.sh {start}", *TEN_DAYS, "--on-failure", policy, cwd=work, env=home
    )
    assert result.returncode == 1, result.stdout + result.stderr
    [backfill] = state_dirs(work / "logs" / "backfills")
    started = [r for r in records(backfill) if any("cannot start" in (a["error"] or "") for a in r["attempts"])]
    assert len(started) == attempted
    assert "cannot start './etl-2024-01-01.sh'" in started[0]["attempts"][-1]["error"]
    queued = 9 if policy != "continue" else 0
    assert f"{queued} queued" in result.stdout if queued else "queued" not in result.stdout.split("partitions")[1]


def test_a_program_gone_before_a_continue_is_refused_by_the_preflight(work, home):
    """The program vanishes after the first run: the --continue is refused (exit 3) by target_valid, naming
    it, and nothing is attempted again."""
    script = work / "etl.sh"
    script.write_text("#!/bin/sh\nexit 1\n")
    script.chmod(0o755)
    assert run_backfill(*GUARD, "--command", "./etl.sh {start}", *TEN_DAYS, cwd=work, env=home).returncode == 1
    script.unlink()
    [backfill] = state_dirs(work / "logs" / "backfills")
    before = records(backfill)
    result = run_backfill("--continue", backfill.name, cwd=work, env=home)
    assert result.returncode == 3, result.stdout + result.stderr
    assert "target_valid: the program './etl.sh' does not exist or is not executable" in result.stderr
    assert records(backfill) == before


def test_a_moved_repository_is_refused_on_continue_before_anything_runs(work, home, tmp_path):
    """The repository renamed after a failed run: --continue (dry run or not) names the directory the backfill
    runs in, exit 2, and starts nothing; before, every partition failed with "cannot start 'sh'"."""
    (work / "job.sh").write_text("exit 1\n")
    first = run_backfill(*GUARD, "--command", "sh job.sh", *TEN_DAYS, cwd=work, env=home)
    assert first.returncode == 1
    moved = work.rename(tmp_path / "moved")
    [backfill] = state_dirs(moved / "logs" / "backfills")
    before = records(backfill)
    for extra in ((), ("--dry-run",)):
        resumed = run_backfill("--continue", backfill.name, *extra, cwd=moved, env=home)
        assert resumed.returncode == 2
        assert resumed.stderr.strip().splitlines() == [
            f"backfill: error: backfill {backfill.name} runs its children in '{work}', which is no longer a "
            "directory (moved, renamed or deleted): a backfill runs where it was started; put the directory back "
            "there, or start a new backfill from where it is now"
        ]
    assert records(backfill) == before
