"""A damaged state store is named, never silently taken as a clean slate."""

from __future__ import annotations

import json
import shutil

import orjson
import pytest

from tests.backfills import records, rewrite, state_dirs
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
    rewrite(path, orjson.dumps(data))
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


def _edit_manifest(backfill, **fields) -> None:
    data = orjson.loads((backfill / "manifest.json").read_bytes())
    data.update(fields)
    (backfill / "manifest.json").write_bytes(orjson.dumps(data))


def _edit_first_record(backfill, change) -> None:
    path = sorted((backfill / "partitions").glob("*.json"))[0]
    data = orjson.loads(path.read_bytes())
    change(data)
    rewrite(path, orjson.dumps(data))


READERS = (("show", "{id}", "--output", "text"), ("show", "{id}", "--output", "json"), ("--continue", "{id}"),
           ("--continue", "{id}", "--dry-run"), ("reconcile", "{id}"))  # fmt: skip


@pytest.mark.parametrize(
    ("damage", "says"),
    [
        (lambda b: _edit_manifest(b, guardrails=None), "guardrails is None, not a dict"),
        (lambda b: _edit_manifest(b, reason=5), "reason is 5, not a str"),
        (lambda b: _edit_manifest(b, reason=""), "reason is '', not a str"),
        (
            lambda b: _edit_first_record(b, lambda r: r["attempts"][0].update(pid="x")),
            "attempts[0].pid is 'x': a process ID above 1 or null",
        ),
        (
            lambda b: _edit_first_record(b, lambda r: r["attempts"][0].update(pid=1)),
            "attempts[0].pid is 1: a process ID above 1 or null",
        ),
        (
            lambda b: _edit_first_record(b, lambda r: r["attempts"][0].update(pid_started="soon")),
            "attempts[0].pid_started is 'soon': a process start time in seconds or null",
        ),
        (
            lambda b: _edit_first_record(b, lambda r: r["attempts"][0].update(pid_birth="b:١٢")),
            "attempts[0].pid_birth is 'b:١٢': a process birth (boot ID:start ticks) or null",
        ),
        (
            lambda b: _edit_first_record(b, lambda r: r.update(attempts=[])),
            "status is 'succeeded' with no attempts: only a queued partition has none",
        ),
        (lambda b: _edit_first_record(b, lambda r: r.update(attempts=[5])), "attempts[0] is 5, not an object"),
    ],
    ids=[
        "guardrails-null",
        "reason-int",
        "reason-empty",
        "pid-x",
        "pid-1",
        "pid-started",
        "pid-birth",
        "no-attempts",
        "not-object",
    ],
)
def test_every_reader_refuses_a_corrupt_field_naming_it_and_touches_nothing(work, home, damage, says):
    """A damaged manifest or record: show (text, JSON), --continue (and its dry run) and reconcile each exit 5 with
    one line naming the file's field; the state directory is byte-identical afterwards. list still lists it. The JSON
    of a damaged record is a whole document, the record's problem on its partition (it stopped half-way, invalid
    JSON on stdout)."""
    _, backfill = saved(work, home)
    damage(backfill)
    before = {p: p.read_bytes() for p in backfill.rglob("*") if p.is_file()}
    for template in READERS:
        args = [word.replace("{id}", backfill.name) for word in template]
        result = run_backfill(*REASON, *args, cwd=work, env=home) if args[0] == "--continue" and "--dry-run" not in \
            args else run_backfill(*args, cwd=work, env=home)  # fmt: skip
        assert result.returncode == 5, (args, result.stdout, result.stderr)
        assert says in one_error(result), (args, result.stderr)
        if "json" in args:  # nothing, or a whole document naming the damage on its partition: never half of one
            damaged = [
                p for p in json.loads(result.stdout or '{"partitions": []}')["partitions"] if "record_error" in p
            ]
            assert [says in p["record_error"] for p in damaged] == ([True] if result.stdout else []), result.stdout
    assert {p: p.read_bytes() for p in backfill.rglob("*") if p.is_file()} == before
    listed = run_backfill("list", "--output", "json", cwd=work, env=home)
    assert listed.returncode == 0, listed.stderr
    [summary] = json.loads(listed.stdout)["backfills"]
    assert summary["id"] == backfill.name


def test_a_truncated_manifest_is_listed_unreadable_and_the_others_as_usual(work, home):
    """One backfill's manifest cut short: list (text and JSON) shows it as unreadable with the reason, and every
    other backfill as usual; it does not take the listing down."""
    _, first = saved(work, home)
    second = run_backfill(*GUARD, "--command", "true", "--start-date", "2024-02-01", "--end-date", "2024-02-02",
                          cwd=work, env=home)  # fmt: skip
    assert second.returncode == 0, second.stderr
    text = (first / "manifest.json").read_text()
    (first / "manifest.json").write_text(text[: len(text) // 2])
    listed = run_backfill("list", "--output", "json", cwd=work, env=home)
    assert listed.returncode == 0, listed.stderr
    summaries = {s["id"]: s for s in json.loads(listed.stdout)["backfills"]}
    assert len(summaries) == 2
    assert summaries[first.name]["state"] == "unreadable"
    assert "is not valid JSON" in summaries[first.name]["error"]
    [other] = [s for name, s in summaries.items() if name != first.name]
    assert other["state"] == "complete" and other["error"] is None
    shown = run_backfill("list", cwd=work, env=home)
    assert shown.returncode == 0 and first.name in shown.stdout and "unreadable" in shown.stdout, shown.stdout
    assert f"warning: {first.name}: manifest" in shown.stderr


def test_no_signal_on_the_strength_of_a_record_naming_an_older_process(work, home):
    """A record (damaged, or forged) says a running attempt's child is a live process with its true PID and start
    time, but that process started before the attempt was launched: it cannot be the child. A reconcile of the
    expired lease settles the attempt lost and leaves the process alive."""
    import socket
    import subprocess
    import time
    from datetime import UTC, datetime

    from engine.base.processes import process_started

    _, backfill = saved(work, home)
    victim = subprocess.Popen(["sleep", "120"])
    try:
        launched = datetime.fromtimestamp(time.time() + 30, UTC).isoformat().replace("+00:00", "Z")

        def running(record) -> None:
            record["status"] = "running"
            record["attempts"][-1].update(status="running", pid=victim.pid, pid_started=process_started(victim.pid),
                                          started_at=launched, finished_at=None, exit_code=None)  # fmt: skip

        _edit_first_record(backfill, running)
        lease = {"format": 1, "epoch": 3, "host": socket.gethostname(), "pid": 999_999_999, "pid_started": 1.0,
                 "expires_at": time.time() - 60, "attempts": [], "note": None}  # fmt: skip
        (backfill / "lease.json").write_bytes(orjson.dumps(lease))
        result = run_backfill("reconcile", backfill.name, cwd=work, env=home)
        assert result.returncode == 0, result.stdout + result.stderr
        assert "1 running attempt marked lost" in result.stdout, result.stdout
        assert victim.poll() is None, "a process older than the attempt is never its child"
    finally:
        victim.kill()
        victim.wait()


def test_list_and_show_count_the_same_interventions_over_a_torn_audit_line(work, home):
    """Two marks, then a torn line appended (a crash while appending) and one more mark: list (text and JSON) and
    show (text and JSON) each count 3 interventions and 1 unreadable line."""
    _, backfill = saved(work, home)
    ids = [r["id"] for r in records(backfill)]

    def mark(partition: str) -> None:
        done = run_backfill("mark", backfill.name, partition[:10], "--status", "skipped", "--reason", "by hand",
                            cwd=work, env=home)  # fmt: skip
        assert done.returncode == 0, done.stderr

    mark(ids[0])
    mark(ids[1])
    with open(backfill / "audit.jsonl", "ab") as log:
        log.write(b'{"action": "MA')
    mark(ids[2])
    [listed] = json.loads(run_backfill("list", "--output", "json", cwd=work, env=home).stdout)["backfills"]
    assert (listed["interventions"], listed["torn_interventions"]) == (3, 1)
    shown = json.loads(run_backfill("show", backfill.name, "--output", "json", cwd=work, env=home).stdout)
    interventions = shown["backfill"]["interventions"]
    assert (interventions["count"], len(interventions["torn_lines"])) == (3, 1)
    text = run_backfill("list", "--output", "text", cwd=work, env=home).stdout
    assert f"{backfill.name}: 3 intervention(s), 1 unreadable line(s) in its audit log" in text, text
    assert "✎3" in text
    show_text = run_backfill("show", backfill.name, "--output", "text", cwd=work, env=home).stdout
    assert "3 intervention(s), 1 unreadable line(s)" in show_text, show_text
