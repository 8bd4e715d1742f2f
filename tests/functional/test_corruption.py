"""A damaged state store is named, never silently taken as a clean slate."""

from __future__ import annotations

import json
import shutil

import orjson

from tests.backfills import records, state_dirs
from tests.conftest import run_backfill
from tests.guard_flags import GUARD, REASON

DAYS = ("--start-date", "2024-01-01", "--end-date", "2024-01-04")


def saved(work, home, command: str = "true"):
    result = run_backfill(*GUARD, "--command", command, *DAYS, "--on-failure", "continue", cwd=work, env=home)
    [backfill] = state_dirs(work / "logs" / "backfills")
    return result, backfill


def one_error(result) -> str:
    assert "Traceback" not in result.stderr, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("backfill: error:")]
    assert len(lines) == 1, result.stderr
    return lines[0]


def test_a_deleted_partitions_directory_is_an_error_not_a_rerun_of_everything(work, home):
    """partitions/ removed: --continue and show refuse (exit 5) naming the directory; nothing reruns."""
    _, backfill = saved(work, home)
    shutil.rmtree(backfill / "partitions")
    for args in (("--continue", backfill.name), ("show", backfill.name, "--output", "text")):
        result = run_backfill(*args, cwd=work, env=home)
        assert result.returncode == 5
        assert f"{backfill / 'partitions'} is missing" in one_error(result)
    assert not (backfill / "partitions").exists()


def test_a_record_without_attempts_is_refused(work, home):
    """A partition file lacking its attempts is unreadable state (exit 5), as the docs say."""
    _, backfill = saved(work, home)
    path = next((backfill / "partitions").glob("*.json"))
    data = orjson.loads(path.read_bytes())
    del data["attempts"]
    path.write_bytes(orjson.dumps(data))
    result = run_backfill(*REASON, "--continue", backfill.name, "--rerun", "all", cwd=work, env=home)
    assert result.returncode == 5 and "lacks the field 'attempts'" in one_error(result)


def test_a_garbled_generation_file_is_an_error_not_a_reset(work, home):
    """.generation.json with a non-integer generation (or garbage): refused, never silently counted from 1."""
    _, backfill = saved(work, home)
    generation = backfill / ".generation.json"
    for content in (b'{"generation": "x", "pid": 1, "pid_started": 0, "host": "h", "started_at": "t"}', b"\x00\xff"):
        generation.write_bytes(content)
        result = run_backfill(*REASON, "--continue", backfill.name, "--rerun", "all", cwd=work, env=home)
        assert result.returncode == 5, result.stderr
        assert str(generation) in one_error(result)


def test_a_deleted_children_directory_is_made_again_and_new_attempts_run(work, home):
    """children/ removed: a resume makes it again and the partitions run (no misleading 'cannot start')."""
    first, backfill = saved(work, home, "false")
    assert first.returncode == 1
    shutil.rmtree(backfill / "children")
    result = run_backfill("--continue", backfill.name, "--rerun", "failed", cwd=work, env=home)
    assert result.returncode == 1
    attempts = [r["attempts"][-1] for r in records(backfill)]
    assert all(a["error"] == "exited with code 1" and "cannot start" not in a["error"] for a in attempts)
    assert all((backfill / a["log"]).exists() for a in attempts)


def test_list_does_not_trust_a_forged_counts_cache(work, home):
    """A .summary.json claiming counts the partition files do not bear out is ignored: list reads the records."""
    _, backfill = saved(work, home, "false")
    cache = backfill / ".summary.json"
    forged = orjson.loads(cache.read_bytes())
    forged["counts"] = {"queued": 0, "running": 0, "succeeded": 4, "failed": 0, "cancelled": 0}
    stamp = (backfill / "partitions").stat().st_mtime_ns
    cache.write_bytes(orjson.dumps(forged))
    import os

    os.utime(backfill / "partitions", ns=(stamp, stamp))
    listed = json.loads(run_backfill("list", "--output", "json", cwd=work, env=home).stdout)
    [summary] = listed["backfills"]
    assert summary["counts"]["failed"] == 4 and summary["counts"]["succeeded"] == 0


def test_manifest_fields_of_the_wrong_type_and_lock_files_that_are_directories(work, home):
    """partition: 5, timezone: 5, run_options: [], a non-integer timeout, start_us: "x"; manifest.json, .lock or
    .children.lock being directories: show and --continue say which (exit 5) before launching anything, and
    list keeps listing."""
    _, backfill = saved(work, home)
    original = (backfill / "manifest.json").read_bytes()
    for field, value, says in (
        ("partition", 5, "partition is 5, not a str"),
        ("timezone", 5, "timezone is 5, not a str"),
        ("run_options", [], "run_options is [], not a dict"),
        ("initial_execution", {"timeout": "x"}, "initial_execution.timeout is 'x', not a int"),
        ("start_us", "x", "start_us is 'x', not whole microseconds"),
    ):
        data = orjson.loads(original)
        data[field] = value
        (backfill / "manifest.json").write_bytes(orjson.dumps(data))
        for args in (("show", backfill.name, "--output", "text"), ("--continue", backfill.name, "--rerun", "all")):
            result = run_backfill(*args, cwd=work, env=home)
            assert result.returncode == 5 and says in one_error(result), (field, result.stderr)
        assert run_backfill("list", "--output", "text", cwd=work, env=home).returncode == 0
    (backfill / "manifest.json").write_bytes(original)
    before = [r["attempts"] for r in records(backfill)]
    for name in (".lock", ".children.lock"):
        (backfill / name).unlink(missing_ok=True)
        (backfill / name).mkdir()
        result = run_backfill(*REASON, "--continue", backfill.name, "--rerun", "all", cwd=work, env=home)
        assert result.returncode == 5 and "cannot be used as a lock file (Is a directory)" in one_error(result)
        (backfill / name).rmdir()
    assert [r["attempts"] for r in records(backfill)] == before, "nothing was launched"
    (backfill / "manifest.json").unlink()
    (backfill / "manifest.json").mkdir()
    result = run_backfill("show", backfill.name, "--output", "text", cwd=work, env=home)
    assert result.returncode == 5 and "cannot be read (Is a directory)" in one_error(result)
