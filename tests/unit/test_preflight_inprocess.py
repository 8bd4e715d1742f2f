"""The pre-flight in-process (issue 22): a real DuckDB pipeline with five weeks of history, judged for plans of
every shape, each check's status, tier and detail compared whole; then the decision and the digest."""

from __future__ import annotations

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

TIME_INTERVAL = {"type": "table", "strategy": "time_interval", "incremental_key": "day", "time_granularity": "date"}
IGNORING = (
    "interval_semantics", "warn", "auto",
    "mid.latest, raw.events ignore the interval: rerun once per partition for nothing; select them out "
    "(--exclude-tag, --selector)",
)  # fmt: skip
NO_QUOTA = ("connector_quotas", "n/a", "auto", "no connection declares a daily_run_quota")


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Repo:
    """raw.events (a view) → mid.daily (time_interval, ten rows a day) and mid.latest (a table without a time
    key), run once from 2023-12-01 to 2024-01-07."""
    repo = Repo(tmp_path_factory.mktemp("preflight") / "repo", guardrails="standard")
    repo.sql("raw.events", "SELECT 1 AS x", materialization={"type": "view"})
    repo.sql(
        "mid.daily",
        "SELECT CAST(range AS DATE) AS day, n FROM range(DATE '{{ start_date }}', DATE '{{ end_date }}' + "
        "INTERVAL 1 DAY, INTERVAL 1 DAY), range(10) AS t(n)",
        depends=["raw.events"],
        materialization=TIME_INTERVAL,
    )
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
