"""The executor's side of the guardrails (``engine/execute/guarding.py``), in-process: what each pre-flight is asked,
what a backfill's manifest keeps of how it was judged, the audit of an asset rerun, and the hooks a started
backfill's executor is given (the record at its end, ``--verify-command`` as a child, the watch of a pipeline's
files, the asset-level resume)."""

from __future__ import annotations

import errno
import hashlib
import os
import time
from pathlib import Path

import orjson
import pytest
import yaml

from engine.base.errors import StateUnreadable
from engine.base.settings import Settings
from engine.base.who import requester
from engine.execute import guarding
from engine.execute.asset_resume import AssetResume
from engine.execute.backfill import load_backfill, replan
from engine.execute.executor import Outcome
from engine.execute.invocation import judge_new, judge_resume
from engine.execute.rerun import AssetRerun, PartitionSelection
from engine.guardrails.request import RERUN, TRIGGER, GuardOptions
from engine.pipeline.options import RunOptions
from engine.pipeline.repository import logs_root
from engine.spec.backfill_spec import ExecutionOptions
from engine.spec.planning import plan_request
from engine.store import audit
from engine.store.records import Attempt, PartitionRecord, RecordStatus
from engine.store.run_tally import RunTally

MICROS = 1_000_000


@pytest.fixture
def here(tmp_path: Path, monkeypatch) -> Path:
    """A working directory, with this user's state (the live-work registry) and cache (remembered digests) in it."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path


def planned_command(cwd: Path, command: str = "true {start}"):
    return plan_request(
        target=None, command=command, name=None, start="2024-01-01", end="2024-01-03", timezone="UTC",
        partition="daily", environment=None, config_file=None, run_options=RunOptions(),
        options=ExecutionOptions(max_parallel=2), force=False, cwd=cwd,
    )  # fmt: skip


def started_command(cwd: Path, guard: GuardOptions, reason: str | None = "first load"):
    """A command backfill of three days started through the invocation path (nothing run): prepared, preflight."""
    invocation = judge_new(planned_command(cwd), guard, reason=reason, state_dir="states", cwd=cwd,
                           settings=Settings(), can_ask=False)  # fmt: skip
    prepared = invocation.start(invocation.approve(approve=None))
    return prepared, invocation.preflight


def pipeline_repo(root: Path):
    from tests.builder import Repo

    repo = Repo(root)
    repo.sql("s.t", "SELECT DATE '{{ start_date }}' AS day", materialization={"type": "table", "strategy": "append"})
    return repo


def started_pipeline(repo, guard: GuardOptions | None = None, **resume):
    """The one-asset pipeline's backfill of three days, started through the invocation path; with ``resume``
    (``rerun_asset``, ``whole_partitions``), saved, given up and continued over its first day."""
    planned = plan_request(
        target=str(repo.pipeline_dir), command=None, name=None, start="2024-01-01", end="2024-01-03",
        timezone="UTC", partition="daily", environment=None, config_file=None, run_options=RunOptions(),
        options=ExecutionOptions(), force=False, cwd=repo.root,
    )  # fmt: skip
    invocation = judge_new(planned, guard or GuardOptions(), reason="load", state_dir="states", cwd=repo.root,
                           settings=Settings(), can_ask=False)  # fmt: skip
    prepared = invocation.start(invocation.approve(approve=None, typed=True))
    if not resume:
        return prepared, invocation.preflight
    prepared.release()
    loaded = load_backfill(prepared.store.id, "states", repo.root)
    again = judge_resume(loaded, ExecutionOptions(), PartitionSelection(indices=frozenset({0})), reason="again",
                         settings=Settings(), can_ask=False, **resume)  # fmt: skip
    return again.start(again.approve(approve=None, typed=True)), again.preflight


def record_attempts(loaded, index: int, *attempts: tuple[RecordStatus, str | None]) -> None:
    """Partition ``index`` recorded with these attempts (status, error), as runs of it would leave it."""
    interval = loaded.spec.plan.interval(index)
    made = [
        Attempt(run_id=f"r{index}-{n}", status=status, started_at="2024-01-01", exit_code=int(bool(error)), error=error)
        for n, (status, error) in enumerate(attempts, start=1)
    ]
    label = "succeeded" if made[-1].status is RecordStatus.SUCCEEDED else "failed"
    record = PartitionRecord(loaded.spec.ids.of(interval.start, interval.end), index, "", "", interval.start,
                             interval.end, label, made)  # fmt: skip
    loaded.store.write_record(record, durable=False)


def test_a_new_backfill_asks_its_preflight_about_every_partition_in_order(here):
    """A new backfill's request: a trigger over every partition of the plan, first to last, with its bounds, the
    reason, where it runs and where its state goes, and the time it was judged."""
    planned = planned_command(here)
    guard = GuardOptions(level="sandbox")
    before = time.time()
    request = guarding.request_for_new(planned, guard, reason="first load", root=here / "states", cwd=here / "w")
    assert (request.spec, request.options, request.guard) == (planned.spec, planned.options, guard)
    assert (request.mode, request.selected_count, list(request.selected())) == (TRIGGER, 3, [0, 1, 2])
    assert request.bounds == (0, 2)
    assert request.effective_parallel == planned.parallelism.effective == 2
    assert (request.state_root, request.working_directory) == (here / "states", here / "w")
    assert (request.reason, request.backfill_id) == ("first load", None)
    assert before * MICROS - 1 <= request.now <= time.time() * MICROS + 1


def test_how_a_backfill_was_judged_comes_back_from_its_manifest(here):
    """A command's manifest keeps its guardrail choices, reason and settings, read back as they were; a pipeline's
    keeps no settings (its environment has them); a manifest from before guardrails is judged by today's defaults;
    one whose guardrails are not a mapping is refused, naming the backfill."""
    guard = GuardOptions(level="sandbox", verify="warn", verify_command="check {start}")
    prepared, preflight = started_command(here, guard)
    prepared.release()
    manifest = orjson.loads((prepared.store.directory / "manifest.json").read_bytes())
    assert manifest["guardrails"]["settings"] == preflight.settings.to_json()
    options, reason, settings = guarding.saved_guard(manifest)
    assert (options, reason) == (guard, "first load")
    assert settings is not None and settings.to_json() == preflight.settings.to_json()
    pipeline, pipeline_preflight = started_pipeline(pipeline_repo(here / "repo"))
    pipeline.release()
    assert guarding.manifest_guardrails(pipeline_preflight.facts.request, pipeline_preflight) == {
        "options": GuardOptions().to_json()
    }
    assert guarding.saved_guard({"id": "bf-old", "reason": "old"}) == (GuardOptions(), None, None)
    with pytest.raises(StateUnreadable) as refused:
        guarding.saved_guard({"id": "bf-x", "guardrails": ["sandbox"]})
    assert str(refused.value) == "manifest of backfill 'bf-x': guardrails is not a mapping"


def test_a_continue_asks_its_preflight_about_the_partitions_it_selected(here, monkeypatch):
    """A --continue's request: a rerun of the selected partitions in order, run where the backfill was made (not
    where --continue was typed), with the saved settings, its own reason or the saved one, and a key that names
    the selection: the IDs, or the mode and a hash of what it selects."""
    prepared, preflight = started_command(here, GuardOptions(level="sandbox"))
    prepared.release()
    loaded = load_backfill(prepared.store.id, "states", here)
    record_attempts(loaded, 1, (RecordStatus.SUCCEEDED, None))
    loaded = load_backfill(prepared.store.id, "states", here)
    elsewhere = here / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    planned = replan(loaded.spec, ExecutionOptions(max_parallel=3))
    by_ids = PartitionSelection(indices=frozenset({2, 0}))
    before = time.time()
    request = guarding.request_for_resume(loaded, planned, by_ids, reason=None)
    assert (request.mode, request.selected_count, list(request.selected())) == (RERUN, 2, [0, 2])
    assert (request.selection_key, request.backfill_id, request.reason) == ("ids:0,2", loaded.store.id, "first load")
    assert request.working_directory == here and request.state_root == loaded.root
    assert request.effective_parallel == planned.parallelism.effective == 3
    assert request.settings_override.to_json() == preflight.settings.to_json()
    assert request.guard == GuardOptions(level="sandbox") and not request.guard.ignore_dependencies
    assert before * MICROS - 1 <= request.now <= time.time() * MICROS + 1
    everything = PartitionSelection(mode="all")
    own = guarding.request_for_resume(loaded, planned, everything, reason="rerun it all", ignore_dependencies=True)
    assert (own.reason, own.selected_count, list(own.selected())) == ("rerun it all", 3, [0, 1, 2])
    assert own.guard.ignore_dependencies
    assert own.selection_key == "all:" + hashlib.sha256(everything.mask(loaded.board)).hexdigest()
    loaded.manifest.pop("working_directory")
    assert guarding.request_for_resume(loaded, planned, by_ids, reason=None).working_directory == elsewhere


def test_rerunning_a_succeeded_partition_is_seen_by_ids_and_by_mode(here):
    """Whether a --continue would run a succeeded partition again: by IDs, when one of them succeeded; by mode,
    when the mode takes succeeded partitions and there is one (not when there is none)."""
    prepared, _ = started_command(here, GuardOptions(level="sandbox"))
    prepared.release()
    loaded = load_backfill(prepared.store.id, "states", here)
    assert not guarding.reruns_succeeded(loaded, PartitionSelection(mode="all"))
    record_attempts(loaded, 1, (RecordStatus.SUCCEEDED, None))
    record_attempts(loaded, 2, (RecordStatus.FAILED, "exit 1"))
    loaded = load_backfill(prepared.store.id, "states", here)
    assert guarding.reruns_succeeded(loaded, PartitionSelection(indices=frozenset({0, 1})))
    assert not guarding.reruns_succeeded(loaded, PartitionSelection(indices=frozenset({0, 2})))
    assert guarding.reruns_succeeded(loaded, PartitionSelection(mode="all"))
    assert not guarding.reruns_succeeded(loaded, PartitionSelection(mode="failed"))


def test_an_asset_rerun_audits_each_partition_with_the_status_and_last_error_it_had(here):
    """One RERUN line per partition, in order: the asset, the status the partition had and its last attempt's
    error (none for a partition never attempted), the reason, who asked and when, and which process applied it."""
    prepared, _ = started_command(here, GuardOptions(level="sandbox"))
    prepared.release()
    loaded = load_backfill(prepared.store.id, "states", here)
    failures = ((RecordStatus.FAILED, "first"), (RecordStatus.FAILED, "second"), (RecordStatus.FAILED, "third"))
    record_attempts(loaded, 0, *failures)
    loaded = load_backfill(prepared.store.id, "states", here)
    guarding.record_asset_rerun(loaded.store, loaded, frozenset({2, 0}), "s.t", "the fix for day one")
    first, third = audit.read(loaded.store.directory).entries
    ids = [loaded.spec.ids.of(i.start, i.end) for i in (loaded.spec.plan.interval(0), loaded.spec.plan.interval(2))]
    for line, partition_id, status, message in ((first, ids[0], "failed", "third"), (third, ids[1], "queued", None)):
        assert (line["backfill_id"], line["partition_id"], line["asset"], line["action"]) == (
            loaded.store.id, partition_id, "s.t", "RERUN"
        )  # fmt: skip
        assert (line["from_status"], line["previous_message"]) == (status, message)
        assert (line["reason"], line["requested_by"]) == ("the fix for day one", requester())
        assert line["requested_at"] and line["applied_at"] == line["requested_at"]
        assert line["applied_by"] == f"backfill --continue (PID {os.getpid()})"


def test_the_verify_command_runs_as_its_partition_s_child_would(here):
    """--verify-command's child: its placeholders filled for this partition and attempt, in the backfill's
    working directory with the child's environment (reason, IDs, dates), its output in the attempt's log after a
    line announcing it; its exit status judged, and a start that fails judged as one."""
    guard = GuardOptions(level="sandbox", verify_command="check.sh {start_date} {partition_id} {run_id}")
    prepared, _ = started_command(here, guard)
    try:
        interval = prepared.spec.plan.interval(1)
        partition_id = prepared.spec.ids.of(interval.start, interval.end)
        attempt = Attempt(run_id="bf-p1-a2", status=RecordStatus.RUNNING, started_at="2024-01-01T00:00:00Z")
        verifying = prepared.hooks.verify_child(1, interval, attempt, partition_id)
        spec = verifying.spec
        assert spec.argv == ["check.sh", "2024-01-02", partition_id, "bf-p1-a2"]
        assert spec.cwd == str(here) and spec.log_path == prepared.store.log_path("bf-p1-a2")
        assert (spec.env["BACKFILL_REASON"], spec.env["BACKFILL_ID"]) == ("first load", prepared.store.id)
        assert (spec.env["BACKFILL_PARTITION_ID"], spec.env["BACKFILL_RUN_ID"]) == (partition_id, "bf-p1-a2")
        assert spec.env["BACKFILL_START"] == "2024-01-02T00:00:00.000000Z"
        announced = spec.log_path.read_bytes()
        assert announced.endswith(f"--- verify-command: check.sh 2024-01-02 {partition_id} bf-p1-a2\n".encode())
        assert verifying.judge(0).detail == "--verify-command exited 0"
        assert verifying.judge(3).fails_partition
        assert "exited 3" in verifying.judge(3).detail
        cannot = verifying.cannot_start(OSError(errno.ENOENT, "No such file or directory"))
        assert cannot.fails_partition and "cannot start: No such file or directory" in cannot.detail
    finally:
        prepared.release()


@pytest.mark.parametrize("guard", [GuardOptions(level="sandbox"), GuardOptions(level="sandbox", verify="off",
                                                                               verify_command="check.sh")])  # fmt: skip
def test_no_verification_child_without_a_verify_command_or_with_verify_off(here, guard):
    """Without --verify-command, or with --verify off, a successful partition starts no second child."""
    prepared, preflight = started_command(here, guard)
    try:
        interval = prepared.spec.plan.interval(0)
        attempt = Attempt(run_id="r", status=RecordStatus.RUNNING, started_at="2024-01-01T00:00:00Z")
        assert prepared.hooks.verify_child(0, interval, attempt, "p") is None
        assert guarding.command_verifier(prepared, preflight) is None
    finally:
        prepared.release()


def test_a_run_s_record_holds_its_counts_and_its_failure_groups(here):
    """At the end of a run the executor's hook writes the record of the invocation: its status, its counts and
    the failed partitions grouped by their reason; a run with no failure lists no group."""
    prepared, _ = started_command(here, GuardOptions(level="sandbox"))
    try:
        loaded = load_backfill(prepared.store.id, "states", here)
        record_attempts(loaded, 0, (RecordStatus.FAILED, "disk full"))
        record_attempts(loaded, 1, (RecordStatus.FAILED, "disk full"))
        record_attempts(loaded, 2, (RecordStatus.SUCCEEDED, None))
        prepared.board = load_backfill(prepared.store.id, "states", here).board
        counts = {"failed": 2, "succeeded": 1}
        outcome = Outcome(status="failed", counts=counts, selected=3, finished_at=1_704_000_000.0, seconds=4.0,
                          tally=RunTally(3))  # fmt: skip
        path = Path(prepared.hooks.after_run(outcome))
        written = yaml.safe_load(path.read_text())
        assert path.name.endswith("-20231231T052000Z.yml")  # named by when the run finished
        assert (written["status"], written["intervals_failed"], written["intervals_succeeded"]) == ("failed", 2, 1)
        assert (written["reason"], written["approval"]["how"]) == ("first load", "auto")
        assert written["duration_total"] and written["failure_groups_total"] == 1
        [group] = written["failure_groups"]
        assert "disk full" in str(group)
        clean = Outcome(status="succeeded", counts={"succeeded": 3}, selected=3, finished_at=0.0, seconds=1.0)
        path = Path(prepared.hooks.after_run(clean))
        assert yaml.safe_load(path.read_text())["failure_groups"] == []
        assert time.strftime("-%Y%m%dT", time.gmtime()) in path.name  # no finish time: now, not 1970
    finally:
        prepared.release()


def test_a_pipeline_backfill_s_hooks_resume_by_asset_verify_and_watch_its_files(here):
    """A pipeline's started backfill: each attempt planned asset by asset from the runs directory of its
    repository, each partition verified, and no partition started once a file it runs changed, saying which and
    how to judge it again."""
    repo = pipeline_repo(here / "repo")
    prepared, preflight = started_pipeline(repo)
    try:
        resume = prepared.hooks.plan_assets.__self__
        assert isinstance(resume, AssetResume)
        assert resume.runs_directory == logs_root(repo.root) / "runs"
        assert resume.digests == {a.asset.name: a.asset.digest for a in preflight.facts.selected}
        assert set(resume.digests) == {"s.t"} and resume.downstream == preflight.facts.pipeline.downstream
        assert prepared.hooks.verify_child(0, None, None, "p") is None
        run = prepared.hooks.before_first_launch.__self__  # the snapshot before the first launch
        assert prepared.hooks.before_first_launch == run.before_first_launch
        assert (run.store, run.reason, run.approval.how, run.rerun_asset) == (prepared.store, "load", "auto", None)
        assert prepared.definition_watch is not None and prepared.hooks.launch_refusal() is None
        asset = next(repo.pipeline_dir.rglob("*.sql"))
        asset.write_text(asset.read_text() + "\n-- edited\n")
        refusal = prepared.hooks.launch_refusal()
        assert refusal.startswith("stopped: ") and asset.name in refusal
        assert refusal.endswith(
            f"; no partition starts on it unjudged: `backfill --continue {prepared.store.id}` judges it again"
        )
    finally:
        prepared.release()


@pytest.mark.parametrize("resume", [{"rerun_asset": AssetRerun("s.t")}, {"whole_partitions": True}])
def test_an_asset_rerun_or_a_whole_partition_rerun_plans_no_asset_by_asset_resume(here, resume):
    """``--asset`` (the operator names what runs) and ``--rerun-whole-partition`` run every attempt's whole
    selection: no asset-level plan; a command has none either."""
    prepared, preflight = started_pipeline(pipeline_repo(here / "repo"), **resume)
    try:
        assert guarding.asset_resume(prepared, preflight) is None
        assert not hasattr(prepared.hooks.plan_assets, "__self__")
    finally:
        prepared.release()
    (here / "cmd").mkdir()
    command, command_preflight = started_command(here / "cmd", GuardOptions(level="sandbox"))
    try:
        assert guarding.asset_resume(command, command_preflight) is None
    finally:
        command.release()


def test_each_pipeline_partition_is_verified_unless_verify_is_off(here):
    """With verification on, each partition of a pipeline is verified from its run record (one that never ran is
    unverified, named so); with --verify off, a partition's success stands without a verification."""
    interval_attempt = Attempt(run_id="never-ran", status=RecordStatus.RUNNING, started_at="2024-01-01")
    prepared, _ = started_pipeline(pipeline_repo(here / "on"))
    try:
        verification = prepared.hooks.verify(0, prepared.spec.plan.interval(0), interval_attempt, "p")
        assert verification is not None and verification.status != "verified"
    finally:
        prepared.release()
    prepared, _ = started_pipeline(pipeline_repo(here / "off"), guard=GuardOptions(verify="off"))
    try:
        assert prepared.hooks.verify(0, prepared.spec.plan.interval(0), interval_attempt, "p") is None
    finally:
        prepared.release()


def test_an_asset_rerun_verifies_the_assets_it_runs_and_records_what_it_reran(here):
    """``--asset s.t`` (no downstream): the run is guarded as a rerun of that asset alone."""
    prepared, _ = started_pipeline(pipeline_repo(here / "repo"), rerun_asset=AssetRerun("s.t"))
    try:
        run = prepared.hooks.before_first_launch.__self__
        assert (run.rerun_asset, run.rerun_downstream, run.reason) == ("s.t", False, "again")
    finally:
        prepared.release()
    prepared, _ = started_pipeline(pipeline_repo(here / "down"), rerun_asset=AssetRerun("s.t", downstream=True))
    try:
        assert prepared.hooks.before_first_launch.__self__.rerun_downstream is True
    finally:
        prepared.release()
