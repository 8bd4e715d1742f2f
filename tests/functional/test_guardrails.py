"""Guardrails on real DuckDB pipelines: every check's tier, the verdict's exit codes, approval bound to the plan
digest, and verification that stops a backfill at the first bad partition."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import duckdb
import pytest

from engine.pipeline.sql_writes import UPSERT
from tests.backfills import child_command, records, state_dirs
from tests.builder import TEST_LIMITS, Repo
from tests.conftest import run_backfill

TIME_INTERVAL = {"type": "table", "strategy": "time_interval", "incremental_key": "day", "time_granularity": "date"}
WEEK = ("--start-date", "2024-01-08", "--end-date", "2024-01-12")


def digest_of(text: str) -> str:
    return re.search(r"plan digest ([0-9a-f]{12})", text).group(1)


def check_row(text: str, name: str) -> str:
    return next(line for line in text.splitlines() if re.search(rf"\s{name}\s", line))


@pytest.fixture
def daily(tmp_path: Path) -> Repo:
    """A standard-guardrails pipeline: raw.events (a view), mid.daily (time_interval on day), with five weeks of
    history (2023-12-01 to 2024-01-07)."""
    repo = Repo(tmp_path / "repo", guardrails="standard")
    repo.sql("raw.events", "SELECT 1 AS x", materialization={"type": "view"})
    redeclare_daily(repo)
    repo.run_ok("--start-date", "2023-12-01", "--end-date", "2024-01-07")
    return repo


DAILY_QUERY = (
    "SELECT CAST(range AS DATE) AS day, n FROM range(DATE '{{ start_date }}', DATE '{{ end_date }}' + "
    "INTERVAL 1 DAY, INTERVAL 1 DAY), range(10) AS t(n)"
)


def redeclare_daily(repo: Repo, **header) -> None:
    """mid.daily as the fixture declares it (ten rows a day), with more header fields (hooks, modifiers)."""
    repo.sql(
        "mid.daily",
        DAILY_QUERY,
        depends=["raw.events"],
        materialization=TIME_INTERVAL,
        **header,
    )


def test_a_safe_week_with_history_runs_automatically_with_its_reason(daily, home):
    """Every check passes for a week of a time_interval table with history: exit 0, verdict auto in the output,
    the reason saved in the manifest and handed to each child as BACKFILL_REASON."""
    result = run_backfill("p", *WEEK, "--reason", "fix for n", "--no-progress", cwd=daily.root, env=home)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "guard   auto (standard guardrails" in result.stdout
    [backfill] = state_dirs(daily.root / "logs" / "backfills")
    assert json.loads((backfill / "manifest.json").read_text())["reason"] == "fix for n"
    invocation = json.loads((backfill / "guardrails.json").read_text())["invocations"][0]
    assert invocation["preflight"]["verdict"] == "auto" and invocation["approval"]["how"] == "auto"
    assert [r["attempts"][-1]["verification"]["status"] for r in records(backfill)] == ["verified"] * 5


def test_a_disabled_asset_never_run_does_not_hold_the_backfill(daily, home):
    """An asset with enabled: false has no history (it never runs): the pre-flight leaves it out instead of
    holding the backfill for a human."""
    daily.sql("mid.retired", "SELECT DATE '{{ start_date }}' AS day", materialization=TIME_INTERVAL, enabled=False)
    result = run_backfill("p", *WEEK, "--reason", "fix for n", "--no-progress", cwd=daily.root, env=home)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "guard   auto (standard guardrails" in result.stdout


def test_a_backfill_without_reason_is_bad_input(daily, home):
    """No --reason: one line on stderr naming the flag, exit 2, nothing saved; a dry run needs none."""
    result = run_backfill("p", *WEEK, "--no-progress", cwd=daily.root, env=home)
    assert result.returncode == 2
    assert result.stderr.startswith("backfill: error: --reason is required") and len(result.stderr.splitlines()) == 1
    assert state_dirs(daily.root / "logs" / "backfills") == []
    assert run_backfill("p", *WEEK, "--dry-run", cwd=daily.root, env=home).returncode == 0
    empty = run_backfill("p", *WEEK, "--reason", " ", cwd=daily.root, env=home)
    assert empty.returncode == 2 and "--reason '' is empty" in empty.stderr


def test_a_range_ending_in_the_future_is_refused(daily, home):
    """A range that ends after now is never allowed: exit 3, range_in_past named, nothing saved."""
    result = run_backfill(
        "p", "--start-date", "2024-01-08", "--end-date", "2099-01-01", "--partition", "yearly", "--reason", "r",
        "--allow-long-range", cwd=daily.root, env=home,
    )  # fmt: skip
    assert result.returncode == 3, result.stdout + result.stderr
    assert "✗ fail  never" in check_row(result.stdout, "range_in_past")
    assert "range_in_past" in result.stderr and state_dirs(daily.root / "logs" / "backfills") == []


def test_a_raw_table_rebuilt_per_partition_is_never_allowed(tmp_path, home):
    """raw.orders with create+replace using the interval: layer risk and materialization both say never (exit 3),
    with every failing check in the report."""
    repo = Repo(tmp_path / "repo", guardrails="standard")
    repo.sql("raw.orders", "SELECT DATE '{{ start_date }}' AS day", materialization={"type": "table"})
    result = run_backfill("p", *WEEK, "--reason", "r", cwd=repo.root, env=home)
    assert result.returncode == 3, result.stdout + result.stderr
    assert "never" in check_row(result.stdout, "layer_risk") and "raw layer" in check_row(result.stdout, "layer_risk")
    assert "only the last partition would survive" in check_row(result.stdout, "materialization")
    assert "verdict: never" in result.stdout


def test_an_scd2_asset_sliced_by_the_interval_is_never_backfilled(tmp_path, home):
    """scd2_by_time over one partition's slice would close every key outside it: the materialization check says
    never, from the strategy the runner really runs."""
    repo = Repo(tmp_path / "repo", guardrails="standard")
    repo.sql(
        "mid.history",
        "SELECT 1 AS id, DATE '{{ start_date }}' AS day",
        materialization={"type": "table", "strategy": "scd2_by_time", "incremental_key": "day"},
        columns=[{"name": "id", "type": "INTEGER", "primary_key": True}, {"name": "day", "type": "DATE"}],
    )
    result = run_backfill("p", *WEEK, "--reason", "r", cwd=repo.root, env=home)
    assert result.returncode == 3, result.stdout + result.stderr
    assert "close the history of the keys outside its slice" in check_row(result.stdout, "materialization")


def add_append_log(repo: Repo) -> None:
    """mid.log: one row per day appended (append on its day), after mid.daily."""
    repo.sql(
        "mid.log",
        "SELECT CAST(range AS DATE) AS day FROM range(DATE '{{ start_date }}', DATE '{{ end_date }}' + INTERVAL 1 DAY,"
        " INTERVAL 1 DAY)",
        depends=["mid.daily"],
        materialization={"type": "table", "strategy": "append", "incremental_key": "day"},
    )


def test_append_over_existing_rows_needs_approval_and_the_digest_runs_it(daily, home):
    """An append asset whose table already holds rows of the range: approval (exit 4) with the row count; the
    printed digest given to --approve runs it (exit 0) and the approval is saved."""
    add_append_log(daily)
    daily.run_ok("--start-date", "2024-01-01", "--end-date", "2024-01-12")
    held = run_backfill("p", *WEEK, "--reason", "r", cwd=daily.root, env=home)
    assert held.returncode == 4, held.stdout + held.stderr
    row = check_row(held.stdout, "materialization")
    assert "approval" in row and "would duplicate 5 rows already in the range" in row
    assert "needs approval" in held.stderr and state_dirs(daily.root / "logs" / "backfills") == []
    digest = digest_of(held.stdout)
    approved = run_backfill("p", *WEEK, "--reason", "r", "--approve", digest[:8], cwd=daily.root, env=home)
    assert approved.returncode == 0, approved.stdout + approved.stderr
    [backfill] = state_dirs(daily.root / "logs" / "backfills")
    approval = json.loads((backfill / "guardrails.json").read_text())["invocations"][0]["approval"]
    assert approval["digest"].startswith(digest) and approval["tier"] == "approval" and "@" in approval["by"]


def test_an_approval_no_longer_holds_once_an_asset_file_or_the_evidence_changes(daily, home):
    """--approve with the digest of a held plan: after editing an asset file the approval is refused (exit 4)
    naming the file; after new upstream rows (a run of the week) it is refused naming the evidence."""
    add_append_log(daily)
    daily.run_ok("--start-date", "2024-01-01", "--end-date", "2024-01-09")
    held = run_backfill("p", *WEEK, "--reason", "r", cwd=daily.root, env=home)
    assert held.returncode == 4
    digest = digest_of(held.stdout)
    asset = daily.pipeline_dir / "assets" / "mid.daily.sql"
    original = asset.read_text()
    asset.write_text(original + "\n-- reviewed\n")
    edited = run_backfill("p", *WEEK, "--reason", "r", "--approve", digest, cwd=daily.root, env=home)
    assert edited.returncode == 4
    assert (
        "the plan changed since it was approved" in edited.stderr
        and "file assets/mid.daily.sql changed" in edited.stderr
    )
    asset.write_text(original)
    daily.run_ok("--start-date", "2024-01-10", "--end-date", "2024-01-10")  # new rows in the range
    moved = run_backfill("p", *WEEK, "--reason", "r", "--approve", digest, cwd=daily.root, env=home)
    assert moved.returncode == 4 and "evidence of materialization changed" in moved.stderr, moved.stderr
    assert state_dirs(daily.root / "logs" / "backfills") == []


def test_an_approval_of_a_command_no_longer_holds_once_the_script_it_names_changes(work, home):
    """A command's plan approved by its digest, then the script it runs edited: the old digest ran the new script
    (exit 0). It is now held (exit 4) naming the script, whether the template runs it as its program, gives it to
    an interpreter, names it as an option's value or in a shell's ``-c`` script, or runs it as
    ``--verify-command``; nothing runs."""
    script = work / "load.sh"
    script.write_text("#!/bin/sh\necho loading $1\n")
    script.chmod(0o755)
    forms = [
        ("--command", form)
        for form in (
            "./load.sh {start}",
            "sh load.sh {start}",
            "sh ./load.sh --config=load.sh",
            "bash -o pipefail -c './load.sh {start} | tee -a load.log'",
        )
    ]
    forms.append(("--command", "echo {start}", "--verify-command", "sh load.sh {start}"))  # the check replaced
    for form in forms:
        script.write_text("#!/bin/sh\necho loading $1\n")
        tried = (*form, "--start-date", "2024-01-01", "--end-date", "2024-01-01", "--reason", "r")
        assert run_backfill(*tried, "--guardrails", "sandbox", cwd=work, env=home).returncode == 0
        args = (*form, "--start-date", "2024-02-01", "--end-date", "2024-02-20", "--reason", "r", "--reversible")
        held = run_backfill(*args, cwd=work, env=home)
        assert held.returncode == 4 and "verdict: approval" in held.stdout, held.stdout + held.stderr
        script.write_text("#!/bin/sh\necho dropping everything $1\n")
        edited = run_backfill(*args, "--approve", digest_of(held.stdout), cwd=work, env=home)
        assert edited.returncode == 4, edited.stdout + edited.stderr
        assert "the plan changed since it was approved: file load.sh changed" in edited.stderr, edited.stderr
    assert not list(work.glob("logs/backfills/*/partitions/*")) or all(
        r["status"] == "succeeded" and r["start"].startswith("2024-01-01")
        for backfill in state_dirs(work / "logs" / "backfills")
        for r in records(backfill)
    )  # only the tried day ran


def test_an_approval_of_a_command_no_longer_holds_once_a_script_it_names_appears(work, home):
    """``sh load.sh {start} helpers.sh`` approved while helpers.sh was not there, then helpers.sh written: the
    approval vouched for its absence, so the old digest is held (exit 4) naming it as new; nothing runs."""
    (work / "load.sh").write_text('[ -e "$2" ] && . "./$2"\necho "$1" >> out.txt\n')
    form = ("--command", "sh load.sh {start} helpers.sh")
    tried = (*form, "--start-date", "2024-01-01", "--end-date", "2024-01-01", "--reason", "r")
    assert run_backfill(*tried, "--guardrails", "sandbox", cwd=work, env=home).returncode == 0
    args = (*form, "--start-date", "2024-02-01", "--end-date", "2024-02-20", "--reason", "r", "--reversible")
    held = run_backfill(*args, cwd=work, env=home)
    assert held.returncode == 4 and "verdict: approval" in held.stdout, held.stdout + held.stderr
    (work / "helpers.sh").write_text("echo unjudged >> pwned.txt\n")
    appeared = run_backfill(*args, "--approve", digest_of(held.stdout), cwd=work, env=home)
    assert appeared.returncode == 4, appeared.stdout + appeared.stderr
    # target_valid said "helpers.sh (not there yet)" when it was approved: its evidence changed with the file.
    changed = "the plan changed since it was approved: evidence of target_valid changed; file helpers.sh is new"
    assert changed in appeared.stderr, appeared.stderr
    assert (work / "out.txt").read_text().splitlines() == ["2024-01-01T00:00:00.000000Z"]
    assert not (work / "pwned.txt").exists()


def test_sql_run_as_written_is_human_only_and_approve_in_a_pipe_is_refused(daily, home):
    """An asset without materialization runs its SQL as written (its effect cannot be judged): human-only, and
    even the right digest in a pipe is refused (exit 4). (A merge without primary key or a delete+insert without
    incremental_key never gets this far: the pipeline does not validate, exit 2.)"""
    daily.sql("mid.adhoc", "CREATE TABLE IF NOT EXISTS mid.adhoc_log AS SELECT DATE '{{ start_date }}' AS day")
    daily.run_ok("--start-date", "2024-01-01", "--end-date", "2024-01-07")
    held = run_backfill("p", *WEEK, "--reason", "r", cwd=daily.root, env=home)
    assert held.returncode == 4, held.stdout + held.stderr
    row = check_row(held.stdout, "materialization")
    assert "human-only" in row and "mid.adhoc runs its SQL as written" in row
    again = run_backfill("p", *WEEK, "--reason", "r", "--approve", digest_of(held.stdout), cwd=daily.root, env=home)
    assert again.returncode == 4 and "human-only" in again.stderr and "--approve is not enough" in again.stderr


def test_missing_upstream_intervals_are_listed_and_refused(daily, home):
    """Selecting mid.daily alone over 2024-01-05..14 while raw.events succeeded only up to Jan 7: never (exit 3),
    the missing interval listed as one compact range."""
    result = run_backfill(
        "p", "--selector", "mid.daily", "--start-date", "2024-01-05", "--end-date", "2024-01-14",
        "--reason", "r", cwd=daily.root, env=home,
    )  # fmt: skip
    assert result.returncode == 3, result.stdout + result.stderr
    row = check_row(result.stdout, "upstream_coverage")
    assert "raw.events: 2024-01-08T00:00:00Z → 2024-01-15T00:00:00Z" in row


def test_a_process_holding_the_duckdb_file_blocks_the_backfill(daily, home):
    """While another process has the warehouse open for writing, the backfill is refused (exit 3) naming it."""
    holder = duckdb.connect(str(daily.database))
    try:
        result = run_backfill("p", *WEEK, "--reason", "r", cwd=daily.root, env=home)
    finally:
        holder.close()
    assert result.returncode == 3, result.stdout + result.stderr
    row = check_row(result.stdout, "downstream_awareness")
    assert "is open for writing by process" in row and str(daily.database) in row


def anomaly_backfill(daily: Repo, home) -> tuple[subprocess.CompletedProcess, Path]:
    """The week backfilled with Jan 10 landing 100 rows where every past Wednesday had 10."""
    sql = daily.pipeline_dir / "assets" / "mid.daily.sql"
    sql.write_text(
        sql.read_text().replace(
            "range(10) AS t(n)",
            "range(CASE WHEN DATE '{{ start_date }}' = DATE '2024-01-10' THEN 100 ELSE 10 END) AS t(n)",
        )
    )
    daily.run_ok("--start-date", "2023-11-01", "--end-date", "2023-11-30")  # history of the new file too
    result = run_backfill(
        "p", *WEEK, "--reason", "r", "--on-failure", "continue", "--no-progress", cwd=daily.root, env=home
    )
    [backfill] = state_dirs(daily.root / "logs" / "backfills")
    return result, backfill


def test_a_row_count_anomaly_stops_the_backfill_at_that_partition(daily, home):
    """Jan 10 lands 100 rows where every past Wednesday had 10: that partition fails verification with the
    numbers in its attempt and in the progress lines, and the backfill stops there (even with --on-failure
    continue)."""
    result, backfill = anomaly_backfill(daily, home)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "verification: mid.daily: 100 rows, outside 5–20" in result.stderr
    by_start = {r["start"][:10]: r for r in records(backfill)}
    failed = by_start["2024-01-10"]
    assert failed["status"] == "failed"
    error = failed["attempts"][-1]["error"]
    assert error.startswith("verification: mid.daily: 100 rows, outside 5–20 (Wednesday mean 10"), error
    assert failed["attempts"][-1]["verification"]["assets"][0]["status"] == "outside"
    assert sorted(by_start) == ["2024-01-08", "2024-01-09", "2024-01-10"], "nothing starts after the bad partition"


def test_verify_command_failure_fails_the_partition_and_stops(work, home):
    """--verify-command runs after each successful partition with its placeholders; its non-zero exit fails that
    partition ("verification: …") and no later partition starts."""
    check = work / "check.sh"
    check.write_text('#!/bin/sh\necho "checking $1"\ntest "$1" != 2024-01-03\n')
    check.chmod(0o755)
    result = run_backfill(
        "--command",
        child_command(),
        "--start-date",
        "2024-01-01",
        "--end-date",
        "2024-01-06",
        "--reason",
        "r",
        "--reversible",
        "--guardrails",
        "sandbox",
        "--verify-command",
        f"{check} {{start_date}}",
        "--no-progress",
        cwd=work,
        env=home,
    )
    assert result.returncode == 1, result.stdout + result.stderr
    [backfill] = state_dirs(work / "logs" / "backfills")
    statuses = {r["start"][:10]: r["status"] for r in records(backfill)}
    assert statuses == {"2024-01-01": "succeeded", "2024-01-02": "succeeded", "2024-01-03": "failed"}
    third = records(backfill)[2]["attempts"][-1]
    assert third["error"].startswith("verification: --verify-command exited 1")
    assert "checking 2024-01-03" in (backfill / third["log"]).read_text()


def test_a_command_without_a_tried_restore_path_is_human_only(work, home):
    """A command backfill is human-only without --reversible, and still human-only with it while the command
    has never succeeded here (the flag states a restore path nobody has tried); once one partition succeeded,
    --reversible lets it run. Sandbox shows both as warnings. In a pipe, human-only is exit 4."""
    base = ("--command", "true", "--start-date", "2024-01-01", "--end-date", "2024-01-02", "--reason", "r")
    held = run_backfill(*base, cwd=work, env=home)
    assert held.returncode == 4 and "human-only" in check_row(held.stdout, "reversibility")
    untried = run_backfill(*base, "--reversible", cwd=work, env=home)
    assert untried.returncode == 4
    row = check_row(untried.stdout, "reversibility")
    assert "human-only" in row and "this command has never succeeded here" in row
    assert not state_dirs(work / "logs" / "backfills") or all(
        not (backfill / "partitions").exists() or not any((backfill / "partitions").iterdir())
        for backfill in state_dirs(work / "logs" / "backfills")
    )  # nothing ran
    sandboxed = run_backfill(*base, "--guardrails", "sandbox", "--no-progress", cwd=work, env=home)
    assert sandboxed.returncode == 0 and "guard   auto (sandbox guardrails, 4 warnings)" in sandboxed.stdout
    one_day = ("--command", "true", "--start-date", "2024-01-03", "--end-date", "2024-01-03", "--reason", "r")
    tried = run_backfill(*one_day, "--reversible", "--no-progress", cwd=work, env=home)
    assert tried.returncode == 0, tried.stdout + tried.stderr
    assert "guard   auto (standard guardrails" in tried.stdout


def test_no_snapshot_on_a_data_changing_pipeline_is_human_only(daily, home):
    """--no-snapshot leaves a time_interval table without a restore path: human-only, exit 4 in a pipe, and
    the table is untouched."""
    before = daily.query("SELECT * FROM mid.daily ORDER BY ALL")
    checks = dry_checks(daily, home, "--no-snapshot")
    assert checks["reversibility"]["tier"] == "human-only"
    assert checks["reversibility"]["detail"] == "--no-snapshot: no restore path for mid.daily"
    held = run_backfill("p", *WEEK, "--reason", "r", "--no-snapshot", "--no-progress", cwd=daily.root, env=home)
    assert held.returncode == 4, held.stdout + held.stderr
    assert daily.query("SELECT * FROM mid.daily ORDER BY ALL") == before


def test_guardrail_flags_that_mean_nothing_for_the_target_are_bad_input(daily, work, home):
    """--reversible, --guardrails and --verify-command on a pipeline, --no-snapshot on a command, an unknown
    --verify mode or level, and a malformed --approve: one line each, exit 2."""
    for flags in (("--reversible",), ("--guardrails", "sandbox"), ("--verify-command", "true")):
        result = run_backfill("p", *WEEK, "--reason", "r", *flags, cwd=daily.root, env=home)
        assert result.returncode == 2 and f"{flags[0]} means nothing for a pipeline backfill" in result.stderr
    command = ("--command", "true", "--start-date", "2024-01-01", "--end-date", "2024-01-02", "--reason", "r")
    assert "--no-snapshot means nothing" in run_backfill(*command, "--no-snapshot", cwd=work, env=home).stderr
    for flags, says in (
        (("--verify", "maybe"), "--verify 'maybe' is not a verification mode"),
        (("--guardrails", "lax"), "--guardrails 'lax' is not a guardrail level"),
        (("--approve", "xyz"), "--approve 'xyz' is not a plan digest"),
        (("--approve", "١٢٣٤٥٦٧٨"), "is not a plan digest"),
    ):
        result = run_backfill(*command, *flags, cwd=work, env=home)
        assert result.returncode == 2 and says in result.stderr and len(result.stderr.splitlines()) == 1, result.stderr


def test_a_continue_that_reruns_succeeded_partitions_needs_its_own_reason(work, home):
    """--continue --rerun all over succeeded partitions without --reason: exit 2; with one it runs and the
    invocation is recorded as a rerun with that reason."""
    args = ("--command", "true", "--start-date", "2024-01-01", "--end-date", "2024-01-02", "--reason", "first")
    assert (
        run_backfill(*args, "--reversible", "--guardrails", "sandbox", "--no-progress", cwd=work, env=home).returncode
        == 0
    )
    [backfill] = state_dirs(work / "logs" / "backfills")
    refused = run_backfill("--continue", backfill.name, "--rerun", "all", cwd=work, env=home)
    assert refused.returncode == 2 and "--reason is required to run succeeded partitions" in refused.stderr
    again = run_backfill(
        "--continue", backfill.name, "--rerun", "all", "--reason", "again", "--no-progress", cwd=work, env=home
    )
    assert again.returncode == 0, again.stdout + again.stderr
    invocations = json.loads((backfill / "guardrails.json").read_text())["invocations"]
    assert [(i["mode"], i["reason"]) for i in invocations] == [("trigger", "first"), ("rerun", "again")]


def test_run_and_show_json_carry_the_preflight_the_record_and_each_verification(daily, home):
    """--output json after a run: preflight, record and per attempt verification; show --output json: the
    reason, the latest pre-flight and the record's copy."""
    result = run_backfill("p", *WEEK, "--reason", "json", "--output", "json", cwd=daily.root, env=home)
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert list(document)[:5] == ["backfill", "options", "preflight", "record", "record_error"]
    assert document["preflight"]["verdict"] == "auto" and Path(document["record"]).exists()
    assert {p["attempts"][-1]["verification"]["status"] for p in document["partitions"]} == {"verified"}
    shown = json.loads(
        run_backfill("show", document["backfill"]["id"], "--output", "json", cwd=daily.root, env=home).stdout
    )
    assert shown["reason"] == "json" and shown["preflight"]["digest"] == document["preflight"]["digest"]
    assert Path(shown["record"]).read_text() == Path(document["record"]).read_text()


def test_dry_run_json_carries_the_preflight_and_exits_zero_whatever_the_verdict(daily, home):
    """A dry run of a never-allowed plan exits 0 and its JSON has preflight.verdict, digest and every check."""
    result = run_backfill(
        "p", "--start-date", "2024-01-08", "--end-date", "2099-01-01", "--partition", "yearly", "--dry-run",
        "--output", "json", cwd=daily.root, env=home,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    preflight = json.loads(result.stdout)["preflight"]
    assert preflight["verdict"] == "never" and len(preflight["digest"]) == 64
    names = [check["name"] for check in preflight["checks"]]
    assert names[:5] == ["target_valid", "history_exists", "range_size", "interval_count", "range_in_past"]
    assert names[-1] == "certainty"
    assert all(set(check) >= {"name", "status", "tier", "detail", "evidence"} for check in preflight["checks"])


def test_another_running_backfill_of_the_pipeline_blocks_a_new_one(tmp_path, home):
    """While a backfill of the pipeline runs (a slow Python asset), a second one is refused (exit 3) naming the
    running backfill, its PID and host, even from another --state-dir; the first is then stopped and waited for."""
    import signal
    import socket

    from tests.backfills import start_background, wait_for

    repo = Repo(tmp_path / "repo")
    repo.python("slow.sleep", "import time\ntime.sleep(60)\n")
    first = start_background(
        "p", "--start-date", "2024-01-01", "--end-date", "2024-01-02", "--reason", "first", "--no-progress",
        cwd=repo.root, env=home,
    )  # fmt: skip
    try:
        backfill = wait_for(lambda: (state_dirs(repo.root / "logs" / "backfills") or [None])[0])
        wait_for(lambda: any(r["status"] == "running" for r in records(backfill)) or None)
        # Another state root: the registry of running work is the user's, not the state root's.
        second = run_backfill("p", *WEEK, "--reason", "second", "--state-dir", "elsewhere", cwd=repo.root, env=home)
        assert second.returncode == 3, second.stdout + second.stderr
        row = check_row(second.stdout, "downstream_awareness")
        who = f"backfill {backfill.name}, PID {first.pid} on {socket.gethostname()}"
        assert f"wait for {who}: it runs slow.sleep" in row
    finally:
        first.send_signal(signal.SIGTERM)
        first.communicate(timeout=60)
    assert first.returncode == 130


def configure(repo: Repo, **environment) -> None:
    """Rewrite the repository's .bruin.yml: environment ``dev`` with these guardrail keys (and ``db``'s quota)."""
    import yaml

    quota = environment.pop("daily_run_quota", None)
    connection = {"name": "db", "path": "warehouse.duckdb", **({"daily_run_quota": quota} if quota else {})}
    limits = {**TEST_LIMITS["guardrail_limits"], **environment.pop("guardrail_limits", {})}
    dev = {**environment, "guardrail_limits": limits, "connections": {"duckdb": [connection]}}
    repo.write(".bruin.yml", yaml.safe_dump({"default_environment": "dev", "environments": {"dev": dev}}))


def dry_checks(repo: Repo, home, *flags: str, start: str = "2024-01-08", end: str = "2024-01-12") -> dict:
    result = run_backfill(
        "p", "--start-date", start, "--end-date", end, *flags, "--dry-run", "--output", "json", cwd=repo.root, env=home
    )
    assert result.returncode == 0, result.stderr
    preflight = json.loads(result.stdout)["preflight"]
    return {"verdict": preflight["verdict"], **{c["name"]: c for c in preflight["checks"]}}


def test_levels_limits_quotas_and_gates_from_the_environment(daily, home):
    """Each configuration key changes what the checks demand: production makes a safe week approval; a tiny
    max_hours makes size approval; a quota of 1 run a day is never; a 100-day range is human-only until
    --allow-long-range; dependency_gates: warn turns missing upstream intervals from never into approval."""
    assert dry_checks(daily, home)["verdict"] == "auto"
    configure(daily, guardrails="production")
    checks = dry_checks(daily, home)
    assert checks["verdict"] == "approval" and checks["environment"]["tier"] == "approval"
    configure(daily, guardrail_limits={"max_hours": 0.000001})
    assert dry_checks(daily, home)["size_and_duration"]["tier"] == "approval"
    configure(daily, daily_run_quota=1)
    quota = dry_checks(daily, home)["connector_quotas"]
    assert quota["tier"] == "never" and quota["evidence"]["quotas"]["db"]["runs_today"] >= 1
    configure(daily)
    assert dry_checks(daily, home, end="2024-04-30")["range_size"]["tier"] == "human-only"
    assert dry_checks(daily, home, "--allow-long-range", end="2024-04-30")["range_size"]["tier"] == "approval"
    configure(daily, dependency_gates="warn")
    gated = dry_checks(daily, home, "--selector", "mid.daily", start="2024-01-05", end="2024-01-14")
    assert gated["upstream_coverage"]["tier"] == "approval" and gated["upstream_coverage"]["evidence"]["gate_bypass"]
    configure(daily, guardrails="sandbox", guardrail_limits={"approval_days": 1})
    sandboxed = dry_checks(daily, home)
    assert sandboxed["verdict"] == "auto"
    assert sandboxed["range_size"]["status"] == "warn" and sandboxed["range_size"]["demanded"] == "approval"
    configure(daily, guardrails="lenient")
    bad = run_backfill("p", *WEEK, "--dry-run", cwd=daily.root, env=home)
    assert bad.returncode == 2 and "guardrails is 'lenient': use sandbox, standard or production" in bad.stderr


def test_interval_semantics_and_a_row_count_far_above_history(daily, home):
    """An asset that never reads its interval next to one that does: a warning naming it; alone, human-only.
    A query now returning 100× the rows its past runs wrote: row-count sanity asks for approval."""
    daily.sql(
        "mid.lookup",
        "SELECT 1 AS id, 'x' AS label",
        materialization={"type": "table", "strategy": "merge"},
        columns=[{"name": "id", "type": "integer", "primary_key": True}, {"name": "label", "type": "varchar"}],
    )
    daily.run_ok("--start-date", "2024-01-01", "--end-date", "2024-01-07")
    both = dry_checks(daily, home)
    assert both["interval_semantics"]["status"] == "warn"
    assert both["interval_semantics"]["evidence"]["without_interval"] == ["mid.lookup", "raw.events"]
    alone = dry_checks(daily, home, "--selector", "mid.lookup")
    assert alone["interval_semantics"]["tier"] == "human-only"
    sql = daily.pipeline_dir / "assets" / "mid.daily.sql"
    sql.write_text(sql.read_text().replace("range(10) AS t(n)", "range(1000) AS t(n)"))
    grown = dry_checks(daily, home, "--selector", "mid.daily")
    row = grown["row_count_sanity"]
    assert row["tier"] == "approval" and "mid.daily: 1,000 rows per partition vs 10 before" in row["detail"]


def test_children_see_the_reason_of_the_invocation(work, home):
    """Each child gets BACKFILL_REASON: the backfill's reason, and a rerun's own reason on that rerun."""
    args = (
        "--command",
        "sh -c 'echo reason=$BACKFILL_REASON'",
        "--start-date",
        "2024-01-01",
        "--end-date",
        "2024-01-01",
    )
    assert (
        run_backfill(
            *args, "--reason", "first pass", "--reversible", "--guardrails", "sandbox", cwd=work, env=home
        ).returncode
        == 0
    )
    [backfill] = state_dirs(work / "logs" / "backfills")
    rerun = ("--continue", backfill.name, "--rerun", "all", "--reason", "second pass")
    assert run_backfill(*rerun, cwd=work, env=home).returncode == 0
    logs = [(backfill / a["log"]).read_text().strip() for a in records(backfill)[0]["attempts"]]
    assert logs == ["reason=first pass", "reason=second pass"]


def test_the_row_sample_renders_macros_and_reads_sql_ending_in_a_comment(daily, home):
    """An asset that calls a macro and ends in ``-- comment`` (after a semicolon): the pre-flight samples it
    (10 rows a day) instead of finding the check undecidable, and the backfill runs it, merge included (its
    query is wrapped in ``USING (…)``, where the comment swallowed the parenthesis)."""
    daily.write("p/macros/days.sql", "{% macro day_range() %}range(DATE '{{ start_date }}', DATE '{{ end_date }}' "
                "+ INTERVAL 1 DAY, INTERVAL 1 DAY){% endmacro %}")  # fmt: skip
    daily.sql(
        "mid.daily",
        "SELECT CAST(range AS DATE) AS day, n FROM {{ day_range() }}, range(10) AS t(n); -- ten rows a day\n"
        "-- mentions '{{ start_date }}' once more",
        depends=["raw.events"],
        materialization=TIME_INTERVAL,
    )
    checks = dry_checks(daily, home)
    sample = checks["row_count_sanity"]
    assert sample["tier"] == "auto", sample
    assert sample["evidence"]["assets"]["mid.daily"]["sample_rows"] == 10
    daily.sql(
        "mart.totals",
        "SELECT day, count(*) AS rows FROM mid.daily WHERE day BETWEEN '{{ start_date }}' AND '{{ end_date }}' "
        "GROUP BY day -- one row a day",
        depends=["mid.daily"],
        materialization={"type": "table", "strategy": "merge"},
        columns=[{"name": "day", "type": "date", "primary_key": True}, {"name": "rows", "type": "bigint",
                                                                         "update_on_merge": True}],
    )  # fmt: skip
    ran = daily.run("--start-date", "2024-01-08", "--end-date", "2024-01-08")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    ran = daily.run("--start-date", "2024-01-09", "--end-date", "2024-01-09")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert [(d.isoformat(), n) for d, n in daily.query("SELECT * FROM mart.totals ORDER BY ALL")] == [
        ("2024-01-08", 10),
        ("2024-01-09", 10),
    ]


def test_whether_an_asset_uses_its_interval_is_read_from_what_it_renders(daily, home):
    """A create+replace table whose window comes from a macro rebuilds the table from each partition (only
    the last would survive): never. One whose only mention of ``{{ start_date }}`` is a comment rebuilds the
    same table each time: merely repeated, not refused."""
    daily.write("p/macros/window.sql", "{% macro window_filter() %}day BETWEEN '{{ start_date }}' AND "
                "'{{ end_date }}'{% endmacro %}")  # fmt: skip
    daily.sql("mart.recent", "SELECT * FROM mid.daily WHERE {{ window_filter() }}", depends=["mid.daily"],
              materialization={"type": "table"})  # fmt: skip
    checks = dry_checks(daily, home, "--selector", "mart.recent")
    assert checks["materialization"]["tier"] == "never", checks["materialization"]
    assert "mart.recent" in checks["materialization"]["detail"]
    daily.sql("mart.recent", "-- rebuilt whole; {{ start_date }} is not used\nSELECT count(*) AS n FROM mid.daily",
              depends=["mid.daily"], materialization={"type": "table"})  # fmt: skip
    checks = dry_checks(daily, home, "--selector", "mart.recent")
    assert checks["materialization"]["tier"] != "never", checks["materialization"]


def test_a_query_that_returns_rows_outside_its_window_is_never_run(daily, home):
    """A time_interval query filtered only by ``>= start_date``: each partition deletes its own day but writes
    every later day again. The pre-flight runs the first partition's query read-only, counts the rows outside
    the window and refuses (never) before any row is written; the table is unchanged."""
    before = daily.query("SELECT * FROM mid.daily ORDER BY ALL")
    daily.sql(
        "mid.daily",
        "SELECT CAST(range AS DATE) AS day, n FROM range(DATE '{{ start_date }}', DATE '2024-01-13', "
        "INTERVAL 1 DAY), range(10) AS t(n)",
        depends=["raw.events"],
        materialization=TIME_INTERVAL,
    )
    checks = dry_checks(daily, home)
    assert checks["verdict"] == "never"
    assert checks["materialization"]["tier"] == "never"
    assert (
        "mid.daily: the query returns 40 rows outside the partition's window; time_interval would duplicate them"
        in checks["materialization"]["detail"]
    )
    ran = run_backfill("p", *WEEK, "--reason", "r", "--no-progress", cwd=daily.root, env=home)
    assert ran.returncode == 3, ran.stdout + ran.stderr
    assert daily.query("SELECT * FROM mid.daily ORDER BY ALL") == before


def test_a_partition_that_changes_rows_outside_its_window_is_rolled_back_and_stops(daily, home):
    """The blast radius: a post hook that deletes old history (the pre-flight sees only the query) runs in
    the first partition, which changes rows outside its window; that partition is rolled back, the backfill
    stops, the attempt says why with the numbers, and the table is exactly as it was."""
    before = daily.query("SELECT * FROM mid.daily ORDER BY ALL")
    redeclare_daily(
        daily, hooks={"post": [{"query": "DELETE FROM mid.daily WHERE day < DATE '{{ start_date }}' - INTERVAL 7 DAY"}]}
    )
    ran = run_backfill("p", *WEEK, "--reason", "r", "--no-progress", cwd=daily.root, env=home)
    assert ran.returncode == 1, ran.stdout + ran.stderr
    assert daily.query("SELECT * FROM mid.daily ORDER BY ALL") == before
    [backfill] = state_dirs(daily.root / "logs" / "backfills")
    attempted = [r for r in records(backfill) if r["attempts"]]
    assert len(attempted) == 1 and attempted[0]["status"] == "failed"
    error = attempted[0]["attempts"][-1]["error"]
    assert "mid.daily changed rows outside its window 2024-01-08T00:00:00+00:00" in error, error
    assert "(380 rows there before, 70 after): rolled back" in error, error  # 38 days of 10 rows; 7 left


def test_a_verification_failure_cancels_the_partitions_in_flight(work, home):
    """--max-parallel 2: when the first partition fails verification, the one still running is cancelled
    (resumable), the third never starts, and nothing more lands unverified."""
    script = work / "work.sh"
    script.write_text(
        '#!/bin/sh\n[ "$1" = 2024-01-01 ] && exit 0\ntouch "$2/$1.started"\n'
        'i=0; while [ ! -f "$2/release" ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done\n'  # 10 s at most
    )
    check = work / "check.sh"
    check.write_text(  # judged once the second partition runs, so that it is in flight
        f'#!/bin/sh\nwhile [ ! -f "{work}/2024-01-02.started" ]; do sleep 0.05; done\ntest "$1" != 2024-01-01\n'
    )
    for path in (script, check):
        path.chmod(0o755)
    result = run_backfill(
        "--command", f"{script} {{start_date}} {work}", "--start-date", "2024-01-01", "--end-date", "2024-01-03",
        "--reason", "r", "--reversible", "--guardrails", "sandbox", "--max-parallel", "2",
        "--verify-command", f"{check} {{start_date}}", "--no-progress", cwd=work, env=home,
    )  # fmt: skip
    assert result.returncode == 1, result.stdout + result.stderr
    [backfill] = state_dirs(work / "logs" / "backfills")
    statuses = {r["start"][:10]: r["status"] for r in records(backfill)}
    assert statuses == {"2024-01-01": "failed", "2024-01-02": "cancelled"}, statuses
    cancelled = next(r for r in records(backfill) if r["status"] == "cancelled")["attempts"][-1]
    assert cancelled["error"] == "cancelled: partition 0 failed verification"
    assert not (work / "2024-01-03.started").exists()


def test_an_append_whose_rows_are_already_in_the_table_needs_approval(daily, home):
    """An append keyed by load date: the rows of 2024-01-08 are already in the table (loaded once before),
    yet no key falls in the range, so a count by window sees nothing. The pre-flight intersects the first
    partition's sample with the table row for row and asks for approval with the count."""
    daily.sql(
        "mid.loads",
        "SELECT DATE '{{ start_date }}' AS event_day, n, DATE '2024-06-01' AS loaded_on FROM range(3) AS t(n)",
        depends=["mid.daily"],
        materialization={"type": "table", "strategy": "append", "incremental_key": "loaded_on"},
    )
    daily.run_ok("--start-date", "2024-01-08", "--end-date", "2024-01-08", "--select", "mid.loads")
    checks = dry_checks(daily, home, "--selector", "mid.loads")
    assert checks["materialization"]["tier"] == "approval", checks["materialization"]
    assert (
        "mid.loads (append): the first partition's query returns 3 rows the table already holds; appending "
        "would duplicate them" in checks["materialization"]["detail"]
    )
    assert daily.query("SELECT count(*) FROM mid.loads") == [(3,)]


def test_partitions_finer_than_a_date_key_are_never_run(daily, home):
    """Hourly (or 6h) partitions of a time_interval table keyed by date: each hour would delete its whole day
    and keep only its own rows, so the pre-flight refuses (never); daily partitions of it are fine."""
    for unit in ("hourly", "6h"):
        checks = dry_checks(daily, home, "--partition", unit, end="2024-01-08")
        assert checks["materialization"]["tier"] == "never", checks["materialization"]
        assert (
            f"mid.daily: {unit} partitions over a date key (time_granularity: date): each partition would replace "
            "whole days" in checks["materialization"]["detail"]
        )
    assert dry_checks(daily, home, "--partition", "48h", end="2024-01-09")["materialization"]["tier"] == "auto"
    assert dry_checks(daily, home)["materialization"]["tier"] == "auto"


def test_an_interval_modifier_that_reaches_into_the_future_is_never_run(daily, home):
    """A range that ends yesterday, with an asset whose end modifier adds three days: with
    --apply-interval-modifiers its last run would read two days of the future, refused like a future range;
    without the modifier (or without the flag) the range is in the past."""
    from datetime import UTC, datetime, timedelta

    yesterday = (datetime.now(UTC).date() - timedelta(days=1)).isoformat()
    checks = dry_checks(daily, home, start=yesterday, end=yesterday)
    assert checks["range_in_past"]["tier"] == "auto"
    redeclare_daily(daily, interval_modifiers={"end": "3d"})
    assert dry_checks(daily, home, start=yesterday, end=yesterday)["range_in_past"]["tier"] == "auto"  # not applied
    checks = dry_checks(daily, home, "--apply-interval-modifiers", start=yesterday, end=yesterday)
    past = checks["range_in_past"]
    assert past["tier"] == "never", past
    assert past["detail"].startswith("mid.daily's interval modifier moves its last run's end to ")
    assert past["detail"].endswith(", after now: backfilling the future is always a mistake")
    assert past["evidence"]["effective_end"] > past["evidence"]["end"]


def test_a_full_refresh_by_hand_needs_a_reason_and_never_rebuilds_raw(daily, home):
    """`backfill run --full-refresh` drops tables: without --reason it is refused (exit 2) before anything
    runs; a raw table in the selection is never rebuilt (exit 3); with a reason the rebuild runs and the run
    record keeps it. --reason on a plain run means nothing (exit 2)."""
    daily.sql("raw.source", "SELECT 1 AS x", materialization={"type": "table", "strategy": "append"})
    daily.run_ok("--start-date", "2024-01-08", "--end-date", "2024-01-08", "--select", "raw.source")
    before = daily.query("SELECT * FROM mid.daily ORDER BY ALL")
    day = ("--start-date", "2024-01-08", "--end-date", "2024-01-08")
    bare = daily.run(*day, "--full-refresh", "--select", "mid.daily")
    assert bare.returncode == 2 and bare.stderr.strip().endswith(
        "--full-refresh drops and rebuilds the selected tables: give --reason TEXT (it is recorded)"
    ), bare.stderr
    raw = daily.run(*day, "--full-refresh", "--reason", "r")
    assert raw.returncode == 3 and "never: raw.source is in the raw layer and --full-refresh rebuilds it" in raw.stderr
    assert daily.query("SELECT * FROM mid.daily ORDER BY ALL") == before
    assert daily.query("SELECT count(*) FROM raw.source") == [(1,)]
    noise = daily.run(*day, "--reason", "r")
    assert noise.returncode == 2 and "--reason means nothing for this run" in noise.stderr
    rebuilt = daily.run(*day, "--full-refresh", "--select", "mid.daily", "--reason", "drop the bad column")
    assert rebuilt.returncode == 0, rebuilt.stdout + rebuilt.stderr
    assert daily.query("SELECT count(*) FROM mid.daily") == [(10,)]
    assert daily.records()[-1]["reason"] == "drop the bad column"


def test_a_delete_style_strategy_on_a_raw_table_is_never_run_by_hand(daily, home):
    """`backfill run` by hand of a raw table that a strategy deletes rows of (create+replace, delete+insert) is
    refused (exit 3) naming each, how to go on, and nothing is created; an append to raw, a raw seed and the same
    table tagged layer:mid run."""
    day = ("--start-date", "2024-01-08", "--end-date", "2024-01-08")
    daily.sql("raw.landing", "SELECT 1 AS x", materialization={"type": "table"})
    daily.sql("raw.slice", "SELECT DATE '{{ start_date }}' AS day", materialization=TIME_INTERVAL | {
        "strategy": "delete+insert"})  # fmt: skip
    daily.sql("raw.feed", "SELECT 1 AS x", materialization={"type": "table", "strategy": "append"})
    daily.write("p/assets/raw/codes.asset.yml", "name: raw.codes\ntype: duckdb.seed\nparameters:\n  path: codes.csv\n")
    daily.write("p/assets/raw/codes.csv", "code\n7\n")
    refused = daily.run(*day, "--select", "raw.landing", "--select", "raw.slice")
    assert refused.returncode == 3, refused.stdout + refused.stderr
    assert refused.stderr.strip().endswith(
        "never: raw.landing (create+replace), raw.slice (delete+insert) are in the raw layer with a delete-style "
        "strategy: source data is never deleted or rebuilt, by hand or in a backfill; select it out (--exclude-tag, "
        "a selector), or tag it layer:mid if it is not source data"
    ), refused.stderr
    tables = "SELECT table_name FROM duckdb_tables() WHERE schema_name = 'raw' ORDER BY ALL"
    assert daily.query(tables) == []
    daily.run_ok(*day, "--select", "raw.feed", "--select", "raw.codes")
    assert daily.query(tables) == [("codes",), ("feed",)]
    daily.sql("raw.landing", "SELECT 1 AS x", materialization={"type": "table"}, tags=["layer:mid"])
    daily.run_ok(*day, "--select", "raw.landing")
    assert daily.query("SELECT * FROM raw.landing") == [(1,)]


def test_an_asset_named_with_its_catalog_is_in_the_layer_of_its_schema(daily, home):
    """Bruin names a DuckDB table ``catalog.schema.table`` too. ``warehouse.raw.slice`` (the warehouse file's own
    catalog), delete+insert, was placed in a layer by its catalog: layer risk passed, verdict auto, and each
    partition deleted source rows. Its schema decides: never in a backfill and by hand (exit 3, nothing created),
    and ``warehouse.mart.x`` is final."""
    daily.sql("warehouse.raw.slice", "SELECT DATE '{{ start_date }}' AS day", materialization=TIME_INTERVAL | {
        "strategy": "delete+insert"})  # fmt: skip
    checks = dry_checks(daily, home, "--selector", "warehouse.raw.slice", "--allow-long-range")
    assert checks["layer_risk"]["tier"] == "never", checks["layer_risk"]
    assert checks["layer_risk"]["detail"] == (
        "warehouse.raw.slice: raw layer with a delete-style strategy (source data is never deleted or rebuilt)"
    )
    result = run_backfill("p", *WEEK, "--selector", "warehouse.raw.slice", "--reason", "r", cwd=daily.root, env=home)
    assert result.returncode == 3 and "verdict: never" in result.stdout, result.stdout + result.stderr
    by_hand = daily.run("--start-date", "2024-01-08", "--end-date", "2024-01-08", "--select", "warehouse.raw.slice")
    assert (
        by_hand.returncode == 3 and "never: warehouse.raw.slice (delete+insert) is in the raw layer" in by_hand.stderr
    )
    assert daily.query("SELECT table_name FROM duckdb_tables() WHERE schema_name = 'raw'") == []
    daily.sql("warehouse.mart.x", "SELECT 1 AS x", materialization={"type": "table", "strategy": "append"})
    assert dry_checks(daily, home, "--selector", "warehouse.mart.x")["layer_risk"]["evidence"]["layers"] == {
        "warehouse.mart.x": {"from": "schema mart", "layer": "final"}
    }


def test_a_hook_naming_its_own_table_without_the_catalog_is_fenced_as_its_own(tmp_path, home):
    """``warehouse.mid.slice`` (time_interval) whose pre hooks clear its own day, named with and without the
    catalog: the window fence judges them, the backfill runs (``mid.slice`` was taken for another table and every
    partition failed); a day outside the window deleted that way is still rolled back and stops the run."""
    repo = Repo(tmp_path / "repo")

    def declare(*hooks: str) -> None:
        repo.sql("warehouse.mid.slice", "SELECT DATE '{{ start_date }}' AS day", materialization=TIME_INTERVAL,
                 hooks={"pre": [{"query": hook} for hook in hooks]})  # fmt: skip

    repo.execute("CREATE SCHEMA mid", "CREATE TABLE mid.slice (day DATE)")
    declare(
        *(
            f"DELETE FROM {name} WHERE day = DATE '{{{{ start_date }}}}'"
            for name in ("mid.slice", "warehouse.mid.slice")
        )
    )
    result = run_backfill("p", *WEEK, "--reason", "r", cwd=repo.root, env=home)
    assert result.returncode == 0, result.stdout + result.stderr
    assert repo.query("SELECT count(*), count(DISTINCT day) FROM mid.slice") == [(5, 5)]
    declare("DELETE FROM mid.slice WHERE day = DATE '2024-01-08'")
    result = run_backfill("p", "--start-date", "2024-01-09", "--end-date", "2024-01-09", "--reason", "r",
                          cwd=repo.root, env=home)  # fmt: skip
    assert result.returncode == 1 and "outside" in result.stdout + result.stderr, result.stdout + result.stderr
    assert repo.query("SELECT count(*) FROM mid.slice") == [(5,)]


def test_a_backfill_id_given_by_hand_does_not_walk_around_the_checks_of_a_run_by_hand(daily, home):
    """``--backfill-id`` marks a backfill's own partition runs, which skip the checks of a run by hand (their
    pre-flight judged them). Given by hand — alone, or with a partition run's whole command line copied from a
    log — it is one line and exit 2, and the raw table it would have rebuilt is never created; the flags that
    only go with it are refused without it. With the IDs the executor sets in the run's environment too, the run
    is a partition's and runs."""
    day = ("--start-date", "2024-01-08", "--end-date", "2024-01-08", "--select", "raw.landing")
    daily.sql("raw.landing", "SELECT 1 AS x", materialization={"type": "table"})
    tables = "SELECT table_name FROM duckdb_tables() WHERE schema_name = 'raw'"
    child = ("--backfill-id", "bf-1", "--run-id", "bf-1-p0-a1", "--partition-id", "9b0c")
    for flags in (("--backfill-id", "bf-1"), child, (*child, "--full-refresh")):
        refused = daily.run(*day, *flags, env=home)
        assert refused.returncode == 2, refused.stdout + refused.stderr
        assert refused.stderr == (
            "backfill: error: --backfill-id 'bf-1' is how a backfill starts its own partitions (with --run-id and "
            "--partition-id, and BACKFILL_ID, BACKFILL_RUN_ID, BACKFILL_PARTITION_ID the same in their environment): "
            "a run by hand leaves it out and is judged as one\n"
        ), refused.stderr
    copied = daily.run(*day, *child, env={**home, "BACKFILL_ID": "bf-1", "BACKFILL_RUN_ID": "bf-1-p0-a2",
                                          "BACKFILL_PARTITION_ID": "9b0c"})  # fmt: skip
    assert copied.returncode == 2 and "(with --run-id and --partition-id, and BACKFILL_RUN_ID the same" in copied.stderr
    for flag, value in (("--partition-id", "9b0c"), ("--backfill-total", "3"), ("--row-changes-from", "s.json")):
        alone = daily.run(*day, flag, value, env=home)
        assert alone.returncode == 2 and alone.stderr == (
            f"backfill: error: {flag} goes only with --backfill-id, which a backfill gives its own partitions' runs\n"
        ), alone.stderr
    assert daily.query(tables) == []
    started = {**home, "BACKFILL_ID": "bf-1", "BACKFILL_RUN_ID": "bf-1-p0-a1", "BACKFILL_PARTITION_ID": "9b0c"}
    daily.run_ok(*day, *child, env=started)
    assert daily.query(tables) == [("landing",)]


def test_the_level_follows_the_warehouse_file(daily, home):
    """A sandbox environment whose connection points at the file a production environment uses gets
    production's rules (nothing auto), naming the environment and file; pointing at its own file it keeps
    sandbox. The same file spelled through a symlink counts as the same file."""
    import yaml

    (daily.root / "link.duckdb").symlink_to(daily.database)

    def environments(dev_path: str) -> None:
        connection = lambda path: {"duckdb": [{"name": "db", "path": path}]}  # noqa: E731
        daily.write(".bruin.yml", yaml.safe_dump({
            "default_environment": "dev",
            "environments": {
                "dev": {"guardrails": "sandbox", "connections": connection(dev_path)},
                "live": {"guardrails": "production", "connections": connection("warehouse.duckdb")},
            },
        }))  # fmt: skip

    environments("link.duckdb")
    checks = dry_checks(daily, home)
    assert checks["verdict"] == "approval"
    assert checks["environment"]["tier"] == "approval"
    source = f"environment 'live' uses the same DuckDB file {daily.database.resolve()}"
    assert checks["environment"]["detail"] == f"dev: production guardrails ({source}): every run needs approval"
    assert checks["environment"]["evidence"]["from"] == source
    result = run_backfill("p", *WEEK, "--dry-run", "--output", "json", cwd=daily.root, env=home)
    assert json.loads(result.stdout)["preflight"]["level"] == "production"
    environments("other.duckdb")
    result = run_backfill("p", *WEEK, "--dry-run", "--output", "json", cwd=daily.root, env=home)
    assert json.loads(result.stdout)["preflight"]["level"] == "sandbox"


def test_a_restore_over_later_writes_is_refused_unless_forced(daily, home):
    """A run by hand wrote mid.daily after the backfill's snapshot: restoring would undo it, so the restore
    is refused (exit 3) naming that run, and the table is untouched; with --force it restores the table as it
    was before the backfill, byte for byte, and records what it overrode."""
    before = daily.query("SELECT * FROM mid.daily ORDER BY ALL")
    ran = run_backfill("p", *WEEK, "--reason", "v2", "--no-progress", cwd=daily.root, env=home)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    [backfill] = state_dirs(daily.root / "logs" / "backfills")
    later = daily.run_ok("--start-date", "2024-01-09", "--end-date", "2024-01-09")
    after_later = daily.query("SELECT * FROM mid.daily ORDER BY ALL")
    refused = run_backfill("restore", backfill.name, "--reason", "v2 was wrong", cwd=daily.root, env=home)
    assert refused.returncode == 3, refused.stdout + refused.stderr
    assert "is older than later writes to its tables (run " in refused.stderr
    assert "(a run by hand) at " in refused.stderr and ": mid.daily)" in refused.stderr
    assert refused.stderr.count("\n") == 1 and later.returncode == 0
    assert daily.query("SELECT * FROM mid.daily ORDER BY ALL") == after_later
    forced = run_backfill("restore", backfill.name, "--reason", "v2 was wrong", "--force", cwd=daily.root, env=home)
    assert forced.returncode == 0, forced.stdout + forced.stderr
    assert daily.query("SELECT * FROM mid.daily ORDER BY ALL") == before
    entry = json.loads((backfill / "guardrails.json").read_text())["invocations"][-1]
    assert entry["mode"] == "restore" and len(entry["forced_over"]) == 1


def test_the_seeds_auto_rule_one_interval_unless_the_environment_raises_it(daily, home):
    """Standard guardrails with .bruin.yml's defaults: one interval is auto, a week of days needs approval
    (the seed: any rerun touching more than one interval); auto_max_intervals raises the limit and is shown;
    weekly partitions of a daily pipeline run a week in one trigger: never."""
    import yaml

    def config(**limits) -> None:
        dev = {"guardrails": "standard", "connections": {"duckdb": [{"name": "db", "path": "warehouse.duckdb"}]}}
        if limits:
            dev["guardrail_limits"] = limits
        daily.write(".bruin.yml", yaml.safe_dump({"default_environment": "dev", "environments": {"dev": dev}}))

    config()
    one = dry_checks(daily, home, start="2024-01-08", end="2024-01-08")
    assert one["interval_count"]["tier"] == "auto" and one["verdict"] == "auto"
    week = dry_checks(daily, home)
    assert week["interval_count"]["tier"] == "approval" and week["verdict"] == "approval"
    assert week["interval_count"]["detail"] == (
        "5 intervals > 1 (auto_max_intervals): a rerun touching more than one interval needs approval"
    )
    config(auto_max_intervals=5)
    raised = dry_checks(daily, home)
    assert raised["interval_count"]["tier"] == "auto" and raised["verdict"] == "auto"
    assert raised["interval_count"]["evidence"] == {"intervals": 5, "auto_max_intervals": 5}
    daily.write("p/pipeline.yml", yaml.safe_dump({"name": "p", "schedule": "daily",
                                                  "default_connections": {"duckdb": "db"}}))  # fmt: skip
    weekly = dry_checks(daily, home, "--partition", "weekly", start="2024-01-08", end="2024-01-14")
    assert weekly["interval_count"]["tier"] == "never"
    assert weekly["interval_count"]["detail"].startswith("weekly partitions of a daily pipeline: each runs 7 days")
    assert dry_checks(daily, home)["interval_count"]["tier"] == "auto"


def test_snapshots_past_their_retention_are_pruned(daily, home):
    """`backfill restore --prune` deletes the snapshot files of backfills older than their retention (from
    .bruin.yml, recorded with the snapshot), keeps younger ones, and a restore of a pruned one says so."""
    configure(daily, guardrail_limits={"snapshot_retention_days": 5})
    for week in (WEEK, ("--start-date", "2024-01-15", "--end-date", "2024-01-19")):
        ran = run_backfill("p", *week, "--reason", "r", "--no-progress", cwd=daily.root, env=home)
        assert ran.returncode == 0, ran.stdout + ran.stderr
    old, young = sorted(state_dirs(daily.root / "logs" / "backfills"))
    index = json.loads((old / "snapshot.json").read_text())
    assert index["retention_days"] == 5 and index["rows"] == 0  # the week had no rows yet
    index["taken_at_us"] -= 6 * 86_400_000_000  # as if taken six days ago
    (old / "snapshot.json").write_text(json.dumps(index))
    pruned = run_backfill("restore", "--prune", cwd=daily.root, env=home)
    assert pruned.returncode == 0, pruned.stderr
    assert pruned.stdout.splitlines()[0].startswith("pruned 1 snapshot in ")
    assert f"  {old.name}: snapshot of " in pruned.stdout and "(6 days old)" in pruned.stdout
    assert not list(old.glob("snapshot-*.duckdb")) and list(young.glob("snapshot-*.duckdb"))
    restore = run_backfill("restore", old.name, "--reason", "undo", cwd=daily.root, env=home)
    assert restore.returncode == 2 and "was pruned at " in restore.stderr and "retention of 5 days" in restore.stderr
    again = run_backfill("restore", "--prune", cwd=daily.root, env=home)
    assert again.returncode == 0 and again.stdout.startswith("no snapshot in ")
    bad = run_backfill("restore", "--prune", old.name, cwd=daily.root, env=home)
    assert bad.returncode == 2 and "--prune takes no backfill ID: it deletes every snapshot" in bad.stderr


def test_an_approval_covers_the_macros_and_the_configuration_but_not_secrets(daily, home):
    """The digest covers every macro file (used or not) and the environment's .bruin.yml entry: editing
    either makes the approval stale, naming what changed; a rotated password does not."""
    import yaml

    add_append_log(daily)
    daily.run_ok("--start-date", "2024-01-01", "--end-date", "2024-01-09")
    macro = daily.write("p/macros/helpers.sql", "{% macro one() %}1{% endmacro %}")

    def environment(password: str, ratio: int) -> None:
        dev = {"guardrails": "standard", "guardrail_limits": {**TEST_LIMITS["guardrail_limits"], "row_ratio": ratio},
               "connections": {"duckdb": [{"name": "db", "path": "warehouse.duckdb"}],
                               "generic": [{"name": "api", "value": "x", "password": password}]}}  # fmt: skip
        daily.write(".bruin.yml", yaml.safe_dump({"default_environment": "dev", "environments": {"dev": dev}}))

    environment("first", 10)
    held = run_backfill("p", *WEEK, "--reason", "r", cwd=daily.root, env=home)
    assert held.returncode == 4, held.stdout + held.stderr
    digest = digest_of(held.stdout)
    environment("rotated", 10)
    macro.write_text("{% macro one() %}2{% endmacro %}")
    stale = run_backfill("p", *WEEK, "--reason", "r", "--approve", digest, cwd=daily.root, env=home)
    assert stale.returncode == 4 and "file macros/helpers.sql changed" in stale.stderr, stale.stderr
    assert ".bruin.yml" not in stale.stderr  # the password alone changed there
    macro.write_text("{% macro one() %}1{% endmacro %}")
    environment("rotated", 11)
    stale = run_backfill("p", *WEEK, "--reason", "r", "--approve", digest, cwd=daily.root, env=home)
    assert stale.returncode == 4
    assert "file .bruin.yml (environment dev, secrets left out) changed" in stale.stderr, stale.stderr
    environment("rotated again", 10)
    approved = run_backfill("p", *WEEK, "--reason", "r", "--approve", digest, "--no-progress", cwd=daily.root, env=home)
    assert approved.returncode == 0, approved.stdout + approved.stderr


def test_a_hook_that_deletes_from_another_table_is_rolled_back(daily, home):
    """A post hook that empties another table (not raw, so the pre-flight lets it through): the partition is
    rolled back and fails naming that table, and both tables are exactly as they were."""
    daily.execute("CREATE TABLE mid.other AS SELECT range AS n FROM range(5)")
    before = daily.query("SELECT * FROM mid.daily ORDER BY ALL")
    redeclare_daily(daily, hooks={"post": [{"query": "DELETE FROM mid.other WHERE n < 3"}]})
    ran = run_backfill("p", *WEEK, "--reason", "r", "--no-progress", cwd=daily.root, env=home)
    assert ran.returncode == 1, ran.stdout + ran.stderr
    assert daily.query("SELECT * FROM mid.other ORDER BY ALL") == [(0,), (1,), (2,), (3,), (4,)]
    assert daily.query("SELECT * FROM mid.daily ORDER BY ALL") == before
    [backfill] = state_dirs(daily.root / "logs" / "backfills")
    [failed] = [r for r in records(backfill) if r["attempts"]]
    assert (
        "a hook of mid.daily changed rows of another table, mid.other (5 rows before, 2 after)"
        in (failed["attempts"][-1]["error"])
    )


LATER_DAYS_QUERY = (
    "SELECT CAST(range AS DATE) AS day, n + 100 AS n FROM range(DATE '{{ start_date }}', {% if start_date >= "
    "'2024-01-10' %}DATE '2024-01-13'{% else %}DATE '{{ end_date }}' + INTERVAL 1 DAY{% endif %}, INTERVAL 1 DAY), "
    "range(10) AS t(n)"
)
DAY_QUERY = (
    "SELECT CAST(range AS DATE) AS day, n + 100 AS n FROM range(DATE '{{ start_date }}', DATE '{{ end_date }}' + "
    "INTERVAL 1 DAY, INTERVAL 1 DAY), range(10) AS t(n)"
)
LOSSES = {
    # From the third day on, the query also returns every later day (the pre-flight's first-day sample is clean).
    "rows outside the window": (LATER_DAYS_QUERY, {}),
    # From the third day on, a post hook empties most of another table.
    "a hook deleting another table": (
        DAY_QUERY,
        {"hooks": {"post": [{"query": "DELETE FROM mid.other WHERE '{{ start_date }}' >= '2024-01-10' AND n < 3"}]}},
    ),
}


@pytest.mark.parametrize("case", sorted(LOSSES))
def test_a_restore_after_each_data_loss_case_gives_back_the_tables(daily, home, case):
    """Two partitions rewrite their days, the third would lose data and is rolled back, the backfill stops;
    `backfill restore` then gives back every table exactly as before the backfill (SELECT * ORDER BY ALL)."""
    query, header = LOSSES[case]
    daily.execute("CREATE TABLE mid.other AS SELECT range AS n FROM range(5)")
    tables = ("mid.daily", "mid.other")
    before = {t: daily.query(f"SELECT * FROM {t} ORDER BY ALL") for t in tables}
    daily.sql("mid.daily", query, depends=["raw.events"], materialization=TIME_INTERVAL, **header)
    ran = run_backfill("p", *WEEK, "--reason", "r", "--max-parallel", "1", "--no-progress", cwd=daily.root, env=home)
    assert ran.returncode == 1, ran.stdout + ran.stderr
    [backfill] = state_dirs(daily.root / "logs" / "backfills")
    statuses = [r["status"] for r in records(backfill) if r["attempts"]]
    assert statuses[:3] == ["succeeded", "succeeded", "failed"], statuses
    assert daily.query("SELECT count(*) FROM mid.daily WHERE n >= 100") == [(20,)]  # the two days rewritten
    restored = run_backfill("restore", backfill.name, "--reason", "the fix was wrong", cwd=daily.root, env=home)
    assert restored.returncode == 0, restored.stdout + restored.stderr
    assert {t: daily.query(f"SELECT * FROM {t} ORDER BY ALL") for t in tables} == before


def test_hooks_are_judged_like_the_asset(daily, home):
    """A hook that deletes from a raw table is never allowed, written out or through a macro; one whose SQL cannot
    be classified is human-only; a hook that appends to an audit table is fine."""
    redeclare_daily(daily, hooks={"post": [{"query": "DELETE FROM raw.landing WHERE true"}]})
    checks = dry_checks(daily, home)
    assert checks["materialization"]["tier"] == "never"
    assert "mid.daily: a post hook runs DELETE on raw.landing, a raw table" in checks["materialization"]["detail"]
    redeclare_daily(daily, hooks={"pre": [{"query": "CALL refresh_everything()"}]})
    checks = dry_checks(daily, home)
    assert checks["materialization"]["tier"] == "human-only"
    assert (
        "a pre hook runs SQL that cannot be classified: 'CALL refresh_everything()'"
        in (checks["materialization"]["detail"])
    )
    redeclare_daily(daily, hooks={"post": [{"query": "INSERT INTO mid.audit SELECT 'DELETE FROM raw.x' AS note"}]})
    assert dry_checks(daily, home)["materialization"]["tier"] == "auto"
    # A macro is part of what the hook runs: judged as rendered for the first partition, not as a template text.
    daily.write(
        "p/macros/tidy.sql", "{% macro tidy(t) %}DELETE FROM {{ t }} WHERE day < '{{ start_date }}'{% endmacro %}"
    )
    redeclare_daily(daily, hooks={"post": [{"query": "{{ tidy('raw.landing') }}"}]})
    checks = dry_checks(daily, home)
    assert checks["materialization"]["tier"] == "never", checks["materialization"]
    assert "mid.daily: a post hook runs DELETE on raw.landing, a raw table" in checks["materialization"]["detail"]


@pytest.mark.parametrize(
    ("hook", "verb", "table"),
    [
        ("WITH stale AS (SELECT 1) DELETE FROM raw.landing WHERE true", "DELETE", "raw.landing"),
        ("INSERT OR REPLACE INTO raw.landing SELECT 1 AS x", "INSERT OR REPLACE", "raw.landing"),
        ("INSERT INTO raw.landing SELECT 1 AS x ON CONFLICT DO UPDATE SET x = 2", UPSERT, "raw.landing"),
        ("DELETE FROM warehouse.raw.landing", "DELETE", "warehouse.raw.landing"),
        ("EXPLAIN ANALYZE DELETE FROM raw.landing", "DELETE", "raw.landing"),
        ("EXPLAIN (ANALYZE, FORMAT json) DELETE FROM raw.landing", "DELETE", "raw.landing"),
        ("DROP SCHEMA IF EXISTS raw CASCADE", "DROP SCHEMA", "raw.*"),
        ('WITH k AS (SELECT 1 AS "update") DELETE FROM raw.landing WHERE true', "DELETE", "raw.landing"),
    ],
)
def test_a_raw_delete_in_another_form_is_still_never_allowed(daily, home, hook, verb, table):
    """A delete behind a CTE, an upsert that rewrites the rows it conflicts with, a table named with its catalog
    and an EXPLAIN ANALYZE (which runs what it explains) passed as reads or appends, or outside the raw layer:
    verdict auto, and the hook deleted source data. Each is now the raw-layer refusal; a search path set to raw
    before an unqualified delete cannot be judged by its names: human-only."""
    redeclare_daily(daily, hooks={"post": [{"query": hook}]})
    checks = dry_checks(daily, home)
    assert (checks["verdict"], checks["materialization"]["tier"]) == ("never", "never"), checks["materialization"]
    assert checks["materialization"]["detail"] == (
        f"mid.daily: a post hook runs {verb} on {table}, a raw table: source data is never deleted or rebuilt"
    )
    if verb == "DELETE" and table == "raw.landing" and hook.startswith("WITH"):
        redeclare_daily(daily, hooks={"pre": [{"query": "SET search_path = 'raw'; DELETE FROM landing"}]})
        checks = dry_checks(daily, home)
        assert checks["materialization"]["tier"] == "human-only", checks["materialization"]
        assert (
            "a pre hook runs SQL that cannot be classified: \"SET search_path = ''\""
            in (checks["materialization"]["detail"])
        )


@pytest.mark.parametrize(
    "setting", ["""SET "search_path" = 'raw'""", "PRAGMA search_path = 'raw'", "PRAGMA schema='raw'"]
)
def test_a_search_path_set_in_another_spelling_cannot_hide_a_raw_delete(daily, home, setting):
    """DuckDB takes a setting's name quoted, and any setting through PRAGMA: each of these, before an unqualified
    DELETE FROM landing, made the hook's delete of raw.landing read as a delete of a mid table, verdict auto. The
    hook is now one that cannot be judged by its names: human-only, never auto."""
    redeclare_daily(daily, hooks={"pre": [{"query": f"{setting}; DELETE FROM landing"}]})
    checks = dry_checks(daily, home)
    assert checks["materialization"]["tier"] == "human-only", checks["materialization"]
    assert "a pre hook runs SQL that cannot be classified: " in checks["materialization"]["detail"]


def test_an_imported_database_cannot_replace_a_raw_table_unjudged(daily, home):
    """PRAGMA import_database runs the CREATE statements of a directory's schema.sql: one holding CREATE OR
    REPLACE TABLE raw.landing emptied the source table from a hook judged harmless, verdict auto. It is now a
    statement that cannot be classified: human-only."""
    daily.execute("CREATE TABLE raw.landing AS SELECT range AS x FROM range(5)")
    (daily.root / "d").mkdir()
    (daily.root / "d" / "schema.sql").write_text("CREATE OR REPLACE TABLE raw.landing (x INTEGER);\n")
    (daily.root / "d" / "load.sql").write_text("")
    redeclare_daily(daily, hooks={"post": [{"query": "PRAGMA import_database('d')"}]})
    checks = dry_checks(daily, home)
    assert checks["materialization"]["tier"] == "human-only", checks["materialization"]
    assert (
        "a post hook runs SQL that cannot be classified: \"PRAGMA import_database('')\""
        in (checks["materialization"]["detail"])
    )


@pytest.mark.parametrize(
    ("name", "strategy", "body", "materialization"),
    [
        ("raw.events", "view", "SELECT 1 AS x; DELETE FROM raw.landing WHERE true", {"type": "view"}),
        ("mid.daily", "time_interval", DAILY_QUERY + ";\nDELETE FROM raw.landing WHERE true;", TIME_INTERVAL),
    ],
)
def test_a_materialized_query_followed_by_more_statements_never_runs_them(
    daily, home, name, strategy, body, materialization
):
    """A view's (or table's) query followed by ``; DELETE FROM raw.landing``: DuckDB ran the delete after the view
    was created, unjudged, verdict auto, exit 0, the source emptied. Bruin refuses a materialized asset of more than
    one query; so does the pre-flight now (never, naming the statement), and so does every run, by hand or in a
    partition: nothing written, the source whole."""
    daily.execute("CREATE TABLE raw.landing AS SELECT range AS x FROM range(5)")
    depends = ["raw.events"] if name == "mid.daily" else []
    daily.sql(name, body, materialization=materialization, depends=depends)
    checks = dry_checks(daily, home)
    assert (checks["verdict"], checks["materialization"]["tier"]) == ("never", "never"), checks["materialization"]
    assert (
        f"{name} ({strategy}): the first partition's query is followed by 1 more statement ('DELETE FROM raw.landing "
        "WHERE true'); a materialized asset runs one query, so every run would fail"
    ) in checks["materialization"]["detail"]
    by_hand = daily.run("--start-date", "2024-01-08", "--end-date", "2024-01-08")
    assert by_hand.returncode == 1, by_hand.stdout + by_hand.stderr
    assert f"error: {name}: a materialized asset runs one query, and this one is followed by 1 more statement" in (
        by_hand.stdout
    )
    assert daily.query("SELECT count(*) FROM raw.landing") == [(5,)]


def test_a_query_that_grows_a_statement_on_some_days_fails_that_partition_unwritten(daily, home):
    """A macro that adds a DELETE of the source to the view's query on the tenth only: the pre-flight renders the
    eighth (one query, auto); the tenth's partition refuses its query before anything runs, the backfill stops
    there and raw.landing keeps its rows."""
    daily.execute("CREATE TABLE raw.landing AS SELECT range AS x FROM range(5)")
    daily.write("p/macros/prune.sql", "{% macro prune() %}{% if start_date == '2024-01-10' %}; DELETE FROM "
                "raw.landing{% endif %}{% endmacro %}")  # fmt: skip
    daily.sql("raw.events", "SELECT 1 AS x {{ prune() }}", materialization={"type": "view"})
    assert dry_checks(daily, home)["verdict"] == "auto"
    ran = run_backfill("p", *WEEK, "--reason", "r", "--no-progress", cwd=daily.root, env=home)
    assert ran.returncode == 1, ran.stdout + ran.stderr
    assert daily.query("SELECT count(*) FROM raw.landing") == [(5,)]
    [backfill] = state_dirs(daily.root / "logs" / "backfills")
    statuses = {r["start"][:10]: r["status"] for r in records(backfill)}
    assert statuses == {"2024-01-08": "succeeded", "2024-01-09": "succeeded", "2024-01-10": "failed"}, statuses
    [failed] = [r for r in records(backfill) if r["status"] == "failed"]
    assert failed["attempts"][-1]["error"] == (
        "raw.events failed: raw.events: a materialized asset runs one query, and this one is followed by 1 more "
        "statement ('DELETE FROM raw.landing'): nothing of this run was written (move them into a hook, or set "
        "materialization to none)"
    )


@pytest.mark.parametrize(
    ("query", "why"),
    [
        ("DELETE FROM raw.landing; SELECT 0", "it is 2 statements"),
        ("DELETE FROM raw.landing RETURNING 0", "it is a DELETE"),
        ("EXPLAIN ANALYZE DELETE FROM raw.landing", "it is an EXPLAIN"),
        # A SELECT by DuckDB's parser, which runs the DELETE of its CTE (it passed the one-SELECT rule).
        ("WITH d AS (DELETE FROM raw.landing RETURNING *) SELECT count(*) FROM d",
         "it runs DELETE on raw.landing inside it"),
        # Parsed, but of a type DuckDB's Python module cannot name: the check raised "29 is not a valid StatementType".
        ("UPDATE EXTENSIONS", "it is a statement DuckDB's Python module cannot name"),
        # A CTE's TRUNCATE (DuckDB's DELETE), or a comment before the CTE's DELETE: the check passed, the source empty.
        ("WITH d AS (TRUNCATE raw.landing) SELECT 0", "it runs DELETE on raw.landing inside it"),
        ("WITH d AS (/* tidy */ DELETE FROM raw.landing RETURNING *) SELECT 0",
         "it runs DELETE on raw.landing inside it"),
    ],
)  # fmt: skip
def test_a_custom_check_that_writes_runs_nothing_and_fails(daily, home, query, why):
    """A custom check ``DELETE FROM raw.landing; SELECT 0`` ran after the partition committed, outside every fence:
    verdict auto, exit 0, the check passed and the source was empty. A check is now one query that reads; any other
    fails as a check, having run nothing: the partition fails (the check blocks) and raw.landing keeps its rows."""
    daily.execute("CREATE TABLE raw.landing AS SELECT range AS x FROM range(5)")
    redeclare_daily(daily, custom_checks=[{"name": "tidy", "query": query, "value": 0}])
    ran = run_backfill("p", "--start-date", "2024-01-08", "--end-date", "2024-01-08", "--reason", "r",
                       "--no-progress", cwd=daily.root, env=home)  # fmt: skip
    assert ran.returncode == 1, ran.stdout + ran.stderr
    assert daily.query("SELECT count(*) FROM raw.landing") == [(5,)]
    by_hand = daily.run("--start-date", "2024-01-08", "--end-date", "2024-01-08")
    assert by_hand.returncode == 1, by_hand.stdout + by_hand.stderr
    assert f"check tidy failed (blocking): a check runs one query that reads, and {why}: nothing of it ran" in (
        by_hand.stdout
    )
    assert daily.query("SELECT count(*) FROM raw.landing") == [(5,)]


def test_a_hook_that_deletes_raw_data_only_on_some_days_is_refused_on_those_days(daily, home):
    """A macro that prunes the source on the tenth only: the pre-flight renders the first partition's hooks (the
    eighth: nothing), so the backfill ran as auto and the tenth's partition deleted raw.source_rows. Each partition
    now judges its own rendered hooks before anything runs: the tenth fails with one line naming the hook, the
    raw rows are all there, and the days before it landed (the backfill stops at its first failure)."""
    daily.execute("CREATE TABLE raw.source_rows AS SELECT range AS id FROM range(5)")
    daily.write("p/macros/prune.sql", "{% macro prune() %}{% if start_date == '2024-01-10' %}DELETE FROM "
                "raw.source_rows{% else %}SELECT 1{% endif %}{% endmacro %}")  # fmt: skip
    redeclare_daily(daily, hooks={"post": [{"query": "{{ prune() }}"}]})
    assert dry_checks(daily, home)["verdict"] == "auto"
    ran = run_backfill("p", *WEEK, "--reason", "r", "--no-progress", "--output", "json", cwd=daily.root, env=home)
    assert ran.returncode == 1, ran.stdout + ran.stderr
    assert daily.query("SELECT count(*) FROM raw.source_rows") == [(5,)]
    [backfill] = state_dirs(daily.root / "logs" / "backfills")
    statuses = {r["start"][:10]: r["status"] for r in records(backfill)}
    assert statuses == {"2024-01-08": "succeeded", "2024-01-09": "succeeded", "2024-01-10": "failed"}, statuses
    [failed] = [r for r in records(backfill) if r["status"] == "failed"]
    assert failed["attempts"][-1]["error"] == (
        "mid.daily failed: mid.daily: this partition's post hook runs DELETE on raw.source_rows, a raw table: source "
        "data is never deleted or rebuilt in a backfill; nothing of this partition was written"
    )


@pytest.mark.parametrize("setting", ["SET search_path = 'raw'", "USE raw"])
def test_a_hook_that_moves_the_search_path_on_some_days_cannot_delete_raw_data(daily, home, setting):
    """A macro renders nothing on the eighth (the pre-flight's sample: auto) and, on the tenth only, moves the search
    path to raw before an unqualified DELETE FROM source_rows: the name read as a mid table nobody holds, so the
    partition fingerprinted nothing and deleted the source, exit 0. The tenth now runs a statement that cannot be
    classified which the pre-flight never saw: refused before anything runs, and raw.source_rows keeps its rows.
    (When the pre-flight did judge such a statement, the fingerprint of every schema's source_rows catches the
    delete: tests/functional/test_run_sql_judged.py.)"""
    daily.execute("CREATE TABLE raw.source_rows AS SELECT range AS id FROM range(5)")
    daily.write("p/macros/prune.sql", "{% macro prune() %}{% if start_date == '2024-01-10' %}" + setting
                + "; DELETE FROM source_rows{% else %}SELECT 1{% endif %}{% endmacro %}")  # fmt: skip
    redeclare_daily(daily, hooks={"post": [{"query": "{{ prune() }}"}]})
    assert dry_checks(daily, home)["verdict"] == "auto"
    ran = run_backfill("p", *WEEK, "--reason", "r", "--no-progress", "--output", "json", cwd=daily.root, env=home)
    assert daily.query("SELECT count(*) FROM raw.source_rows") == [(5,)]
    assert ran.returncode == 1, ran.stdout + ran.stderr
    [backfill] = state_dirs(daily.root / "logs" / "backfills")
    [failed] = [r for r in records(backfill) if r["status"] == "failed"]
    assert failed["start"][:10] == "2024-01-10"
    shown = setting.replace("'raw'", "''")
    assert (
        "mid.daily: this partition's post hook runs SQL that cannot be classified, unjudged by the pre-flight "
        f"({shown!r})"
    ) in failed["attempts"][-1]["error"]


def test_a_seed_file_that_lost_its_rows_is_held_before_it_empties_the_table(daily, home):
    """A seed's CSV cut to its header (a bad merge): the seed rebuilds its table in every partition, so the week ran
    with verdict auto, exit 0, and mid.codes went from 5 rows to none. The pre-flight now counts the file as the
    run reads it against the table: approval, naming both counts; the table keeps its rows. The same file with its
    rows back is auto again."""
    daily.write("p/assets/mid/codes.asset.yml", "name: mid.codes\ntype: duckdb.seed\nparameters:\n  path: codes.csv\n")
    rows = "code\n" + "".join(f"c{i}\n" for i in range(5))
    daily.write("p/assets/mid/codes.csv", rows)
    daily.run_ok("--start-date", "2024-01-01", "--end-date", "2024-01-01")
    daily.write("p/assets/mid/codes.csv", "code\n")
    checks = dry_checks(daily, home)
    assert (checks["verdict"], checks["materialization"]["tier"]) == ("approval", "approval"), checks["materialization"]
    assert checks["materialization"]["detail"] == (
        "mid.codes (create+replace): its seed file holds 0 rows where its run deletes 5 (the whole table) — fewer "
        "than 50% of them"
    )
    held = run_backfill("p", *WEEK, "--reason", "r", "--no-progress", cwd=daily.root, env=home)
    assert held.returncode == 4, held.stdout + held.stderr
    assert daily.query("SELECT count(*) FROM mid.codes") == [(5,)]
    daily.write("p/assets/mid/codes.csv", rows)
    assert dry_checks(daily, home)["verdict"] == "auto"


@pytest.mark.parametrize(
    "enabled",
    ["{{ start_date is defined and start_date >= '2024-01-10' }}", "{{ (start_date | default('')) >= '2024-01-10' }}"],
)
def test_an_asset_enabled_only_for_later_windows_is_judged(daily, home, enabled):
    """``enabled`` reads the run's window through ``is defined`` or ``default``, which do not fail without one: the
    pre-flight rendered it with the variables alone, read false, and judged nothing of the asset; from the tenth on
    it ran, rebuilding raw.landing each day, verdict auto, exit 0. A template that reads more than ``var`` now
    counts as enabled before any run (each run decides), so the asset is judged: never."""
    daily.execute("CREATE TABLE raw.landing AS SELECT range AS id FROM range(5)")
    daily.sql("raw.landing", "SELECT 1 AS id WHERE DATE '{{ start_date }}' IS NOT NULL",
              materialization={"type": "table"}, enabled=enabled)  # fmt: skip
    checks = dry_checks(daily, home)
    assert checks["verdict"] == "never", checks
    assert "raw.landing" in checks["layer_risk"]["detail"], checks["layer_risk"]
    refused = run_backfill("p", *WEEK, "--reason", "r", "--no-progress", cwd=daily.root, env=home)
    assert refused.returncode == 3, refused.stdout + refused.stderr
    assert daily.query("SELECT count(*) FROM raw.landing") == [(5,)]


def test_a_restore_over_another_backfill_is_refused_naming_it(daily, home):
    """The later writer can be another backfill's partitions rather than a run by hand: the restore of the
    first backfill names the second and leaves the table as the second left it."""
    first = run_backfill("p", *WEEK, "--reason", "v2", "--no-progress", cwd=daily.root, env=home)
    assert first.returncode == 0, first.stdout + first.stderr
    [older] = state_dirs(daily.root / "logs" / "backfills")
    second = run_backfill("p", "--start-date", "2024-01-10", "--end-date", "2024-01-11", "--reason", "v3",
                          "--no-progress", cwd=daily.root, env=home)  # fmt: skip
    assert second.returncode == 0, second.stdout + second.stderr
    [newer] = [d for d in state_dirs(daily.root / "logs" / "backfills") if d != older]
    after_second = daily.query("SELECT * FROM mid.daily ORDER BY ALL")
    refused = run_backfill("restore", older.name, "--reason", "v2 was wrong", cwd=daily.root, env=home)
    assert refused.returncode == 3, refused.stdout + refused.stderr
    assert f"(backfill {newer.name}) at " in refused.stderr
    assert daily.query("SELECT * FROM mid.daily ORDER BY ALL") == after_second


def test_a_continue_its_preflight_holds_reopens_nothing(daily, home):
    """A cancelled backfill whose --continue (with its own reason) is held for approval by its pre-flight (an
    append asset added since): exit 4, no REOPEN line, control.json as it was — still cancelled."""
    assert run_backfill("p", *WEEK, "--reason", "first", "--no-progress", cwd=daily.root, env=home).returncode == 0
    [backfill] = state_dirs(daily.root / "logs" / "backfills")
    cancelled = run_backfill("cancel", backfill.name, "--reason", "wrong week", cwd=daily.root, env=home)
    assert cancelled.returncode == 0, cancelled.stderr
    control = (backfill / "control.json").read_bytes()
    add_append_log(daily)
    held = run_backfill(
        "--continue", backfill.name, "--rerun", "all", "--reason", "again", "--no-progress", cwd=daily.root, env=home
    )
    assert held.returncode == 4, held.stdout + held.stderr
    actions = [json.loads(x)["action"] for x in (backfill / "audit.jsonl").read_text().splitlines()]
    assert actions == ["CANCEL"]
    assert (backfill / "control.json").read_bytes() == control


def test_a_restore_gives_back_the_tables_the_hooks_wrote(daily, home):
    """Hooks are part of the asset: a post hook that appends to an audit table (it passes every check) and one
    that creates a table are in the snapshot, so `backfill restore` gives the audit table back row for row and
    drops the table the backfill created."""
    daily.execute("CREATE TABLE mid.audit AS SELECT 'before' AS note, range AS n FROM range(3)")
    before = daily.query("SELECT * FROM mid.audit ORDER BY ALL")
    redeclare_daily(
        daily,
        hooks={
            "post": [
                {"query": "INSERT INTO mid.audit SELECT 'ran {{ start_date }}', 0"},
                {"query": "CREATE TABLE IF NOT EXISTS mid.made_by_hook AS SELECT 1 AS x"},
            ]
        },
    )
    ran = run_backfill("p", *WEEK, "--reason", "r", "--no-progress", cwd=daily.root, env=home)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert daily.query("SELECT count(*) FROM mid.audit") == [(8,)]
    [backfill] = state_dirs(daily.root / "logs" / "backfills")
    restored = run_backfill("restore", backfill.name, "--reason", "undo", cwd=daily.root, env=home)
    assert restored.returncode == 0, restored.stdout + restored.stderr
    assert "mid.audit: 3 rows put back" in restored.stdout
    assert daily.query("SELECT * FROM mid.audit ORDER BY ALL") == before
    assert daily.query("SELECT count(*) FROM information_schema.tables WHERE table_name = 'made_by_hook'") == [(0,)]


def test_a_run_that_would_delete_rows_and_put_back_far_fewer_needs_approval(daily, home):
    """The source lost days that the table holds: a time_interval run over them deletes each window's ten rows
    and writes none. Before, every check passed (auto) and verification stopped the backfill only after the
    first day's rows were gone; now the pre-flight counts what the first partition's run deletes against what
    its query returns and holds it for approval, and a run without ``--approve`` changes nothing. The same for a
    delete+insert whose query returns 4 of a day's 10 rows, and for a one-day rebuild of a whole table (declared
    ``parameters.full_refresh``, or create+replace); a query that puts back as many rows as it deletes stays
    auto."""
    before = daily.query("SELECT * FROM mid.daily ORDER BY ALL")
    past = ("--start-date", "2024-01-01", "--end-date", "2024-01-05")
    assert dry_checks(daily, home, start="2024-01-01", end="2024-01-05")["verdict"] == "auto"  # ten rows for ten
    daily.sql("mid.daily", "SELECT DATE '{{ start_date }}' AS day, 1 AS n WHERE false", depends=["raw.events"],
              materialization=TIME_INTERVAL)  # fmt: skip
    checks = dry_checks(daily, home, start="2024-01-01", end="2024-01-05")
    assert (checks["verdict"], checks["materialization"]["tier"]) == ("approval", "approval")
    assert checks["materialization"]["detail"] == (
        "mid.daily (time_interval): the first partition's query returns 0 rows where its run deletes 10 (the rows "
        "in its window) — fewer than 50% of them"
    )
    entry = checks["materialization"]["evidence"]["assets"]["mid.daily"]
    assert (entry["rows_replaced"], entry["sample_rows"]) == (10, 0)
    ran = run_backfill("p", *past, "--reason", "r", "--no-progress", cwd=daily.root, env=home)
    assert ran.returncode == 4, ran.stdout + ran.stderr
    assert daily.query("SELECT * FROM mid.daily ORDER BY ALL") == before
    daily.sql(
        "mid.daily",
        "SELECT CAST(range AS DATE) AS day, n FROM range(DATE '{{ start_date }}', DATE '{{ end_date }}' + "
        "INTERVAL 1 DAY, INTERVAL 1 DAY), range(4) AS t(n)",
        depends=["raw.events"],
        materialization={**TIME_INTERVAL, "strategy": "delete+insert"},
    )
    detail = dry_checks(daily, home, start="2024-01-01", end="2024-01-05")["materialization"]["detail"]
    assert detail == (
        "mid.daily (delete+insert): the first partition's query returns 4 rows where its run deletes 10 (the rows "
        "of the day values it returns) — fewer than 50% of them"
    )
    redeclare_daily(daily, parameters={"full_refresh": True})  # every run rebuilds the table from its one day
    detail = dry_checks(daily, home, start="2024-01-03", end="2024-01-03")["materialization"]["detail"]
    assert detail == (
        "mid.daily (time_interval, parameters.full_refresh): the first partition's query returns 10 rows where its "
        "run deletes 380 (the whole table) — fewer than 50% of them"
    )
    daily.execute("CREATE SCHEMA mart", "CREATE TABLE mart.recent AS SELECT * FROM mid.daily")  # 380 rows
    daily.sql("mart.recent", "SELECT * FROM mid.daily WHERE day BETWEEN '{{ start_date }}' AND '{{ end_date }}'",
              depends=["mid.daily"], materialization={"type": "table"})  # fmt: skip
    checks = dry_checks(daily, home, "--selector", "mart.recent", start="2024-01-03", end="2024-01-03")
    assert checks["materialization"]["tier"] == "approval", checks["materialization"]
    assert checks["materialization"]["detail"] == (
        "mart.recent (create+replace): the first partition's query returns 10 rows where its run deletes 380 (the "
        "whole table) — fewer than 50% of them"
    )


def test_a_query_that_stopped_returning_a_column_never_blanks_it(daily, home):
    """The table has ``amount``; the asset's query no longer returns it. ``INSERT … BY NAME`` would have written
    NULL there in every row of every window, exit 0 (a one-day backfill was auto). Now the pre-flight refuses it
    (exit 3) naming the column, and a run by hand fails with one line and leaves the table as it was."""
    daily.execute("ALTER TABLE mid.daily ADD COLUMN amount INTEGER DEFAULT 7")
    before = daily.query("SELECT * FROM mid.daily ORDER BY ALL")
    day = ("--start-date", "2024-01-03", "--end-date", "2024-01-03")
    checks = dry_checks(daily, home, start="2024-01-03", end="2024-01-03")
    assert (checks["verdict"], checks["materialization"]["tier"]) == ("never", "never")
    assert checks["materialization"]["detail"] == (
        "mid.daily (time_interval): the first partition's query returns no column amount of the table; every run "
        "would fail rather than write NULL there (return it from the query, or drop it from the table)"
    )
    assert checks["materialization"]["evidence"]["assets"]["mid.daily"]["sample_missing_columns"] == ["amount"]
    refused = run_backfill("p", *day, "--reason", "r", "--no-progress", cwd=daily.root, env=home)
    assert refused.returncode == 3, refused.stdout + refused.stderr
    by_hand = run_backfill("run", "p", *day, cwd=daily.root, env=home)
    assert by_hand.returncode == 1, by_hand.stdout + by_hand.stderr
    assert "mid.daily: the query returns no column amount, which the table has; the rows it writes would hold " in (
        by_hand.stdout
    )
    assert daily.query("SELECT * FROM mid.daily ORDER BY ALL") == before
    assert daily.query("SELECT count(*) FROM mid.daily WHERE amount IS NULL") == [(0,)]


def test_a_merge_whose_query_repeats_a_key_needs_approval(daily, home):
    """A join that fans out returns each day twice under the merge's primary key: DuckDB's MERGE inserts both rows
    of a new key (the key then repeats in the table) and updates a known one from either, exit 0 (Bruin's merge
    does the same). The pre-flight counts the first partition's rows that share a key and holds the backfill
    for approval; without ``--approve`` the table is unchanged. The same query grouped once per day stays auto."""
    totals = (
        "SELECT day, count(*) AS rows FROM mid.daily{} WHERE day BETWEEN '{{{{ start_date }}}}' AND "
        "'{{{{ end_date }}}}' GROUP BY day{}"
    )
    columns = [{"name": "day", "type": "date", "primary_key": True},
               {"name": "rows", "type": "bigint", "update_on_merge": True}]  # fmt: skip
    merge = {"type": "table", "strategy": "merge"}
    daily.sql("mart.totals", totals.format("", ""), depends=["mid.daily"], materialization=merge, columns=columns)
    daily.run_ok("--start-date", "2024-01-08", "--end-date", "2024-01-09")
    daily.execute("DELETE FROM mart.totals WHERE day = DATE '2024-01-09'")  # a day the merge would insert again
    before = daily.query("SELECT * FROM mart.totals ORDER BY ALL")
    assert dry_checks(daily, home, start="2024-01-09", end="2024-01-09")["materialization"]["tier"] == "auto"
    fanned = totals.format(", range(2) AS copy(c)", ", c")
    daily.sql("mart.totals", fanned, depends=["mid.daily"], materialization=merge, columns=columns)
    checks = dry_checks(daily, home, start="2024-01-09", end="2024-01-09")
    assert (checks["verdict"], checks["materialization"]["tier"]) == ("approval", "approval"), checks
    assert checks["materialization"]["detail"] == (
        "mart.totals (merge): the first partition's query returns 2 rows that share their primary key (day) with "
        "another; the merge would insert each of a new key (repeating it in the table) and update a row from any "
        "one of them"
    )
    assert checks["materialization"]["evidence"]["assets"]["mart.totals"]["sample_rows_repeating_a_key"] == 2
    held = run_backfill("p", "--start-date", "2024-01-09", "--end-date", "2024-01-09", "--reason", "r",
                        "--no-progress", cwd=daily.root, env=home)  # fmt: skip
    assert held.returncode == 4, held.stdout + held.stderr
    assert daily.query("SELECT * FROM mart.totals ORDER BY ALL") == before


def test_a_hook_that_deletes_rows_of_its_own_unfenced_table_needs_a_person(daily, home):
    """A merge keyed by ``day`` without an incremental key has no window to fence, so a post hook that prunes its
    own table (``DELETE … WHERE day < start_date``: a retention rule meant for the daily run) ran in every
    partition and deleted the history the backfill had just written, with verdict auto and exit 0. The
    pre-flight now holds it as human-only, naming the hook; without a person the table is unchanged. The same
    hook on the window-fenced time_interval table stays auto: the fence rolls back what it deletes outside."""
    columns = [{"name": "day", "type": "date", "primary_key": True},
               {"name": "rows", "type": "bigint", "update_on_merge": True}]  # fmt: skip
    body = (
        "SELECT day, count(*) AS rows FROM mid.daily WHERE day BETWEEN '{{ start_date }}' AND '{{ end_date }}' "
        "GROUP BY day"
    )
    daily.sql("mart.totals", body, depends=["mid.daily"], materialization={"type": "table", "strategy": "merge"},
              columns=columns)  # fmt: skip
    daily.run_ok("--start-date", "2024-01-01", "--end-date", "2024-01-07")
    before = daily.query("SELECT * FROM mart.totals ORDER BY ALL")
    prune = {"post": [{"query": "DELETE FROM mart.totals WHERE day < DATE '{{ start_date }}'"}]}
    daily.sql("mart.totals", body, depends=["mid.daily"], materialization={"type": "table", "strategy": "merge"},
              columns=columns, hooks=prune)  # fmt: skip
    checks = dry_checks(daily, home, start="2024-01-05", end="2024-01-05")
    assert (checks["verdict"], checks["materialization"]["tier"]) == ("human-only", "human-only"), checks
    assert checks["materialization"]["detail"] == (
        "mart.totals: a post hook runs DELETE on mart.totals, its own table, which no window fences (merge "
        "without incremental_key): what it removes is not bounded to the partition"
    )
    held = run_backfill("p", "--start-date", "2024-01-05", "--end-date", "2024-01-05", "--reason", "r",
                        "--no-progress", cwd=daily.root, env=home)  # fmt: skip
    assert held.returncode == 4, held.stdout + held.stderr
    assert daily.query("SELECT * FROM mart.totals ORDER BY ALL") == before
    redeclare_daily(daily, hooks={"post": [{"query": "DELETE FROM mid.daily WHERE day < DATE '{{ start_date }}'"}]})
    daily.sql("mart.totals", body, depends=["mid.daily"], materialization={"type": "table", "strategy": "merge"},
              columns=columns)  # fmt: skip
    assert dry_checks(daily, home, start="2024-01-05", end="2024-01-05")["materialization"]["tier"] == "auto"
