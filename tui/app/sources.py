"""Where the dashboard's data comes from: a live executor, or a saved backfill on disk.

Every source exposes the plan (``spec``), the store, the shared status board and
a :meth:`poll` returning a small immutable state. The dashboard never gets a
message per partition; it polls a few times a second.
"""

from __future__ import annotations

import os
import time
from array import array
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Protocol

from engine.base.errors import BackfillError, StateUnreadable
from engine.execute.executor import Executor
from engine.execute.executor_snapshot import RunningPartition
from engine.spec.backfill_spec import BackfillSpec, ExecutionOptions
from engine.spec.parallelism import Parallelism
from engine.store.catalog import is_running, partitions_stamp
from engine.store.index_watch import IndexRow, IndexWatch, finished_column
from engine.store.record_index import pending_rows
from engine.store.state_store import Generation, StateStore, show_record
from engine.store.status import FINISHED, Status, StatusBoard
from tui.app.record_cache import RecordCache

IDLE = "idle"  # a saved backfill nobody is running


class RecordRead(Enum):
    """What reading a watched partition's record again found."""

    READ = "read"
    ABSENT = "absent"  # no record: never written
    DAMAGED = "damaged"  # unreadable or not this plan's


@dataclass(frozen=True)
class SourceState:
    version: int
    counts: dict[str, int]
    total: int
    selected: int
    finished: int
    running: tuple[RunningPartition, ...]
    state: str  # starting, running, stopping, finished, idle
    stop_reason: str | None
    outcome: str | None
    started_at: float | None
    intervention: str | None = None  # an operator's cancel, pause or mark of this run: who and why
    escalation: int = 0  # a stop asked again: 1 sent SIGTERM to every child, 2 SIGKILL
    parallel: tuple[int, int] | None = None  # (--max-parallel asked, children at once) when it changed live


class BackfillSource(Protocol):
    spec: BackfillSpec
    store: StateStore
    board: StatusBoard
    records: RecordCache  # the records the screens show, each read again only when it changed
    options: ExecutionOptions
    parallelism: Parallelism
    can_stop: bool

    @property
    def nobody_runs(self) -> bool:
        """No executor anywhere runs this backfill: partitions recorded running were interrupted."""
        ...

    def poll(self) -> SourceState: ...

    def stop(self, reason: str) -> None: ...


class ExecutorSource:
    """A backfill this process is running."""

    can_stop = True
    nobody_runs = False

    def __init__(self, executor: Executor, *, options: ExecutionOptions, parallelism: Parallelism) -> None:
        self.executor = executor
        describe = getattr(executor.launcher, "describe", None)
        self.cluster: str | None = describe() if describe is not None else None  # a Dask cluster, as it started
        self.spec = executor.spec
        self.store = executor.store
        self.board = executor.board
        self.records = RecordCache(self.spec, self.store)
        self.options = options
        self.parallelism = parallelism

    def poll(self) -> SourceState:
        snap = self.executor.snapshot()
        return SourceState(
            snap.version,
            snap.counts,
            snap.total,
            snap.selected,
            snap.finished,
            snap.running,
            snap.state,
            snap.stop_reason,
            snap.outcome,
            snap.started_at,
            snap.intervention,
            snap.escalation,
            snap.parallel,
        )

    def stop(self, reason: str) -> None:
        self.executor.operator_stop(reason)  # a person's stop: asked again, it escalates (SIGTERM, then SIGKILL)

    @property
    def record(self) -> str | None:
        """The backfill record the run wrote when it ended (guardrails), if any."""
        return self.executor.record


class SavedSource:
    """A saved backfill read once from disk (nothing runs it)."""

    can_stop = False

    @property
    def nobody_runs(self) -> bool:
        return True

    def __init__(
        self,
        spec: BackfillSpec,
        store: StateStore,
        board: StatusBoard,
        running: list,
        options: ExecutionOptions,
        parallelism: Parallelism,
        started_at: float | None = None,
    ) -> None:
        self.spec = spec
        self.store = store
        self.board = board
        self.records = RecordCache(spec, store)
        self.options = options
        self.parallelism = parallelism
        self.started_at = started_at
        self._running = running_partitions(running)
        self._control_stamp = _control_stamp(store)
        self.decision = _decision_of(store)

    def _decision_now(self) -> str | None:
        """The pause or end in force, read again only when control.json changed (a pause from this screen, a
        resume from another terminal)."""
        stamp = _control_stamp(self.store)
        if stamp != self._control_stamp:
            self._control_stamp, self.decision = stamp, _decision_of(self.store)
        return self.decision

    def poll(self) -> SourceState:
        board = self.board
        counts = board.counts()
        return SourceState(
            0,
            counts,
            board.size,
            board.size,
            board.size - counts["queued"],
            self._running,
            IDLE,
            None,
            None,
            self.started_at,
            self._decision_now(),
        )

    def stop(self, reason: str) -> None:
        raise RuntimeError("a saved backfill that nothing runs cannot be stopped")


def _control_stamp(store: StateStore) -> int | None:
    from engine.store.control import CONTROL

    try:
        return os.stat(store.directory / CONTROL).st_mtime_ns
    except OSError:
        return None


def _decision_of(store: StateStore) -> str | None:
    """An operator's pause or end of a saved backfill, as a sentence (who, when, why); None without one. A control
    file that cannot be read is not shown here: every command that acts on it says so."""
    from engine.store.control import read_control

    try:
        control = read_control(store.directory)
    except StateUnreadable:
        return None
    decision = control.paused or control.ended
    return decision.sentence() if decision is not None else None


def running_partitions(records) -> tuple[RunningPartition, ...]:
    """What the dashboard shows of partitions whose records say they are running."""
    return tuple(
        RunningPartition(
            r.index,
            r.id,
            r.attempts[-1].run_id,
            len(r.attempts),
            _unix(r.attempts[-1].started_at),
            r.attempts[-1].pid or 0,
        )
        for r in records
        if r.attempts
    )


def _unix(text: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


class WatchedSource(SavedSource):
    """A saved backfill that an executor in another process is running: what changed is read again as it changes.

    The record index (``partitions.idx``, kept by that executor) says which partitions changed: their rows give
    the board, and only the records of running and pending partitions are read. Without a trusted index, the
    ``partitions/`` directory's time tells when anything changed; then only files whose own time changed are
    read again. When the other executor releases its lock, the backfill is idle again.
    """

    RESCAN_SECONDS = 0.3

    def __init__(
        self,
        spec: BackfillSpec,
        store: StateStore,
        board: StatusBoard,
        running: list,
        options: ExecutionOptions,
        parallelism: Parallelism,
        *,
        seen: tuple[int, dict[str, int], list[tuple[int, Status, float | None]]] | None = None,
        watch: IndexWatch | None = None,
    ) -> None:
        try:
            generation = store.read_generation()
        except BackfillError:  # shown without the other executor's start time; resuming reports the problem
            generation = None
        self.progress = RunProgress(generation, board.size)
        self._parallel = generation.parallel if generation else None
        super().__init__(spec, store, board, running, options, parallelism, started_at=self.progress.started_at)
        self.pid = generation.pid if generation else None
        self._version = 1
        self._stamp = -1
        self._mtimes: dict[str, int] = {}
        self._running_records = {r.index: r for r in running}
        self._running_versions: dict[int, tuple | None] = dict.fromkeys(self._running_records)  # read again first
        self._last_scan = 0.0
        self._idle = False
        self._watch = watch
        if watch is not None:  # the index's rows say when each partition's latest attempt ended
            self.progress.saw_rows(board.raw(), finished_column(watch.rows))
            for index in pending_rows(watch.rows):  # a pending row's end is its record's, not the row's
                self._read_again(index)
        if seen is not None:  # the records were read once already: only what changed since is read
            self._stamp, self._mtimes, ended = seen
            for index, status, finished_at in ended:
                self.progress.saw(index, status, finished_at)
        self._rescan()

    @classmethod
    def load(
        cls, spec: BackfillSpec, store: StateStore, options: ExecutionOptions, parallelism: Parallelism
    ) -> WatchedSource:
        """Read a backfill another process runs: through its record index when that can be trusted (the rows,
        and the records of running and pending partitions), else in one pass over the files — their times
        first (so that anything written while they are read is read again on the first poll), then every record
        once for the board and the progress."""
        first = IndexWatch.first(
            store.directory, store.partitions, len(spec.plan), writer_alive=store.lock_held_elsewhere()
        )
        if first is not None:
            watch, indexed = first
            board, running = store.board_from_index(indexed, spec.plan, spec.ids.of)
            return cls(spec, store, board, running, options, parallelism, watch=watch)
        stamp, mtimes = _record_times(store)
        ended: list[tuple[int, Status, float | None]] = []

        def visit(record) -> None:
            ended.append((record.index, Status.parse(record.status), _ended(record)))

        board, running = store.load_board(spec.plan, spec.ids.of, visit)
        return cls(spec, store, board, running, options, parallelism, seen=(stamp, mtimes, ended))

    @property
    def nobody_runs(self) -> bool:
        return self._idle

    def _rescan(self, *, last: bool = False) -> None:
        """Take what changed since the last scan; ``last`` once the executor has gone (nothing changes after)."""
        changed = self._rescan_index(last) if self._watch is not None else self._rescan_files()
        if changed:
            if self.store.bulk_marks():  # a bulk mark is merged by readers, never written into the files
                self.store.apply_bulk_marks(self.board)
            self._version += 1
            self._running = running_partitions(sorted(self._running_records.values(), key=lambda r: r.index))

    def _rescan_index(self, last: bool) -> bool:
        rows = self._watch.look(writer_alive=not last, again=last)
        if rows is None:  # the index can no longer be trusted (removed after a failed write, or damaged)
            self._watch = None
            return self._rescan_files()
        seen = set()
        for row in rows:
            seen.add(row.index)
            if row.pending or row.status is Status.RUNNING:  # what its record holds now
                read = self._read_again(row.index)
                if read is not RecordRead.ABSENT:  # read, or damaged: the row keeps what was last known
                    continue
                row = IndexRow(row.index, False, Status.QUEUED, 0, 0, -1.0, 0)  # never written after all
            self.board.set(row.index, row.status)
            self.board.set_attempts(row.index, row.attempts)
            self.board.set_duration(row.index, row.duration)
            self.board.set_verification_code(row.index, row.verification)
            self.progress.saw(row.index, row.status, row.finished_at)
            self._running_records.pop(row.index, None)
        return self._reread_running(seen) or bool(rows)

    def _reread_running(self, seen: set[int]) -> bool:
        """A running partition's record is written again with the same row (its child's PID, once started):
        the records of the running partitions are read again when their files changed."""
        changed = False
        for index in [index for index in self._running_records if index not in seen]:
            if self._running_versions.get(index) != self.records.version(index):
                changed = self._read_again(index) is RecordRead.READ or changed
        return changed

    def _read_again(self, index: int) -> RecordRead:
        """Read the partition's record now (its file's version taken first, so a write after it is seen on the
        next scan). A damaged record ends no watch: its row keeps what was last known (the details pane names the
        damage), and the record is read again once its file changes."""
        version = self.records.version(index)
        try:
            record = self.store.record_of(index, self.spec.plan, self.spec.ids.of)
        except StateUnreadable:
            if index in self._running_records:
                self._running_versions[index] = version
            return RecordRead.DAMAGED
        if record is None:
            return RecordRead.ABSENT
        self._saw(record, version)
        return RecordRead.READ

    def _rescan_files(self) -> bool:
        from engine.store.records import read_record

        stamp = partitions_stamp(self.store)
        if stamp == self._stamp:
            return False
        self._stamp = stamp
        changed = False
        with os.scandir(self.store.partitions) as entries:
            for entry in entries:
                if not entry.name.endswith(".json") or entry.name.startswith("."):
                    continue
                mtime = entry.stat().st_mtime_ns
                if self._mtimes.get(entry.name) == mtime:
                    continue
                self._mtimes[entry.name] = mtime  # a damaged record is read again once it changes
                try:
                    record = read_record(Path(entry.path), self.spec.plan, self.spec.ids.of)
                except StateUnreadable:  # its row keeps what was last known; the details pane names it
                    continue
                self._saw(record)
                changed = True
        return changed

    def _saw(self, record, version: tuple | None = None) -> None:
        status = show_record(self.board, record)
        self.progress.saw(record.index, status, _ended(record))
        if status is Status.RUNNING:
            self._running_records[record.index] = record
            self._running_versions[record.index] = version
        else:
            self._running_records.pop(record.index, None)
            self._running_versions.pop(record.index, None)

    def _learn_generation(self) -> None:
        """The executor writes its selection as it starts, and its parallelism again after each live change."""
        try:
            generation = self.store.read_generation()
        except BackfillError:
            return
        if generation is None:
            return
        self._parallel = generation.parallel
        if not self.progress.known:
            self.progress.adopt(generation)
            self.started_at = self.progress.started_at

    def poll(self) -> SourceState:
        now = time.monotonic()
        if not self._idle and now - self._last_scan >= self.RESCAN_SECONDS:
            self._last_scan = now
            self._learn_generation()
            self._rescan()
            if not is_running(self.store):
                self._idle = True
                self._rescan(last=True)
                self._version += 1
        counts = self.board.counts()
        state = IDLE if self._idle else RUNNING_ELSEWHERE
        if self.progress.known:  # what the executor's own screen shows: this run's selection and its progress
            selected, finished = self.progress.selected, self.progress.finished
        else:  # an executor from before the generation said so: every partition, and every final one
            selected = self.board.size
            finished = counts["succeeded"] + counts["failed"] + counts["cancelled"] + counts["skipped"]
        return SourceState(
            self._version,
            counts,
            self.board.size,
            selected,
            finished,
            self._running,
            state,
            None,
            None,
            self.started_at,
            self._decision_now() if self._idle else None,
            parallel=None if self._idle else self._parallel,
        )


def _record_times(store: StateStore) -> tuple[int, dict[str, int]]:
    """The ``partitions/`` directory's time and each record file's, taken before any record is read."""
    stamp = partitions_stamp(store)
    with os.scandir(store.partitions) as entries:
        mtimes = {
            entry.name: entry.stat().st_mtime_ns
            for entry in entries
            if entry.name.endswith(".json") and not entry.name.startswith(".")
        }
    return stamp, mtimes


def _ended(record) -> float | None:
    """When the record's latest attempt ended (seconds since the epoch), None when it has not."""
    finished_at = record.attempts[-1].finished_at if record.attempts else None
    return _unix(finished_at) if finished_at else None


RUNNING_ELSEWHERE = "running elsewhere"


class RunProgress:
    """How far another process's executor is through its own run, from the same data its screen uses: the
    partitions it selected (its generation says how many, and when it began) and those whose latest attempt
    ended since then — so the completion bar and the ETA agree with that executor's own, whatever earlier runs
    finished."""

    def __init__(self, generation: Generation | None, size: int) -> None:
        self.generation_started = _unix(generation.started_at) if generation else None
        self.selected: int | None = None
        self.run_started: float | None = None
        self._ended = array("d", bytes(8 * size))  # partition → when its latest attempt ended (final only), 0 not
        self.finished = 0
        if generation is not None:
            self.adopt(generation)

    @property
    def known(self) -> bool:
        return self.selected is not None and self.run_started is not None

    @property
    def started_at(self) -> float | None:
        return self.run_started if self.run_started is not None else self.generation_started

    def adopt(self, generation: Generation) -> None:
        if generation.selected is None or generation.run_started_at is None:
            return
        self.selected, self.run_started = generation.selected, generation.run_started_at
        self.finished = sum(1 for ended in self._ended if ended >= self.run_started)

    def saw(self, index: int, status: Status, ended: float | None) -> None:
        """A partition read again: count it once if its latest attempt ended in this run."""
        started = self.run_started
        before = self._ended[index]
        if before and started is not None and before >= started:
            self.finished -= 1
        ended = ended if ended and status in FINISHED else 0.0
        self._ended[index] = ended
        if ended and started is not None and ended >= started:
            self.finished += 1

    def saw_rows(self, statuses: bytearray, finished_us: array) -> None:
        """Every partition at once, from the record index: its status and when its latest attempt ended (µs)."""
        final = bytes(sorted(FINISHED))
        for index, micros in enumerate(finished_us):
            if micros and statuses[index] in final:
                self.saw(index, Status(statuses[index]), micros / 1_000_000)


def open_saved(store: StateStore) -> SavedSource:
    """The source for browsing a saved backfill: watched when another process runs it, else read once."""
    from engine.execute.backfill import shown_parallelism
    from engine.store.control import resume_options
    from engine.store.manifest import spec_of

    manifest = store.read_manifest()
    spec = spec_of(manifest)
    options = resume_options(manifest, store.directory)
    parallelism = shown_parallelism(spec, options)
    if is_running(store):
        return WatchedSource.load(spec, store, options, parallelism)
    board, running = store.load_board(spec.plan, spec.ids.of)
    return SavedSource(spec, store, board, running, options, parallelism)
