"""The executor: runs the selected partitions as child processes with bounded parallelism.

It runs on its own thread. Front ends poll :meth:`Executor.snapshot`; they stop
it with :meth:`Executor.request_stop`. Every attempt is recorded before its
child is waited on and again, durably, when it ends; children are always
waited for, whatever happens.

Stopping a child (cancel, fail-fast, timeout) sends one signal to its process
group (SIGINT, or SIGTERM when we were terminated), and SIGKILL only once the
grace period (30 s by default) has passed.
"""

from __future__ import annotations

import selectors
import signal
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from engine.base.errors import BackfillError, StateWriteFailed
from engine.base.processes import TrackedFamily
from engine.dates.plan import Interval
from engine.execute.active_child import ActiveChild
from engine.execute.asset_resume import AssetPlan
from engine.execute.children import ChildFactory
from engine.execute.executor_controls import ExecutorControls
from engine.execute.executor_reaping import ExecutorReaping, Pending
from engine.execute.executor_snapshot import FINISHED, RUNNING, STARTING, STOPPING, Event
from engine.execute.executor_splits import ExecutorSplits
from engine.execute.executor_stopping import ExecutorStopping
from engine.execute.executor_storage import ExecutorStorage
from engine.execute.launcher import ChildSpec, ForkExecLauncher, Launcher, start_failure
from engine.execute.rerun import AssetRerun, PartitionSelection, RerunMode
from engine.execute.splitting import SplitRun
from engine.execute.takeover import Takeover
from engine.interventions.leasing import LeaseKeeper
from engine.spec.backfill_spec import BackfillSpec, ExecutionOptions
from engine.spec.split_policy import SplitPolicy
from engine.store.manifest import now_text
from engine.store.record_writer import RecordWriter
from engine.store.records import Attempt, PartitionRecord, RecordStatus
from engine.store.run_tally import RunTally
from engine.store.space_reserve import SpaceReserve, reserve_size
from engine.store.split_tree import read_tree, settle_node
from engine.store.state_store import StateStore
from engine.store.status import DONE, RunOutcome, Status, StatusBoard

EVENTS_KEPT = 512


@dataclass
class ExecutorHooks:
    """Where guardrails and interventions plug in: before the first launch, after each partition."""

    before_first_launch: Callable[[], None] = lambda: None
    after_partition: Callable[[int, Attempt], None] = lambda index, attempt: None
    # After a child exits 0, before the attempt is recorded succeeded: a verification (``status``,
    # ``detail``, ``fails_partition``, ``to_json()``) or None. One that fails the partition stops the backfill.
    # The partition ID is the record's: a half of a split partition has its own.
    verify: Callable[[int, Interval, Attempt, str], Any] = lambda index, interval, attempt, partition_id: None
    # Instead, a verification run as a child of the attempt once its own exits 0 (--verify-command): a
    # VerifyingChild, or None.
    verify_child: Callable[[int, Interval, Attempt, str], Any] = lambda index, interval, attempt, partition_id: None
    # Once every child has been waited for, with the backfill still locked: the path of the record written.
    after_run: Callable[[Outcome], str | None] = lambda outcome: None
    # Called on every turn of the loop (at least every 0.25 s): picks up operators' requests (interventions).
    poll: Callable[[Executor], None] = lambda executor: None
    # Before each attempt of a pipeline partition: the assets it runs and carries (engine.execute.asset_resume),
    # or None to run the whole selection.
    plan_assets: Callable[[PartitionRecord | None], AssetPlan | None] = lambda record: None
    # Before every turn of launches: why nothing more may start (the pipeline changed since it was judged), or None.
    launch_refusal: Callable[[], str | None] = lambda: None


@dataclass
class _Launch:
    """An attempt prepared to start: its record holds it as starting, not yet written."""

    pending: Pending
    interval: Interval
    record: PartitionRecord
    attempt: Attempt
    number: int
    child_spec: ChildSpec


@dataclass(kw_only=True)
class Outcome:
    status: RunOutcome  # paused: an operator paused it (exit 22)
    counts: dict[str, int]
    selected: int
    failed_in_run: list[int] = field(default_factory=list)
    started_at: float = 0.0  # Unix seconds: the run's own span, whatever a front end did before or after
    finished_at: float = 0.0
    seconds: float = 0.0  # how long it ran, on the monotonic clock (a wall-clock step mid-run is not part of it)
    tally: RunTally = field(default_factory=lambda: RunTally(0))  # what this run's ended attempts add up to
    record: str | None = None  # the backfill record the guardrails wrote, if any
    record_error: str | None = None  # why it could not be written (the run then does not report success)
    intervention: str | None = None  # who stopped, paused or ended it and why (an operator, not a signal)
    splits: int = 0  # splits made in this run (docs/splitting.md)
    split_partitions: int = 0  # partitions of the plan with a split made in this run
    split_depth: int = 0  # how deep the deepest split of this run went (1: halves)


def _snapshot_index(spec: BackfillSpec, store: StateStore) -> str | None:
    """The snapshot a pipeline's children measure what they changed against; a command has none (and does not
    load the pipeline's SQL modules the name lives beside)."""
    if spec.target.is_command:
        return None
    from engine.pipeline.row_changes import SNAPSHOT_INDEX

    return str(store.directory / SNAPSHOT_INDEX)


class Executor(ExecutorControls, ExecutorStorage, ExecutorStopping, ExecutorSplits, ExecutorReaping):
    def __init__(
        self,
        spec: BackfillSpec,
        store: StateStore,
        board: StatusBoard,
        options: ExecutionOptions,
        selection: PartitionSelection,
        takeover: Takeover,
        *,
        effective_parallel: int,
        working_directory: str,
        launcher: Launcher | None = None,
        hooks: ExecutorHooks | None = None,
        grace: float = 30.0,
        reason: str | None = None,
        lease: LeaseKeeper | None = None,
        rerun_asset: AssetRerun | None = None,
        parallel_cap: tuple[int, str] | None = None,
        split: SplitPolicy | None = None,
        judged_sql: str | None = None,
        judged_files: str | None = None,
    ) -> None:
        self.spec = spec
        self.store = store
        self.board = board
        self.options = options
        self.selection = selection
        self.takeover = takeover
        self.parallel = max(1, effective_parallel)
        self.requested_parallel = options.max_parallel  # what operators asked for; `parallel` is what runs
        self.parallel_cap = parallel_cap  # (most children at once, why): a connection's or a cluster's limit
        self.launcher = launcher or ForkExecLauncher()
        self.hooks = hooks or ExecutorHooks()
        self.grace = grace
        self.lease = lease
        self.rerun_asset = rerun_asset
        self._fenced: str | None = None  # this executor lost its lease: it writes nothing more
        self.plan = spec.plan
        self.ids = spec.ids
        self.factory = ChildFactory(
            spec,
            backfill_id=store.id,
            working_directory=working_directory,
            workers=options.workers,
            inherit_fds=takeover.inherited_fds(),
            reason=reason,
            rerun_asset=rerun_asset,
            row_changes_from=_snapshot_index(spec, store),
            judged_sql=judged_sql,
            judged_files=judged_files,
        )
        self._selected = selection.count(board)
        self._queue: Iterator[int] = selection.iterate(board, reverse=options.reverse)
        self._retries: deque[Pending] = deque()
        self._active: dict[str, ActiveChild] = {}  # by record ID: a split partition's halves run side by side
        # Re-entrant: a stop signal's handler (request_stop) runs in the main thread, possibly while that very
        # thread holds the lock for a snapshot; a plain lock would wait for itself forever.
        self._lock = threading.RLock()
        self._events: deque[Event] = deque(maxlen=EVENTS_KEPT)
        self._sequence = 0
        self._version = 0
        self._finished = 0
        self._state = STARTING
        self._stop_reason: str | None = None
        self._stop_signal: int = signal.SIGINT
        self._escalation = 0  # stop requests after the first: 1 sends SIGTERM now, 2 or more SIGKILL now
        self._halted = False  # on-failure stop / fail-fast: launch nothing more
        self._outcome: str | None = None
        self._failed: list[int] = []
        self._failed_set: set[int] = set()  # the halves of one partition may fail apart: it is listed once
        self._started_at = time.time()
        self._finished_at = self._started_at
        self._exhausted = False
        self._selector = selectors.DefaultSelector()
        self._writer = RecordWriter(store.partitions, self.owns, store.index_for_writing(self.plan, self.ids.of))
        self._reserve = SpaceReserve(store.directory, reserve_size(options.max_parallel))
        self._storage_error: OSError | None = None  # the store could not be written: stop, wait, report
        self._leftovers: list[tuple[TrackedFamily, float]] = []  # what ended attempts left alive, SIGKILL deadline
        self._summary_written = 0.0
        self._verification_failed = False  # set by _reap for the attempt _finish records next
        self._tally = RunTally(len(self.plan))
        self.record: str | None = None  # the backfill record written at the end, once it is
        self._paused: str | None = None  # why an operator paused it: running children finish, none start
        self._intervention: str | None = None  # an operator's cancel, pause or end, in their words
        self._ended_as: str | None = None  # the status an operator's mark ended the backfill with
        self._stopped: set[int] = set()  # partitions an operator stopped one by one: the run is not a success
        self.splits = SplitRun(split, spec.zone, self.factory.formatter, lambda record: read_tree(store.splits, record))

    # ---------------------------------------------------------------- the loop

    def run(self) -> Outcome:
        self._started_at, started = time.time(), time.monotonic()
        self.takeover.generation = self.store.record_selection(
            self.takeover.generation, self._selected, self._started_at, (self.requested_parallel, self.parallel)
        )
        setup_error: BackfillError | None = None
        try:
            try:
                self._hold_reserve()
                if self.lease is not None:
                    self.lease.start(self._leased_attempts, self._fenced_out)
                self.hooks.before_first_launch()
            except BackfillError as error:  # a snapshot that could not be taken: launch nothing, say why
                setup_error = error
                self._halted = True
            self._set_state(RUNNING)
            while setup_error is None:
                self.hooks.poll(self)
                stopping = self._stop_reason is not None
                if stopping and self._state != STOPPING:
                    self._begin_cancel_all()
                if not stopping and not self._halted and self._paused is None:
                    refusal = self.hooks.launch_refusal() if self._may_launch() else None
                    if refusal is not None:
                        self.halt_for(refusal)
                    else:
                        self._launch_available()
                if not self._active and (stopping or self._halted or self._exhausted or self._paused is not None):
                    break
                self._wait_for_exits(self._next_wakeup())
                self._reap()
                self._enforce_deadlines()
                self._sweep_leftovers(wait=False)
                self._maybe_write_summary()
                if self._writer.full is not None:
                    self._storage_failed(self._writer.full)
        finally:
            # Whatever happened (a full disk, a bug of ours), no child outlives this loop unwaited.
            self._stop_everything_and_wait()
            self._settle_unstarted_halves()
            self._write_deferred()
            if self.lease is not None:
                self.lease.stop()
            self.launcher.shutdown()
            self._finished_at, seconds = time.time(), time.monotonic() - started
            self._selector.close()
            try:
                self._writer.close()
            except OSError as error:
                self._storage_failed(error)
            self.store.close_index()
            self._maybe_write_summary(force=True)
        status = self._decide_outcome()
        result = Outcome(
            status=status,
            counts=self.board.counts(),
            selected=self._selected,
            failed_in_run=list(self._failed),
            started_at=self._started_at,
            finished_at=self._finished_at,
            seconds=seconds,
            tally=self._tally,
            intervention=self._intervention,
            splits=self.splits.splits,
            split_partitions=len(self.splits.split_indices),
            split_depth=self.splits.deepest,
        )
        if not self.owns():
            result.status = status = RunOutcome.FAILED
        elif setup_error is None and self._storage_error is None:
            try:
                result.record = self.record = self.hooks.after_run(result)
            except Exception as error:  # not written, whatever the cause: the run must not report success
                result.record_error = (
                    error.strerror or str(error) if isinstance(error, OSError) else f"{type(error).__name__}: {error}"
                )
                if result.status == RunOutcome.SUCCEEDED:
                    result.status = status = RunOutcome.FAILED
        with self._lock:
            self._outcome = status
            self._state = FINISHED
            self._version += 1
        self.takeover.release()
        if setup_error is not None:
            raise setup_error
        if self._storage_error is not None:
            error = self._storage_error
            raise StateWriteFailed(
                f"the state store {self.store.directory} could not be written ({error.strerror or error}): "
                f"every child was stopped and waited for; free space or fix the disk, then "
                f"backfill --continue {self.store.id}"
            )
        return result

    def _set_state(self, state: str) -> None:
        with self._lock:
            self._state = state
            self._version += 1

    def _decide_outcome(self) -> RunOutcome:
        if self._ended_as is not None:
            return RunOutcome(self._ended_as)
        if self._paused is not None and self._stop_reason is None:
            return RunOutcome.PAUSED
        if self._stop_reason is not None:
            return RunOutcome.CANCELLED
        if self._failed or self._stopped:  # a partition an operator stopped is not done: exit 1, resumable
            return RunOutcome.FAILED
        return RunOutcome.SUCCEEDED if self._exhausted else RunOutcome.FAILED

    # ---------------------------------------------------------------- launching

    def _next_pending(self) -> Pending | None:
        while True:
            if self._retries:
                return self._retries.popleft()
            if self._exhausted:
                return None
            index = next(self._queue, None)
            if index is None:
                self._exhausted = True
                return None
            pending = Pending(index, self.options.retries + 1)
            if not self.board.attempts(index):
                return pending
            pending.record = self._read_partition(index)
            if pending.record is None or not pending.record.is_split:
                return pending
            self._resume_tree(index, pending.record)  # its leaves wait in _retries: taken next

    def _read_partition(self, index: int) -> PartitionRecord | None:
        interval = self.plan.interval(index)
        return self.store.read_record(self.ids.of(interval.start, interval.end), self.plan, self.ids.of)

    def _resume_tree(self, index: int, record: PartitionRecord) -> None:
        """A partition that split in an earlier run: its leaves the selection wants run, not the partition whole
        (a partition selected by ID runs every leaf not done; ``--rerun all`` every leaf)."""
        root = self.splits.root(index, record)
        selection = self.selection
        if selection.mode == RerunMode.ALL:
            wants: Callable[[str], bool] = lambda status: True  # noqa: E731
        elif selection.indices is not None:
            wants = lambda status: Status.parse(status) not in DONE  # noqa: E731
        else:
            wants = lambda status: selection.wants(Status.parse(status))  # noqa: E731
        leaves = self.splits.wanted(root, wants)
        if leaves:
            # Every node above a leaf that runs again is running, durably, before that leaf starts: a takeover
            # after a crash finds a split partition's live halves through its record's status.
            reopened = {
                id(n): n.record for leaf in leaves for n in leaf.ancestors() if settle_node(n, RecordStatus.RUNNING)
            }
            if reopened and not self._write_ahead(sorted(reopened.values(), key=lambda r: r.parent is None)):
                return
            with self._lock:
                self.board.set(index, Status.RUNNING)
        self._retries.extend(Pending(index, self.options.retries + 1, leaf.record, leaf) for leaf in leaves)
        if not leaves:
            with self._lock:
                self._finished += 1

    def _may_launch(self) -> bool:
        """Whether a slot is free and a partition may wait for it (the launch refusal is asked only then)."""
        return len(self._active) < self.parallel and (bool(self._retries) or not self._exhausted)

    def _launch_available(self) -> None:
        """Fill the free slots. Their attempts are written ahead together, with one sync of the directory (a
        group commit: the more children ended since the last turn, the larger the batch), then their children
        start, each after its own attempt is durable: a child that ran always has an attempt record, whatever
        kills this executor next (a takeover settles a "starting" one: issue 24)."""
        batch: list[_Launch] = []
        while (
            len(self._active) + len(batch) < self.parallel
            and not self._halted
            and self._stop_reason is None
            and self._paused is None
            and self.owns()  # a process thawed past its lease starts nothing, even before its lease thread runs
        ):
            pending = self._next_pending()
            if pending is None:
                break
            batch.append(self._prepare(pending))
        if not batch:
            return
        if not self._write_ahead([launch.record for launch in batch]):
            for launch in batch:
                self._not_started(launch, "its attempt could not be recorded first")
            return
        for launch in batch:
            if self._halted or self._stop_reason is not None or not self.owns():
                # Halted by an earlier launch of this batch that failed, stopped by a signal meanwhile, fenced.
                self._not_started(launch, "the run stopped starting partitions")
            else:
                self._launch(launch)

    def _not_started(self, launch: _Launch, why: str) -> None:
        attempt = launch.attempt
        attempt.status, attempt.finished_at, attempt.error = RecordStatus.CANCELLED, now_text(), f"not started: {why}"
        pending = launch.pending
        self._finish(pending.index, launch.record, attempt, pending.attempts_left, node=pending.node)

    def _prepare(self, pending: Pending) -> _Launch:
        """The next attempt of a partition, not yet written nor started."""
        index = pending.index
        record = pending.record
        if pending.node is not None:  # a half: its own interval and ID
            interval = Interval(index, pending.node.record.start_us, pending.node.record.end_us)
            partition_id, stem = pending.node.record.id, f"{self.store.id}-p{index}-s{pending.node.path}"
        else:
            interval = self.plan.interval(index)
            partition_id, stem = self.ids.of(interval.start, interval.end), f"{self.store.id}-p{index}"
        if record is None and self.board.attempts(index):
            record = self.store.read_record(partition_id, self.plan, self.ids.of)
        if record is None:
            record = PartitionRecord.fresh(partition_id, interval, self.factory.formatter, RecordStatus.RUNNING)
        number = len(record.attempts) + 1
        run_id = f"{stem}-a{number}"
        log_path = self.store.log_path(run_id)
        while log_path.exists():
            # An attempt whose start record was lost (the executor was killed before the writer thread
            # wrote it) still left its log: never reuse its run ID, its log or its run record.
            number += 1
            run_id = f"{stem}-a{number}"
            log_path = self.store.log_path(run_id)
        attempt = Attempt(
            run_id=run_id,
            status=RecordStatus.STARTING,
            started_at=now_text(),
            log=f"children/{run_id}.log",
            generation=self.takeover.generation.number,
            launcher=self.launcher.name,
        )
        assets = None
        if self.rerun_asset is not None:
            attempt.kind, attempt.asset = "rerun", self.rerun_asset.name
        else:
            assets = self.hooks.plan_assets(record if record.attempts else None)
            if assets is not None:
                attempt.assets, attempt.carried = list(assets.run), assets.carried
        record.attempts.append(attempt)
        record.status = RecordStatus.RUNNING
        child_spec = self.factory.child(
            interval, partition_id, run_id, log_path, len(self.plan), assets=assets.run if assets else None
        )
        return _Launch(pending, interval, record, attempt, number, child_spec)

    def _launch(self, launch: _Launch) -> None:
        """Start the child of an attempt already written ahead."""
        index, record, attempt, child_spec = launch.pending.index, launch.record, launch.attempt, launch.child_spec
        attempt.status = RecordStatus.RUNNING
        try:
            child = self.launcher.launch(child_spec)
        except OSError as error:
            attempt.status, attempt.finished_at = RecordStatus.FAILED, now_text()
            attempt.error = start_failure(child_spec, error)
            self._finish(index, record, attempt, launch.pending.attempts_left)
            return
        remoted = hasattr(child, "remote")  # a child on another machine: its identity arrives later
        attempt.pid = child.pid or None
        attempt.pid_started, attempt.pid_birth = child.identity()
        if remoted:
            attempt.remote = child.remote  # the cluster at least: where a successor looks for it
        self._write(record, durable=False)
        active = ActiveChild(
            index, launch.interval, record, attempt, child, time.monotonic(), time.time(), launch.pending.attempts_left
        )
        active.identity_pending, active.node = remoted, launch.pending.node
        fd = child.exit_fd()
        if fd is not None:
            self._selector.register(fd, selectors.EVENT_READ, active)
        with self._lock:
            self._active[record.id] = active
            self.board.set(index, Status.RUNNING)
            if launch.pending.node is None:
                self.board.set_attempts(index, launch.number)
            self._event("started", index, attempt.run_id, span=self._span(launch.pending.node))

    # ---------------------------------------------------------------- waiting

    def _next_wakeup(self) -> float:
        now = time.monotonic()
        wakeup = now + 0.25
        for active in self._active.values():
            if self.options.timeout and active.stop_reason is None:
                wakeup = min(wakeup, active.started + self.options.timeout / 1_000_000)
            if active.stop_reason is not None:
                wakeup = min(wakeup, active.stop_started + self.grace)
        return max(0.0, wakeup - now)

    def _wait_for_exits(self, timeout: float) -> None:
        if not self._active:
            return
        if all(a.child.exit_fd() is not None for a in self._active.values()):
            self._selector.select(timeout)
        else:
            time.sleep(min(timeout, 0.01))

    def _event(
        self,
        kind: str,
        index: int,
        run_id: str,
        duration: float | None = None,
        error: str | None = None,
        *,
        final: bool = True,
        span: tuple[int, int] | None = None,
    ) -> None:
        self._sequence += 1
        self._version += 1
        self._events.append(Event(self._sequence, kind, index, run_id, time.time(), duration, error, final, span))
