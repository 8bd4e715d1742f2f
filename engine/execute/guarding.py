"""Guardrails around creating and resuming backfills: the pre-flight request of an invocation, what the
manifest and ``guardrails.json`` keep of it, and the reason children see as ``BACKFILL_REASON``.

A new backfill is judged before anything is saved; a ``--continue`` before its takeover. The
verdict, the checks, the digest and the approval of every invocation are appended to
``guardrails.json`` in the backfill's state directory.
"""

from __future__ import annotations

import os
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson

from engine.base.atomic import write_atomic
from engine.base.errors import StateUnreadable
from engine.base.who import requester
from engine.execute.backfill import Loaded, Prepared
from engine.execute.children import ChildFactory
from engine.execute.executor import ExecutorHooks
from engine.execute.rerun import AssetRerun, PartitionSelection
from engine.guardrails.preflight import Approval, Preflight
from engine.guardrails.request import RERUN, TRIGGER, GuardOptions, GuardRequest
from engine.guardrails.settings import GuardrailSettings
from engine.guardrails.table_snapshot import read_snapshot, take_snapshot
from engine.guardrails.verification import CommandVerifier, PipelineVerifier, Verification
from engine.pipeline.repository import logs_root, resolve_target
from engine.spec.backfill_spec import Planned
from engine.store import audit
from engine.store.manifest import now_text
from engine.store.state_store import StateStore
from engine.store.status import Status

GUARDRAILS_FILE = "guardrails.json"


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
        bounds=(0, size - 1) if size else None,
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


def append_invocation(
    store: StateStore, *, mode: str, reason: str | None, preflight: Preflight, approval: Approval
) -> None:
    """Add this invocation's pre-flight and approval to ``guardrails.json`` (atomically rewritten)."""
    path = store.directory / GUARDRAILS_FILE
    document = read_guardrails(store)
    document.setdefault("invocations", []).append(
        {
            "mode": mode,
            "reason": reason,
            "at": approval.at,
            "preflight": preflight.to_json(),
            "approval": approval.to_json(),
        }
    )
    write_atomic(path, orjson.dumps(document, option=orjson.OPT_INDENT_2))
    record_gate_bypasses(store, reason=reason, preflight=preflight, at=approval.at)


def record_asset_rerun(store: StateStore, loaded: Loaded, indices: frozenset[int], asset: str, reason: str) -> None:
    """One RERUN audit line per partition an asset rerun runs again (with the status it had)."""
    now = now_text()
    spec, board = loaded.spec, loaded.board
    lines = []
    for index in sorted(indices):
        interval = spec.plan.interval(index)
        lines.append(
            audit.entry(
                backfill_id=store.id,
                partition_id=spec.ids.of(interval.start, interval.end),
                asset=asset,
                action="RERUN",
                from_status=board.status(index).label,
                reason=reason,
                requested_by=requester(),
                requested_at=now,
                applied_at=now,
                applied_by=f"backfill --continue (PID {os.getpid()})",
            )
        )
    audit.append(store.directory, lines)


def record_gate_bypasses(store: StateStore, *, reason: str | None, preflight: Preflight, at: str) -> None:
    """One GATE_BYPASS audit line per upstream asset a run let through unchecked or uncovered (gates
    ``warn`` or ``off``, or ``--ignore-dependencies``, which also leaves an IGNORE_DEPENDENCIES line)."""
    check = next((c for c in preflight.checks if c.name == "upstream_coverage"), None)
    bypassed = (check.evidence.get("gate_bypass") if check is not None else None) or {}
    if not bypassed:
        return
    who = requester()
    ignored = preflight.facts.request.guard.ignore_dependencies
    how = "--ignore-dependencies" if ignored else f"dependency_gates: {preflight.settings.dependency_gates}"
    common = {
        "backfill_id": store.id,
        "requested_by": who,
        "requested_at": at,
        "applied_at": at,
        "applied_by": f"backfill (PID {os.getpid()})",
    }
    lines = []
    if ignored:
        lines.append(audit.entry(action="IGNORE_DEPENDENCIES", reason=reason, previous_message=how, **common))
    for asset, spans in sorted(bypassed.items()):
        let_through = f"{how}; let through {asset}: {', '.join(spans[:5])}{' …' if len(spans) > 5 else ''}"
        lines.append(
            audit.entry(
                action="GATE_BYPASS",
                asset=asset,
                from_status="missing" if spans != ["not checked"] else "unchecked",
                reason=f"{reason} ({let_through})" if reason else let_through,
                previous_message=how,
                **common,
            )
        )
    audit.append(store.directory, lines)


def read_guardrails(store: StateStore) -> dict[str, Any]:
    path = store.directory / GUARDRAILS_FILE
    try:
        data = orjson.loads(path.read_bytes())
    except FileNotFoundError:
        return {"format": 1, "invocations": []}
    except (OSError, orjson.JSONDecodeError) as error:
        raise StateUnreadable(f"{path} cannot be read ({error}): move it away to resume without its history") from None
    if not isinstance(data, dict) or not isinstance(data.get("invocations", []), list):
        raise StateUnreadable(f"{path} is not a guardrails document")
    return data


def latest_preflight(store: StateStore) -> dict[str, Any] | None:
    try:
        invocations = read_guardrails(store).get("invocations") or []
    except StateUnreadable:
        return None
    return invocations[-1]["preflight"] if invocations else None


def guard_hooks(prepared: Prepared, preflight: Preflight, approval: Approval | None) -> ExecutorHooks:
    """The executor hooks of the guardrails: the snapshot before the first launch (pipelines, unless
    --no-snapshot), verification of each partition (unless --verify off), and the record at the end."""
    warehouses = preflight.facts.warehouses

    def before_first_launch() -> None:
        try:
            snapshot_once(prepared, preflight)
        finally:
            warehouses.close()  # children write the files: the pre-flight's read-only connections must go

    def after_run(outcome) -> str | None:
        warehouses.close()
        return write_backfill_record(prepared, preflight, approval, outcome)

    hooks = ExecutorHooks(before_first_launch=before_first_launch, after_run=after_run)
    verify = verifier_of(prepared, preflight)  # its baselines read the warehouse now, through the same connections
    if verify is not None:
        hooks.verify = verify
    return hooks


def write_backfill_record(prepared: Prepared, preflight: Preflight, approval: Approval | None, outcome) -> str:
    """Write the YAML record of this invocation (and its copy in the state directory); its path."""
    from engine.guardrails.record import (
        build_record,
        is_table,
        record_path,
        tables_after_run,
        write_record,
    )
    from engine.pipeline.repository import repository_root

    facts = preflight.facts
    spec = prepared.spec
    is_pipeline = not spec.target.is_command
    before = {a.asset.name: a.table_rows for a in facts.selected if is_table(a.asset)}
    after, after_range = tables_after_run(facts, with_checks=bool(outcome.attempts)) if is_pipeline else ({}, [])
    record = build_record(
        backfill_id=prepared.store.id,
        preflight=preflight,
        approval=approval,
        reason=prepared.reason,
        counts=outcome.counts,
        total=len(spec.plan),
        attempts=outcome.attempts,
        status=outcome.status,
        seconds=outcome.seconds,
        before=before if is_pipeline else {},
        after=after,
        snapshot=read_snapshot(prepared.store.directory),
        after_range=after_range,
        state_directory=prepared.store.directory,
    )
    anchor = Path(spec.target.path) if spec.target.path else Path(prepared.working_directory)
    repository = repository_root(anchor)
    now = outcome.finished_at or time.time()
    path = record_path(repository, prepared.store.directory, spec.target.name.split("/")[0], now)
    copy = prepared.store.directory / "records" / path.name
    return str(write_record(record, path, copy))


def snapshot_once(prepared: Prepared, preflight: Preflight) -> None:
    """Take the backfill's snapshot unless it has one (a resume keeps the state from before the backfill)."""
    guard = preflight.facts.request.guard
    if prepared.spec.target.is_command or not guard.snapshot:
        return
    if not preflight.facts.by_file([a for a in preflight.facts.selected if a.changes_data]):
        return
    if read_snapshot(prepared.store.directory) is None:
        take_snapshot(preflight.facts, prepared.store.directory)


def rerun_assets(preflight: Preflight, rerun: AssetRerun | None) -> set[str] | None:
    """The assets an asset rerun runs: the asset, and with ``downstream`` everything that depends on it."""
    if rerun is None:
        return None
    pipeline = preflight.facts.pipeline
    found, todo = {rerun.name}, [rerun.name]
    while rerun.downstream and pipeline is not None and todo:
        for child in pipeline.downstream.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def verifier_of(prepared: Prepared, preflight: Preflight):
    """The verification hook as the pre-flight's choices say, or None (--verify off, or nothing to verify)."""
    guard = preflight.facts.request.guard
    spec = prepared.spec
    if guard.verify == "off":
        return None
    if not spec.target.is_command:
        target = resolve_target(spec.target.path or "")
        verifier = PipelineVerifier(preflight.facts, logs_root(target.repository) / "runs", guard.verify)
        only = rerun_assets(preflight, prepared.rerun_asset)
        return lambda index, interval, attempt: verifier.verify(index, interval, attempt.run_id, only)
    if guard.verify_command is None:
        return None
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

    def verify(index: int, interval, attempt) -> Verification:
        partition_id = spec.ids.of(interval.start, interval.end)
        log = prepared.store.log_path(attempt.run_id)
        child = factory.child(interval, partition_id, attempt.run_id, log, total)
        return command.verify(interval, partition_id, attempt.run_id, cwd=child.cwd, env=child.env, log=log)

    return verify


def restore_backfill(store: StateStore, reason: str) -> list[str]:
    """Put back what the backfill's snapshot holds, under the backfill's lock (refused while it runs); the
    restore is appended to ``guardrails.json``."""
    from engine.base.errors import Refused
    from engine.guardrails.table_snapshot import restore_snapshot
    from engine.store.locks import FileLock
    from engine.store.manifest import now_text

    lock = FileLock(store.lock_path)
    if not lock.try_acquire():
        raise Refused(f"backfill {store.id} is running: restore it once it has stopped")
    try:
        done = restore_snapshot(store.directory)
        path = store.directory / GUARDRAILS_FILE
        document = read_guardrails(store)
        document.setdefault("invocations", []).append(
            {"mode": "restore", "reason": reason, "at": now_text(), "by": requester(), "restored": done}
        )
        write_atomic(path, orjson.dumps(document, option=orjson.OPT_INDENT_2))
        at = now_text()
        audit.append(
            store.directory,
            [
                audit.entry(
                    backfill_id=store.id,
                    action="RESTORE",
                    reason=reason,
                    previous_message="; ".join(done)[:300],
                    requested_by=requester(),
                    requested_at=at,
                    applied_at=at,
                    applied_by=f"backfill restore (PID {os.getpid()})",
                )
            ],
        )
        return done
    finally:
        lock.release()
