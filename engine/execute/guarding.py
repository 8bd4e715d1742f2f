"""Guardrails around creating and resuming backfills, on the executor's side: the pre-flight request of an
invocation, what the manifest keeps of its choices, the audit of an asset rerun, and the executor hooks that
call the guardrails (``engine/guardrails/guarded_run.py``) around the run.

A new backfill is judged before anything is saved; a ``--continue`` after its takeover. What each invocation
was judged and approved is in ``guardrails.json`` (``engine/store/guardrails_log.py``).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from engine.base.errors import StateUnreadable
from engine.base.who import requester
from engine.dates.plan import Interval
from engine.execute.active_child import VerifyingChild
from engine.execute.asset_resume import AssetResume
from engine.execute.backfill import Loaded, Prepared
from engine.execute.children import ChildFactory
from engine.execute.executor import ExecutorHooks, Outcome
from engine.execute.launcher import ChildSpec
from engine.execute.rerun import PartitionSelection
from engine.guardrails.definition_watch import DefinitionWatch
from engine.guardrails.guarded_run import GuardedRun
from engine.guardrails.preflight import Approval, Preflight
from engine.guardrails.request import RERUN, TRIGGER, GuardOptions, GuardRequest
from engine.guardrails.settings import GuardrailSettings
from engine.guardrails.verification import CommandVerifier
from engine.pipeline.repository import logs_root, resolve_target
from engine.spec.backfill_spec import Planned
from engine.store import audit
from engine.store.failure_groups import failure_groups
from engine.store.manifest import now_text
from engine.store.records import Attempt
from engine.store.state_store import StateStore
from engine.store.status import Status


def request_for_new(
    planned: Planned, guard: GuardOptions, *, reason: str | None, root: Path, cwd: Path
) -> GuardRequest:
    """What the pre-flight of a new backfill is asked: every partition of the plan runs."""
    spec = planned.spec
    size = len(spec.plan)
    return GuardRequest(
        spec=spec,
        options=planned.options,
        guard=guard,
        effective_parallel=planned.parallelism.effective,
        mode=TRIGGER,
        selected_count=size,
        selected=lambda: iter(range(size)),
        state_root=root,
        working_directory=cwd,
        config=planned.config,
        environment=planned.environment,
        checked=planned.checked,
        reason=reason,
        now=int(time.time() * 1_000_000),
        bounds=(0, size - 1),  # planning refuses an empty plan
    )


def saved_guard(manifest: dict[str, Any]) -> tuple[GuardOptions, str | None, GuardrailSettings | None]:
    """The guardrail choices, reason and (command targets) settings a backfill was created with."""
    saved = manifest.get("guardrails")
    if saved is None:  # a backfill from before guardrails: judged by today's defaults
        return GuardOptions(), None, None
    if not isinstance(saved, dict):
        raise StateUnreadable(f"manifest of backfill {manifest.get('id')!r}: guardrails is not a mapping")
    settings = GuardrailSettings.from_json(saved["settings"]) if isinstance(saved.get("settings"), dict) else None
    return GuardOptions.from_json(saved.get("options")), manifest.get("reason"), settings


def reruns_succeeded(loaded: Loaded, selection: PartitionSelection) -> bool:
    """Whether this invocation would run a partition that has succeeded (it needs its own --reason)."""
    board = loaded.board
    if selection.indices is not None:
        return any(board.status(index) is Status.SUCCEEDED for index in selection.indices)
    return selection.wants(Status.SUCCEEDED) and board.count(Status.SUCCEEDED) > 0


def request_for_resume(
    loaded: Loaded,
    planned: Planned,
    selection: PartitionSelection,
    *,
    reason: str | None,
    ignore_dependencies: bool = False,
) -> GuardRequest:
    """What the pre-flight of a ``--continue`` is asked, with ``planned`` as :func:`replan` made it.
    ``ignore_dependencies``: an asset rerun's upstream is not checked (the rerun is the operator's call)."""
    spec = loaded.spec
    guard, saved_reason, settings = saved_guard(loaded.manifest)
    if ignore_dependencies:
        guard = replace(guard, ignore_dependencies=True)
    board = loaded.board
    return GuardRequest(
        spec=spec,
        options=planned.options,
        guard=guard,
        effective_parallel=planned.parallelism.effective,
        mode=RERUN,
        selected_count=selection.count(board),
        selected=lambda: selection.iterate(board, reverse=False),
        state_root=loaded.root,
        working_directory=Path(loaded.manifest.get("working_directory") or Path.cwd()),
        config=planned.config,
        environment=planned.environment,
        checked=planned.checked,
        backfill_id=loaded.store.id,
        reason=reason or saved_reason,
        now=int(time.time() * 1_000_000),
        settings_override=settings,
        selection_key=_selection_key(loaded, selection),
    )


def _selection_key(loaded: Loaded, selection: PartitionSelection) -> str:
    import hashlib

    if selection.indices is not None:
        return "ids:" + ",".join(str(i) for i in sorted(selection.indices))
    return f"{selection.mode}:" + hashlib.sha256(selection.mask(loaded.board)).hexdigest()


def manifest_guardrails(request: GuardRequest, preflight: Preflight) -> dict[str, Any]:
    """What the manifest keeps: the choices, and for a command the settings (it has no environment)."""
    saved: dict[str, Any] = {"options": request.guard.to_json()}
    if request.spec.target.is_command:
        saved["settings"] = preflight.settings.to_json()
    return saved


def record_asset_rerun(store: StateStore, loaded: Loaded, indices: frozenset[int], asset: str, reason: str) -> None:
    """One RERUN audit line per partition an asset rerun runs again (with the status and message it had)."""
    now = now_text()
    spec, board = loaded.spec, loaded.board
    lines = []
    for index in sorted(indices):
        interval = spec.plan.interval(index)
        partition_id = spec.ids.of(interval.start, interval.end)
        record = store.read_record(partition_id, spec.plan, spec.ids.of) if board.attempts(index) else None
        lines.append(
            audit.entry(
                backfill_id=store.id,
                partition_id=partition_id,
                asset=asset,
                action="RERUN",
                from_status=board.status(index).label,
                previous_message=record.attempts[-1].error if record is not None and record.attempts else None,
                reason=reason,
                requested_by=requester(),
                requested_at=now,
                applied_at=now,
                applied_by=f"backfill --continue (PID {os.getpid()})",
            )
        )
    audit.append(store.directory, lines)


def guard_hooks(prepared: Prepared, preflight: Preflight, approval: Approval | None) -> ExecutorHooks:
    """The executor hooks of the guardrails: the snapshot before the first launch (pipelines, unless
    --no-snapshot), verification of each partition (unless --verify off), and the record at the end."""
    rerun = prepared.rerun_asset
    run = GuardedRun(
        preflight=preflight,
        approval=approval,
        store=prepared.store,
        spec=prepared.spec,
        reason=prepared.reason,
        working_directory=prepared.working_directory,
        rerun_asset=rerun.name if rerun is not None else None,
        rerun_downstream=rerun.downstream if rerun is not None else False,
    )

    def after_run(outcome: Outcome) -> str:
        failed = outcome.counts.get(Status.FAILED.label)
        groups = failure_groups(prepared.spec, prepared.store, prepared.board) if failed else []
        return run.write_record(
            counts=outcome.counts,
            tally=outcome.tally,
            status=outcome.status,
            seconds=outcome.seconds,
            finished_at=outcome.finished_at or time.time(),
            failure_groups=groups,
        )

    hooks = ExecutorHooks(before_first_launch=run.before_first_launch, after_run=after_run)
    watch = prepared.definition_watch = DefinitionWatch.of(preflight)
    if watch is not None:
        hooks.launch_refusal = lambda: _unjudged(watch, prepared.store.id)
    resume = asset_resume(prepared, preflight)
    if resume is not None:
        hooks.plan_assets = resume.plan
    if prepared.spec.target.is_command:
        verify_child = command_verifier(prepared, preflight)
        if verify_child is not None:
            hooks.verify_child = verify_child
    elif (verify := run.pipeline_verifier()) is not None:
        hooks.verify = verify
    return hooks


def _unjudged(watch: DefinitionWatch, backfill_id: str) -> str | None:
    """Why no partition may start: files it would run changed since the pre-flight judged them."""
    changes = watch.changes()
    if not changes:
        return None
    return (
        f"stopped: {watch.changed(changes)}; no partition starts "
        f"on it unjudged: `backfill --continue {backfill_id}` judges it again"
    )


def asset_resume(prepared: Prepared, preflight: Preflight) -> AssetResume | None:
    """How each attempt of a pipeline partition is planned asset by asset; None when it always runs its whole
    selection: a command target (no assets), an operator's ``--asset`` rerun, ``--rerun-whole-partition``."""
    facts = preflight.facts
    if facts.pipeline is None:  # a command
        return None
    if prepared.rerun_asset is not None or prepared.whole_partitions:
        return None
    runs = logs_root(resolve_target(prepared.spec.target.path or "").repository) / "runs"
    return AssetResume(runs, {a.asset.name: a.asset.digest for a in facts.selected}, facts.pipeline.downstream)


def command_verifier(
    prepared: Prepared, preflight: Preflight
) -> Callable[[int, Interval, Attempt, str], VerifyingChild] | None:
    """``--verify-command``: run after each successful partition as that partition's child would be (the same
    placeholders, environment and working directory), as a second child of its attempt; or None."""
    guard = preflight.facts.request.guard
    if guard.verify == "off" or guard.verify_command is None:
        return None
    spec = prepared.spec
    factory = ChildFactory(
        spec,
        backfill_id=prepared.store.id,
        working_directory=prepared.working_directory,
        workers=prepared.options.workers,
        inherit_fds=(),
        reason=prepared.reason,
    )
    command = CommandVerifier(guard.verify_command, guard.verify, factory.values)
    total = len(spec.plan)

    def verify_child(index: int, interval: Interval, attempt: Attempt, partition_id: str) -> VerifyingChild:
        log = prepared.store.log_path(attempt.run_id)
        child = factory.child(interval, partition_id, attempt.run_id, log, total)
        argv = command.prepare(interval, partition_id, attempt.run_id, log=log)
        return VerifyingChild(ChildSpec(argv, child.cwd, child.env, log), command.judge, command.cannot_start)

    return verify_child
