"""The pre-flight in-process (issue 22): a real DuckDB pipeline with five weeks of history, judged for plans of
every shape, each check's status, tier and detail compared whole; then the decision and the digest."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.base.errors import BadInput, Refused
from engine.execute.backfill import state_root_for
from engine.execute.guarding import request_for_new
from engine.guardrails.preflight import NeedsApproval, check_digest_prefix, decide, remember, run_preflight
from engine.guardrails.request import GuardOptions
from engine.pipeline.options import RunOptions
from engine.spec.backfill_spec import ExecutionOptions
from engine.spec.planning import plan_request
from tests.builder import Repo
from tests.duckdb_writer import writing
from tests.functional.test_guardrails import redeclare_daily

TIME_INTERVAL = {"type": "table", "strategy": "time_interval", "incremental_key": "day", "time_granularity": "date"}
IGNORING = (
    "interval_semantics", "warn", "auto",
    "mid.latest, raw.events ignore the interval: rerun once per partition for nothing; select them out "
    "(--exclude-tag, --selector)",
)  # fmt: skip
NO_QUOTA = ("connector_quotas", "n/a", "auto", "no connection declares a daily_run_quota")
NO_SPLIT = ("splitting", "n/a", "auto", "no --split-on: a failed partition is retried whole")


# Repositories the tests only read, built once per process and kept across test sessions in it: mutation
# testing forks a session per mutant from one that has run every test, and rebuilding them each time would
# multiply its hours. Tests that change a repository, or hold its files, build their own.
_BUILT: dict[tuple, Repo] = {}


def built(key: tuple, build) -> Repo:
    import atexit
    import os
    import shutil
    import tempfile

    if key not in _BUILT:
        base, creator = Path(tempfile.mkdtemp(prefix="backfill-preflight-")), os.getpid()
        # Removed when the process that built it exits (never by a forked session that only borrowed it).
        atexit.register(lambda: os.getpid() == creator and shutil.rmtree(base, ignore_errors=True))
        _BUILT[key] = build(base)
    return _BUILT[key]


@pytest.fixture
def repo() -> Repo:
    """raw.events (a view) → mid.daily (time_interval, ten rows a day) and mid.latest (a table without a time
    key), run once from 2023-12-01 to 2024-01-07 (read only)."""
    return built(("three assets",), three_assets)


def three_assets(base: Path) -> Repo:
    repo = Repo(base / "repo", guardrails="standard")
    repo.sql("raw.events", "SELECT 1 AS x", materialization={"type": "view"})
    redeclare_daily(repo)  # mid.daily as the functional guardrail tests declare it: ten rows a day
    repo.sql("mid.latest", "SELECT 1 AS x", materialization={"type": "table"})
    run_in_process(repo, "2023-12-01", "2024-01-07")
    return repo


def run_in_process(repo: Repo, start: str, end: str) -> None:
    """`backfill run p --start-date START --end-date END` in this process (what the command runs, without a
    process of its own: mutation testing runs this fixture once per mutant)."""
    from engine.pipeline.run_types import RunRequest
    from engine.pipeline.runner import execute_run, prepare_run

    prepared = prepare_run(RunRequest(str(repo.pipeline_dir), start, end), cwd=repo.root)
    result = execute_run(prepared, lambda line: None)
    assert result.ok, result.error


SAFE = GuardOptions()


def preflight(repo: Repo, start: str, end: str, guard: GuardOptions = SAFE, *, command: str | None = None,
              selector: tuple[str, ...] = ()):  # fmt: skip
    planned = plan_request(
        target=None if command else str(repo.pipeline_dir), command=command, name=None, start=start, end=end,
        timezone="UTC", partition="daily", environment=None, config_file=None,
        run_options=RunOptions(selector=selector), options=ExecutionOptions(), force=False, cwd=repo.root,
    )  # fmt: skip
    state = state_root_for(planned.spec, None, repo.root).path
    judged = run_preflight(request_for_new(planned, guard, reason="test", root=state, cwd=repo.root))
    judged.facts.warehouses.close()
    return judged


def rows(judged, *, only_unpassed: bool = False) -> list[tuple[str, str, str, str]]:
    return [(c.name, c.status, c.tier, c.detail) for c in judged.checks if not only_unpassed or c.status != "pass"]


def test_a_safe_week_passes_every_check_with_its_reason(repo):
    """Five days of a keyed table with history: auto; each check says what it judged."""
    judged = preflight(repo, "2024-01-08", "2024-01-12")
    assert judged.verdict == "auto"
    found = {name: (status, tier, detail) for name, status, tier, detail in rows(judged)}
    assert found.pop("size_and_duration")[:2] == ("pass", "auto")
    assert found.pop("reversibility")[2].startswith("a snapshot of 2 tables is taken before the first partition (~1")
    assert found == {
        "target_valid": ("pass", "auto", "pipeline 'p' validates: 3 assets, 3 selected"),
        "history_exists": ("pass", "auto", "every selected asset has succeeded before (1 run record)"),
        "range_size": ("pass", "auto", "5 days ≤ 7 days"),
        "interval_count": ("pass", "auto", "5 intervals ≤ 31 (auto_max_intervals)"),
        "range_in_past": ("pass", "auto", "the range ends 2024-01-13T00:00:00Z, in the past"),
        "interval_semantics": IGNORING[1:],
        "materialization": (
            "warn", "auto", "mid.latest rebuilt 5 times (they ignore the interval): run once or select out"
        ),
        "layer_risk": ("pass", "auto", "no raw asset is deleted or rebuilt"),
        "upstream_coverage": ("pass", "auto", "every upstream asset is in the selection"),
        "downstream_awareness": (
            "pass", "auto",
            "nothing else is running on these assets or their warehouse; no downstream asset outside the selection",
        ),
        "row_count_sanity": ("pass", "auto", "samples within 10× of history for mid.daily, mid.latest"),
        "connector_quotas": NO_QUOTA[1:],
        "environment": ("pass", "auto", "dev: standard guardrails (.bruin.yml)"),
        "verification": ("pass", "auto", "each partition verified against its run record and history (on)"),
        "splitting": NO_SPLIT[1:],
        "certainty": ("pass", "auto", "every check could decide"),
    }  # fmt: skip
    evidence = {c.name: c.evidence for c in judged.checks}
    assert evidence["target_valid"] == {"assets": 3, "selected": ["mid.daily", "mid.latest", "raw.events"]}
    assert evidence["range_size"] == {"days": 5.0, "approval_days": 7, "human_only_days": 90}
    assert evidence["row_count_sanity"]["assets"]["mid.daily"] == {
        "sample_rows": 10, "estimated_rows": 50, "historical_mean": 10.0,
    }  # fmt: skip
    assert evidence["layer_risk"]["layers"]["raw.events"] == {"layer": "raw", "from": "schema raw"}
    assert evidence["materialization"]["assets"]["mid.latest"] == {"strategy": "create+replace", "selected": True}


def test_long_ranges_need_approval_then_a_person(repo):
    """20 days: approval; 100 days: human-only, and more intervals than auto allows; --allow-long-range makes
    the range approval."""
    twenty = preflight(repo, "2024-01-01", "2024-01-20")
    assert twenty.verdict == "approval"
    assert rows(twenty, only_unpassed=True) == [
        ("range_size", "fail", "approval", "20 days > 7 days"),
        IGNORING,
        ("materialization", "warn", "auto",
         "mid.latest rebuilt 20 times (they ignore the interval): run once or select out"),
        NO_QUOTA,
        NO_SPLIT,
    ]  # fmt: skip
    hundred = preflight(repo, "2023-10-01", "2024-01-08")
    assert hundred.verdict == "human-only"
    assert rows(hundred, only_unpassed=True)[:2] == [
        ("range_size", "fail", "human-only",
         "100 days > 90 days: split it, or pass --allow-long-range to make it approval"),
        ("interval_count", "fail", "approval",
         "100 intervals > 31 (auto_max_intervals): a rerun touching more than 31 intervals needs approval"),
    ]  # fmt: skip
    allowed = preflight(repo, "2023-10-01", "2024-01-08", GuardOptions(allow_long_range=True))
    assert allowed.verdict == "approval"
    assert rows(allowed, only_unpassed=True)[0] == (
        "range_size", "fail", "approval", "100 days > 90 days (--allow-long-range given)",
    )  # fmt: skip


def test_the_future_is_never_backfilled(repo):
    """A range ending after now: never, whatever was allowed."""
    judged = preflight(repo, "2024-01-08", "2031-01-08", GuardOptions(allow_long_range=True))
    assert judged.verdict == "never"
    found = rows(judged)
    assert (
        "range_in_past",
        "fail",
        "never",
        "the range ends 2031-01-09T00:00:00Z, after now: backfilling the future is always a mistake",
    ) in found
    assert (
        "interval_count",
        "fail",
        "approval",
        "2,558 intervals > 31 (auto_max_intervals): a rerun touching more than 31 intervals needs approval",
    ) in found
    with pytest.raises(Refused) as refused:
        decide(judged, approve=None, interactive_approval=True, reason="r", now_text="t")
    assert str(refused.value).startswith("refused (never allowed): range_in_past: the range ends 2031-01-09")


def test_an_upstream_without_runs_over_the_range_is_never_run_over(repo):
    """mid.daily alone: raw.events, outside the selection, never ran over 2024-01-08..12."""
    judged = preflight(repo, "2024-01-08", "2024-01-12", selector=("mid.daily",))
    assert judged.verdict == "never"
    assert rows(judged, only_unpassed=True) == [
        ("upstream_coverage", "fail", "never",
         "missing upstream intervals: raw.events: 2024-01-08T00:00:00Z → 2024-01-13T00:00:00Z"),
        NO_QUOTA,
        NO_SPLIT,
    ]  # fmt: skip


def test_no_snapshot_is_human_only_and_verify_warn_says_so(repo):
    """--no-snapshot on tables that change: human-only, naming them; --verify warn is stated; --verify off needs
    approval."""
    judged = preflight(repo, "2024-01-08", "2024-01-12", GuardOptions(verify="warn", snapshot=False))
    assert judged.verdict == "human-only"
    assert ("reversibility", "fail", "human-only", "--no-snapshot: no restore path for mid.daily, mid.latest") in rows(
        judged
    )
    assert ("verification", "pass", "auto", "each partition verified against its run record and history (warn)") in (
        rows(judged)
    )
    off = preflight(repo, "2024-01-08", "2024-01-12", GuardOptions(verify="off"))
    assert [r for r in rows(off) if r[0] == "verification"] == [
        ("verification", "fail", "approval", "--verify off: partitions are not verified")
    ]
    assert off.verdict == "approval"


def test_a_command_s_digest_holds_the_code_it_names_and_the_absence_of_what_is_not_there_yet(tmp_path):
    """``sh load.sh {start} helpers.sh``: load.sh's component is the sha256 of its bytes, named from the working
    directory; helpers.sh, not there yet, is judged absent — so its appearing changes the digest (a repository
    of its own: files are written into it)."""
    import hashlib

    repo = Repo(tmp_path / "repo", guardrails="standard")
    (repo.root / "load.sh").write_text("echo $1\n")
    judged = preflight(repo, "2024-01-08", "2024-01-12", command="sh load.sh {start} helpers.sh")
    parts = judged.components
    assert parts["file load.sh"] == hashlib.sha256(b"echo $1\n").hexdigest()
    assert parts["file helpers.sh"] == "unreadable: No such file or directory"
    (repo.root / "helpers.sh").write_text("echo later\n")
    again = preflight(repo, "2024-01-08", "2024-01-12", command="sh load.sh {start} helpers.sh")
    assert again.components["file helpers.sh"] == hashlib.sha256(b"echo later\n").hexdigest()
    assert again.digest != judged.digest
    (repo.root / "load.py").write_text("import helpers\n")
    (repo.root / "helpers.py").write_text("VERSION = 1\n")
    python = preflight(repo, "2024-01-08", "2024-01-12", command="python load.py {start}")
    assert python.components["file helpers.py"] == hashlib.sha256(b"VERSION = 1\n").hexdigest()


def test_a_command_is_judged_by_what_can_be_known_of_it(repo):
    """A command: its program checked, no history, no tables, no inputs; human-only without --reversible; with it
    (and sandbox), every demand becomes a warning naming what it demanded."""
    judged = preflight(repo, "2024-01-08", "2024-01-12", command="true")
    assert judged.verdict == "human-only"
    assert rows(judged) == [
        ("target_valid", "pass", "auto", "the program true exists and is executable"),
        ("history_exists", "n/a", "auto", "no earlier backfill of this command: nothing to compare with"),
        ("range_size", "pass", "auto", "5 days ≤ 7 days"),
        ("interval_count", "fail", "approval",
         "5 intervals > 1 (auto_max_intervals): a rerun touching more than one interval needs approval"),
        ("range_in_past", "pass", "auto", "the range ends 2024-01-13T00:00:00Z, in the past"),
        ("interval_semantics", "warn", "auto",
         "the command template has no interval placeholder: it must read BACKFILL_START/BACKFILL_END itself"),
        ("materialization", "n/a", "auto", "a command's effect on data is not known to backfill"),
        ("reversibility", "fail", "human-only",
         "no restore path known for a command: pass --reversible only if you can undo it"),
        ("layer_risk", "n/a", "auto", "a command's tables are not known to backfill"),
        ("upstream_coverage", "n/a", "auto", "a command's inputs are not known to backfill"),
        ("downstream_awareness", "pass", "auto", "no other backfill of this command is running over these intervals"),
        ("size_and_duration", "n/a", "auto", "no succeeded run to estimate from; tables now 0 B"),
        ("row_count_sanity", "n/a", "auto", "a command's output is not known to backfill"),
        NO_QUOTA,
        ("environment", "pass", "auto", "command: standard guardrails (default)"),
        ("verification", "warn", "auto", "no --verify-command: a command's partitions are verified by exit code only"),
        NO_SPLIT,
        ("certainty", "pass", "auto", "every check could decide"),
    ]  # fmt: skip
    sandboxed = preflight(
        repo, "2024-01-08", "2024-01-12", GuardOptions(reversible=True, level="sandbox", verify_command="true"),
        command="true",
    )  # fmt: skip
    assert sandboxed.verdict == "auto"
    demanded = {c.name: (c.status, c.demanded, c.detail) for c in sandboxed.checks if c.demanded}
    assert demanded == {
        "interval_count": (
            "warn", "approval",
            "5 intervals > 1 (auto_max_intervals): a rerun touching more than one interval needs approval",
        ),
        "reversibility": ("warn", "human-only",
                          "--reversible, but this command has never succeeded here, so how to undo it is untried: "
                          "run one partition first"),
    }  # fmt: skip
    assert ("environment", "pass", "auto", "command: sandbox guardrails (--guardrails)") in rows(sandboxed)
    assert ("verification", "pass", "auto", "--verify-command runs after each partition (on)") in rows(sandboxed)


def test_the_decision_follows_the_verdict_and_the_digest(repo, tmp_path, monkeypatch):
    """auto runs (with a matching --approve, or none; a stale one is refused as changed); approval needs the
    digest's prefix; human-only needs it typed at a terminal; a bad prefix is one line."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    safe = preflight(repo, "2024-01-08", "2024-01-12")
    approval = decide(safe, approve=None, interactive_approval=False, reason="r", now_text="t")
    assert (approval.tier, approval.how, approval.reason, approval.at, approval.digest) == (
        "auto", "auto", "r", "t", safe.digest
    )  # fmt: skip
    assert decide(safe, approve=safe.digest[:8], interactive_approval=False, reason=None, now_text="t").how == "auto"
    with pytest.raises(NeedsApproval, match="the plan changed since it was approved: its inputs, files or evidence"):
        decide(safe, approve="0" * 8, interactive_approval=False, reason=None, now_text="t")
    long = preflight(repo, "2024-01-01", "2024-01-20")
    with pytest.raises(NeedsApproval) as held:
        decide(long, approve=None, interactive_approval=False, reason=None, now_text="t")
    assert str(held.value) == (
        f"needs approval (plan {long.short_digest}): range_size: 20 days > 7 days; review the report (--dry-run), "
        f"then run again with --approve {long.short_digest}"
    )
    approved = decide(long, approve=long.digest[:10].upper(), interactive_approval=False, reason="r", now_text="t")
    assert (approved.tier, approved.how) == ("approval", "--approve")
    assert (
        decide(long, approve=None, interactive_approval=True, reason="r", now_text="t").how == "typed at the terminal"
    )
    person = preflight(repo, "2023-10-01", "2024-01-08")
    with pytest.raises(NeedsApproval) as human:
        decide(person, approve=person.digest, interactive_approval=False, reason=None, now_text="t")
    assert str(human.value).startswith(f"human-only (plan {person.short_digest}): --approve is not enough")
    with pytest.raises(NeedsApproval, match=r"^needs a person at a terminal \(human-only\)"):
        decide(person, approve=None, interactive_approval=False, reason=None, now_text="t")
    remember(long)
    changed = preflight(repo, "2024-01-01", "2024-01-21")
    with pytest.raises(NeedsApproval) as stale:
        decide(changed, approve=long.digest[:8], interactive_approval=False, reason=None, now_text="t")
    assert "the plan changed since it was approved: " in str(stale.value)
    assert "evidence of interval_count changed; " in str(stale.value) and " and 2 more. " in str(stale.value)
    assert f"Approved {long.digest[:8]}, now {changed.short_digest}" in str(stale.value)
    for bad in ("abc", "zzzzzzzz", "１２３４５６７８", ""):
        with pytest.raises(BadInput, match="is not a plan digest: give at least 8 hexadecimal characters"):
            check_digest_prefix(bad)
    assert check_digest_prefix(" ABCDEF12 ") == "abcdef12"


def test_the_digest_names_each_file_and_changes_with_it(tmp_path):
    """Components per asset file, pipeline.yml and the environment without secrets; editing an asset changes
    its component and the digest, and nothing else (a repository of its own: this one is edited)."""
    from engine.guardrails.digest import changed_components

    repo = Repo(tmp_path / "repo", guardrails="standard")
    repo.sql("raw.events", "SELECT 1 AS x", materialization={"type": "view"})
    repo.sql("mid.latest", "SELECT 1 AS x", materialization={"type": "table"})
    before = preflight(repo, "2024-01-08", "2024-01-12")
    names = set(before.components)
    assert {"plan inputs", "partition IDs", "file pipeline.yml", "file assets/raw.events.sql",
            "file assets/mid.latest.sql"} <= names  # fmt: skip
    assert any(n.startswith("file .bruin.yml (environment dev, secrets left out)") for n in names)
    path = repo.pipeline_dir / "assets" / "mid.latest.sql"
    path.write_text(path.read_text() + "\n-- edited\n")
    after = preflight(repo, "2024-01-08", "2024-01-12")
    assert after.digest != before.digest
    assert changed_components(before.components, after.components)[0] == "file assets/mid.latest.sql changed"
    assert preflight(repo, "2024-01-08", "2024-01-12").digest == after.digest


def test_the_backfill_record_says_what_was_done(repo, tmp_path):
    """The record of a week run with one verification warning and a failed partition: every field as the
    invocation left it, written as YAML to its path and its copy."""
    import yaml

    from engine.guardrails.preflight import Approval
    from engine.guardrails.record import build_record, record_path, write_record
    from engine.store import audit
    from engine.store.records import Attempt
    from engine.store.run_tally import RunTally

    judged = preflight(repo, "2024-01-08", "2024-01-12")
    approval = Approval(judged.digest, "ann@box", "2024-01-13T00:00:00Z", "auto", "fix", "auto")
    tally = RunTally(5)
    warned = {"status": "warning", "detail": "mid.daily: 3 rows, outside 5–20"}
    tally.add(0, Attempt(run_id="r0", status="succeeded", started_at="t", log="children/r0.log",
                         verification={"status": "verified"}))  # fmt: skip
    tally.add(1, Attempt(run_id="r1", status="succeeded", started_at="t", log=None, verification=warned))
    tally.add(2, Attempt(run_id="r2", status="failed", started_at="t", log="children/r2.log"))
    state = tmp_path / "state"
    state.mkdir()
    audit.append(state, [audit.entry(action="PAUSE", reason="outage", requested_by="bo@box")])
    snapshot = {"taken_at": "T", "bytes": 10, "files": [{"tables": [{"name": "mid.daily"}, {"name": "mid.latest"}]}]}
    counts = {"queued": 2, "running": 0, "succeeded": 2, "failed": 1, "cancelled": 0, "skipped": 0}
    after_range = [{"asset": "mid.daily", "check": "not_null", "passed": False, "detail": "2 nulls"}]
    record = build_record(
        backfill_id="B", preflight=judged, approval=approval, reason="fix", counts=counts, total=5, tally=tally,
        status="failed", seconds=4.1, before={"mid.daily": 100, "mid.latest": 0}, after={"mid.daily": 110,
        "mid.latest": 1}, snapshot=snapshot, after_range=after_range, state_directory=state,
    )  # fmt: skip
    assert {k: record[k] for k in list(record)[:17]} == {
        "backfill_id": "B", "status": "failed", "asset": ["mid.daily", "mid.latest", "raw.events"], "pipeline": "p",
        "command": None, "environment": "dev",
        "range": "2024-01-08T00:00:00Z to 2024-01-13T00:00:00Z (end exclusive)", "partition": "daily in UTC",
        "reason": "fix", "mode": "trigger",
        "materialization_strategy": {
            "mid.daily": "time_interval", "mid.latest": "create+replace", "raw.events": "view",
        },
        "layer": {"mid.daily": "mid", "mid.latest": "mid", "raw.events": "raw"},
        "intervals_attempted": 3, "intervals_succeeded": 2, "intervals_failed": 1, "intervals_cancelled": 0,
        "intervals_skipped": 0,
    }  # fmt: skip
    assert record["partial"] is True
    assert record["runs"] == [
        {"run_id": "r0", "status": "succeeded", "log": str(state / "children/r0.log")},
        {"run_id": "r1", "status": "succeeded", "log": None},
        {"run_id": "r2", "status": "failed", "log": str(state / "children/r2.log")},
    ]
    assert record["runs_total"] == 3
    assert record["row_counts"] == {
        "mid.daily": {"before": 100, "after": 110, "delta_pct": 10.0},
        "mid.latest": {"before": 0, "after": 1, "delta_pct": None},
    }
    assert record["duration_total"] == "4.1s"
    assert record["verified"] is False
    assert record["unverified_because"] == [
        "the invocation ended failed",
        "1 partition failed or warned in verification",
        "check not_null of mid.daily failed over the whole table: 2 nulls",
    ]
    assert record["verification"] == {"verified": 1, "warning": 1, "none": 1}
    assert record["verification_failures"] == [{"run_id": "r1", "detail": "mid.daily: 3 rows, outside 5–20"}]
    assert record["verification_failures_total"] == 1 and record["checks_after_range"] == after_range
    assert record["preflight"]["verdict"] == "auto" and record["preflight"]["digest"] == judged.digest
    assert record["preflight"]["level"] == "standard" and len(record["preflight"]["checks"]) == len(judged.checks)
    assert record["preflight"]["checks"][0] == {
        "name": "target_valid", "status": "pass", "tier": "auto",
        "detail": "pipeline 'p' validates: 3 assets, 3 selected",
    }  # fmt: skip
    assert record["approval"] == approval.to_json()
    assert record["snapshot"] == {"taken_at": "T", "bytes": 10, "tables": ["mid.daily", "mid.latest"],
                                  "restore": "backfill restore state --reason TEXT"}  # fmt: skip
    assert record["downstream_blocked_until_rerun"] == []
    interventions = record["interventions"]
    assert (interventions["count"], interventions["torn_lines"], interventions["all"]) == (
        0 + 1,
        [],
        "backfill audit state",
    )
    assert interventions["entries"][0]["action"] == "PAUSE" and interventions["entries"][0]["requested_by"] == "bo@box"
    assert set(interventions["entries"][0]) == {"action", "partition_id", "asset", "from_status", "to_status",
                                                "target_count", "reason", "requested_by", "applied_at"}  # fmt: skip
    path = record_path(tmp_path / "repo", state, "shop/daily orders", 0.0)
    assert path == tmp_path / "repo" / ".context" / "backfill-shop-daily-orders-19700101T000000Z.yml"
    assert record_path(None, state, "///", 0.0) == state / "backfill-backfill-19700101T000000Z.yml"
    assert record_path(None, state, "Xmas orders/", 0.0).name == "backfill-Xmas-orders-19700101T000000Z.yml"
    assert record_path(None, state, "./load.sh {start}", 0.0).name == "backfill-load.sh-start-19700101T000000Z.yml"
    assert record_path(None, state, "x" * 79 + " " + "y" * 300, 0.0).name == f"backfill-{'x' * 79}-19700101T000000Z.yml"
    written = write_record(record, path, state / "copy.yml")
    assert yaml.safe_load(written.read_text()) == yaml.safe_load((state / "copy.yml").read_text())
    assert yaml.safe_load(written.read_text())["preflight"]["checks"][0]["status"] == "pass"


def test_a_record_is_verified_only_when_nothing_says_otherwise(repo, tmp_path):
    """A succeeded invocation whose partitions were verified (or had too little history) is verified; --verify
    off, no success, or an unknown verification status each say why not."""
    from engine.guardrails.record import _unverified_because

    fine = Counter_of(verified=3, **{"insufficient history": 1, "none": 1})
    assert _unverified_because("succeeded", "on", [], True, fine, []) == []
    passing = [{"check": "c", "asset": "a", "passed": True, "detail": ""}]
    assert _unverified_because("succeeded", "off", [], False, Counter_of(odd=1, later=2), passing) == [
        "verification was off (--verify off)",
        "no partition succeeded in this invocation",
        "verification statuses not known to be safe: later, odd",
    ]  # fmt: skip
    two = [{"run_id": "a"}, {"run_id": "b"}]
    assert _unverified_because("succeeded", "on", two, True, fine, []) == [
        "2 partitions failed or warned in verification"
    ]


def Counter_of(**counts: int):
    from collections import Counter

    return Counter(counts)


def scenario(tmp_path, *, level: str = "standard", limits: dict | None = None, quota: int | None = None,
             gates: str | None = None, fresh: bool = False) -> Repo:  # fmt: skip
    """raw.events → mid.daily run over 2023-12-01..2024-01-07, in an environment with these guardrail keys (built
    once per process unless ``fresh``: a test that changes it or holds its files)."""
    key = ("scenario", level, tuple(sorted((limits or {}).items())), quota, gates)
    build = lambda base: _scenario(base, level=level, limits=limits, quota=quota, gates=gates)  # noqa: E731
    return build(tmp_path) if fresh else built(key, build)


def _scenario(tmp_path, *, level: str, limits: dict | None, quota: int | None, gates: str | None) -> Repo:
    import yaml

    from tests.builder import TEST_LIMITS

    repo = Repo(tmp_path / "repo", guardrails=level)
    connection = {"name": "db", "path": "warehouse.duckdb", **({"daily_run_quota": quota} if quota else {})}
    dev = {"guardrails": level, "guardrail_limits": {**TEST_LIMITS["guardrail_limits"], **(limits or {})},
           "connections": {"duckdb": [connection]}, **({"dependency_gates": gates} if gates else {})}  # fmt: skip
    repo.write(".bruin.yml", yaml.safe_dump({"default_environment": "dev", "environments": {"dev": dev}}))
    repo.sql("raw.events", "SELECT 1 AS x", materialization={"type": "view"})
    redeclare_daily(repo)  # mid.daily as the functional guardrail tests declare it: ten rows a day
    run_in_process(repo, "2023-12-01", "2024-01-07")
    return repo


RAW_IGNORES = (
    "interval_semantics", "warn", "auto",
    "raw.events ignores the interval: rerun once per partition for nothing; select it out (--exclude-tag, --selector)",
)  # fmt: skip


def test_a_quota_the_backfill_would_exhaust_is_never(tmp_path):
    """db allows 1 run a day: five partitions would exhaust it."""
    judged = preflight(scenario(tmp_path, quota=1), "2024-01-08", "2024-01-12")
    assert judged.verdict == "never"
    assert rows(judged, only_unpassed=True) == [
        RAW_IGNORES,
        ("connector_quotas", "fail", "never", "would exhaust the day's quota: db: 1 runs today + 5 > quota 1"),
        NO_SPLIT,
    ]


def test_tight_limits_make_size_and_rows_need_approval(tmp_path):
    """A duration, size and row ratio above tiny limits: approval, each saying what it found and the limit."""
    limits = {"max_hours": 0.0000001, "max_gib": 0.000001, "row_ratio": 0.5}
    judged = preflight(scenario(tmp_path, limits=limits), "2024-01-08", "2024-01-12")
    assert judged.verdict == "approval"
    found = {name: (status, tier, detail) for name, status, tier, detail in rows(judged, only_unpassed=True)}
    status, tier, detail = found["size_and_duration"]
    assert (status, tier) == ("fail", "approval") and detail.startswith("large: ~")
    assert detail.endswith("(limits 1e-07 h, 1e-06 GiB)") and "(5 × median " in detail
    assert found["row_count_sanity"] == ("fail", "approval", "mid.daily: 10 rows per partition vs 10 before (> 0.5×)")


def test_production_needs_approval_for_every_run(tmp_path):
    """The production level: every run needs approval, said by the environment check."""
    judged = preflight(scenario(tmp_path, level="production"), "2024-01-08", "2024-01-12")
    assert judged.verdict == "approval"
    assert ("environment", "fail", "approval", "dev: production guardrails (.bruin.yml): every run needs approval") in (
        rows(judged)
    )


ATTACHING_ENVIRONMENTS = {
    "stage": {"guardrails": "standard", "connections": {"duckdb": [{"name": "db", "path": "stage.duckdb"}]}},
    "live": {"guardrails": "production", "connections": {"duckdb": [{"name": "db", "path": "prod.duckdb"}]}},
    "scratch": {"guardrails": "sandbox", "connections": {"duckdb": [{"name": "db", "path": "scratch.duckdb"}]}},
    "unread": {"guardrails": "production", "connections": {"duckdb": [{"name": "db", "path": "${UNSET_PATH}"}]}},
}


@pytest.mark.parametrize(
    ("attaches", "level", "source", "without"),
    [
        ("ATTACH 'stage.duckdb' AS s", "standard",
         "mid.x's SQL attaches {root}/stage.duckdb, environment 'stage''s DuckDB file", ()),
        ("ATTACH 'stage.duckdb' AS s; ATTACH DATABASE '{root}/p/../prod.duckdb' AS p", "production",
         "mid.x's SQL attaches {root}/prod.duckdb, environment 'live''s DuckDB file", ()),
        ("ATTACH 'prod.duckdb' AS p (READ_ONLY); ATTACH 'stage.duckdb' AS s", "standard",
         "mid.x's SQL attaches {root}/stage.duckdb, environment 'stage''s DuckDB file", ()),
        ("ATTACH 'other.duckdb' AS o; ATTACH 'x.db' AS x (TYPE sqlite)", "sandbox", ".bruin.yml", ()),
        ("ATTACH 'other.duckdb' AS o; ATTACH 'prod.duckdb' AS p", "production",
         "mid.x's SQL attaches {root}/prod.duckdb, environment 'live''s DuckDB file", ()),
        ("ATTACH 'scratch.duckdb' AS o", "sandbox", ".bruin.yml", ()),
        ("ATTACH getvariable('w') AS w", "production",
         "mid.x's SQL attaches a database its text does not name, which may be environment 'live''s", ()),
        ("ATTACH getvariable('w') AS w", "standard",
         "mid.x's SQL attaches a database its text does not name, which may be environment 'stage''s", ("live",)),
    ],
)  # fmt: skip
def test_the_level_follows_the_files_a_run_attaches(tmp_path, monkeypatch, attaches, level, source, without):
    """A sandbox pipeline whose SQL run as written attaches other files: the strictest level of an environment
    owning one applies (a path as DuckDB opens it, by real path; a read-only attach, another type or a file of
    no environment, or of one at the same level, changes nothing; one its text does not name may be any readable
    environment's, never one that cannot be read), and the environment check says where the level came from."""
    import yaml

    monkeypatch.delenv("UNSET_PATH", raising=False)
    repo = scenario(tmp_path, level="sandbox", fresh=True)
    config = yaml.safe_load((repo.root / ".bruin.yml").read_text())
    config["environments"].update({k: v for k, v in ATTACHING_ENVIRONMENTS.items() if k not in without})
    repo.write(".bruin.yml", yaml.safe_dump(config))
    repo.sql("mid.x", attaches.format(root=repo.root) + "; SELECT 1", depends=["raw.events"])
    judged = preflight(repo, "2024-01-08", "2024-01-12")
    [environment] = [c for c in judged.checks if c.name == "environment"]
    assert (environment.evidence["level"], environment.evidence["from"]) == (level, source.format(root=repo.root))


@pytest.mark.parametrize(
    ("copies", "level", "source"),
    [
        ("COPY (SELECT 1 AS x) TO 'other.duckdb' (FORMAT csv); COPY (SELECT 1 AS x) TO 'prod.duckdb' (FORMAT csv)",
         "production", "mid.x's SQL copies to {root}/prod.duckdb, the DuckDB file of environment 'live'"),
        ("COPY (SELECT 1 AS x) TO '{root}/stage.duckdb.wal' (FORMAT csv)", "standard",
         "mid.x's SQL copies to {root}/stage.duckdb.wal, the write-ahead log of the DuckDB file of environment "
         "'stage'"),
        ("COPY (SELECT 1 AS x, 2 AS y) TO 'wh' (FORMAT csv, PARTITION_BY (x), OVERWRITE)", "production",
         "mid.x's SQL copies to {root}/wh, a directory holding the DuckDB file {root}/wh/prod.duckdb of environment "
         "'live'"),
        ("COPY (SELECT 1 AS x) TO ('prod' || '.duckdb') (FORMAT csv)", "production",
         "mid.x's SQL copies to a file its text does not name, which may be environment 'live''s"),
        ("COPY (SELECT 1 AS x) TO 'export-2024-01-08.csv' (FORMAT csv)", "sandbox", ".bruin.yml"),
        ("COPY (SELECT 1 AS x) TO 'other.duckdb' (FORMAT csv)", "sandbox", ".bruin.yml"),
    ],
)  # fmt: skip
def test_the_level_follows_the_files_a_run_copies_over(tmp_path, monkeypatch, copies, level, source):
    """A sandbox pipeline whose SQL run as written copies over other files: the strictest level of an environment
    whose DuckDB file it overwrites, whose write-ahead log it overwrites, or whose directory it empties applies; a
    target its text does not name may be any environment's; an export's own file, or a DuckDB file of no
    environment, changes nothing. Relative targets are read from the working directory, as DuckDB reads them."""
    import duckdb
    import yaml

    repo = scenario(tmp_path, level="sandbox", fresh=True)
    monkeypatch.chdir(repo.root)
    (repo.root / "wh").mkdir()
    for file in ("other.duckdb", "prod.duckdb", "wh/prod.duckdb"):
        duckdb.connect(str(repo.root / file)).close()
    prod = "wh/prod.duckdb" if "'wh'" in copies else "prod.duckdb"
    environments = {
        **ATTACHING_ENVIRONMENTS,
        "live": {"guardrails": "production", "connections": {"duckdb": [{"name": "db", "path": prod}]}},
    }
    config = yaml.safe_load((repo.root / ".bruin.yml").read_text())
    config["environments"].update(environments)
    repo.write(".bruin.yml", yaml.safe_dump(config))
    repo.sql("mid.x", copies.format(root=repo.root) + "; SELECT 1", depends=["raw.events"])
    judged = preflight(repo, "2024-01-08", "2024-01-12")
    [environment] = [c for c in judged.checks if c.name == "environment"]
    assert (environment.evidence["level"], environment.evidence["from"]) == (level, source.format(root=repo.root))


def test_gates_let_missing_upstream_through_only_with_approval(tmp_path):
    """dependency_gates: warn, or --ignore-dependencies: a gap in the upstream needs approval, naming it."""
    gap = "raw.events: 2024-01-08T00:00:00Z → 2024-01-13T00:00:00Z"
    warned = preflight(scenario(tmp_path, gates="warn"), "2024-01-08", "2024-01-12", selector=("mid.daily",))
    assert warned.verdict == "approval"
    assert rows(warned, only_unpassed=True)[0] == (
        "upstream_coverage", "fail", "approval",
        f"dependency_gates: warn lets missing upstream intervals through: {gap}",
    )  # fmt: skip
    ignored = preflight(scenario(tmp_path / "b"), "2024-01-08", "2024-01-12", GuardOptions(ignore_dependencies=True),
                        selector=("mid.daily",))  # fmt: skip
    assert rows(ignored, only_unpassed=True)[0] == (
        "upstream_coverage", "fail", "approval",
        f"--ignore-dependencies lets missing upstream intervals through: {gap}",
    )  # fmt: skip


def test_slicing_what_ignores_the_interval_is_human_only(tmp_path):
    """Only raw.events (a view that ignores the interval): slicing is meaningless; nothing to sample."""
    judged = preflight(scenario(tmp_path), "2024-01-08", "2024-01-12", selector=("raw.events",))
    assert judged.verdict == "human-only"
    assert rows(judged, only_unpassed=True)[:2] == [
        ("interval_semantics", "fail", "human-only",
         "no selected asset uses the interval: every partition would compute the same thing, slicing is meaningless"),
        ("row_count_sanity", "n/a", "auto", "no selected SQL table asset to sample"),
    ]  # fmt: skip


def test_never_run_assets_and_a_deleting_raw_table(tmp_path):
    """Assets that never succeeded are human-only (and cannot be sampled against history); a raw table with a
    delete-style strategy is never."""
    repo = scenario(tmp_path, fresh=True)
    repo.sql("raw.load", "SELECT CAST('{{ start_date }}' AS DATE) AS day",
             materialization={"type": "table", "strategy": "delete+insert", "incremental_key": "day"})  # fmt: skip
    repo.sql("mid.never", "SELECT 1 AS y", materialization={"type": "table"})
    judged = preflight(repo, "2024-01-08", "2024-01-12")
    assert judged.verdict == "never"
    found = {name: (status, tier, detail) for name, status, tier, detail in rows(judged, only_unpassed=True)}
    assert found["history_exists"] == (
        "fail", "human-only",
        "never succeeded: mid.never, raw.load; there is no back to fill: run it once with `backfill run` first",
    )  # fmt: skip
    assert found["layer_risk"] == (
        "fail", "never", "raw.load: raw layer with a delete-style strategy (source data is never deleted or rebuilt)",
    )  # fmt: skip
    assert found["row_count_sanity"] == (
        "fail", "human-only",
        "could not decide: mid.never: no history to compare its sample of 1 rows with; raw.load: no history to "
        "compare its sample of 1 rows with",
    )  # fmt: skip
    assert found["certainty"] == ("fail", "human-only", "1 check(s) could not decide: row_count_sanity")


def test_work_running_on_the_assets_or_the_file_is_never_joined(tmp_path, monkeypatch):
    """A backfill of the same asset in the live-work registry, or a process writing the DuckDB file: never,
    naming it; the held file's sample says why it was not taken (it once said 'sample failed (None)')."""

    from engine.store.live_work import LiveWork, WorkKind, join, pipeline_key

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    repo = scenario(tmp_path, fresh=True)
    database = str((repo.root / "warehouse.duckdb").resolve())
    week = (1_704_672_000_000_000, 1_705_104_000_000_000)
    other = LiveWork(kind=WorkKind.BACKFILL, target=pipeline_key(repo.pipeline_dir), shown="p", backfill_id="b7",
                     assets=("mid.daily",), files=(database,), windows=(week,), pid=99, host="h")  # fmt: skip
    registration = join(other)
    try:
        live = preflight(repo, "2024-01-08", "2024-01-12")
    finally:
        registration.release()
    assert live.verdict == "never"
    waits = "wait for backfill b7, PID 99 on h: it runs mid.daily over 2024-01-08T00:00:00Z → 2024-01-13T00:00:00Z"
    assert ("downstream_awareness", "fail", "never", waits) in rows(live)
    with writing(database) as writer:
        held = preflight(repo, "2024-01-08", "2024-01-12")
    found = {name: (status, tier, detail) for name, status, tier, detail in rows(held)}
    assert held.facts.errors == {"row_count_sanity": f"{database} is held by process {writer.pid}"}
    assert found["downstream_awareness"] == (
        "fail", "never",
        f"{database} is open for writing by process {writer.pid} (a `backfill run`?): wait for it to finish",
    )  # fmt: skip
    assert found["row_count_sanity"] == (
        "fail", "human-only",
        f"could not decide: mid.daily: sample failed ({database} is held by process {writer.pid})",
    )  # fmt: skip


def test_a_downstream_asset_left_out_is_named(tmp_path):
    """raw.events alone: mid.daily, downstream of it, is named as not selected."""
    judged = preflight(scenario(tmp_path), "2024-01-08", "2024-01-12", selector=("raw.events",))
    assert ("downstream_awareness", "pass", "auto",
            "nothing else is running on these assets or their warehouse; downstream not selected: mid.daily") in (
        rows(judged)
    )  # fmt: skip


def test_a_command_s_record_and_the_yaml_as_written(repo, tmp_path):
    """A command backfill's record names the command, no assets, pipeline or approval, and leaves the downstream
    alone when nothing succeeded; row deltas keep two decimals and a table that appeared is listed; the YAML
    keeps the record's order, writes non-ASCII as it is and wraps at 120 columns."""
    from engine.guardrails.record import build_record, write_record
    from engine.store.run_tally import RunTally

    judged = preflight(repo, "2024-01-08", "2024-01-12", command="true")
    record = build_record(
        backfill_id="C", preflight=judged, approval=None, reason="r → s", counts={"queued": 5}, total=5,
        tally=RunTally(5), status="cancelled", seconds=0.0, before={"t": 3}, after={"t": 4, "new": 2},
        snapshot={"taken_at": "T"}, after_range=[], state_directory=tmp_path,
    )  # fmt: skip
    assert (record["asset"], record["pipeline"], record["command"], record["approval"]) == ("true", None, "true", None)
    assert (record["materialization_strategy"], record["layer"], record["partial"]) == (None, None, True)
    assert record["intervals_attempted"] == 0 and record["downstream_blocked_until_rerun"] == []
    assert record["row_counts"] == {
        "new": {"before": None, "after": 2, "delta_pct": None},
        "t": {"before": 3, "after": 4, "delta_pct": 33.33},
    }
    assert record["snapshot"]["tables"] == [] and record["duration_total"] == "100ms"
    path = write_record(record | {"long": "x " * 100}, tmp_path / "r.yml", tmp_path / "r.yml")
    text = path.read_text()
    assert text.startswith("backfill_id: C\nstatus: cancelled\nasset: 'true'\n")
    assert "reason: r → s\n" in text
    widths = [len(line) for line in text.splitlines()]
    assert 100 < max(widths) <= 122  # wrapped at 120 columns, not at YAML's default 80


def test_approvals_say_who_when_and_how_and_what_holds_a_plan(repo, tmp_path, monkeypatch):
    """Each way of approving records the digest, who, when, the tier, the reason and how; a plan held for
    approval lists every blocking check; a shown digest's components are kept under the user cache; a bad
    prefix is one line."""
    from engine.base.who import requester
    from engine.guardrails.preflight import Approval, pending_directory

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    allowed = preflight(repo, "2023-10-01", "2024-01-08", GuardOptions(allow_long_range=True))
    typed = decide(allowed, approve=None, interactive_approval=True, reason="r", now_text="t")
    assert typed == Approval(allowed.digest, requester(), "t", "approval", "r", "typed at the terminal")
    given = decide(allowed, approve=allowed.digest[:8], interactive_approval=False, reason="r", now_text="t")
    assert given == Approval(allowed.digest, requester(), "t", "approval", "r", "--approve")
    assert given.to_json() == {"digest": allowed.digest, "by": requester(), "at": "t", "tier": "approval",
                               "reason": "r", "how": "--approve"}  # fmt: skip
    safe = preflight(repo, "2024-01-08", "2024-01-12")
    assert decide(safe, approve=None, interactive_approval=False, reason="r", now_text="t").by == requester()
    with pytest.raises(NeedsApproval) as held:
        decide(allowed, approve=None, interactive_approval=False, reason=None, now_text="t")
    assert str(held.value).startswith(
        f"needs approval (plan {allowed.short_digest}): range_size: 100 days > 90 days (--allow-long-range given); "
        "interval_count: 100 intervals > 31"
    )
    person = preflight(repo, "2023-10-01", "2024-01-08")
    with pytest.raises(NeedsApproval) as human:
        decide(person, approve=None, interactive_approval=False, reason=None, now_text="t")
    assert str(human.value).endswith("; run it on a terminal and type the digest on the pre-flight screen")
    with pytest.raises(NeedsApproval) as not_enough:
        decide(person, approve=person.digest, interactive_approval=False, reason=None, now_text="t")
    assert str(not_enough.value) == (
        f"human-only (plan {person.short_digest}): --approve is not enough; run it on a terminal and type the "
        "digest on the pre-flight screen"
    )
    remember(person)
    assert pending_directory() == tmp_path / "cache" / "backfill" / "approvals"
    assert (pending_directory() / f"{person.digest}.json").is_file()
    with pytest.raises(BadInput) as bad:
        check_digest_prefix("xyz")
    assert str(bad.value) == (
        "--approve 'xyz' is not a plan digest: give at least 8 hexadecimal characters of the digest the pre-flight "
        "report printed"
    )
    with pytest.raises(NeedsApproval, match="the plan changed since it was approved"):
        decide(safe, approve=("1" if safe.digest[0] != "1" else "2") * 8, interactive_approval=False, reason=None,
               now_text="t")  # fmt: skip


def test_the_tables_and_checks_after_a_range(tmp_path):
    """After the run: every selected table's rows (a view has none), and the selected assets' checks run once
    over the whole table; without checks only the rows; a file held by a writer leaves every count unknown and
    each check failed with why; a pre-flight's JSON says its verdict, digest, level and checks."""

    from engine.guardrails.record import is_table, tables_after_run

    repo = scenario(tmp_path, fresh=True)
    column_checks = [{"name": "not_null"}, {"name": "negative", "blocking": False}]
    columns = [{"name": "n", "type": "integer", "checks": column_checks}]
    redeclare_daily(repo, columns=columns)
    repo.sql("mid.latest", "SELECT 1 AS x", materialization={"type": "table"})
    run_in_process(repo, "2024-01-01", "2024-01-07")
    judged = preflight(repo, "2024-01-01", "2024-01-07")
    counts, checks = tables_after_run(judged.facts, with_checks=True)
    assert counts == {"mid.daily": 380, "mid.latest": 1}
    assert [(c["asset"], c["check"], c["passed"]) for c in checks] == [
        ("mid.daily", "not_null(n)", True), ("mid.daily", "negative(n)", False),
    ]  # fmt: skip
    assert tables_after_run(judged.facts, with_checks=False) == (counts, [])
    assert [is_table(a.asset) for a in sorted(judged.facts.selected, key=lambda a: a.asset.name)] == [
        True, True, False,
    ]  # fmt: skip
    database = str((repo.root / "warehouse.duckdb").resolve())
    with writing(database) as writer:
        held_counts, held_checks = tables_after_run(judged.facts, with_checks=True)
    assert held_counts == {"mid.daily": None, "mid.latest": None}
    assert [(c["asset"], c["check"], c["passed"]) for c in held_checks] == [("mid.daily", "*", False)]
    assert str(writer.pid) in held_checks[0]["detail"]
    shown = judged.to_json()
    assert (shown["verdict"], shown["digest"], shown["level"]) == (judged.verdict, judged.digest, "standard")
    assert shown["checks"] == [c.to_json() for c in judged.checks] and shown["pipeline_warnings"] == []


def test_the_digest_s_parts_are_pinned(repo):
    """The digest is sha256 of its sorted components; the plan inputs, the environment and each check's
    evidence are each a sha256 of their sorted JSON, so an approval given by an earlier version still matches;
    secrets in the configuration are blanked however deep; changes are named gone, new or changed."""
    import hashlib

    import orjson

    from engine.guardrails.digest import _without_secrets, changed_components, digest_of

    judged = preflight(repo, "2024-01-08", "2024-01-12")
    parts = judged.components

    def hashed(value) -> str:
        return hashlib.sha256(orjson.dumps(value, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS)).hexdigest()

    joined = "".join(f"{name}={value}\n" for name, value in sorted(parts.items())).encode()
    assert judged.digest == digest_of(parts) == hashlib.sha256(joined).hexdigest()
    request = judged.facts.request
    assert parts["plan inputs"] == hashed({
        "spec": request.spec.to_json(), "mode": "trigger", "execution": request.options.to_json(),
        "guardrails": request.guard.to_json(), "selected": 5,
    })  # fmt: skip
    ids = hashlib.sha256()
    for index in range(5):
        interval = request.spec.plan.interval(index)
        ids.update(request.spec.ids.of(interval.start, interval.end).encode() + b"\n")
    assert parts["partition IDs"] == ids.hexdigest()
    connection = request.environment.connections[0]
    assert parts["environment"] == hashed({
        "name": "dev",
        "connections": [{"kind": "duckdb", "name": "db", "path": str(connection.path), "read_only": False,
                         "max_concurrent_assets": connection.max_concurrent_assets}],
        "guardrails": judged.facts.settings.to_json(),
    })  # fmt: skip
    for check in judged.checks:
        assert parts[f"evidence of {check.name}"] == hashed(check.to_json())
    file_parts = {name for name in parts if name.startswith("file ")}
    assert file_parts == {
        "file pipeline.yml", "file assets/raw.events.sql", "file assets/mid.daily.sql", "file assets/mid.latest.sql",
        "file .bruin.yml (environment dev, secrets left out)",
    }  # fmt: skip
    config = request.config
    assert parts["file .bruin.yml (environment dev, secrets left out)"] == hashed(
        {"default_environment": "dev", "dev": _without_secrets(config.raw_environments["dev"])}
    )
    assert (
        parts["file assets/raw.events.sql"]
        == hashlib.sha256((repo.pipeline_dir / "assets" / "raw.events.sql").read_bytes()).hexdigest()
    )
    assert _without_secrets({"db": [{"Password": "x", "path": "p", "nested": {"API_TOKEN": 1}}], "n": 2}) == {
        "db": [{"Password": "<secret>", "path": "p", "nested": {"API_TOKEN": "<secret>"}}], "n": 2,
    }  # fmt: skip
    assert changed_components({"a": "1", "b": "2", "c": "3"}, {"b": "2", "c": "4", "d": "5"}) == [
        "a is gone", "c changed", "d is new",
    ]  # fmt: skip
    # A file judged absent (a script a command names, not there yet) that reads now is new.
    absent = "unreadable: No such file or directory"
    assert changed_components({"file x.sh": absent, "file y.sh": "1"}, {"file x.sh": "2", "file y.sh": absent}) == [
        "file x.sh is new", "file y.sh changed",
    ]  # fmt: skip
