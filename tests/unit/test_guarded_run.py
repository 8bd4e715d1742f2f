"""What the guardrails do around a decided run, in-process on a real DuckDB pipeline (issue 22): the invocation in
guardrails.json and the audit lines of the gates it let through, the snapshot before the first child (or not),
each partition's verifier, and the YAML record at the end."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import orjson
import pytest
import yaml

from engine.base.who import requester
from engine.dates.plan import Interval
from engine.guardrails.guarded_run import GuardedRun, record_gate_bypasses, record_invocation, rerun_assets
from engine.guardrails.preflight import Approval
from engine.guardrails.request import GuardOptions
from engine.guardrails.table_snapshot import SNAPSHOT_INDEX, read_snapshot
from engine.guardrails.tiers import APPROVAL, FAIL, PreflightCheck, passed
from engine.pipeline.repository import logs_root
from engine.store import audit
from engine.store.failure_groups import group_failures
from engine.store.guardrails_log import read_guardrails
from engine.store.records import Attempt
from engine.store.run_tally import RunTally
from engine.store.state_store import StateStore
from tests.builder import Repo
from tests.functional.test_guardrails import redeclare_daily
from tests.unit.test_preflight_inprocess import built, preflight, run_in_process

DAY = 86_400_000_000
JAN_8 = 1_704_672_000_000_000


def checked_assets(base: Path) -> Repo:
    """raw.events (a view) → mid.daily (time_interval, a blocking not_null check on n) and mid.latest (a table),
    run once over 2023-12-01..2024-01-07."""
    repo = Repo(base / "repo", guardrails="standard")
    repo.sql("raw.events", "SELECT 1 AS x", materialization={"type": "view"})
    redeclare_daily(repo, columns=[{"name": "n", "type": "integer", "checks": [{"name": "not_null"}]}])
    repo.sql("mid.latest", "SELECT 1 AS x", depends=["raw.events"], materialization={"type": "table"})
    run_in_process(repo, "2023-12-01", "2024-01-07")
    return repo


@pytest.fixture
def repo() -> Repo:
    """The pipeline above, built once per process (tests write only their own files into it)."""
    return built(("guarded run",), checked_assets)


def store_in(tmp_path: Path, name: str = "B1") -> StateStore:
    directory = tmp_path / name
    directory.mkdir(parents=True)
    return StateStore(directory)


def guarded(judged, store: StateStore, **fields) -> GuardedRun:
    spec = judged.facts.request.spec
    return GuardedRun(preflight=judged, approval=None, store=store, spec=spec, reason="fix", working_directory="/",
                      **fields)  # fmt: skip


def test_the_invocation_is_recorded_with_its_preflight_and_approval(repo, tmp_path):
    """guardrails.json gains the mode, reason, time, the pre-flight's JSON and the approval's; a safe run adds
    no audit line."""
    judged = preflight(repo, "2024-01-08", "2024-01-12")
    approval = Approval(judged.digest, "ann@box", "2024-01-13T00:00:00Z", "auto", "fix", "auto")
    store = store_in(tmp_path)
    record_invocation(store, mode="trigger", reason="fix", preflight=judged, approval=approval)
    record_invocation(store, mode="resume", reason=None, preflight=judged, approval=approval)
    invocations = read_guardrails(store)["invocations"]
    assert invocations[0] == orjson.loads(orjson.dumps({
        "mode": "trigger", "reason": "fix", "at": "2024-01-13T00:00:00Z", "preflight": judged.to_json(),
        "approval": approval.to_json(),
    }))  # fmt: skip
    assert (invocations[1]["mode"], invocations[1]["reason"]) == ("resume", None)
    assert audit.read(store.directory).entries == []


def test_an_invocation_that_lets_a_gap_through_audits_it_with_its_reason_and_time(tmp_path):
    """dependency_gates: warn over a gap: record_invocation writes the GATE_BYPASS line into this backfill's
    audit log, with the invocation's reason and approval time."""
    from tests.unit.test_preflight_inprocess import scenario

    judged = preflight(scenario(tmp_path, gates="warn"), "2024-01-08", "2024-01-12", selector=("mid.daily",))
    approval = Approval(judged.digest, "ann@box", "T0", "approval", "fix", "--approve")
    store = store_in(tmp_path)
    record_invocation(store, mode="trigger", reason="fix", preflight=judged, approval=approval)
    [line] = audit.read(store.directory).entries
    assert (line["action"], line["asset"], line["requested_at"], line["applied_at"]) == (
        "GATE_BYPASS", "raw.events", "T0", "T0",
    )  # fmt: skip
    assert line["reason"] == (
        "fix (dependency_gates: warn; let through raw.events: 2024-01-08T00:00:00Z → 2024-01-13T00:00:00Z)"
    )


def bypassing(spans: dict | None, *, ignored: bool = False, gates: str = "warn"):
    """A pre-flight, built by hand, whose upstream check let ``spans`` through."""
    evidence = {"gate_bypass": spans} if spans is not None else {}
    checks = [passed("target_valid", "ok"), PreflightCheck("upstream_coverage", FAIL, APPROVAL, "gap", evidence)]
    facts = SimpleNamespace(request=SimpleNamespace(guard=GuardOptions(ignore_dependencies=ignored)))
    return SimpleNamespace(checks=checks, facts=facts, settings=SimpleNamespace(dependency_gates=gates))


def test_each_upstream_let_through_is_one_audit_line_naming_how_and_what(tmp_path):
    """dependency_gates: warn lets two upstreams through: one GATE_BYPASS line each, sorted, with the reason,
    the spans (five shown, then …), who asked and which process applied it; 'not checked' is 'unchecked'."""
    store = store_in(tmp_path)
    spans = [f"s{i}" for i in range(6)]
    record_gate_bypasses(store, reason="fix", preflight=bypassing({"z.up": ["not checked"], "a.up": spans}),
                         at="T")  # fmt: skip
    lines = audit.read(store.directory).entries
    common = {"backfill_id": "B1", "requested_by": requester(), "requested_at": "T", "applied_at": "T",
              "applied_by": f"backfill (PID {os.getpid()})", "previous_message": "dependency_gates: warn",
              "action": "GATE_BYPASS"}  # fmt: skip
    assert [{k: line[k] for k in [*common, "asset", "from_status", "reason"]} for line in lines] == [
        {**common, "asset": "a.up", "from_status": "missing",
         "reason": "fix (dependency_gates: warn; let through a.up: s0, s1, s2, s3, s4 …)"},
        {**common, "asset": "z.up", "from_status": "unchecked",
         "reason": "fix (dependency_gates: warn; let through z.up: not checked)"},
    ]  # fmt: skip
    assert all(line["partition_id"] is None and line["id"] for line in lines)


def test_ignoring_dependencies_is_audited_even_when_nothing_was_missing(tmp_path):
    """--ignore-dependencies: an IGNORE_DEPENDENCIES line first, then a line per gap; without a reason the spans
    are the reason; no gap and no flag: nothing written."""
    store = store_in(tmp_path)
    record_gate_bypasses(store, reason=None, preflight=bypassing(None, ignored=True), at="T")
    record_gate_bypasses(store, reason=None, preflight=bypassing({"u": ["a", "b"]}, ignored=True), at="T")
    record_gate_bypasses(store, reason="r", preflight=bypassing({"v": list("abcde")}, ignored=True), at="T2")
    record_gate_bypasses(store, reason="r", preflight=bypassing({}), at="T")
    record_gate_bypasses(store, reason="r", preflight=SimpleNamespace(
        checks=[], facts=bypassing(None).facts, settings=SimpleNamespace(dependency_gates="off")), at="T")  # fmt: skip
    lines = audit.read(store.directory).entries
    assert [(line["action"], line["asset"], line["reason"], line["previous_message"]) for line in lines] == [
        ("IGNORE_DEPENDENCIES", None, None, "--ignore-dependencies"),
        ("IGNORE_DEPENDENCIES", None, None, "--ignore-dependencies"),
        ("GATE_BYPASS", "u", "--ignore-dependencies; let through u: a, b", "--ignore-dependencies"),
        ("IGNORE_DEPENDENCIES", None, "r", "--ignore-dependencies"),
        ("GATE_BYPASS", "v", "r (--ignore-dependencies; let through v: a, b, c, d, e)", "--ignore-dependencies"),
    ]  # fmt: skip
    ignored = lines[3]
    assert (ignored["backfill_id"], ignored["requested_by"], ignored["requested_at"], ignored["applied_at"]) == (
        "B1", requester(), "T2", "T2",
    )  # fmt: skip
    assert ignored["applied_by"] == f"backfill (PID {os.getpid()})"


def test_an_asset_rerun_runs_the_asset_and_with_downstream_all_that_follows_once(tmp_path):
    """No asset: None (the whole selection); an asset alone; with downstream, the transitive closure, each asset
    once however many paths reach it; without a pipeline, the asset alone."""
    downstream = {"a": ["b", "c"], "b": ["d"], "c": ["d"], "d": ["e"]}
    judged = SimpleNamespace(facts=SimpleNamespace(pipeline=SimpleNamespace(downstream=downstream)))
    assert rerun_assets(judged, None, True) is None
    assert rerun_assets(judged, "b", False) == {"b"}
    assert rerun_assets(judged, "b", True) == {"b", "d", "e"}
    assert rerun_assets(judged, "a", True) == {"a", "b", "c", "d", "e"}
    assert rerun_assets(SimpleNamespace(facts=SimpleNamespace(pipeline=None)), "a", True) == {"a"}


def test_the_snapshot_is_taken_once_before_the_first_child_and_the_files_are_let_go(repo, tmp_path):
    """A pipeline run that changes data: the snapshot is taken, then the read-only connections are closed; a
    resume keeps the snapshot it has (not taken again)."""
    judged = preflight(repo, "2024-01-08", "2024-01-12")
    store = store_in(tmp_path)
    warehouse = judged.facts.warehouses.open(repo.database)
    guarded(judged, store).before_first_launch()
    taken = read_snapshot(store.directory)
    assert taken is not None and warehouse.connection is None
    names = sorted(t["name"] for f in taken["files"] for t in f["tables"])
    assert names == ["mid.daily", "mid.latest"]
    (store.directory / SNAPSHOT_INDEX).write_bytes(orjson.dumps({**taken, "taken_at": "kept"}))
    guarded(judged, store).before_first_launch()
    assert read_snapshot(store.directory)["taken_at"] == "kept"


@pytest.mark.parametrize("why", ["--no-snapshot", "a command", "views only"])
def test_no_snapshot_without_a_way_back_to_keep_yet_the_files_are_let_go(repo, tmp_path, why):
    """--no-snapshot, a command, or nothing selected that changes data: no snapshot file; the connections are
    closed all the same."""
    if why == "--no-snapshot":
        judged = preflight(repo, "2024-01-08", "2024-01-12", GuardOptions(snapshot=False))
    elif why == "a command":
        judged = preflight(repo, "2024-01-08", "2024-01-12", command="true")
    else:
        judged = preflight(repo, "2024-01-08", "2024-01-12", selector=("raw.events",))
    store = store_in(tmp_path)
    warehouse = judged.facts.warehouses.open(repo.database)
    guarded(judged, store).before_first_launch()
    assert not (store.directory / SNAPSHOT_INDEX).exists()
    assert warehouse.connection is None


def run_record(repo: Repo, run_id: str, **statuses: str) -> str:
    """A run record in the pipeline's logs with these asset statuses (a blocking check failing for 'checkfail')."""
    assets = [
        {"name": name.replace("__", "."), "status": "succeeded" if status == "checkfail" else status,
         "checks": [{"passed": False, "blocking": True}] if status == "checkfail" else []}
        for name, status in statuses.items()
    ]  # fmt: skip
    runs = logs_root(repo.root) / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    (runs / f"{run_id}.json").write_bytes(orjson.dumps({"status": "succeeded", "assets": assets}))
    return run_id


def verdict(verifier, run_id: str, carried: dict | None = None) -> tuple[str, str]:
    attempt = Attempt(run_id=run_id, status="succeeded", started_at="t", log=None, carried=carried or {})
    found = verifier(0, Interval(0, JAN_8, JAN_8 + DAY), attempt, "p0")
    return str(found.status), found.detail


def test_each_partition_is_verified_from_its_run_record_unless_off_or_a_command(repo, tmp_path):
    """The verifier judges the attempt's run record: an asset failing or missing fails it (warns under
    --verify warn); an asset rerun judges only what it ran (and downstream when asked); carried assets are
    judged by the attempt they came from; --verify off or a command: no verifier."""
    store = store_in(tmp_path)
    judged = preflight(repo, "2024-01-08", "2024-01-08")
    failing = run_record(repo, "gr-latest-failed", mid__daily="succeeded", mid__latest="failed")
    verifier = guarded(judged, store).pipeline_verifier()
    status, detail = verdict(verifier, failing)
    assert status == "failed" and "mid.latest failed" in detail
    assert "mid.latest failed" in verdict(guarded(judged, store, rerun_asset="mid.latest").pipeline_verifier(),
                                          failing)[1]  # fmt: skip
    only_daily = guarded(judged, store, rerun_asset="mid.daily").pipeline_verifier()
    assert "mid.latest" not in verdict(only_daily, failing)[1]
    from_raw = guarded(judged, store, rerun_asset="raw.events").pipeline_verifier()
    assert "mid.latest" not in verdict(from_raw, failing)[1]
    with_downstream = guarded(judged, store, rerun_asset="raw.events", rerun_downstream=True).pipeline_verifier()
    assert "mid.latest failed" in verdict(with_downstream, failing)[1]
    partial = run_record(repo, "gr-daily-only", mid__daily="succeeded")
    earlier = run_record(repo, "gr-earlier", mid__latest="succeeded")
    assert "mid.latest is not in the run record" in verdict(verifier, partial)[1]
    assert "mid.latest" not in verdict(verifier, partial, carried={"mid.latest": earlier})[1]
    warn = preflight(repo, "2024-01-08", "2024-01-08", GuardOptions(verify="warn"))
    assert verdict(guarded(warn, store).pipeline_verifier(), failing)[0] == "warning"
    off = preflight(repo, "2024-01-08", "2024-01-08", GuardOptions(verify="off"))
    assert guarded(off, store).pipeline_verifier() is None
    command = preflight(repo, "2024-01-08", "2024-01-08", command="true")
    assert guarded(command, store).pipeline_verifier() is None


def test_the_record_counts_tables_before_and_after_and_runs_checks_only_after_a_run(repo, tmp_path):
    """write_record: the YAML under the repository's .context and its copy under records/, the tables' rows
    before (the pre-flight's) and after (read now), checks over the whole table only when partitions ran."""
    for earlier in (repo.root / ".context").glob("backfill-p-19700101T*"):
        earlier.unlink()  # this test's records from an earlier run in this process (the repository is shared)
    judged = preflight(repo, "2024-01-08", "2024-01-12")
    store = store_in(tmp_path)
    run = guarded(judged, store)
    run.approval = Approval(judged.digest, "ann@box", "T0", "auto", "fix", "auto")
    (store.directory / SNAPSHOT_INDEX).write_bytes(orjson.dumps({"taken_at": "S", "bytes": 1, "files": []}))
    counts = {"queued": 0, "running": 0, "succeeded": 0, "failed": 0, "cancelled": 0, "skipped": 0}
    path = Path(run.write_record(counts=counts, tally=RunTally(5), status="cancelled", seconds=1.0,
                                 finished_at=0.0))  # fmt: skip
    assert path == repo.root / ".context" / "backfill-p-19700101T000000Z.yml"
    record = yaml.safe_load(path.read_text())
    assert yaml.safe_load((store.directory / "records" / path.name).read_text()) == record
    assert record["backfill_id"] == "B1" and record["status"] == "cancelled" and record["reason"] == "fix"
    assert record["row_counts"]["mid.daily"] == {"before": 380, "after": 380, "delta_pct": 0.0}
    assert set(record["row_counts"]) == {"mid.daily", "mid.latest"}
    assert record["checks_after_range"] == []
    assert record["approval"]["by"] == "ann@box" and record["snapshot"]["taken_at"] == "S"
    tally = RunTally(5)
    tally.add(0, Attempt(run_id="r0", status="succeeded", started_at="t", log=None))
    assert (record["failure_groups"], record["failure_groups_total"]) == ([], 0)
    kinds = group_failures([(1, "mid.daily failed: out of memory"), (3, "mid.daily failed: out of memory")])
    ran = yaml.safe_load(Path(run.write_record(counts=counts, tally=tally, status="succeeded", seconds=1.0,
                                               finished_at=60.0, failure_groups=kinds)).read_text())  # fmt: skip
    assert ran["failure_groups_total"] == 1 and ran["failure_groups"][0]["count"] == 2
    assert ran["failure_groups"][0]["first"]["index"] == 1 and ran["failure_groups"][0]["last"]["index"] == 3
    assert [(c["asset"], c["check"], c["passed"]) for c in ran["checks_after_range"]] == [
        ("mid.daily", "not_null(n)", True)
    ]
    spec = judged.facts.request.spec
    one_asset = replace(spec, target=replace(spec.target, name="p/mid.daily"))
    named = GuardedRun(preflight=judged, approval=None, store=store, spec=one_asset, reason=None,
                       working_directory="/")  # fmt: skip
    path = named.write_record(counts=counts, tally=RunTally(5), status="cancelled", seconds=1.0, finished_at=180.0)
    assert path == str(repo.root / ".context" / "backfill-p-19700101T000300Z.yml")
    command = preflight(repo, "2024-01-08", "2024-01-12", command="true")
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    run = GuardedRun(preflight=command, approval=None, store=store, spec=command.facts.request.spec, reason=None,
                     working_directory=str(outside))  # fmt: skip
    path = Path(run.write_record(counts=counts, tally=tally, status="succeeded", seconds=1.0, finished_at=120.0))
    assert path == store.directory / "backfill-true-19700101T000200Z.yml"  # no repository: kept with the state
    written = yaml.safe_load(path.read_text())
    assert written["row_counts"] == {} and written["checks_after_range"] == []
