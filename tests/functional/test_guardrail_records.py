"""Snapshots and restore on a real DuckDB file, and the YAML record of full, partial and cancelled backfills."""

from __future__ import annotations

import json
import os
import re
import signal
import time
from pathlib import Path

import duckdb
import yaml

from tests.backfills import child_command, records, start_background, state_dirs, wait_for
from tests.builder import Repo
from tests.conftest import run_backfill
from tests.functional.test_guardrails import TIME_INTERVAL, WEEK

RECORD_FIELDS = [
    "backfill_id",
    "status",
    "asset",
    "pipeline",
    "command",
    "environment",
    "range",
    "partition",
    "reason",
    "mode",
    "materialization_strategy",
    "layer",
    "intervals_attempted",
    "intervals_succeeded",
    "intervals_failed",
    "intervals_cancelled",
    "intervals_skipped",
    "partial",
    "runs",
    "runs_total",
    "row_counts",
    "duration_total",
    "verified",
    "unverified_because",
    "verification",
    "verification_failures",
    "verification_failures_total",
    "row_changes",
    "failure_groups",
    "failure_groups_total",
    "checks_after_range",
    "preflight",
    "approval",
    "snapshot",
    "downstream_blocked_until_rerun",
    "interventions",
]


def two_tables(tmp_path: Path) -> Repo:
    """mid.daily (time_interval on day) and mart.totals (merge on day), with five weeks of history."""
    repo = Repo(tmp_path / "repo", guardrails="standard")
    repo.sql(
        "mid.daily",
        "SELECT CAST(range AS DATE) AS day, n, 'v1' AS version FROM range(DATE '{{ start_date }}', "
        "DATE '{{ end_date }}' + INTERVAL 1 DAY, INTERVAL 1 DAY), range(10) AS t(n)",
        materialization=TIME_INTERVAL,
        columns=[{"name": "n", "type": "bigint", "checks": [{"name": "not_null"}]}],
    )
    repo.sql(
        "mart.totals",
        "SELECT day, count(*) AS n, max(version) AS version FROM mid.daily "
        "WHERE day BETWEEN DATE '{{ start_date }}' AND DATE '{{ end_date }}' GROUP BY day",
        depends=["mid.daily"],
        materialization={"type": "table", "strategy": "merge"},
        columns=[
            {"name": "day", "type": "date", "primary_key": True},
            {"name": "n", "type": "bigint", "update_on_merge": True},
            {"name": "version", "type": "varchar", "update_on_merge": True},
        ],
    )
    repo.run_ok("--start-date", "2023-12-01", "--end-date", "2024-01-14")
    return repo


def everything(repo: Repo) -> dict[str, list[tuple]]:
    with duckdb.connect(str(repo.database), read_only=True) as connection:
        return {
            table: connection.execute(f"SELECT * FROM {table} ORDER BY ALL").fetchall()
            for table in ("mid.daily", "mart.totals")
        }


def test_restore_puts_back_exactly_what_the_snapshot_took(tmp_path, home):
    """A backfill that rewrites a week (v2) and adds a table; restore gives back byte-identical query results
    for both tables and drops the new one; the restore is recorded; a second restore while the backfill's lock
    is held is refused (exit 3)."""
    repo = two_tables(tmp_path)
    before = everything(repo)
    sql = repo.pipeline_dir / "assets" / "mid.daily.sql"
    sql.write_text(sql.read_text().replace("'v1'", "'v2'"))
    repo.sql(
        "mid.extra",
        "SELECT DATE '{{ start_date }}' AS day",
        materialization={"type": "table", "strategy": "append", "incremental_key": "day"},
    )
    repo.run_ok("--start-date", "2023-12-01", "--end-date", "2023-12-07")  # history for the new asset
    before = everything(repo)
    with duckdb.connect(str(repo.database), read_only=True) as connection:
        extra_before = connection.execute("SELECT * FROM mid.extra ORDER BY ALL").fetchall()
    result = run_backfill("p", *WEEK, "--reason", "v2 fix", "--no-progress", cwd=repo.root, env=home)
    assert result.returncode == 0, result.stdout + result.stderr
    after = everything(repo)
    assert after != before and any(row[2] == "v2" for row in after["mid.daily"] if str(row[0]) == "2024-01-09")
    [backfill] = state_dirs(repo.root / "logs" / "backfills")
    missing_reason = run_backfill("restore", backfill.name, cwd=repo.root, env=home)
    assert missing_reason.returncode == 2 and "--reason is required" in missing_reason.stderr
    restored = run_backfill("restore", backfill.name, "--reason", "v2 was wrong", cwd=repo.root, env=home)
    assert restored.returncode == 0, restored.stderr
    assert everything(repo) == before
    with duckdb.connect(str(repo.database), read_only=True) as connection:
        assert connection.execute("SELECT * FROM mid.extra ORDER BY ALL").fetchall() == extra_before
    import json

    invocations = json.loads((backfill / "guardrails.json").read_text())["invocations"]
    assert invocations[-1]["mode"] == "restore" and invocations[-1]["reason"] == "v2 was wrong"
    [restore_line] = [json.loads(x) for x in (backfill / "audit.jsonl").read_text().splitlines()]
    assert (restore_line["action"], restore_line["reason"]) == ("RESTORE", "v2 was wrong")
    from engine.store.locks import FileLock

    lock = FileLock(backfill / ".lock")
    assert lock.try_acquire()
    try:
        busy = run_backfill("restore", backfill.name, "--reason", "again", cwd=repo.root, env=home)
    finally:
        lock.release()
    assert busy.returncode == 3 and "is running" in busy.stderr


def load_record(path_text: str) -> dict:
    return yaml.safe_load(Path(path_text).read_text())


def record_line(stdout: str) -> str:
    return next(
        line.split("record", 1)[1].strip() for line in stdout.splitlines() if line.strip().startswith("record ")
    )


def test_a_full_backfill_writes_a_record_with_every_field(tmp_path, home):
    """A succeeded week: the record in .context/ (and its copy in the state directory) has every field, the
    row counts before and after, the pre-flight, the approval and the snapshot; the summary names it."""
    repo = two_tables(tmp_path)
    result = run_backfill("p", *WEEK, "--reason", "full", "--no-progress", cwd=repo.root, env=home)
    assert result.returncode == 0, result.stdout + result.stderr
    path = record_line(result.stdout)
    assert Path(path).parent == repo.root / ".context" and Path(path).name.startswith("backfill-p-")
    record = load_record(path)
    assert list(record) == RECORD_FIELDS
    [backfill] = state_dirs(repo.root / "logs" / "backfills")
    assert (backfill / "records" / Path(path).name).read_text() == Path(path).read_text()
    assert record["backfill_id"] == backfill.name and record["reason"] == "full" and record["mode"] == "trigger"
    assert record["status"] == "succeeded" and record["partial"] is False
    assert re.fullmatch(r"[1-9]00ms|(\d+h)?(\d+m)?\d+(\.\d)?s", record["duration_total"]), record["duration_total"]
    assert (record["intervals_attempted"], record["intervals_succeeded"], record["intervals_failed"]) == (5, 5, 0)
    assert record["materialization_strategy"] == {"mart.totals": "merge", "mid.daily": "time_interval"}
    assert record["layer"] == {"mart.totals": "final", "mid.daily": "mid"}
    assert record["row_counts"]["mid.daily"] == {"before": 450, "after": 450, "delta_pct": 0.0}
    assert record["verified"] is True and record["verification"] == {
        "insufficient history": 5
    }  # mart.totals: no one-day runs yet
    assert record["unverified_because"] == []
    assert record["preflight"]["verdict"] == "auto" and record["approval"]["how"] == "auto"
    assert record["snapshot"]["tables"] == ["mart.totals", "mid.daily"]
    assert len(record["runs"]) == 5 and all(Path(run["log"]).exists() for run in record["runs"])
    assert record["checks_after_range"] == [
        {"asset": "mid.daily", "check": "not_null(n)", "passed": True, "detail": "ok"}
    ]


def test_a_partial_backfill_says_so(tmp_path, home):
    """A command backfill with a failing day: the record says partial, one interval failed, its run listed."""
    work = tmp_path / "work"
    (work / ".git").mkdir(parents=True)
    result = run_backfill(
        "--command",
        child_command("--fail-on", "2024-01-02"),
        "--start-date",
        "2024-01-01",
        "--end-date",
        "2024-01-03",
        "--reason",
        "partial",
        "--reversible",
        "--guardrails",
        "sandbox",
        "--on-failure",
        "continue",
        "--no-progress",
        cwd=work,
        env=home,
    )
    assert result.returncode == 1
    record = load_record(record_line(result.stdout))
    assert list(record) == RECORD_FIELDS
    assert record["status"] == "failed" and record["partial"] is True
    assert (record["intervals_attempted"], record["intervals_succeeded"], record["intervals_failed"]) == (3, 2, 1)
    assert [run["status"] for run in record["runs"]] == ["succeeded", "failed", "succeeded"]
    assert Path(record_line(result.stdout)).parent == work / ".context"
    assert record["verified"] is False and "the invocation ended failed" in record["unverified_because"]
    [kind] = record["failure_groups"]  # the one kind of failure, with its one partition
    assert (kind["count"], kind["first"]["index"], kind["last"]["index"], record["failure_groups_total"]) == (
        1,
        1,
        1,
        1,
    )


def test_a_cancelled_backfill_still_writes_its_record(tmp_path, home):
    """SIGINT while children run: exit 130, and the record says cancelled with the cancelled intervals."""
    work = tmp_path / "work"
    (work / ".git").mkdir(parents=True)
    process = start_background(
        "--command",
        child_command(),
        "--start-date",
        "2024-01-01",
        "--end-date",
        "2024-01-04",
        "--reason",
        "stop",
        "--reversible",
        "--guardrails",
        "sandbox",
        "--max-parallel",
        "2",
        "--no-progress",
        cwd=work,
        env={**home, "CHILD_SLEEP": "30"},
    )
    backfill = wait_for(lambda: (state_dirs(work / "logs" / "backfills") or [None])[0])
    wait_for(lambda: len([r for r in records(backfill) if r["status"] == "running"]) == 2 or None)
    os.kill(process.pid, signal.SIGINT)
    stdout, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr
    record = load_record(record_line(stdout))
    assert list(record) == RECORD_FIELDS
    assert record["status"] == "cancelled" and record["partial"] is True
    assert record["intervals_cancelled"] == 2 and record["intervals_succeeded"] == 0
    assert record["verified"] is False
    assert record["unverified_because"][:2] == [
        "the invocation ended cancelled",
        "no partition succeeded in this invocation",
    ]


def test_a_backfill_whose_record_cannot_be_written_does_not_report_success(tmp_path, home):
    """.context is a file, so the record cannot be written: every partition succeeded, yet exit 1 and the
    summary names why the record is missing."""
    work = tmp_path / "work"
    (work / ".git").mkdir(parents=True)
    (work / ".context").write_text("not a directory")
    result = run_backfill(
        "--command", "true", "--start-date", "2024-01-01", "--end-date", "2024-01-02", "--reason", "r",
        "--reversible", "--guardrails", "sandbox", "--no-progress", cwd=work, env=home,
    )  # fmt: skip
    assert result.returncode == 1, result.stdout + result.stderr
    assert "record      not written:" in result.stdout and "Traceback" not in result.stderr
    assert f"backfill {state_dirs(work / 'logs' / 'backfills')[0].name} not recorded" in result.stdout
    [backfill] = state_dirs(work / "logs" / "backfills")
    assert {r["status"] for r in records(backfill)} == {"succeeded"}


def test_a_check_that_fails_without_blocking_leaves_the_backfill_unverified(tmp_path, home):
    """Every partition succeeded and verified, but the non-blocking not_null check fails (a NULL outside the
    range): the record says verified false and names the check."""
    repo = two_tables(tmp_path)
    repo.sql(
        "mid.daily",
        "SELECT CAST(range AS DATE) AS day, n, 'v1' AS version FROM range(DATE '{{ start_date }}', "
        "DATE '{{ end_date }}' + INTERVAL 1 DAY, INTERVAL 1 DAY), range(10) AS t(n)",
        materialization=TIME_INTERVAL,
        columns=[{"name": "n", "type": "bigint", "checks": [{"name": "not_null", "blocking": False}]}],
    )
    repo.execute("INSERT INTO mid.daily VALUES (DATE '2023-01-01', NULL, 'v0')")
    result = run_backfill("p", *WEEK, "--reason", "full", "--no-progress", cwd=repo.root, env=home)
    assert result.returncode == 0, result.stdout + result.stderr
    record = load_record(record_line(result.stdout))
    assert record["verification"] == {"insufficient history": 5}  # mart.totals: no one-day runs yet
    assert record["verified"] is False
    [why] = record["unverified_because"]
    assert why.startswith("check not_null(n) of mid.daily failed over the whole table: ")


def test_two_invocations_of_one_second_each_keep_their_record(work, home):
    """A record is named by its backfill's name and its second: a --continue finishing in the same second as the
    run before it replaced that run's record (three invocations left one record, shown through the command). Every
    name of the next two minutes (and its ``-2``) is taken in the repository first: the --continue writes ``…Z-3.yml``,
    and its copy in the state directory under the same name; every file taken before is unchanged, and ``show``
    names it as the latest record."""
    base = ("--command", "true", "--start-date", "2024-01-01", "--end-date", "2024-01-01", "--no-progress")
    assert run_backfill(*base, "--reason", "r", "--guardrails", "sandbox", cwd=work, env=home).returncode == 0
    [backfill] = state_dirs(work / "logs" / "backfills")
    now = int(time.time())
    taken = {}
    for second in range(now, now + 120):  # the state directory's copy takes the same name all the same
        for suffix in ("", "-2"):
            path = (
                work / ".context" / f"backfill-true-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime(second))}{suffix}.yml"
            )
            if not path.exists():
                path.write_text(f"taken {second}")
            taken[path] = path.read_bytes()
    again = run_backfill("--continue", backfill.name, "--rerun", "all", "--reason", "again", "--no-progress",
                         cwd=work, env=home)  # fmt: skip
    assert again.returncode == 0, again.stdout + again.stderr
    [written] = re.findall(r"record\s+(\S+)", again.stdout)
    assert written.endswith("Z-3.yml") and Path(written).parent == work / ".context", written
    assert yaml.safe_load(Path(written).read_text())["reason"] == "again"
    assert (backfill / "records" / Path(written).name).read_bytes() == Path(written).read_bytes()
    assert {path: path.read_bytes() for path in taken} == taken
    shown = json.loads(run_backfill("show", backfill.name, "--output", "json", cwd=work, env=home).stdout)
    assert shown["record"] == str(backfill / "records" / Path(written).name)
