"""The one path from a request to a running executor: a new backfill, a ``--continue``, a rerun from the screen.

::

    judge_new / judge_resume    plan (the pipeline validated once), state root, takeover (resume), pre-flight
              │                 → an Invocation: the verdict, the reason it would run with, what it needs
              ▼
    the front end asks a person (the pre-flight screen) when needs_a_person(), or reports and stops
              ▼
    Invocation.approve()        the decision: a refusal or a missing approval gives the backfill up
              ▼
    Invocation.start()          saved (new), the invocation appended to guardrails.json, the guardrails' hooks
              ▼
    Prepared.executor()         run by the front end on an ExecutorThread

Front ends render and ask; they never take or release a lock. Whatever ends an invocation before it
starts (an exception inside ``with invocation:``, or :meth:`Invocation.abandon`) releases what it holds.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from engine.base.errors import BadInput, Refused
from engine.base.settings import Settings
from engine.base.who import requester
from engine.dates.split import SplitUnit
from engine.execute.backfill import (
    Loaded,
    Prepared,
    StateRoot,
    create_backfill,
    prepare_resume,
    replan,
    state_root_for,
)
from engine.execute.executor import Executor
from engine.execute.guarding import (
    guard_hooks,
    manifest_guardrails,
    record_asset_rerun,
    request_for_new,
    request_for_resume,
    reruns_succeeded,
)
from engine.execute.rerun import AssetRerun, PartitionSelection
from engine.guardrails.guarded_run import record_invocation
from engine.guardrails.preflight import Approval, NeedsApproval, Preflight, decide, remember, run_preflight
from engine.guardrails.request import RERUN, TRIGGER, GuardOptions, GuardRequest
from engine.guardrails.tiers import APPROVAL, HUMAN_ONLY
from engine.pipeline.judged_sql import judged_shapes
from engine.spec.backfill_spec import ExecutionOptions, Planned, check_execution_options
from engine.store.control import Decision, read_control
from engine.store.live_work import join
from engine.store.manifest import now_text
from engine.store.state_store import check_state_root, new_backfill_id
from engine.store.target_pauses import check_not_paused

REASON_REQUIRED = "--reason is required to run a backfill: say why it runs (a --dry-run needs none)"


@dataclass(kw_only=True)
class Invocation:
    """One invocation, judged: what it would run, the verdict, and (once started) the prepared backfill."""

    mode: str  # TRIGGER (a new backfill) or RERUN (--continue, or a rerun from the screen)
    planned: Planned
    settings: Settings
    preflight: Preflight | None  # None: a resume that selects nothing to run is not judged
    request: GuardRequest | None
    reason: str | None  # the reason it runs with, unless a person gives one; None: one must be given
    cwd: Path
    root: StateRoot | None = None  # new backfills: where the store is created
    loaded: Loaded | None = None  # resumes: the saved backfill
    selection: PartitionSelection = field(default_factory=PartitionSelection)
    rerun_asset: AssetRerun | None = None
    whole_partitions: bool = False  # --rerun-whole-partition: no asset of an earlier attempt is carried over
    prepared: Prepared | None = None  # resumes: taken over (its locks held); new backfills once started
    paused: Decision | None = None  # resumes: paused by an operator when taken over; nothing is held
    _started: bool = field(default=False, init=False, repr=False)  # given up or started: nothing to release

    def __enter__(self) -> Invocation:
        return self

    def __exit__(self, kind, error, traceback) -> None:
        if error is not None:
            self.abandon()

    def needs_a_person(self, approve: str | None) -> bool:
        """Whether a person must answer before it may run: a reason is missing, the verdict is human-only,
        or it needs an approval that ``approve`` (a digest prefix) does not give."""
        if self.reason is None:
            return True
        preflight = self.preflight
        if preflight is None:
            return False
        if preflight.verdict == HUMAN_ONLY:
            return True
        return preflight.verdict == APPROVAL and not (approve and preflight.digest.startswith(approve.lower()))

    def approve(self, *, approve: str | None, typed: bool = False, reason: str | None = None) -> Approval | None:
        """May it run? ``approve`` is ``--approve``'s digest prefix, ``typed`` says the digest was typed at the
        terminal, ``reason`` one given there. Refused (exit 3), NeedsApproval (exit 4) or a missing reason
        (exit 2) give the backfill up; the digest's components are remembered so that a later ``--approve``
        can say what changed. None: nothing is judged (a resume that runs nothing)."""
        reason = reason if reason is not None else self.reason
        if self.preflight is None:
            return None
        try:
            approval = decide(
                self.preflight, approve=approve, interactive_approval=typed, reason=reason, now_text=now_text()
            )
            if reason is None:
                raise BadInput(REASON_REQUIRED)
        except BaseException as error:
            if isinstance(error, Refused | NeedsApproval):
                remember(self.preflight)  # a later --approve can then say what changed
            self.abandon()
            raise
        self.reason = reason
        if self.request is not None:
            self.request.reason = reason
        return approval

    def start(self, approval: Approval | None) -> Prepared:
        """Join the live-work registry (``Refused`` when work that started since the pre-flight is in the way), save
        a new backfill and take it over, or go on with the resumed one; record the invocation and plug in the
        guardrails' hooks. The prepared backfill's executor is the front end's to run."""
        registration = None
        try:
            backfill_id = new_backfill_id() if self.mode == TRIGGER else None
            if self.preflight is not None:  # judged: it runs something
                pipeline = self.preflight.facts.pipeline
                check = (lambda: check_not_paused(pipeline.directory)) if pipeline is not None else None
                registration = join(self.preflight.facts.live_work(backfill_id), check=check)
            if self.mode == TRIGGER:
                assert self.root is not None and self.request is not None and self.preflight is not None
                extra = {"reason": self.reason, "guardrails": manifest_guardrails(self.request, self.preflight)}
                self.prepared = create_backfill(
                    self.planned,
                    root=self.root,
                    cwd=self.cwd,
                    settings=self.settings,
                    extra=extra,
                    backfill_id=backfill_id,
                )
            prepared = self.prepared
            assert prepared is not None
            prepared.takeover.live = registration
            if self.mode != TRIGGER and self.reason is not None:
                # Only now, judged and decided: a --continue refused by its pre-flight (or not approved) leaves a
                # backfill ended by a mark or a cancel as it was, with no REOPEN line.
                from engine.interventions.apply import reopen_for_continue  # --continue only

                by = f"backfill --continue (PID {os.getpid()})"
                reopen_for_continue(prepared.store, self.reason, requester(), by)
            if self.preflight is not None:
                assert approval is not None
                prepared.reason = self.reason
                prepared.judged_sql = judged_shapes({a.asset.name: a.classified for a in self.preflight.facts.selected})
                record_invocation(
                    prepared.store,
                    mode=self.mode,
                    reason=self.reason,
                    preflight=self.preflight,
                    approval=approval,
                    judged_sql=prepared.judged_sql,
                )
                if self.rerun_asset is not None and self.selection.indices is not None and self.loaded is not None:
                    record_asset_rerun(
                        prepared.store, self.loaded, self.selection.indices, self.rerun_asset.name, self.reason or ""
                    )
                    prepared.rerun_asset = self.rerun_asset
                prepared.whole_partitions = self.whole_partitions
                prepared.split_finest = split_finest(self.preflight)
                prepared.hooks = guard_hooks(prepared, self.preflight, approval)
        except BaseException:
            if registration is not None:
                registration.release()
            self.abandon()
            raise
        self._started = True
        return prepared

    def executor(self) -> Executor:
        """The started backfill's executor, its launcher ready (a cluster connected); a failure gives the
        backfill up."""
        assert self.prepared is not None and self._started, "start() the invocation first"
        try:
            return self.prepared.executor()
        except BaseException:
            self.prepared.release()
            raise

    def close_warehouses(self) -> None:
        """Before a person is asked: the pre-flight's read-only connections to the warehouse are closed (a person
        may take minutes, and other writers must not wait on us); what needs them later opens them again."""
        if self.preflight is not None:
            self.preflight.facts.warehouses.close()

    def abandon(self) -> None:
        """Nothing runs: close the warehouse connections and release the backfill's locks (a resume's takeover),
        once."""
        self.close_warehouses()
        if self.prepared is not None and not self._started:
            self._started = True  # nothing more to release, whatever is called next
            self.prepared.release()


def split_finest(preflight: Preflight) -> SplitUnit:
    """The finest cut the pre-flight's splitting check allows (a DATE-keyed asset: whole days)."""
    check = next((c for c in preflight.checks if c.name == "splitting"), None)
    finest = check.evidence.get("finest") if check is not None else None
    return SplitUnit[finest.upper()] if isinstance(finest, str) else SplitUnit.SECOND


def judge_new(
    planned: Planned,
    guard: GuardOptions,
    *,
    reason: str | None,
    state_dir: str | None,
    cwd: Path,
    settings: Settings,
    can_ask: bool,
    dry_run: bool = False,
) -> Invocation:
    """A new backfill, judged before anything is saved. A plan over the partition limit is refused first, a dry
    run's too; unless it is a dry run, a paused pipeline, a missing reason (where no one can be asked) and an
    unusable state root are refused next."""
    root = state_root_for(planned.spec, state_dir, cwd)
    settings.check_plan_size(len(planned.spec.plan))  # a dry run's too: a plan that large is a typo
    if not dry_run:
        check_target_not_paused(planned)
        if reason is None and not can_ask:
            raise BadInput(
                "--reason is required to run a backfill: say why it runs, e.g. --reason 'schema fix for "
                "view_count' (a --dry-run needs none)"
            )
        check_state_root(root.path)
    request = request_for_new(planned, guard, reason=reason, root=root.path, cwd=cwd)
    return Invocation(
        mode=TRIGGER,
        planned=planned,
        settings=settings,
        preflight=run_preflight(request),
        request=request,
        reason=reason,
        cwd=cwd,
        root=root,
    )


def check_working_directory(loaded: Loaded) -> None:
    """A backfill's children run where it was started: a directory gone since (a repository moved or renamed)
    would fail every partition, so the resume is refused before anything is taken over or started."""
    saved = loaded.manifest.get("working_directory")
    if saved and not Path(saved).is_dir():
        raise BadInput(
            f"backfill {loaded.store.id} runs its children in {saved!r}, which is no longer a directory (moved, "
            "renamed or deleted): a backfill runs where it was started; put the directory back there, or start a "
            "new backfill from where it is now"
        )


def needs_own_reason(loaded: Loaded, selection: PartitionSelection) -> bool:
    """Whether the backfill's saved reason does not cover this resume: it runs succeeded partitions again, or
    the backfill was saved without a reason (before guardrails)."""
    return reruns_succeeded(loaded, selection) or loaded.manifest.get("reason") is None


def judge_resume(
    loaded: Loaded,
    options: ExecutionOptions,
    selection: PartitionSelection,
    *,
    reason: str | None,
    settings: Settings,
    can_ask: bool,
    rerun_asset: AssetRerun | None = None,
    whole_partitions: bool = False,
    dry_run: bool = False,
) -> Invocation:
    """A saved backfill resumed: re-planned (its pipeline validated once), then, unless a dry run, taken over
    (orphans of a crashed executor, which may hold the DuckDB file, are stopped first) and judged.

    A backfill paused meanwhile comes back with ``paused`` set and nothing held; one ended by an operator goes
    on only with a reason of its own, which reopens it."""
    check_execution_options(options)  # whichever front end built them (flags, the rerun form)
    planned = replan(loaded.spec, options)
    check_working_directory(loaded)
    if rerun_asset is not None:
        check_rerun_asset(planned, rerun_asset.name)
    own_reason = needs_own_reason(loaded, selection)
    if not dry_run and reason is None and not can_ask:
        if reruns_succeeded(loaded, selection):
            raise BadInput(
                f"--reason is required to run succeeded partitions of backfill {loaded.store.id} again: say why "
                "(the backfill's own reason covered its first run)"
            )
        if loaded.manifest.get("reason") is None:
            raise BadInput(
                f"--reason is required: backfill {loaded.store.id} was saved without one (before guardrails); "
                "say why it runs"
            )
    runs_something = selection.count(loaded.board) > 0  # a --continue that runs something is judged
    invocation = Invocation(
        mode=RERUN,
        planned=planned,
        settings=settings,
        preflight=None,
        request=None,
        reason=reason if (reason is not None or own_reason) else loaded.manifest.get("reason"),
        cwd=Path(loaded.manifest.get("working_directory") or Path.cwd()),
        loaded=loaded,
        selection=selection,
        rerun_asset=rerun_asset,
        whole_partitions=whole_partitions,
    )
    if dry_run:
        if runs_something:
            invocation.request = request_for_resume(loaded, planned, selection, reason=reason)
            invocation.preflight = run_preflight(invocation.request)
        return invocation
    check_target_not_paused(planned)  # before the takeover: a paused pipeline's backfill is left as it is
    invocation.prepared = prepare_resume(loaded, planned, selection, settings=settings, reason=reason)
    with invocation:  # read again under the lock: a pause or cancel may have been applied since
        invocation.paused = held_by_control(loaded, reason)
        if invocation.paused is not None:
            invocation.abandon()
            return invocation
        if runs_something:
            invocation.request = request_for_resume(
                loaded, planned, selection, reason=reason, ignore_dependencies=rerun_asset is not None
            )
            invocation.preflight = run_preflight(invocation.request)
    return invocation


def check_target_not_paused(planned: Planned) -> None:
    """A pipeline an operator paused (``backfill pause --target``) starts nothing: ``TargetPaused``, exit 0 on
    stdout, naming who paused it and why (checked again at the start, under the live-work registry's lock)."""
    if planned.checked is not None:
        check_not_paused(planned.checked.pipeline.directory)


def held_by_control(loaded: Loaded, reason: str | None) -> Decision | None:
    """An operator's pause holds a resume (returned: it starts nothing, and says so with exit 0); an operator's
    end (a mark or a cancel) lets it go on only with a reason of its own, which reopens the backfill once the
    resume starts (``Invocation.start``, under the lock)."""
    control = read_control(loaded.store.directory)
    if control.paused is not None:
        return control.paused
    if control.ended is not None and reason is None:
        raise BadInput(
            f"backfill {loaded.store.id} was {control.ended.sentence()}; --continue needs its own --reason to go on"
        )
    return None


def check_rerun_asset(planned: Planned, name: str) -> None:
    """``--asset`` names an asset of the backfill's pipeline, as validated for this invocation."""
    if planned.checked is None:
        raise BadInput("--asset means nothing for a --command backfill (pipeline partitions only): leave it out")
    from engine.pipeline.validation import check_asset_flag

    check_asset_flag(planned.checked.pipeline, name)
