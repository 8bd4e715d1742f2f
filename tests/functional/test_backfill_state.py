"""The state store and resume: strict reading, JSON output, dry-run resume, .gitignore, permissions, inputs."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import orjson
import pytest

from tests.backfills import child_command, records, rewrite, state_dirs, statuses
from tests.conftest import run_backfill
from tests.guard_flags import GUARD, REASON

SIX_DAYS = ("--start-date", "2024-01-01", "--end-date", "2024-01-06")


def finished_backfill(work: Path, home, *extra: str) -> Path:
    """A backfill where 2024-01-03 failed and the others succeeded (on-failure continue)."""
    run_backfill(
        *GUARD,
        "--command",
        child_command("--fail-on", "2024-01-03"),
        *SIX_DAYS,
        "--on-failure",
        "continue",
        *extra,
        cwd=work,
        env=home,
    )
    [backfill] = state_dirs(work / "logs" / "backfills")
    return backfill


def test_corrupt_partition_file_is_named_and_nothing_is_touched(work, home):
    """A partition file that is not JSON stops --continue with exit 5 naming it; no file changes."""
    backfill = finished_backfill(work, home)
    victim = backfill / "partitions" / f"{records(backfill)[1]['id']}.json"
    rewrite(victim, "{ not json")
    before = {p: p.read_bytes() for p in (backfill / "partitions").iterdir()}
    result = run_backfill("--continue", backfill.name, cwd=work, env=home)
    assert result.returncode == 5
    assert f"partition file {victim} is not valid JSON" in result.stderr
    assert len(result.stderr.splitlines()) == 1 and "Traceback" not in result.stderr
    assert {p: p.read_bytes() for p in (backfill / "partitions").iterdir()} == before


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda r: {**r, "index": 4}, "does not belong to this backfill's plan"),
        (lambda r: {**r, "index": 99}, "has index 99, outside this backfill's plan of 6"),
        (lambda r: {**r, "status": "exploded"}, "has unknown status 'exploded'"),
        (lambda r: {k: v for k, v in r.items() if k != "start_us"}, "lacks the field 'start_us'"),
    ],
)
def test_foreign_or_unknown_partition_files_are_errors(work, home, change, message):
    """Files that do not belong to the plan, have an unknown status or miss fields are named in the error."""
    backfill = finished_backfill(work, home)
    path = backfill / "partitions" / f"{records(backfill)[0]['id']}.json"
    rewrite(path, orjson.dumps(change(orjson.loads(path.read_bytes()))))
    result = run_backfill("--continue", backfill.name, "--dry-run", cwd=work, env=home)
    assert result.returncode == 5
    assert str(path) in result.stderr and message in result.stderr


def test_executed_json_has_ids_statuses_attempts_and_pages(work, home):
    """--output json after running: backfill.id and state_dir, every attempt, pagination, only JSON on stdout."""
    result = run_backfill(
        *GUARD,
        "--command",
        child_command("--fail-on", "2024-01-03"),
        *SIX_DAYS,
        "--on-failure",
        "continue",
        "--output",
        "json",
        "--offset",
        "2",
        "--limit",
        "2",
        cwd=work,
        env=home,
    )
    assert result.returncode == 1
    document = json.loads(result.stdout)
    [backfill] = state_dirs(work / "logs" / "backfills")
    assert document["backfill"]["id"] == backfill.name and document["backfill"]["state_dir"] == str(backfill)
    assert document["summary"] == {
        "total": 6,
        "queued": 0,
        "running": 0,
        "succeeded": 5,
        "failed": 1,
        "cancelled": 0,
        "skipped": 0,
        "not_selected": 0,
    }
    assert [p["index"] for p in document["partitions"]] == [2, 3]
    failed = document["partitions"][0]
    assert failed["status"] == "failed" and failed["not_selected"] is False
    [attempt] = failed["attempts"]
    assert set(attempt) == {
        "run_id",
        "status",
        "started_at",
        "finished_at",
        "exit_code",
        "error",
        "log",
        "verification",
        "kind",
        "rows",
        "asset",
        "by",
        "assets",
        "carried",
        "split",
        "row_changes",
    }
    assert (attempt["kind"], attempt["rows"], attempt["by"]) == ("run", None, None)
    assert (attempt["split"], failed["children"]) == (None, None)  # it failed whole: no --split-on
    assert (attempt["row_changes"], failed["row_changes"]) == (None, None)  # a command measures nothing
    assert (attempt["assets"], attempt["carried"]) == (None, None)  # a command has no assets
    assert attempt["exit_code"] == 3 and attempt["error"] == "failing 2024-01-03 on purpose"
    assert failed["reason"] == "failing 2024-01-03 on purpose"
    assert Path(attempt["log"]).read_text().startswith("child ")
    assert document["page"] == {"offset": 2, "limit": 2} and document["has_more"] is True
    assert "[" in result.stderr  # progress went to stderr


def test_continue_dry_run_shows_saved_progress_without_running(work, home):
    """--continue --dry-run --output json: saved statuses and attempts, skipped per --rerun, nothing runs."""
    backfill = finished_backfill(work, home)
    before = {p.name: p.read_bytes() for p in (backfill / "partitions").iterdir()}
    result = run_backfill(
        "--continue", backfill.name, "--rerun", "failed", "--dry-run", "--output", "json", cwd=work, env=home
    )
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["summary"]["succeeded"] == 5 and document["summary"]["failed"] == 1
    assert document["summary"]["not_selected"] == 5
    assert [p["not_selected"] for p in document["partitions"]] == [True, True, False, True, True, True]
    assert all(len(p["attempts"]) == 1 for p in document["partitions"])
    assert {p.name: p.read_bytes() for p in (backfill / "partitions").iterdir()} == before


def test_rerun_modes_and_ids(work, home):
    """--rerun failed runs only failures; --rerun all everything; --ids exactly the named partitions."""
    backfill = finished_backfill(work, home)
    attempts = lambda: [len(r["attempts"]) for r in records(backfill)]  # noqa: E731
    assert run_backfill("--continue", backfill.name, "--rerun", "failed", cwd=work, env=home).returncode == 1
    assert attempts() == [1, 1, 2, 1, 1, 1]
    third = records(backfill)[4]["id"]
    assert run_backfill(*REASON, "--continue", backfill.name, "--ids", third[:10], cwd=work, env=home).returncode == 0
    assert attempts() == [1, 1, 2, 1, 2, 1]
    ids_file = work / "ids.txt"
    ids_file.write_text(f"# two partitions\n{records(backfill)[0]['id']}\n{records(backfill)[5]['id']}\n")
    assert (
        run_backfill(*REASON, "--continue", backfill.name, "--ids-from", str(ids_file), cwd=work, env=home).returncode
        == 0
    )
    assert attempts() == [2, 1, 2, 1, 2, 2]
    missing = run_backfill(*REASON, "--continue", backfill.name, "--ids", "abcdef0123", cwd=work, env=home)
    assert missing.returncode == 2 and "--ids 'abcdef0123' matches no partition" in missing.stderr


def test_default_resume_runs_everything_not_succeeded(work, home):
    """Without --rerun, --continue retries failed and runs queued partitions, skipping successes."""
    run_backfill(*GUARD, "--command", child_command("--fail-on", "2024-01-03"), *SIX_DAYS, cwd=work, env=home)
    [backfill] = state_dirs(work / "logs" / "backfills")
    assert statuses(backfill) == {0: "succeeded", 1: "succeeded", 2: "failed"}
    result = run_backfill("--continue", backfill.name, "--on-failure", "continue", cwd=work, env=home)
    assert result.returncode == 1
    assert statuses(backfill) == {
        0: "succeeded",
        1: "succeeded",
        2: "failed",
        3: "succeeded",
        4: "succeeded",
        5: "succeeded",
    }
    assert [len(r["attempts"]) for r in records(backfill)] == [1, 1, 2, 1, 1, 1]


@pytest.mark.parametrize(
    "flags",
    [
        ("--start-date", "2024-02-01"),
        ("--partition", "hourly"),
        ("--timezone", "Europe/Paris"),
        ("--var", "x=1"),
        ("--command", "true"),
        ("--selector", "tag:x"),
        ("--environment", "dev"),
    ],
)
def test_changed_plan_inputs_are_refused_on_resume(work, home, flags):
    """Plan inputs cannot change with --continue: exit 2, naming the flag and saying to start a new backfill."""
    backfill = finished_backfill(work, home)
    result = run_backfill("--continue", backfill.name, *flags, cwd=work, env=home)
    assert result.returncode == 2
    assert flags[0] in result.stderr and "start a new backfill" in result.stderr


def test_gitignore_gets_the_state_root_once(work, home):
    """The store's path is added to the repository's .gitignore once, keeping what was there."""
    (work / ".gitignore").write_text("*.pyc")
    finished_backfill(work, home)
    run_backfill(*GUARD, "--command", "true", *SIX_DAYS, cwd=work, env=home)
    text = (work / ".gitignore").read_text()
    assert text.startswith("*.pyc\n") and text.count("/logs/backfills/") == 1


def test_gitignore_is_left_alone_when_a_parent_directory_is_ignored(work, home):
    """A repository already ignoring /logs/ gets no new line."""
    (work / ".gitignore").write_text("/logs/\n")
    finished_backfill(work, home)
    assert (work / ".gitignore").read_text() == "/logs/\n"


def test_directories_are_0700_and_files_0600(work, home):
    """Everything in the store is private to the user: it holds variable overrides."""
    backfill = finished_backfill(work, home)
    for path in [backfill, *backfill.rglob("*")]:
        mode = stat.S_IMODE(path.stat().st_mode)
        assert mode == (0o700 if path.is_dir() else 0o600), f"{path} has mode {oct(mode)}"
    assert stat.S_IMODE((work / "logs" / "backfills").stat().st_mode) == 0o700


def test_state_dir_override_and_resume_hint(work, home, tmp_path):
    """--state-dir puts the store elsewhere; the resume command repeats it; without it the ID is not found."""
    root = tmp_path / "states"
    result = run_backfill(
        *GUARD,
        "--command",
        child_command("--fail-on", "2024-01-02"),
        *SIX_DAYS,
        "--state-dir",
        str(root),
        cwd=work,
        env=home,
    )
    [backfill] = state_dirs(root)
    assert f"resume      backfill --continue {backfill.name} --state-dir {root}" in result.stdout
    assert not (work / "logs").exists() and not (work / ".gitignore").exists()
    lost = run_backfill("--continue", backfill.name, cwd=work, env=home)
    assert lost.returncode == 2 and "pass the same --state-dir" in lost.stderr
    assert (
        run_backfill(
            "--continue", backfill.name[:12], "--state-dir", str(root), "--dry-run", cwd=work, env=home
        ).returncode
        == 0
    )


def test_outside_a_repository_the_user_state_directory_is_used(tmp_path, home):
    """With no git repository around, backfills live under the user state directory (XDG_STATE_HOME)."""
    outside = tmp_path / "plain"
    outside.mkdir()
    assert run_backfill(*GUARD, "--command", "true", *SIX_DAYS, cwd=outside, env=home).returncode == 0
    assert len(state_dirs(Path(home["XDG_STATE_HOME"]) / "backfill" / "backfills")) == 1


def test_full_refresh_is_refused_for_backfills(work, home):
    """--full-refresh would rebuild every table once per partition: refused with exit 2."""
    result = run_backfill(*GUARD, "--command", "true", *SIX_DAYS, "--full-refresh", cwd=work, env=home)
    assert result.returncode == 2 and "--full-refresh is not supported for backfills" in result.stderr
    assert not (work / "logs").exists()


def test_show_status_lines_up_its_columns_whatever_the_indices(work, home):
    """`show --status failed` over twelve days where days 3 and 11 failed: the rows of index 2 and 10 start their
    IDs, statuses and intervals in the same columns (the index column is as wide as the plan's last index)."""
    run_backfill(*GUARD, "--command", child_command("--fail-on", "2024-01-03", "--fail-on", "2024-01-11"),
                 "--start-date", "2024-01-01", "--end-date", "2024-01-12", "--on-failure", "continue",
                 cwd=work, env=home)  # fmt: skip
    [backfill] = state_dirs(work / "logs" / "backfills")
    shown = run_backfill("show", backfill.name, "--status", "failed", "--output", "text", cwd=work, env=home)
    assert shown.returncode == 0, shown.stderr
    rows = [line for line in shown.stdout.splitlines() if " failed " in line and "2024-01-" in line]
    assert [row.split()[0] for row in rows] == ["2", "10"]
    assert len({row.index("failed") for row in rows}) == 1 and len({row.index("2024-01-") for row in rows}) == 1
    header = next(line for line in shown.stdout.splitlines() if line.lstrip().startswith("#"))
    assert header.index("status") == rows[0].index("failed")
