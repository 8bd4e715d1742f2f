"""Creating and reopening backfills: the state store, the saved plan, and an executor ready to run.

This is the one place that ties spec, store, takeover and executor together, so
that the command line, the dashboard and the rerun form all resume a backfill
through the same code path.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.base.atomic import write_atomic
from engine.base.errors import BadInput, StateWriteFailed
from engine.base.open_files import make_room
from engine.base.settings import Settings
from engine.dates.split import SplitUnit
from engine.execute.executor import Executor, ExecutorHooks
from engine.execute.launcher import ForkExecLauncher, Launcher
from engine.execute.rerun import AssetRerun, PartitionSelection
from engine.execute.takeover import Takeover, take_over
from engine.execute.warm_launcher import WarmLauncher
from engine.interventions.leasing import LeaseKeeper
from engine.pipeline.judged_sql import judged_argument
from engine.pipeline.repository import repository_root, resolve_target
from engine.spec.backfill_spec import BackfillSpec, ExecutionOptions, Planned
from engine.spec.parallelism import Parallelism, effective_parallelism
from engine.store.locate import locate_backfill
from engine.store.manifest import manifest_of, spec_of
from engine.store.records import PartitionRecord
from engine.store.state_store import (
    Generation,
    StateStore,
    add_to_gitignore,
    default_state_root,
    new_backfill_id,
)
from engine.store.status import StatusBoard

if TYPE_CHECKING:
    from engine.guardrails.definition_watch import DefinitionWatch

JUDGED_FILES = "judged-files.json"  # the pipeline's files as judged, for each asset of a partition to ask again
JUDGED_SQL = "judged-sql.json"  # the shapes of SQL that cannot be classified the pre-flight judged, by asset


@dataclass(frozen=True)
class StateRoot:
    """Where a backfill's state lives, and the repository whose .gitignore gets it (None: not in one)."""

    path: Path
    repository: Path | None


def state_root_for(spec: BackfillSpec, state_dir: str | None, cwd: Path) -> StateRoot:
    """``--state-dir`` (relative to ``cwd``), or the default root of the target's repository."""
    repository = repository_root(cwd) if spec.target.is_command else repository_root(Path(spec.target.path or cwd))
    if state_dir:
        return StateRoot((cwd / state_dir).resolve(), repository)
    return StateRoot(default_state_root(repository), repository)


@dataclass(kw_only=True)
class Prepared:
    """A backfill ready to execute: its store is taken over (its locks held) and its partitions selected."""

    store: StateStore
    spec: BackfillSpec
    manifest: dict[str, Any]
    board: StatusBoard
    options: ExecutionOptions
    parallelism: Parallelism
    selection: PartitionSelection
    takeover: Takeover
    state_root: Path
    working_directory: str
    settings: Settings
    reason: str | None = None  # why this backfill runs: saved, recorded, and BACKFILL_REASON for children
    hooks: ExecutorHooks | None = None  # the guardrails' verification, once the pre-flight has run
    rerun_asset: AssetRerun | None = None  # --asset: this invocation runs one asset (and downstream) again
    whole_partitions: bool = False  # --rerun-whole-partition: no asset of a failed attempt is carried over
    split_finest: SplitUnit = SplitUnit.SECOND  # the finest cut the guardrails allow a split (a DATE key: a day)
    definition_watch: DefinitionWatch | None = None  # what a pipeline's partitions run, as judged: each worker reads it
    # by asset, the shapes of the SQL that cannot be classified which the pre-flight judged (engine/pipeline/
    # judged_sql.py): a pipeline partition's run refuses any other
    judged_sql: dict[str, list[str]] = field(default_factory=dict)

    @property
    def launcher_name(self) -> str:
        """``warm`` for pipeline partitions unless ``--launcher exec``; a command is always exec'd; ``dask`` on a
        cluster, for any target."""
        if self.options.launcher.startswith("dask"):
            return "dask"
        return "warm" if self.options.launcher == "warm" and not self.spec.target.is_command else "exec"

    def start_launcher(self) -> Launcher:
        """A launcher for this invocation. A Dask launcher connects to its cluster (or starts the local one),
        checks the target is visible on every worker and records the scheduler in the generation file."""
        if self.launcher_name == "dask":
            return self._dask_launcher()
        if self.launcher_name == "warm":
            return WarmLauncher(self.settings.runner_partitions)
        return ForkExecLauncher()

    def _dask_launcher(self) -> Launcher:
        from engine.execute.dask_launcher import DaskLauncher, scheduler_address
        from engine.spec.backfill_spec import local_dask_workers

        grace = self.settings.stop_grace
        local = local_dask_workers(self.options.launcher)
        address = None if local is not None else scheduler_address(self.options.dask_scheduler)
        launcher = DaskLauncher(
            address=address,
            local_workers=local,
            backfill_id=self.store.id,
            generation=self.takeover.generation.number,
            grace=grace,
        )
        try:
            if not self.spec.target.is_command and self.spec.target.path:
                launcher.check_target_visible(self.spec.target.path)
                if self.definition_watch is not None:
                    launcher.check_definition(self.definition_watch)
            if address is not None:  # before the first launch: a successor must know where to look
                self.takeover.generation = self.store.record_cluster(self.takeover.generation, address, grace)
        except BaseException:
            launcher.shutdown()
            raise
        return launcher

    def executor(
        self, *, launcher: Launcher | None = None, hooks: ExecutorHooks | None = None, grace: float | None = None
    ) -> Executor:
        judged_files, judged_sql = self._write_judged()  # before any launcher starts: a failure leaves nothing to stop
        launcher = launcher or self.start_launcher()
        parallel = self.parallelism.effective
        cap = self.parallelism.limit
        threads = getattr(launcher, "threads", None)
        if threads is not None:  # never submit more than the cluster can start: a queued attempt would wait
            slots = threads()
            if slots < parallel:
                parallel, cap = max(1, slots), (max(1, slots), f"the cluster has {slots} worker threads")
        else:  # children on this machine: each holds descriptors of this process
            make_room(parallel)
        return Executor(
            self.spec,
            self.store,
            self.board,
            self.options,
            self.selection,
            self.takeover,
            effective_parallel=parallel,
            working_directory=self.working_directory,
            launcher=launcher,
            hooks=with_requests(hooks or self.hooks or ExecutorHooks()),
            grace=grace if grace is not None else self.settings.stop_grace,
            reason=self.reason,
            lease=LeaseKeeper(self.store, self.takeover.generation.number, self.settings),
            rerun_asset=self.rerun_asset,
            parallel_cap=cap,
            split=self.options.split_policy(self.split_finest),
            judged_sql=judged_sql,
            judged_files=judged_files,
        )

    def _write_judged(self) -> tuple[str | None, str | None]:
        """What a pipeline partition's run is given as judged, written to the state directory: the pipeline's files,
        for it to ask again before each asset, and the shapes of SQL that cannot be classified it may run. Files,
        not arguments: a large pipeline's list, or one long statement approved, would pass the 128 KiB an argument
        may hold. None for a command, whose children are not ours to ask."""
        if self.spec.target.is_command:
            return None, None
        files = None
        if self.definition_watch is not None:
            files = self._given(JUDGED_FILES, self.definition_watch.argument())
        return files, self._given(JUDGED_SQL, judged_argument(self.judged_sql))

    def _given(self, name: str, text: str) -> str:
        """``text`` written to the state directory as ``name``, its path returned; a write that fails starts
        nothing and says so in one line."""
        path = self.store.directory / name
        try:
            write_atomic(path, text.encode())
        except OSError as error:
            raise StateWriteFailed(
                f"cannot write {path} ({error.strerror or error}): nothing was started; the backfill can be continued"
            ) from None
        return str(path)

    def release(self) -> None:
        """Give the backfill up without running it (a refusal, or no approval): its locks are released, and its
        place in the live-work registry."""
        self.takeover.release()


def with_requests(hooks: ExecutorHooks) -> ExecutorHooks:
    """Every executor picks up operators' requests (cancel, pause, mark) from the state directory."""
    from engine.execute.intervening import RequestPoller

    hooks.poll = RequestPoller()
    return hooks


def create_backfill(
    planned: Planned,
    *,
    root: StateRoot,
    cwd: Path,
    settings: Settings,
    extra: dict[str, Any] | None = None,
    backfill_id: str | None = None,
) -> Prepared:
    """Save a new backfill (manifest, directories, .gitignore) and take it over; ``extra`` adds manifest fields
    (the reason and guardrail choices), ``backfill_id`` is the ID chosen before (else a new one)."""
    spec = planned.spec
    board = StatusBoard(len(spec.plan))  # before anything is written (judge_new refused a plan too large to keep)
    store = StateStore(root.path / (backfill_id or new_backfill_id()))
    manifest = manifest_of(spec, backfill_id=store.id, working_directory=str(cwd), options=planned.options)
    manifest.update(extra or {})
    store.create(manifest)
    if root.repository is not None:
        add_to_gitignore(root.repository, root.path)
    takeover = take_over(store, board, [], grace=settings.stop_grace, lease_seconds=settings.lease_seconds, new=True)
    return Prepared(
        store=store,
        spec=spec,
        manifest=manifest,
        board=board,
        options=planned.options,
        parallelism=planned.parallelism,
        selection=PartitionSelection(),
        takeover=takeover,
        state_root=root.path,
        working_directory=str(cwd),
        settings=settings,
        reason=manifest.get("reason"),
    )


@dataclass
class Loaded:
    store: StateStore
    spec: BackfillSpec
    manifest: dict[str, Any]
    board: StatusBoard
    running: list[PartitionRecord]
    root: Path


def load_backfill(backfill_id: str, state_dir: str | None, cwd: Path) -> Loaded:
    """Read a saved backfill strictly: manifest, plan, and every partition record."""
    store, root = locate_backfill(backfill_id, state_dir, cwd)
    manifest = store.read_manifest()
    spec = spec_of(manifest)
    board, running = store.load_board(spec.plan, spec.ids.of)
    return Loaded(store, spec, manifest, board, running, root)


def replan(spec: BackfillSpec, options: ExecutionOptions, *, validate: bool = True) -> Planned:
    """The saved spec with this invocation's controls, and its environment read again: a fixed credential or
    limit takes effect, and (``validate``) the pipeline's files are validated again, once. (Production needs
    --force only on the initial invocation.)"""
    if spec.target.is_command:
        return Planned(spec, options, Parallelism(options.max_parallel, options.max_parallel, None))
    from engine.pipeline.config import find_config_file, load_config  # the pipeline's modules: not a command's
    from engine.pipeline.validation import check_pipeline

    target = resolve_target(spec.target.path or "")
    config = load_config(find_config_file(target, spec.run_options.config_file))
    environment = config.environment(spec.environment)
    checked = check_pipeline(target, config, environment, spec.run_options) if validate else None
    parallelism = effective_parallelism(options.max_parallel, options.workers, environment)
    return Planned(spec, options, parallelism, config, environment, checked)


def _remote_stopper(backfill_id: str, grace: float) -> Callable[[list[PartitionRecord], Generation | None], list[str]]:
    """What stops the children an earlier executor left on a Dask cluster, found from its records and from the
    scheduler its generation recorded (whatever launcher this invocation uses)."""

    def stop(running: list[PartitionRecord], previous: Generation | None) -> list[str]:
        on_cluster = any(a.launcher == "dask" for record in running for a in record.attempts)
        if not on_cluster and (previous is None or previous.cluster is None):
            return []  # nothing ran on a cluster: Dask is not even imported
        from engine.execute.dask_launcher import stop_remote_attempts

        return stop_remote_attempts(backfill_id, running, previous, grace)

    return stop


def prepare_resume(
    loaded: Loaded,
    planned: Planned,
    selection: PartitionSelection,
    *,
    settings: Settings,
    reason: str | None = None,
) -> Prepared:
    """Take a saved backfill over for another invocation (the path shared by --continue and the rerun form);
    ``planned`` is what :func:`replan` made of it for this invocation."""
    spec = loaded.spec
    takeover = take_over(
        loaded.store,
        loaded.board,
        loaded.running,
        grace=settings.stop_grace,
        lease_seconds=settings.lease_seconds,
        reload=lambda: loaded.store.load_board(spec.plan, spec.ids.of),
        stop_remote=_remote_stopper(loaded.store.id, settings.stop_grace),
    )
    working_directory = loaded.manifest.get("working_directory") or os.getcwd()
    return Prepared(
        store=loaded.store,
        spec=spec,
        manifest=loaded.manifest,
        board=loaded.board,
        options=planned.options,
        parallelism=planned.parallelism,
        selection=selection,
        takeover=takeover,
        state_root=loaded.root,
        working_directory=working_directory,
        settings=settings,
        reason=reason or loaded.manifest.get("reason"),
    )


def shown_parallelism(spec: BackfillSpec, options: ExecutionOptions) -> Parallelism:
    """The parallelism a resume would use, for display; a configuration that cannot be read is said so."""
    try:
        return replan(spec, options, validate=False).parallelism
    except BadInput as error:
        return Parallelism(options.max_parallel, options.max_parallel, f"configuration not readable now: {error}")
