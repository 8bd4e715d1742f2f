"""Stepping in from another process: cancel, pause and resume, marks, and the audit line each one leaves."""

from __future__ import annotations

import getpass
import os
import socket
import subprocess
import time
from pathlib import Path

import orjson
import pytest
import yaml

from engine.store.locks import FileLock
from tests.backfills import (
    alive,
    child_command,
    child_running,
    records,
    start_background,
    state_dirs,
    statuses,
    wait_for,
)
from tests.conftest import backfill_argv, run_backfill
from tests.guard_flags import GUARD

WHO = f"{getpass.getuser()}@{socket.gethostname()}"


def plan(days: int = 5) -> tuple[str, ...]:
    return ("--command", child_command(), "--start-date", "2024-01-01", "--end-date", f"2024-01-{days:02d}")


def audit_lines(backfill: Path) -> list[dict]:
    path = backfill / "audit.jsonl"
    return [orjson.loads(line) for line in path.read_bytes().splitlines()] if path.exists() else []


def running_pids(backfill: Path, count: int) -> list[int]:
    """Wait until ``count`` partitions are recorded running; their children's PIDs."""

    def found():
        pids = [r["attempts"][-1]["pid"] for r in records(backfill) if child_running(r)]
        return pids if len(pids) >= count else None

    return wait_for(found, timeout=30)


def started(work: Path, *args: str, env: dict[str, str]) -> tuple[subprocess.Popen[str], Path]:
    process = start_background(*GUARD, *args, "--no-progress", cwd=work, env=env)
    backfill = wait_for(lambda: (state_dirs(work / "logs" / "backfills") or [None])[0], timeout=30)
    return process, backfill


@pytest.fixture
def env(home) -> dict[str, str]:
    return {**home, "CHILD_SLEEP": "30", "BACKFILL_STOP_GRACE": "5"}


def test_cancel_from_another_process_stops_children_exits_1_and_says_who_and_why(work, env):
    """`backfill cancel` while children run: each is stopped within the grace, the executor exits 1 and prints
    who cancelled and why; records say cancelled by whom; one CANCEL audit line; --continue then needs a reason."""
    process, backfill = started(work, *plan(), "--max-parallel", "2", env=env)
    pids = running_pids(backfill, 2)
    asked = time.monotonic()
    cancel = run_backfill("cancel", backfill.name, "--reason", "the source resent the file", cwd=work, env=env)
    assert cancel.returncode == 0, cancel.stderr
    assert cancel.stdout == f"backfill {backfill.name} cancelled; 2 running children stopped\n"
    out, err = process.communicate(timeout=30)
    assert time.monotonic() - asked < 5 + 2.5  # seen within 2 s, children gone within the grace
    assert process.returncode == 1, err
    assert f"stepped in  cancelled by {WHO}: the source resent the file" in out
    assert "  this run    cancelled: 2 partitions were running; 3 not started\n" in out, out
    [printed] = [line.split(None, 1)[1] for line in out.splitlines() if line.startswith("  resume      ")]
    assert printed == f"backfill --continue {backfill.name} --reason TEXT", printed
    assert not [pid for pid in pids if alive(pid)]
    cancelled = [r for r in records(backfill) if r["status"] == "cancelled"]
    assert len(cancelled) == 2
    assert {r["attempts"][-1]["error"] for r in cancelled} == {f"cancelled: by {WHO}: the source resent the file"}
    [line] = audit_lines(backfill)
    assert line["action"] == "CANCEL" and line["partition_id"] is None and line["backfill_id"] == backfill.name
    assert (line["from_status"], line["to_status"], line["reason"]) == (
        "running",
        "cancelled",
        "the source resent the file",
    )
    assert line["requested_by"] == WHO and line["applied_by"].startswith("executor generation 1 (PID ")
    [copy] = (backfill / "records").glob("*.yml")  # the backfill record carries its interventions
    interventions = yaml.safe_load(copy.read_text())["interventions"]
    assert interventions["count"] == 1 and interventions["entries"][0]["action"] == "CANCEL"
    assert interventions["entries"][0]["reason"] == "the source resent the file"
    again = run_backfill("--continue", backfill.name, cwd=work, env=env)
    assert again.returncode == 2
    assert f"was cancelled by {WHO} at " in again.stderr
    assert "--continue needs its own --reason to go on" in again.stderr
    import shlex

    as_printed = run_backfill(*shlex.split(printed)[1:], "--no-progress", cwd=work, env={**env, "CHILD_SLEEP": "0"})
    assert as_printed.returncode == 0, as_printed.stdout + as_printed.stderr  # the summary's command works as printed
    quick = {**env, "CHILD_SLEEP": "0"}
    done = run_backfill("--continue", backfill.name, "--reason", "resent file is in", cwd=work, env=quick)
    assert done.returncode == 0, done.stderr
    assert set(statuses(backfill).values()) == {"succeeded"}
    assert [line["action"] for line in audit_lines(backfill)] == ["CANCEL", "REOPEN"]


def test_cancel_without_a_live_executor_marks_the_backfill_cancelled(work, env):
    """With no executor running, cancel is applied by the command itself: the list shows it cancelled."""
    quick = {**env, "CHILD_SLEEP": "0"}
    first = run_backfill(*GUARD, *plan(3), "--no-progress", cwd=work, env=quick)
    assert first.returncode == 0, first.stderr
    [backfill] = state_dirs(work / "logs" / "backfills")
    cancel = run_backfill("cancel", backfill.name, "--reason", "wrong range", cwd=work, env=env)
    assert cancel.returncode == 0 and cancel.stdout == f"backfill {backfill.name} cancelled\n"
    listed = orjson.loads(run_backfill("list", "--output", "json", cwd=work, env=env).stdout)
    [summary] = listed["backfills"]
    assert summary["state"] == "cancelled" and summary["interventions"] == 1
    assert summary["decision"].startswith(f"cancelled by {WHO} at ") and summary["decision"].endswith(": wrong range")
    [line] = audit_lines(backfill)
    assert line["applied_by"].startswith("backfill cancel (PID ")


def test_pause_lets_running_children_finish_exits_22_then_continue_holds_until_resume(work, env):
    """pause: running children finish, nothing more starts, exit 22; --continue starts nothing and exits 0 with
    who/when/why; resume lets --continue complete. PAUSE and RESUME are audited, list shows paused."""
    released = work / "released"  # the children finish only once the pause has been applied, whatever the load
    slow = {**env, "CHILD_SLEEP": "0", "CHILD_WAIT_FOR": str(released)}
    process, backfill = started(work, *plan(6), "--max-parallel", "2", env=slow)
    running_pids(backfill, 2)
    pause = run_backfill("pause", backfill.name, "--reason", "CRM migration", cwd=work, env=env)
    assert pause.returncode == 0, pause.stderr
    assert pause.stdout == f"backfill {backfill.name} paused; 2 running children will finish\n"
    released.touch()
    out, err = process.communicate(timeout=30)
    assert process.returncode == 22, err
    assert f"stepped in  paused by {WHO}: CRM migration" in out
    assert f"resume      backfill resume {backfill.name} --reason TEXT, then backfill --continue {backfill.name}" in out
    after_pause = statuses(backfill)
    assert sorted(after_pause.values()) == ["succeeded", "succeeded"]  # the two that ran finished; none started
    listed = orjson.loads(run_backfill("list", "--output", "json", cwd=work, env=env).stdout)
    assert listed["backfills"][0]["state"] == "paused"
    held = run_backfill("--continue", backfill.name, cwd=work, env=env)
    assert held.returncode == 0, held.stderr
    assert held.stdout.startswith(f"backfill {backfill.name} is paused by {WHO} at ")
    assert ": CRM migration; nothing started" in held.stdout
    assert statuses(backfill) == after_pause
    shown = run_backfill("show", backfill.name, "--output", "text", cwd=work, env=env).stdout
    assert f"stepped in   paused by {WHO} at " in shown and "audit        1 intervention(s)" in shown
    assert f"PAUSE           backfill      open → paused  {WHO}: CRM migration" in shown
    resume = run_backfill("resume", backfill.name, "--reason", "migration done", cwd=work, env=env)
    assert resume.returncode == 0, resume.stderr
    done = run_backfill("--continue", backfill.name, cwd=work, env={**env, "CHILD_SLEEP": "0"})
    assert done.returncode == 0, done.stderr
    assert list(statuses(backfill).values()) == ["succeeded"] * 6
    lines = audit_lines(backfill)
    assert [(x["action"], x["from_status"], x["to_status"], x["reason"]) for x in lines] == [
        ("PAUSE", "open", "paused", "CRM migration"),
        ("RESUME", "paused", "open", "migration done"),
    ]


def test_mark_of_a_running_partition_is_refused_and_changes_nothing(work, env):
    """A mark naming a running partition: exit 3, 'cancel the backfill first, or wait', no record or audit line."""
    process, backfill = started(work, *plan(3), "--max-parallel", "1", env=env)
    running_pids(backfill, 1)
    [running] = [r for r in records(backfill) if child_running(r)]
    mark = run_backfill(
        "mark", backfill.name, running["id"][:8], "--status", "succeeded", "--reason", "x", cwd=work, env=env
    )
    assert mark.returncode == 3
    assert mark.stderr == (
        f"backfill: error: partition {running['id']} of backfill {backfill.name} is running: "
        "cancel the backfill first, or wait\n"
    )
    assert [r["status"] for r in records(backfill) if r["id"] == running["id"]] == ["running"]
    assert audit_lines(backfill) == []
    os.killpg(process.pid, 2)
    process.communicate(timeout=30)


def test_marks_decide_what_continue_runs_and_keep_every_attempt(work, env):
    """mark failed → rerun by --continue; mark succeeded / skipped → not rerun. Each mark is a new entry in the
    partition's history (kind mark, who and why) and one MARK audit line with the previous status and message."""
    quick = {**env, "CHILD_SLEEP": "0"}
    first = run_backfill(
        *GUARD,
        "--command",
        child_command("--fail-on", "2024-01-02"),
        "--start-date",
        "2024-01-01",
        "--end-date",
        "2024-01-04",
        "--on-failure",
        "continue",
        cwd=work,
        env=quick,
    )
    assert first.returncode == 1
    [backfill] = state_dirs(work / "logs" / "backfills")
    by_index = {r["index"]: r for r in records(backfill)}
    failed_id, ok_id = by_index[1]["id"], by_index[0]["id"]
    previous_error = by_index[1]["attempts"][-1]["error"]
    marked = run_backfill(
        "mark",
        backfill.name,
        failed_id,
        "--status",
        "succeeded",
        "--rows",
        "1200",
        "--reason",
        "loaded by hand",
        cwd=work,
        env=env,
    )
    assert marked.returncode == 0 and marked.stdout == "marked 1 partition succeeded\n", marked.stderr
    skip = run_backfill(
        "mark", backfill.name, by_index[2]["id"], "--status", "skipped", "--reason", "holiday", cwd=work, env=env
    )
    assert skip.returncode == 0, skip.stderr
    again = run_backfill("mark", backfill.name, ok_id, "--status", "failed", "--reason", "bad data", cwd=work, env=env)
    assert again.returncode == 0, again.stderr
    record = {r["index"]: r for r in records(backfill)}
    mark = record[1]["attempts"][-1]
    assert len(record[1]["attempts"]) == 2 and record[1]["attempts"][0]["status"] == "failed"  # nothing erased
    assert (mark["kind"], mark["status"], mark["rows"], mark["by"], mark["pid"]) == (
        "mark",
        "succeeded",
        1200,
        WHO,
        None,
    )
    assert mark["error"] == f"marked succeeded by {WHO}: loaded by hand"
    resumed = run_backfill("--continue", backfill.name, cwd=work, env=quick)
    assert resumed.returncode == 0, resumed.stderr
    after = {r["index"]: r for r in records(backfill)}
    assert [len(after[i]["attempts"]) for i in range(4)] == [3, 2, 2, 1]  # only the one marked failed ran again
    assert [after[i]["status"] for i in range(4)] == ["succeeded", "succeeded", "skipped", "succeeded"]
    lines = audit_lines(backfill)
    assert [(x["action"], x["partition_id"], x["from_status"], x["to_status"], x["target_count"]) for x in lines] == [
        ("MARK", failed_id, "failed", "succeeded", 1200),
        ("MARK", by_index[2]["id"], "queued", "skipped", None)
        if False
        else ("MARK", by_index[2]["id"], "succeeded", "skipped", None),
        ("MARK", ok_id, "succeeded", "failed", None),
    ]
    assert lines[0]["previous_message"] == previous_error


def test_marking_an_ended_backfill_reopens_it(work, env):
    """A backfill marked failed (ended) is opened again by a mark of its partitions: REOPEN, and the list derives
    its state from the partitions again."""
    quick = {**env, "CHILD_SLEEP": "0"}
    assert run_backfill(*GUARD, *plan(2), cwd=work, env=quick).returncode == 0
    [backfill] = state_dirs(work / "logs" / "backfills")
    ended = run_backfill("mark", backfill.name, "--status", "failed", "--reason", "numbers wrong", cwd=work, env=env)
    assert ended.returncode == 0, ended.stderr

    def state():
        return orjson.loads(run_backfill("list", "--output", "json", cwd=work, env=env).stdout)["backfills"][0]

    assert state()["state"] == "marked-failed"
    first = records(backfill)[0]["id"]
    run_backfill("mark", backfill.name, first, "--status", "failed", "--reason", "redo", cwd=work, env=env)
    assert state()["state"] == "incomplete"
    assert [x["action"] for x in audit_lines(backfill)] == ["MARK", "MARK", "REOPEN"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--status", "succeeded"], "--reason is required to mark a backfill"),
        (["--status", "done", "--reason", "x"], "--status 'done' cannot end a backfill: give succeeded or failed"),
        (["--status-filter", "late", "--status", "failed", "--reason", "x"], "--status-filter 'late' is not a status"),
        (
            ["--status-filter", "failed", "--status", "failed", "--rows", "5", "--reason", "x"],
            "--rows means nothing for a partition marked failed",
        ),
        (["--status-filter", "failed", "--status", "succeeded", "--rows", "٣", "--reason", "x"], "--rows"),
        (["--status", "succeeded", "--asset", "a", "--reason", "x"], "--asset means nothing for a mark of the whole"),
        (
            ["--status-filter", "failed", "--status", "succeeded", "--asset", "a", "--reason", "x"],
            "--asset means nothing for a --command backfill",
        ),
        (["zzzzzz", "--status", "failed", "--reason", "x"], "partition 'zzzzzz' is not a partition ID"),
        (["--status", "succeeded", "--reason", ""], "--reason '' is empty"),
    ],
)
def test_bad_marks_are_one_line_and_exit_2(work, env, args, message):
    """Each bad mark is one line on stderr naming the bad value, exit 2, and nothing is written."""
    assert run_backfill(*GUARD, *plan(2), cwd=work, env={**env, "CHILD_SLEEP": "0"}).returncode == 0
    [backfill] = state_dirs(work / "logs" / "backfills")
    result = run_backfill("mark", backfill.name, *args, cwd=work, env=env)
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("backfill: error: ") and message in result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert not (backfill / "audit.jsonl").exists()


def test_concurrent_marks_from_four_processes_lose_no_audit_line(work, env):
    """Four processes mark different partitions at once while the backfill's lock is held (as by a command
    applying a request): all four wait with a request each; once it is free, each withdraws its request and
    applies it in turn under the lock. 4 MARK lines, 4 marks, no request left."""
    assert run_backfill(*GUARD, *plan(4), cwd=work, env={**env, "CHILD_SLEEP": "0"}).returncode == 0
    [backfill] = state_dirs(work / "logs" / "backfills")
    ids = [r["id"] for r in records(backfill)]
    environment = {**os.environ, "NO_COLOR": "1", **env}
    holder = FileLock(backfill / ".lock")
    assert holder.try_acquire()
    marks = [
        subprocess.Popen(
            [*backfill_argv(), "mark", backfill.name, partition, "--status", "failed", "--reason", f"r{n}"],
            cwd=work,
            env=environment,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n, partition in enumerate(ids)
    ]
    try:
        wait_for(lambda: len(list((backfill / "requests").glob("*.json"))) == 4)
    finally:
        holder.release()
    for process in marks:
        process.communicate(timeout=60)
    assert list((backfill / "requests").iterdir()) == []
    assert [process.returncode for process in marks] == [0, 0, 0, 0]
    lines = audit_lines(backfill)
    assert sorted(x["partition_id"] for x in lines) == sorted(ids) and len({x["id"] for x in lines}) == 4
    assert set(statuses(backfill).values()) == {"failed"}


def test_a_torn_audit_line_is_reported_and_later_appends_still_work(work, env):
    """A crash mid-append leaves half a line: audit reports it by line number on stderr, a later mark appends
    on a new line, and both whole lines are read."""
    assert run_backfill(*GUARD, *plan(2), cwd=work, env={**env, "CHILD_SLEEP": "0"}).returncode == 0
    [backfill] = state_dirs(work / "logs" / "backfills")
    first, second = (r["id"] for r in records(backfill))
    run_backfill("mark", backfill.name, first, "--status", "failed", "--reason", "one", cwd=work, env=env)
    with open(backfill / "audit.jsonl", "ab") as handle:
        handle.write(b'{"id": "torn-by-a-cr')
    run_backfill("mark", backfill.name, second, "--status", "failed", "--reason", "two", cwd=work, env=env)
    shown = run_backfill("audit", backfill.name, "--output", "json", cwd=work, env=env)
    assert shown.returncode == 0
    assert [orjson.loads(line)["reason"] for line in shown.stdout.splitlines()] == ["one", "two"]
    assert "line 2 is torn (a crash while appending)" in shown.stderr
    text = run_backfill("audit", backfill.name, cwd=work, env=env)
    assert "3 lines in its audit log" in text.stdout and "line 2: torn (a crash while appending)" in text.stdout
    assert "line 2 is torn" in text.stderr and text.stdout.count(" MARK ") == 2


def test_a_mark_of_many_partitions_is_one_bulk_file_that_every_reader_merges(work, env):
    """Marking 100 partitions (more than 64) writes one bulk mark, no partition file: list, show and the JSON
    see the marks; --continue reruns only those marked failed, and each rerun's record keeps its mark entry."""
    quick = {**env, "CHILD_SLEEP": "0"}
    first = run_backfill(*GUARD, "--command", "false", "--start-date", "2024-01-01", "--end-date", "2024-04-10",
                         "--no-progress", cwd=work, env=quick)  # fmt: skip
    assert first.returncode == 1
    [backfill] = state_dirs(work / "logs" / "backfills")
    files_before = sorted(p.name for p in (backfill / "partitions").glob("*.json"))
    skip = run_backfill("mark", backfill.name, "--status-filter", "queued", "--status", "skipped", "--reason",
                        "holidays", cwd=work, env=env)  # fmt: skip
    assert skip.returncode == 0 and skip.stdout == "marked 100 partitions skipped\n", skip.stderr
    assert sorted(p.name for p in (backfill / "partitions").glob("*.json")) == files_before
    assert len(list((backfill / "bulk-marks").glob("*.json"))) == 1
    [line] = audit_lines(backfill)  # one slice: partitions 1 to 100 were all queued
    assert (line["partitions"], line["from_status"], line["to_status"]) == (100, "queued", "skipped")
    assert f" {line['partition_id'][:12]} +99  queued → skipped  " in run_backfill("audit", backfill.name, cwd=work,
                                                                                  env=env).stdout  # fmt: skip
    listed = orjson.loads(run_backfill("list", "--output", "json", cwd=work, env=env).stdout)["backfills"][0]
    assert listed["counts"]["skipped"] == 100 and listed["counts"]["failed"] == 1
    redo = run_backfill("mark", backfill.name, "--status-filter", "skipped", "--status", "failed", "--reason",
                        "not holidays after all", cwd=work, env=env)  # fmt: skip
    assert redo.returncode == 0 and redo.stdout == "marked 100 partitions failed\n", redo.stderr
    shown = orjson.loads(run_backfill("show", backfill.name, "--output", "json", "--limit", "0", cwd=work,
                                      env=env).stdout)  # fmt: skip
    second = shown["partitions"][1]
    assert second["status"] == "failed"
    assert [(a["kind"], a["status"], a["run_id"][-3:]) for a in second["attempts"]] == [
        ("mark", "skipped", "-m1"),
        ("mark", "failed", "-m2"),
    ]
    done = run_backfill("--continue", backfill.name, "--ids", second["id"][:10], "--no-progress", cwd=work, env=quick)
    assert done.returncode == 1  # `false` fails again; what matters is what its record now holds
    record = orjson.loads((backfill / "partitions" / f"{second['id']}.json").read_bytes())
    assert [a.get("kind", "run") for a in record["attempts"]] == ["mark", "mark", "run"]
    resumed = run_backfill("--continue", backfill.name, "--rerun", "failed", "--dry-run", "--output", "json",
                           cwd=work, env=quick)  # fmt: skip
    assert orjson.loads(resumed.stdout)["summary"]["not_selected"] == 0  # all 101 are failed now: all would run


def test_a_cancel_sent_while_a_large_mark_is_applied_takes_effect_and_both_get_answers(work, env):
    """A live backfill of 20,024 hourly partitions, two children running: a mark of every queued partition is sent,
    and a cancel right behind it. Both commands get their answer (exit 0, no 'took the request but gave no
    answer'), the executor ends cancelled (exit 1) with its children stopped, and the queued partitions read
    skipped; no answer file is left behind."""
    days = ("--start-date", "2024-01-01T00:00:00Z", "--end-date", "2026-04-14T08:00:00Z", "--partition", "1h")
    process, backfill = started(work, "--command", child_command(), *days, "--max-parallel", "2", env=env)
    pids = running_pids(backfill, 2)
    mark = subprocess.Popen(
        [*backfill_argv(), "mark", backfill.name, "--status-filter", "queued", "--status", "skipped", "--reason",
         "the vendor will never send these"],
        cwd=work, env={**os.environ, **env}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    wait_for(lambda: any((backfill / "requests").glob("*.json")) or mark.poll() is not None, timeout=30)
    cancel = run_backfill("cancel", backfill.name, "--reason", "stop it now", cwd=work, env=env)
    marked_out, marked_err = mark.communicate(timeout=120)
    assert cancel.returncode == 0, cancel.stdout + cancel.stderr
    assert mark.returncode == 0 and "gave no answer" not in marked_err, marked_out + marked_err
    process.communicate(timeout=60)
    assert process.returncode == 1
    assert not [pid for pid in pids if alive(pid)]
    shown = run_backfill("show", backfill.name, "--output", "json", "--limit", "1", cwd=work, env=env)
    counts = orjson.loads(shown.stdout)["summary"]
    assert counts["queued"] == 0 and counts["cancelled"] == 2 and counts["skipped"] > 20_000, counts
    assert not list((backfill / "requests").glob("*.result.json"))
