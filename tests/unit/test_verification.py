"""Per-partition verification, in-process: a real pre-flight of a real DuckDB pipeline with five weeks of
history, then run records written by hand and judged (pipelines), and real commands run (--verify-command)."""

from __future__ import annotations

import json
import select
import sys
from pathlib import Path

import pytest

from engine.dates.plan import Interval
from engine.execute.backfill import state_root_for
from engine.execute.guarding import request_for_new
from engine.execute.launcher import ChildSpec, ForkExecLauncher
from engine.guardrails.preflight import run_preflight
from engine.guardrails.request import GuardOptions
from engine.guardrails.verification import (
    FAILED,
    INSUFFICIENT,
    VERIFIED,
    WARNING,
    CommandVerifier,
    PipelineVerifier,
    Verification,
    baselines,
    written_baselines,
)
from engine.pipeline.options import RunOptions
from engine.spec.backfill_spec import ExecutionOptions
from engine.spec.planning import plan_request
from tests.builder import Repo

TIME_INTERVAL = {"type": "table", "strategy": "time_interval", "incremental_key": "day", "time_granularity": "date"}
WEDNESDAY = Interval(2, 1_704_844_800_000_000, 1_704_931_200_000_000)  # 2024-01-10, the plan's third day


# Its module-scoped fixture is built once, on one worker, instead of once per worker (docs/testing.md).
pytestmark = pytest.mark.xdist_group("verification")


@pytest.fixture(scope="module")
def facts(tmp_path_factory):
    """The pre-flight facts of a week (2024-01-08..12) of mid.daily, which landed 10 rows a day for five weeks
    before it (and 1,000 rows on 2024-01-10 once, a run inside the range that is not history)."""
    root = tmp_path_factory.mktemp("verification") / "repo"
    repo = Repo(root, guardrails="standard")
    repo.sql("raw.events", "SELECT 1 AS x", materialization={"type": "view"})
    repo.sql(
        "mid.daily",
        "SELECT CAST(range AS DATE) AS day, n FROM range(DATE '{{ start_date }}', DATE '{{ end_date }}' + "
        "INTERVAL 1 DAY, INTERVAL 1 DAY), range(CASE WHEN DATE '{{ start_date }}' = DATE '2024-01-10' THEN 1000 "
        "ELSE 10 END) AS t(n)",
        depends=["raw.events"],
        materialization=TIME_INTERVAL,
    )
    repo.sql("mid.latest", "SELECT 1 AS x", materialization={"type": "table"})  # a table without a time key
    repo.run_ok("--start-date", "2023-12-01", "--end-date", "2024-01-07")
    repo.run_ok("--start-date", "2024-01-10", "--end-date", "2024-01-10")  # inside the backfilled range
    # Daily runs: three Wednesdays the table will no longer hold (one of them run twice), a Wednesday it does
    # hold, the Sunday that ends where the range starts and the Saturday that starts where it ends.
    for day in ("2023-11-01", "2023-11-08", "2023-11-08", "2023-11-15", "2023-12-06", "2024-01-07", "2024-01-13"):
        repo.run_ok("--start-date", day, "--end-date", day)
    repo.execute("DELETE FROM mid.daily WHERE day < DATE '2023-12-01' OR day > DATE '2024-01-12'")
    planned = plan_request(
        target=str(repo.pipeline_dir), command=None, name=None, start="2024-01-08", end="2024-01-12",
        timezone="UTC", partition="daily", environment=None, config_file=None, run_options=RunOptions(),
        options=ExecutionOptions(), force=False, cwd=root,
    )  # fmt: skip
    state = state_root_for(planned.spec, None, root).path
    preflight = run_preflight(request_for_new(planned, GuardOptions(), reason="test", root=state, cwd=root))
    yield preflight.facts
    preflight.facts.warehouses.close()


def record(runs: Path, run_id: str, status: str = "succeeded", **assets: dict) -> None:
    """A run record as `backfill run` writes it (only what verification reads); raw.events (a view, selected
    too) succeeded unless given."""
    assets = {"raw.events": ok(None), "mid.latest": ok(None), **assets}
    entries = [{"name": name, **entry} for name, entry in assets.items() if entry is not None]
    (runs / f"{run_id}.json").write_text(json.dumps({"status": status, "assets": entries}))


def ok(rows: int | None = 10, checks: list | None = None) -> dict:
    """An asset's entry in a run record: succeeded with ``rows`` in its interval."""
    return {"status": "succeeded", "rows_in_interval": rows, "checks": checks or []}


@pytest.fixture
def verifier(facts, tmp_path):
    """A verifier in mode ``on`` and one in mode ``warn`` over the same facts and runs directory."""
    return {mode: PipelineVerifier(facts, tmp_path, mode) for mode in ("on", "warn")}, tmp_path


def test_the_baselines_come_from_the_table_outside_the_range_by_weekday(facts):
    """Five Wednesdays (and every other weekday) of 10 rows; the 1,000-row Wednesday inside the range is not
    history, and only the selected keyed table is judged."""
    found = baselines(facts)
    assert set(found) == {"mid.daily"}
    assert sorted(found["mid.daily"]) == [0, 1, 2, 3, 4, 5, 6]  # Monday to Sunday
    # The table's Wednesdays of December and 2024-01-03, then the three November runs (not 2024-01-10, inside
    # the range, not 2023-12-06 again, not 2023-11-08 twice, and not the 38-day run, not one partition long).
    assert found["mid.daily"][2] == [10] * 8
    assert found["mid.daily"][5] == [10] * 7  # Saturdays: the table's six and 2024-01-13 (just after the range)
    assert found["mid.daily"][1] == [10] * 5  # Tuesdays: December's table only
    assert all(set(values) == {10} for values in found["mid.daily"].values())


def test_without_the_warehouse_the_run_records_are_the_whole_history(facts, monkeypatch):
    """A warehouse that cannot be opened: the baselines come from runs one partition long outside the range."""

    def held(path):
        raise OSError("held")

    monkeypatch.setattr(facts.warehouses, "open", held)
    assert baselines(facts) == {"mid.daily": {2: [10, 10, 10, 10], 5: [10], 6: [10]}}


def test_a_table_that_cannot_be_grouped_leaves_the_run_records(facts, monkeypatch):
    """Counting the table's periods fails: what the run records say is the history."""
    warehouse = facts.warehouses.open(facts.by_file(facts.selected).popitem()[0])

    def broken(*args):
        raise ValueError("cannot group")

    monkeypatch.setattr(warehouse, "period_counts", broken)
    assert baselines(facts) == {"mid.daily": {2: [10, 10, 10, 10], 5: [10], 6: [10]}}


def test_rows_within_the_weekday_bounds_verify(verifier):
    """10 rows on a Wednesday whose past five had 10: verified, with the bounds 5–20 in the asset's entry."""
    verifiers, runs = verifier
    verifiers["on"].written = {}
    record(runs, "r1", **{"mid.daily": ok(10), "raw.events": ok(None)})
    result = verifiers["on"].verify(WEDNESDAY, "r1")
    assert result == Verification(
        VERIFIED,
        "run record OK; rows within bounds",
        [
            {
                "asset": "mid.daily",
                "rows": 10,
                "bucket": "Wednesday",
                "mean": 10.0,
                "low": 5.0,
                "high": 20.0,
                "values": 8,
                "status": "inside",
            }
        ],
    )
    assert not result.fails_partition
    assert result.to_json() == {"status": "verified", "detail": result.detail, "assets": result.assets}


@pytest.mark.parametrize(("rows", "admitted"), [(5, True), (20, True), (4, False), (21, False), (1000, False)])
def test_the_bounds_are_inclusive_and_rows_outside_fail_with_the_numbers(verifier, rows, admitted):
    """5 and 20 are inside (half and twice the mean); 4, 21 and 1,000 fail with the asset, rows and bounds."""
    verifiers, runs = verifier
    record(runs, "r1", **{"mid.daily": ok(rows)})
    result = verifiers["on"].verify(WEDNESDAY, "r1")
    if admitted:
        assert result.status == VERIFIED and result.assets[0]["status"] == "inside"
        return
    assert result.status == FAILED and result.fails_partition
    assert result.detail == f"mid.daily: {rows:,} rows, outside 5–20 (Wednesday mean 10 over 8)"
    assert result.assets[0]["status"] == "outside"


def test_warn_mode_records_the_failure_without_failing_the_partition(verifier):
    """--verify warn: the same problem is a warning; the partition is not failed."""
    verifiers, runs = verifier
    record(runs, "r1", **{"mid.daily": ok(1000)})
    on, warn = verifiers["on"].verify(WEDNESDAY, "r1"), verifiers["warn"].verify(WEDNESDAY, "r1")
    assert on.status == FAILED and on.fails_partition
    assert warn.status == WARNING and not warn.fails_partition
    assert warn.detail == on.detail


def test_a_missing_or_unreadable_run_record_fails_or_warns(verifier):
    """No run record (or one that is not JSON): failed under on, a warning under warn, naming the file."""
    verifiers, runs = verifier
    missing = verifiers["on"].verify(WEDNESDAY, "absent")
    assert missing.status == FAILED and missing.detail.startswith(f"no readable run record {runs / 'absent.json'} (")
    assert verifiers["warn"].verify(WEDNESDAY, "absent").status == WARNING
    (runs / "garbled.json").write_text("{not json")
    assert verifiers["on"].verify(WEDNESDAY, "garbled").status == FAILED


def test_what_the_run_record_says_is_judged_before_the_rows(verifier):
    """A failed run, a selected asset missing or not succeeded, a failing blocking check: each is a problem;
    a failing non-blocking check is not."""
    verifiers, runs = verifier
    record(runs, "failed-run", "failed", **{"mid.daily": ok()})
    assert verifiers["on"].verify(WEDNESDAY, "failed-run").detail == "the run record says 'failed'"
    record(runs, "missing")
    assert verifiers["on"].verify(WEDNESDAY, "missing").detail == "mid.daily is not in the run record"
    record(runs, "asset-failed", **{"mid.daily": {"status": "failed", "rows_in_interval": 10}})
    assert verifiers["on"].verify(WEDNESDAY, "asset-failed").detail == "mid.daily failed"
    blocking = [{"name": "not_null(day)", "passed": False, "blocking": True}]
    record(runs, "check", **{"mid.daily": ok(10, blocking)})
    assert verifiers["on"].verify(WEDNESDAY, "check").detail == "mid.daily has a failing check"
    warning_only = [{"name": "positive(n)", "passed": False, "blocking": False}]
    record(runs, "soft", **{"mid.daily": ok(10, warning_only)})
    assert verifiers["on"].verify(WEDNESDAY, "soft").status == VERIFIED
    passing = [{"name": "not_null(day)", "passed": True, "blocking": True}]
    record(runs, "passing", **{"mid.daily": ok(10, passing)})
    assert verifiers["on"].verify(WEDNESDAY, "passing").status == VERIFIED
    record(runs, "two", "failed", **{"mid.daily": {"status": "failed", "rows_in_interval": None}})
    assert verifiers["on"].verify(WEDNESDAY, "two").detail == "the run record says 'failed'; mid.daily failed"


def test_an_asset_rerun_is_judged_only_on_the_assets_it_ran(verifier):
    """``only``: an asset the rerun did not run may be absent from its run record."""
    verifiers, runs = verifier
    record(runs, "r1")
    assert verifiers["on"].verify(WEDNESDAY, "r1", only={"raw.events"}).status == VERIFIED
    assert verifiers["on"].verify(WEDNESDAY, "r1").status == FAILED


def test_no_count_and_too_little_history(verifier, facts, tmp_path):
    """A record without rows_in_interval is 'no count' (not a failure); a bucket with fewer than three past
    values is insufficient history, naming the asset."""
    verifiers, runs = verifier
    record(runs, "r1", **{"mid.daily": ok(None)})
    result = verifiers["on"].verify(WEDNESDAY, "r1")
    assert result.status == VERIFIED and result.assets[0]["status"] == "no count"
    assert result.detail == "run record OK; rows within bounds"
    thin = PipelineVerifier(facts, tmp_path, "on")
    thin.baselines = {"mid.daily": {2: [10, 10]}}
    thin.written = {}
    record(runs, "r2", **{"mid.daily": ok(10)})
    judged = thin.verify(WEDNESDAY, "r2")
    assert judged.status == INSUFFICIENT and not judged.fails_partition
    assert judged.detail == "run record OK; too little history to judge rows of mid.daily"
    assert judged.assets[0] == {"asset": "mid.daily", "rows": 10, "bucket": "Wednesday", "status": INSUFFICIENT,
                                "values": 2}  # fmt: skip


def test_a_bucket_without_history_and_two_assets_short_of_it(verifier, facts, tmp_path):
    """No value at all for the bucket is insufficient (0 values); two such assets are both named."""
    _, runs = verifier
    thin = PipelineVerifier(facts, tmp_path, "on")
    thin.baselines = {"mid.daily": {}, "mid.other": {2: [1]}}
    thin.written = {}
    record(runs, "r1", **{"mid.daily": ok(10), "mid.other": ok(1)})
    judged = thin.verify(WEDNESDAY, "r1")
    assert judged.detail == "run record OK; too little history to judge rows of mid.daily, mid.other"
    assert [a["values"] for a in judged.assets] == [0, 1]


def test_the_bucket_is_the_partition_start_in_the_backfill_zone(verifier, facts, tmp_path):
    """In Los Angeles, 2024-01-10 00:00 UTC is a Tuesday afternoon: Tuesday's history judges it."""
    from engine.dates.instants import load_zone

    _, runs = verifier
    local = PipelineVerifier(facts, tmp_path, "on")
    local.zone = load_zone("America/Los_Angeles")
    local.baselines = {"mid.daily": {1: [10, 10, 10], 2: [1000, 1000, 1000]}}
    local.written = {}
    record(runs, "r1", **{"mid.daily": ok(10)})
    judged = local.verify(WEDNESDAY, "r1")
    assert judged.status == VERIFIED and judged.assets[0]["bucket"] == "Tuesday"


def test_without_keyed_assets_the_record_alone_verifies(verifier):
    """No baseline to judge rows against: 'run record OK' and nothing more."""
    verifiers, runs = verifier
    bare = verifiers["on"]
    bare.baselines = {}
    bare.written = {}
    record(runs, "r1", **{"mid.daily": ok(10)})
    assert bare.verify(WEDNESDAY, "r1") == Verification(VERIFIED, "run record OK", [])


def _values(interval: Interval, partition_id: str, run_id: str) -> dict[str, str]:
    return {"start": str(interval.start), "partition_id": partition_id, "run_id": run_id}


def _verify(verifier: CommandVerifier, partition_id: str, run_id: str, *, cwd: str, env: dict, log) -> Verification:
    """What the executor does with a --verify-command: prepared, started as a child, its exit judged."""
    argv = verifier.prepare(WEDNESDAY, partition_id, run_id, log=log)
    try:
        child = ForkExecLauncher().launch(ChildSpec(argv, cwd, env, log))
    except OSError as error:
        return verifier.cannot_start(error)
    select.select([child.exit_fd()], [], [], 60)
    code = child.poll()
    child.close()
    return verifier.judge(code)


@pytest.mark.parametrize(
    ("script", "status", "detail"),
    [
        ("import sys; sys.exit(0)", VERIFIED, "--verify-command exited 0"),
        ("import sys; sys.exit(3)", FAILED, "--verify-command exited 3 (output in the partition's log)"),
        ("import os, signal; os.kill(os.getpid(), signal.SIGKILL)", FAILED, "--verify-command exited -9"),
    ],
    ids=["exit-0", "exit-3", "killed"],
)
def test_a_verify_command_passes_only_on_exit_0(tmp_path, script, status, detail):
    """The command's exit decides; a command killed by a signal (a negative code) fails too; the command line
    and its output go to the partition's log."""
    log = tmp_path / "p.log"
    template = f"{sys.executable} -c '{script}' {{partition_id}}"
    result = _verify(CommandVerifier(template, "on", _values), "abc123", "run-1", cwd=str(tmp_path),
                                                             env={}, log=log)  # fmt: skip
    assert result.status == status and result.detail.startswith(detail) and result.assets == []
    assert "--- verify-command: " in log.read_text() and log.read_text().rstrip().endswith("abc123")


def test_a_verify_command_runs_where_and_as_the_partition_s_child_and_logs_everything(tmp_path):
    """The placeholders (run ID included), the working directory and environment given, stdin closed, and both
    its streams appended to the partition's log after the command line."""
    script = (
        "import os, sys; print(os.getcwd(), os.environ['MARK'], sys.argv[1], repr(sys.stdin.read()), flush=True); "
        "print('to stderr', file=sys.stderr)"
    )
    log = tmp_path / "p.log"
    log.write_text("the child's output\n")
    work = tmp_path / "work"
    work.mkdir()
    template = f'{sys.executable} -c "{script}" {{run_id}}'
    result = _verify(CommandVerifier(template, "on", _values), "p", "run-7", cwd=str(work),
                                                             env={"MARK": "seen"}, log=log)  # fmt: skip
    assert result == Verification(VERIFIED, "--verify-command exited 0", [])
    argv = f"{sys.executable} -c {script} run-7"
    assert log.read_text() == f"the child's output\n\n--- verify-command: {argv}\n{work} seen run-7 ''\nto stderr\n"


def test_a_verify_command_that_cannot_start_fails_or_warns(tmp_path):
    """A program that does not exist: 'cannot start', failed under on and a warning under warn."""
    template = str(tmp_path / "nowhere") + " {run_id}"
    on = _verify(CommandVerifier(template, "on", _values), "p", "r", cwd=str(tmp_path), env={},
                                                         log=tmp_path / "l")  # fmt: skip
    assert on == Verification(FAILED, "--verify-command cannot start: No such file or directory", [])
    warn = _verify(CommandVerifier(template, "warn", _values), "p", "r", cwd=str(tmp_path), env={},
                                                             log=tmp_path / "l")  # fmt: skip
    assert warn.status == WARNING and not warn.fails_partition


def test_a_table_without_a_time_key_is_judged_by_the_rows_its_runs_wrote(verifier, facts):
    """mid.latest has no incremental_key: its history is the rows each past one-day run wrote (1 on each
    Wednesday), and a run that writes 100 fails verification; one that writes 1 is inside."""
    verifiers, runs = verifier
    assert written_baselines(facts) == {"mid.latest": {2: [1, 1, 1, 1, 1], 6: [1], 5: [1]}}
    on = verifiers["on"]
    record(runs, "r1", **{"mid.daily": ok(10), "mid.latest": {**ok(None), "rows_written": 100}})
    judged = on.verify(WEDNESDAY, "r1")
    assert judged.status == FAILED and "mid.latest: 100 rows, outside" in judged.detail, judged.detail
    record(runs, "r2", **{"mid.daily": ok(10), "mid.latest": {**ok(None), "rows_written": 1}})
    fine = on.verify(WEDNESDAY, "r2")
    assert fine.status == VERIFIED
    assert [a["status"] for a in fine.assets] == ["inside", "inside"]


def test_a_verify_command_whose_log_cannot_be_written_is_still_prepared(tmp_path):
    """The partition's log directory is gone: the command line is still given (its start, which opens the same log,
    reports what fails), rather than an error escaping into the executor's loop."""
    verifier = CommandVerifier(f"{sys.executable} -c pass {{partition_id}}", "on", _values)
    argv = verifier.prepare(WEDNESDAY, "p9", "run-1", log=tmp_path / "gone" / "p.log")
    assert argv == [sys.executable, "-c", "pass", "p9"]
