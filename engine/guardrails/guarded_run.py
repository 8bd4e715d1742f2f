"""What the guardrails do around one decided invocation: record it, snapshot before the first child, verify
each pipeline partition, write the backfill record at the end.

The executor's hooks (``engine/execute/guarding.guard_hooks``) call these methods; nothing here knows the
executor, so the guardrails stay below it.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.base.who import requester
from engine.dates.plan import Interval
from engine.guardrails.preflight import Approval, Preflight
from engine.pipeline.repository import logs_root, repository_root, resolve_target
from engine.spec.backfill_spec import BackfillSpec
from engine.store import audit
from engine.store.failure_groups import GROUPS_SHOWN, FailureGroup
from engine.store.guardrails_log import append_entry
from engine.store.records import Attempt
from engine.store.run_tally import RunTally
from engine.store.state_store import StateStore

if TYPE_CHECKING:
    from engine.guardrails.verification import Verification

# The snapshot, its tables and a pipeline's verification are imported where a pipeline needs them: they load the
# warehouse and SQL modules, which a command's start-up would otherwise pay for (issue 28, item 5).


def record_invocation(
    store: StateStore,
    *,
    mode: str,
    reason: str | None,
    preflight: Preflight,
    approval: Approval,
    judged_sql: dict[str, list[str]] | None = None,
) -> None:
    """Add this invocation's pre-flight and approval to ``guardrails.json`` (with the SQL that cannot be classified
    it lets the partitions run, when any), and audit the gates it let through."""
    entry: dict[str, Any] = {
        "mode": mode,
        "reason": reason,
        "at": approval.at,
        "preflight": preflight.to_json(),
        "approval": approval.to_json(),
    }
    if judged_sql:
        entry["judged_sql"] = judged_sql
    append_entry(store, entry)
    record_gate_bypasses(store, reason=reason, preflight=preflight, at=approval.at)


def record_gate_bypasses(store: StateStore, *, reason: str | None, preflight: Preflight, at: str) -> None:
    """One GATE_BYPASS audit line per upstream asset a run let through unchecked or uncovered (gates
    ``warn`` or ``off``, or ``--ignore-dependencies``, which also leaves an IGNORE_DEPENDENCIES line)."""
    check = next((c for c in preflight.checks if c.name == "upstream_coverage"), None)
    bypassed = (check.evidence.get("gate_bypass") if check is not None else None) or {}
    ignored = preflight.facts.request.guard.ignore_dependencies
    if not bypassed and not ignored:
        return
    who = requester()
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


def rerun_assets(preflight: Preflight, name: str | None, downstream: bool) -> set[str] | None:
    """The assets an asset rerun runs: ``name``, and with ``downstream`` everything that depends on it."""
    if name is None:
        return None
    pipeline = preflight.facts.pipeline
    found, todo = {name}, [name]
    while downstream and pipeline is not None and todo:
        for child in pipeline.downstream.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


@dataclass(kw_only=True)
class GuardedRun:
    """One invocation's run as the guardrails see it."""

    preflight: Preflight
    approval: Approval | None
    store: StateStore
    spec: BackfillSpec
    reason: str | None
    working_directory: str
    rerun_asset: str | None = None  # an operator's asset rerun: this asset (and with downstream, what follows)
    rerun_downstream: bool = False

    def before_first_launch(self) -> None:
        """Take the snapshot unless the backfill has one (a resume keeps the state from before the backfill);
        then close the pre-flight's read-only connections: the children write the files."""
        try:
            facts = self.preflight.facts
            if self.spec.target.is_command or not facts.request.guard.snapshot:
                return
            if not facts.by_file([a for a in facts.selected if a.changes_data]):
                return
            from engine.guardrails.snapshot_left import forget_left
            from engine.guardrails.table_snapshot import read_snapshot, take_snapshot

            if read_snapshot(self.store.directory) is None:
                take_snapshot(facts, self.store.directory)
            else:  # a resume: this run may change the tables an earlier one left
                with contextlib.suppress(OSError):  # kept stale, a restore refuses more, never less
                    forget_left(self.store.directory)
        finally:
            self.preflight.facts.warehouses.close()

    def pipeline_verifier(self) -> Callable[[int, Interval, Attempt, str], Verification] | None:
        """Verification of each pipeline partition from its run record (its baselines read now, through the
        pre-flight's connections), or None: ``--verify off``, or a command target."""
        guard = self.preflight.facts.request.guard
        if guard.verify == "off" or self.spec.target.is_command:
            return None
        from engine.guardrails.verification import PipelineVerifier

        target = resolve_target(self.spec.target.path or "")
        verifier = PipelineVerifier(self.preflight.facts, logs_root(target.repository) / "runs", guard.verify)
        only = rerun_assets(self.preflight, self.rerun_asset, self.rerun_downstream)
        return lambda _index, interval, attempt, _partition_id: verifier.verify(
            interval, attempt.run_id, only, carried=attempt.carried
        )

    def write_record(
        self,
        *,
        counts: dict[str, int],
        tally: RunTally,
        status: str,
        seconds: float,
        finished_at: float,
        failure_groups: tuple[FailureGroup, ...] | list[FailureGroup] = (),
    ) -> str:
        """Write the YAML record of this invocation (and its copy in the state directory); its path."""
        from engine.guardrails.record import build_record, is_table, record_path, tables_after_run
        from engine.guardrails.record import write_record as write_yaml
        from engine.guardrails.snapshot_left import LeftTables
        from engine.guardrails.table_snapshot import read_snapshot

        facts = self.preflight.facts
        facts.warehouses.close()  # the record reads the files as the children left them
        spec = self.spec
        # A command has no selected assets: no table before, none after.
        before = {a.asset.name: a.table_rows for a in facts.selected if is_table(a.asset)}
        left = LeftTables(self.store.directory)
        after, after_range = tables_after_run(facts, with_checks=bool(tally.total), visit=left.read)
        with contextlib.suppress(OSError):  # unknown then: a restore judges on run records alone
            left.save()
        record: dict[str, Any] = build_record(
            backfill_id=self.store.id,
            preflight=self.preflight,
            approval=self.approval,
            reason=self.reason,
            counts=counts,
            total=len(spec.plan),
            tally=tally,
            status=status,
            seconds=seconds,
            before=before,
            after=after,
            snapshot=read_snapshot(self.store.directory),
            after_range=after_range,
            state_directory=self.store.directory,
            failure_groups=[group.to_json(spec) for group in failure_groups[:GROUPS_SHOWN]],
            failure_groups_total=len(failure_groups),
        )
        anchor = Path(spec.target.path) if spec.target.path else Path(self.working_directory)
        name = spec.target.name if spec.target.is_command else spec.target.name.split("/")[0]  # a command: whole
        path = record_path(repository_root(anchor), self.store.directory, name, finished_at)
        copy = self.store.directory / "records" / path.name
        return str(write_yaml(record, path, copy))
