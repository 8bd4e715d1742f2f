"""The executor with real child processes: success, retries, failure policies, order, parallelism, timeouts."""

from __future__ import annotations

import json
import time
from pathlib import Path

import duckdb
import pytest

from tests.backfills import child_command, max_overlap, read_spans, records, state_dirs, statuses
from tests.conftest import run_backfill
from tests.guard_flags import GUARD, REASON

JANUARY_6 = ("--start-date", "2024-01-01", "--end-date", "2024-01-06")


def only_backfill(work: Path) -> Path:
    [backfill] = state_dirs(work / "logs" / "backfills")
    return backfill


def test_all_partitions_succeed_with_placeholders_environment_and_process_groups(work, home):
    """Every partition runs once with exact placeholders, BACKFILL_* variables, the invocation's directory
    and its own process group; the summary and records say succeeded."""
    spans = work / "spans.jsonl"
    result = run_backfill(
        *GUARD,
        "--command",
        child_command("--spans", str(spans)),
        *JANUARY_6,
        "--timezone",
        "America/New_York",
        cwd=work,
        env=home,
    )
    assert result.returncode == 0, result.stderr
    backfill = only_backfill(work)
    seen = sorted(read_spans(spans), key=lambda s: s["start"])
    assert [s["start"] for s in seen][:2] == ["2024-01-01T00:00:00.000000-05:00", "2024-01-02T00:00:00.000000-05:00"]
    assert seen[0]["end"] == "2024-01-01T23:59:59.999999-05:00"
    for span in seen:
        assert span["pgid"] == span["pid"] == span["sid"], "each child leads its own process group"
        assert span["cwd"] == str(work)
        env = span["env"]
        assert env["BACKFILL_ID"] == backfill.name and env["BACKFILL_PARTITION_ID"] == span["partition"]
        assert env["BACKFILL_START"] == span["start"] and env["BACKFILL_END"] == span["end"]
        assert env["BACKFILL_RUN_ID"].startswith(f"{backfill.name}-p")
    assert statuses(backfill) == {i: "succeeded" for i in range(6)}
    assert f"backfill {backfill.name} succeeded" in result.stdout
    assert "partitions  6: 6 succeeded" in result.stdout
    log = (backfill / "children" / f"{backfill.name}-p0-a1.log").read_text()
    assert log.startswith("child ") and "start=2024-01-01T00:00:00.000000-05:00" in log


def test_id_and_resume_command_are_printed_before_the_first_child(work, home):
    """The backfill ID and the exact resume command come first (stderr when the output is JSON)."""
    text = run_backfill(*GUARD, "--command", "true", *JANUARY_6, cwd=work, env=home)
    backfill = only_backfill(work).name
    first_lines = text.stdout.splitlines()[:3]
    assert first_lines[0].startswith(f"backfill {backfill}: 6 of 6 partitions to run")
    assert first_lines[2] == f"  resume  backfill --continue {backfill}"
    as_json = run_backfill(*GUARD, "--command", "true", *JANUARY_6, "--output", "json", cwd=work, env=home)
    assert json.loads(as_json.stdout)["summary"]["succeeded"] == 6
    assert "resume  backfill --continue" in as_json.stderr


def test_a_failing_partition_succeeds_on_retry_and_keeps_both_attempts(work, home):
    """--retries 1: the first attempt fails, the second succeeds; both attempts keep their run ID and log."""
    markers = work / "markers"
    markers.mkdir()
    result = run_backfill(
        *GUARD,
        "--command",
        child_command("--fail-first-attempt", str(markers)),
        *JANUARY_6,
        "--retries",
        "1",
        cwd=work,
        env=home,
    )
    assert result.returncode == 0, result.stderr
    for record in records(only_backfill(work)):
        assert record["status"] == "succeeded"
        assert [a["status"] for a in record["attempts"]] == ["failed", "succeeded"]
        assert (
            record["attempts"][0]["exit_code"] == 7
            and record["attempts"][0]["error"] == "failing the first attempt on purpose"
        )
        assert record["attempts"][0]["run_id"] != record["attempts"][1]["run_id"]
        assert "failing the first attempt" in (only_backfill(work) / record["attempts"][0]["log"]).read_text()


def test_on_failure_stop_lets_active_runs_finish_and_launches_nothing_more(work, home):
    """stop (the default): after 2024-01-02 fails, nothing new starts; exit 1; the rest stay queued."""
    result = run_backfill(*GUARD, "--command", child_command("--fail-on", "2024-01-02"), *JANUARY_6, cwd=work, env=home)
    assert result.returncode == 1
    assert statuses(only_backfill(work)) == {0: "succeeded", 1: "failed"}
    assert "partitions  6: 4 queued, 1 succeeded, 1 failed" in result.stdout
    assert "resume      backfill --continue" in result.stdout


def test_on_failure_continue_runs_everything_else(work, home):
    """continue: the failure is recorded and every other partition still runs; exit 1."""
    result = run_backfill(
        *GUARD,
        "--command",
        child_command("--fail-on", "2024-01-02", "--fail-on", "2024-01-05"),
        *JANUARY_6,
        "--on-failure",
        "continue",
        cwd=work,
        env=home,
    )
    assert result.returncode == 1
    assert statuses(only_backfill(work)) == {
        0: "succeeded",
        1: "failed",
        2: "succeeded",
        3: "succeeded",
        4: "failed",
        5: "succeeded",
    }


def test_on_failure_fail_fast_cancels_active_children(work, home):
    """fail-fast: a quick failure cancels the slow partition running beside it, without waiting for it."""
    # 2024-01-01 sleeps 60 s; 2024-01-02 fails at once.
    script = work / "slow_or_fail.sh"
    script.write_text('case "$1" in 2024-01-01*) exec sleep 60;; 2024-01-02*) exit 3;; *) exit 0;; esac\n')
    started = time.monotonic()
    result = run_backfill(
        *GUARD,
        "--command",
        f"sh {script} {{start}}",
        *JANUARY_6,
        "--max-parallel",
        "2",
        "--on-failure",
        "fail-fast",
        cwd=work,
        env=home,
    )
    assert time.monotonic() - started < 20
    assert result.returncode == 1
    backfill = only_backfill(work)
    assert statuses(backfill) == {0: "cancelled", 1: "failed"}
    first = records(backfill)[0]["attempts"][0]
    assert first["error"] == "cancelled: fail-fast after partition 1 failed"


def test_reverse_runs_newest_first(work, home):
    """--reverse starts partitions from the newest."""
    spans = work / "spans.jsonl"
    run_backfill(*GUARD, "--command", child_command("--spans", str(spans)), *JANUARY_6, "--reverse", cwd=work, env=home)
    started = [s["start"][:10] for s in sorted(read_spans(spans), key=lambda s: s["began"])]
    assert started == ["2024-01-06", "2024-01-05", "2024-01-04", "2024-01-03", "2024-01-02", "2024-01-01"]


@pytest.mark.parametrize("parallel", [1, 3])
def test_max_parallel_is_never_exceeded_as_seen_by_the_children(work, home, parallel):
    """Children's own start/end times never overlap more than --max-parallel (and do reach it)."""
    spans = work / "spans.jsonl"
    result = run_backfill(
        *GUARD,
        "--command",
        child_command("--spans", str(spans), "--sleep", "0.3"),
        "--start-date",
        "2024-01-01",
        "--end-date",
        "2024-01-09",
        "--max-parallel",
        str(parallel),
        cwd=work,
        env=home,
    )
    assert result.returncode == 0, result.stderr
    intervals = [(s["began"], s["ended"]) for s in read_spans(spans)]
    assert len(intervals) == 9
    assert max_overlap(intervals) == parallel


def test_timeout_stops_the_child_and_records_a_failure(work, home):
    """--timeout: a child over its time is stopped like a cancel and recorded failed, 'timed out after …'."""
    started = time.monotonic()
    result = run_backfill(
        *GUARD,
        "--command",
        "sleep 60",
        "--start-date",
        "2024-01-01",
        "--end-date",
        "2024-01-01",
        "--timeout",
        "500ms",
        cwd=work,
        env=home,
    )
    assert time.monotonic() - started < 15
    assert result.returncode == 1
    [record] = records(only_backfill(work))
    assert record["status"] == "failed"
    assert record["attempts"][0]["error"] == "timed out after 500ms"


def test_pipeline_backfill_of_the_example_fills_the_tables(shop, home):
    """A week of the example pipeline: each child is `backfill run`, records carry the backfill ID and count,
    and the mart holds one row per day and category."""
    result = run_backfill(
        *REASON, "pipeline", "--start-date", "2024-02-01", "--end-date", "2024-02-07", cwd=shop, env=home
    )
    assert result.returncode == 0, result.stdout + result.stderr
    backfill = only_backfill(shop)
    with duckdb.connect(str(shop / "warehouse.duckdb"), read_only=True) as connection:
        days = connection.execute("SELECT count(DISTINCT order_date), count(*) FROM mart.daily_revenue").fetchone()
    assert days == (7, 21)
    run_records = [json.loads(p.read_text()) for p in (shop / "logs" / "runs").glob("*.json")]
    assert len(run_records) == 7
    assert {(r["backfill_id"], r["backfill_total"]) for r in run_records} == {(backfill.name, 7)}
    assert sorted(r["interval"]["end"] for r in run_records)[0] == "2024-02-01T23:59:59.999999Z"


def test_progress_lines_are_coalesced_for_many_fast_partitions(work, home):
    """Thousands of fast partitions do not produce thousands of lines: successes are summed per update."""
    result = run_backfill(
        *GUARD,
        "--command",
        "true",
        "--start-date",
        "2024-01-01T00:00:00Z",
        "--end-date",
        "2024-01-01T10:00:00Z",
        "--partition",
        "1m",
        "--max-parallel",
        "4",
        cwd=work,
        env=home,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) < 600 / 2, f"{len(lines)} progress lines for 600 partitions"
    assert any("since the last update" in line for line in lines)
    assert "partitions  600: 600 succeeded" in result.stdout


def test_invalid_pipeline_is_refused_before_anything_is_saved(shop, home):
    """A broken asset, an undeclared --var or a selector matching nothing: exit 2 before any store or child;
    and a pipeline broken after the backfill started is refused on --continue before anything runs."""
    asset = shop / "pipeline" / "assets" / "mart" / "daily_revenue.sql"
    original = asset.read_text()
    asset.write_text(original.replace("strategy: merge", "strategy: upsert"))
    result = run_backfill(
        *REASON, "pipeline", "--start-date", "2024-02-01", "--end-date", "2024-02-03", cwd=shop, env=home
    )
    assert result.returncode == 2
    assert f"{asset}:" in result.stderr and "unknown strategy 'upsert'" in result.stderr
    assert not (shop / "logs").exists()
    for args, message in (
        (("--var", "nope=1"), "--var 'nope' is not declared"),
        (("--selector", "tag:none"), "selects no asset"),
    ):
        asset.write_text(original)
        refused = run_backfill(
            "pipeline", "--start-date", "2024-02-01", "--end-date", "2024-02-03", *args, "--dry-run", cwd=shop, env=home
        )
        assert refused.returncode == 2 and message in refused.stderr
    failing = run_backfill(
        *REASON,
        "pipeline",
        "--start-date",
        "2024-02-01",
        "--end-date",
        "2024-02-03",
        "--timeout",
        "1us",
        cwd=shop,
        env=home,
    )
    assert failing.returncode == 1
    backfill = only_backfill(shop)
    asset.write_text(original.replace("strategy: merge", "strategy: upsert"))
    before = {p.name: p.read_bytes() for p in (backfill / "partitions").iterdir()}
    resumed = run_backfill("--continue", backfill.name, cwd=shop, env=home)
    assert resumed.returncode == 2 and "unknown strategy 'upsert'" in resumed.stderr
    assert {p.name: p.read_bytes() for p in (backfill / "partitions").iterdir()} == before
    shown = run_backfill("show", backfill.name, "--output", "json", cwd=shop, env=home)
    assert shown.returncode == 0, "show still works on a backfill whose pipeline is broken now"
