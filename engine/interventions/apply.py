"""Applying a request to a backfill held by its executor or, with no executor live, by the command itself.

Both hold the backfill's lock while they apply, so records, ``control.json`` and the audit log change under
one writer. Nothing is erased: a mark is a new attempt-like entry in the partition's history, and the audit
line keeps the status and message the partition had before.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Protocol

from engine.base.atomic import sync_directory
from engine.base.errors import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK, EXIT_REFUSED
from engine.base.processes import stop_verified
from engine.dates.formatting import InstantFormatter
from engine.interventions.reconcile import LOST_GRACE
from engine.interventions.requests import Request, Result
from engine.interventions.split_marks import mark_tree
from engine.spec.backfill_spec import BackfillSpec
from engine.store import audit
from engine.store.bulk_marks import BulkMark
from engine.store.control import Control, Decision, Setting, read_control, resume_options, write_control
from engine.store.manifest import now_text
from engine.store.ownership import children_still_run, find_orphans, held_by_fenced_owner
from engine.store.records import LIVE_ATTEMPT_STATUSES, Attempt, PartitionRecord, RecordStatus
from engine.store.state_store import StateStore
from engine.store.status import Status, StatusBoard

MARK_STATUSES = (RecordStatus.SUCCEEDED, RecordStatus.FAILED, RecordStatus.SKIPPED)
BACKFILL_MARK_STATUSES = (RecordStatus.SUCCEEDED, RecordStatus.FAILED)
DURABLE_ONE_BY_ONE = 64  # up to this many marks are written into each record; more go into one bulk mark
MOST_PARALLEL = 100_000  # as --max-parallel: anything above is a typo, not a plan


class Holder(Protocol):
    """Whoever holds the backfill's lock while a request is applied: the live executor or a command."""

    store: StateStore
    spec: BackfillSpec
    board: StatusBoard
    applied_by: str
    live: bool  # an executor runs the backfill: it has children to stop and a parallelism to change
    left_on_dask: int  # partitions a cancel left running as they were: a gone executor ran them on a Dask cluster

    def running(self) -> frozenset[int]: ...

    def requested_parallel(self) -> int:
        """The ``--max-parallel`` in force: the live run's, else what the next ``--continue`` starts from."""

    def set_parallel(self, value: int) -> str:
        """Run up to ``value`` children at once from now on; what that means here, in a few words (an
        OSError when the executor cannot keep room for that many records: nothing changed)."""

    def stop_partitions(self, indices: list[int], message: str) -> None:
        """Stop these running partitions now (recorded cancelled, resumable); the rest goes on."""

    def flush(self) -> None: ...

    def update(self, changes: list[tuple[int, Status, int]]) -> None: ...

    def cancel(self, message: str) -> int:
        """Stop every running child and start nothing more; how many children are being stopped."""
        ...

    def pause(self, paused: bool, message: str) -> None: ...

    def end(self, status: str, message: str) -> None: ...

    def before_write(self) -> None:
        """Raise :class:`Fenced` when this holder may no longer write the backfill (checked before each write)."""


@dataclass
class CommandHolder:
    """A command holding the lock of a backfill no executor runs: nothing runs, nothing to tell."""

    store: StateStore
    spec: BackfillSpec
    board: StatusBoard
    applied_by: str
    live: bool = False
    left_running: tuple[PartitionRecord, ...] = ()  # what an executor that is gone recorded running
    left_on_dask: int = 0  # of those, partitions a cancel left as they were: they ran on a Dask cluster

    def running(self) -> frozenset[int]:
        """Partitions still recorded running: an executor that is gone left them so (a later takeover or
        reconcile settles them); a mark must not write over an attempt whose child may still live."""
        return frozenset(self.board.indices_with(frozenset({Status.RUNNING})))

    def flush(self) -> None:
        pass

    def update(self, changes: list[tuple[int, Status, int]]) -> None:
        for index, status, attempts in changes:
            self.board.set(index, status)
            self.board.set_attempts(index, attempts)

    def cancel(self, message: str) -> int:
        """No executor runs it: the children an executor that is gone left running (a SIGKILL, the OOM killer) are
        stopped here, with their groups, each verified by PID, start time and birth (never a reused PID); how
        many. They are found as a takeover finds them, by their records and by ``BACKFILL_ID`` in their
        environment: an executor killed between a child's start and its running record left that attempt
        ``starting``, naming no child."""
        children, started = find_orphans(self.store, self.left_running)
        stopped = stop_verified(children, LOST_GRACE)
        if not children_still_run(self.store):
            self._settle_left_running(message, started)
        return len(stopped)

    def _settle_left_running(self, message: str, started: frozenset[str]) -> None:
        """Nothing of ours runs any more: what the gone executor recorded running is settled now, as a takeover
        would settle it, so the records say what is true (a ``mark`` of such a partition is no longer refused as
        running). An attempt on a Dask worker is left for the takeover, which stops children on other machines."""
        error = f"cancelled: {message.removeprefix('cancelled ')}"  # "cancelled: by …", as an executor's cancel reads
        for record in self.left_running:
            if any(
                attempt.launcher == "dask" and attempt.status in LIVE_ATTEMPT_STATUSES
                for part in self.store.tree_records(record)
                for attempt in part.attempts
            ):
                self.left_on_dask += 1
                continue
            self.store.settle_running(
                record,
                self.board,
                attempt_status=RecordStatus.CANCELLED,
                status=Status.CANCELLED,
                error=error,
                started=started,
                starting=f"{error}; its executor had died while starting it: whether its child ran is unknown",
            )

    def pause(self, paused: bool, message: str) -> None:
        pass

    def end(self, status: str, message: str) -> None:
        pass

    def requested_parallel(self) -> int:
        return resume_options(self.store.read_manifest(), self.store.directory).max_parallel

    def set_parallel(self, value: int) -> str:
        return "nothing runs now: the next --continue starts from it"

    def stop_partitions(self, indices: list[int], message: str) -> None:
        raise AssertionError("no executor runs the backfill: there is nothing to stop")

    def before_write(self) -> None:
        pass  # the command holds .lock: no executor runs the backfill


def apply(request: Request, holder: Holder) -> Result:
    """Carry out ``request``; a refusal changes nothing and says why (exit code 3, or 2 for a bad request)."""
    handler = {
        "mark": _mark,
        "mark_backfill": _mark_backfill,
        "cancel": _cancel,
        "pause": _pause,
        "resume": _resume,
        "set": _set,
        "stop": _stop,
    }.get(request.action)
    if handler is None:
        return Result(EXIT_BAD_INPUT, f"unknown request {request.action!r}")
    return handler(request, holder)


def _line(request: Request, store: StateStore, applied_by: str, **values) -> dict:
    return audit.entry(
        backfill_id=store.id,
        reason=request.reason,
        requested_by=request.requested_by,
        requested_at=request.requested_at,
        applied_at=now_text(),
        applied_by=applied_by,
        **values,
    )


def _reopen(
    request: Request, store: StateStore, applied_by: str, control: Control, before_write: Callable[[], None]
) -> list[dict]:
    """A backfill ended by a mark or a cancel is opened again by a change to its partitions, or by a
    ``--continue`` with a reason of its own: the audit line keeps what ended it."""
    if control.ended is None:
        return []
    before_write()
    write_control(store.directory, replace(control, ended=None))
    ended = control.ended
    return [
        _line(
            request,
            store,
            applied_by,
            action="REOPEN",
            from_status=ended.status,
            to_status=None,
            previous_message=ended.sentence(),
        )
    ]


def selected_indices(request: Request, holder: Holder) -> list[int]:
    """The partitions a mark names: exact indices, or every partition whose status is in the filter now."""
    params = request.params
    if params.get("indices") is not None:
        return sorted(int(index) for index in params["indices"])
    wanted = frozenset(Status.parse(name) for name in params.get("status_filter") or ())
    return holder.board.indices_with(wanted)


def _mark(request: Request, holder: Holder) -> Result:
    to = request.params.get("to")
    if to not in MARK_STATUSES:
        return Result(EXIT_BAD_INPUT, f"--status {to!r} cannot be marked: give one of {', '.join(MARK_STATUSES)}")
    holder.flush()
    indices = selected_indices(request, holder)
    halves: dict[str, int] = dict(request.params.get("halves") or {})  # a half's ID → its plan partition
    busy = sorted(holder.running().intersection([*indices, *halves.values()]))
    if busy:
        shown = ", ".join(holder.spec.ids.of(*_bounds(holder, index)) for index in busy[:3])
        more = f" and {len(busy) - 3} more" if len(busy) > 3 else ""
        return Result(
            EXIT_REFUSED,
            f"partition {shown}{more} of backfill {holder.store.id} is running: cancel the backfill first, or wait",
        )
    if not indices and not halves:
        return Result(EXIT_OK, "no partition matches: nothing was marked")
    asset, rows = request.params.get("asset"), request.params.get("rows")
    if halves and (asset is not None or rows is not None):
        return Result(
            EXIT_BAD_INPUT, "a half of a split partition is marked whole: --asset and --rows mean nothing for it"
        )
    message = f"marked {to} by {request.requested_by}: {request.reason}"
    store, plan, ids = holder.store, holder.spec.plan, holder.spec.ids
    formatter = InstantFormatter(holder.spec.zone)
    changes: list[tuple[int, Status, int]] = []
    lines: list[dict] = []
    durable = len(indices) <= DURABLE_ONE_BY_ONE
    now, stem = now_text(), audit.new_entry_id()
    common = {
        "backfill_id": store.id,
        "reason": request.reason,
        "requested_by": request.requested_by,
        "requested_at": request.requested_at,
        "applied_at": now,
        "applied_by": holder.applied_by,
    }
    board = holder.board
    numbers: dict[int, int] = {}  # a bulk mark: partition index → the number of its mark entry
    slices = _Slices(common, stem, asset, to, rows)
    for index in indices:
        interval = plan.interval(index)
        partition_id = ids.of(interval.start, interval.end)
        attempted = board.attempts(index)
        before = board.status(index).label
        # A bulk mark reads a record only for the rows it stated (a partition already so, marked with --rows or
        # an asset): the board (the record index) has each status and entry count, and a slice's audit line
        # keeps no message. A few partitions are written one by one: their records are read and extended.
        restated = before == to and not (asset is None and rows is None)
        record = store.read_record(partition_id, plan, ids.of) if attempted and (durable or restated) else None
        if record is not None and record.is_split and asset is None and rows is None:
            _mark_split(store, holder, record, None, to, message, request, common, stem, lines, changes)
            continue
        if record is not None:
            before = record.status  # the record's word (a board may lag it)
        stated = _stated_rows(record)
        if before == to and asset is None and (rows is None or rows == stated):
            continue  # already so (with these rows, if any): no entry, nothing changes
        number = (len(record.attempts) if record is not None else attempted) + 1
        if durable:
            if record is None:
                record = PartitionRecord.fresh(partition_id, interval, formatter, RecordStatus.QUEUED)
            previous = record.attempts[-1].error if record.attempts else None
            record.attempts.append(
                Attempt(
                    run_id=f"{store.id}-p{index}-m{number}",
                    status=to,
                    started_at=now,
                    finished_at=now,
                    error=message,
                    duration=0.0,
                    generation=0,
                    launcher="none",
                    kind="mark",
                    rows=rows,
                    asset=asset,
                    by=request.requested_by,
                )
            )
            if asset is None:
                record.status = to
            holder.before_write()
            store.write_record(record, durable=True)
            lines.append(
                audit.bulk_entry(
                    common,
                    stem,
                    len(lines),
                    partition_id=partition_id,
                    asset=asset,
                    action="MARK",
                    from_status=before,
                    to_status=to,
                    target_count=rows,
                    previous_count=stated if before == to else None,
                    previous_message=previous,
                )
            )
        else:
            numbers[index] = number
            slices.add(index, partition_id, before, stated if before == to else None)
        changes.append((index, Status.parse(to if asset is None else before), number))
    for half_id, index in sorted(halves.items(), key=lambda item: item[1]):
        interval = plan.interval(index)
        record = store.read_record(ids.of(interval.start, interval.end), plan, ids.of)
        if record is None or not record.is_split:
            return Result(EXIT_BAD_INPUT, f"partition {half_id[:12]} is not a half of a split partition")
        _mark_split(store, holder, record, half_id, to, message, request, common, stem, lines, changes)
    lines += slices.lines()
    if not changes:
        return Result(EXIT_OK, f"every selected partition is {to} already: nothing was marked")
    holder.before_write()
    if numbers:  # one file for all of them (engine.store.bulk_marks), and their rows in the record index
        store.add_bulk_mark(
            BulkMark(stem, to, message, now, request.requested_by, rows, asset, numbers),
            {index: status for index, status, _number in changes},
        )
    else:
        sync_directory(store.partitions)
    lines += _reopen(request, store, holder.applied_by, read_control(store.directory), holder.before_write)
    holder.before_write()
    audit.append(store.directory, lines)
    holder.update(changes)
    what = f"asset {asset} of " if asset else ""
    return Result(
        EXIT_OK, f"marked {what}{len(changes)} partition{'s' if len(changes) != 1 else ''} {to}", len(changes)
    )


def _mark_split(
    store: StateStore,
    holder: Holder,
    record: PartitionRecord,
    under: str | None,
    to: str,
    message: str,
    request: Request,
    common: dict,
    stem: str,
    lines: list[dict],
    changes: list[tuple[int, Status, int]],
) -> None:
    """A split partition (or one of its halves) marked: every leaf under it takes the mark; one audit line."""
    done = mark_tree(
        store, record, under=under, to=to, message=message, by=request.requested_by, before_write=holder.before_write
    )
    if done is None:
        return
    lines.append(
        audit.bulk_entry(
            common,
            stem,
            len(lines),
            partition_id=under or record.id,
            action="MARK",
            from_status=done.before,
            to_status=to,
        )
    )
    changes.append((record.index, Status.parse(done.after), len(record.attempts)))


@dataclass
class _Slice:
    first: int
    last: int
    first_id: str
    last_id: str
    before: str
    previous_count: int | None


class _Slices:
    """The audit lines of a bulk mark: one per slice, a run of consecutive partitions that were in the same
    status (and stated the same rows) before it: a mark of a million partitions leaves a few lines, not a million.
    Each partition's own history stays in its record; the bulk mark's file lists every partition it marked."""

    def __init__(self, common: dict, stem: str, asset: str | None, to: str, rows: int | None) -> None:
        self._common, self._stem, self._asset, self._to, self._rows = common, stem, asset, to, rows
        self._open: _Slice | None = None
        self._lines: list[dict] = []

    def add(self, index: int, partition_id: str, before: str, previous_count: int | None) -> None:
        current = self._open
        if (
            current
            and current.last == index - 1
            and (current.before, current.previous_count) == (before, previous_count)
        ):
            current.last, current.last_id = index, partition_id
            return
        self._close()
        self._open = _Slice(index, index, partition_id, partition_id, before, previous_count)

    def _close(self) -> None:
        current = self._open
        if current is None:
            return
        self._lines.append(
            audit.bulk_entry(
                self._common,
                self._stem,
                len(self._lines),
                partition_id=current.first_id,
                last_partition_id=current.last_id,
                partitions=current.last - current.first + 1,
                asset=self._asset,
                action="MARK",
                from_status=current.before,
                to_status=self._to,
                target_count=self._rows,
                previous_count=current.previous_count,
            )
        )
        self._open = None

    def lines(self) -> list[dict]:
        self._close()
        return self._lines


def _stated_rows(record: PartitionRecord | None) -> int | None:
    """The rows the partition's latest entry of its own (not an asset's) states (a mark's ``--rows``), if any."""
    for attempt in reversed(record.attempts if record is not None else []):
        if attempt.asset is None:
            return attempt.rows
    return None


def _bounds(holder: Holder, index: int) -> tuple[int, int]:
    interval = holder.spec.plan.interval(index)
    return interval.start, interval.end


def _mark_backfill(request: Request, holder: Holder) -> Result:
    to = request.params.get("to")
    if to not in BACKFILL_MARK_STATUSES:
        return Result(
            EXIT_BAD_INPUT,
            f"--status {to!r} cannot end a backfill: give {' or '.join(BACKFILL_MARK_STATUSES)}",
        )
    if holder.running():
        return Result(
            EXIT_REFUSED, f"backfill {holder.store.id} has a child running: cancel the backfill first, or wait"
        )
    control = read_control(holder.store.directory)
    before = control.ended.status if control.ended else "open"
    decision = Decision(to, request.requested_by, now_text(), request.reason)
    holder.before_write()
    write_control(holder.store.directory, replace(control, ended=decision))
    holder.before_write()
    audit.append(
        holder.store.directory,
        [
            _line(
                request,
                holder.store,
                holder.applied_by,
                action="MARK",
                from_status=before,
                to_status=to,
                previous_message=_said(control),
            )
        ],
    )
    holder.end(to, f"marked {to} by {request.requested_by}: {request.reason}")
    return Result(EXIT_OK, f"backfill {holder.store.id} marked {to}; its partitions keep their statuses", 1)


def _said(control: Control) -> str | None:
    decision = control.ended or control.paused
    return decision.sentence() if decision else None


def _cancel(request: Request, holder: Holder) -> Result:
    control = read_control(holder.store.directory)
    if control.ended is not None and control.ended.status == RecordStatus.CANCELLED and not holder.running():
        return Result(EXIT_OK, f"backfill {holder.store.id} is cancelled already ({control.ended.sentence()})")
    decision = Decision(RecordStatus.CANCELLED, request.requested_by, now_text(), request.reason)
    holder.before_write()
    write_control(holder.store.directory, replace(control, ended=decision))
    before = control.ended.status if control.ended else "running" if holder.running() else "open"
    holder.before_write()
    audit.append(
        holder.store.directory,
        [
            _line(
                request,
                holder.store,
                holder.applied_by,
                action="CANCEL",
                from_status=before,
                to_status=RecordStatus.CANCELLED,
                previous_message=_said(control),
            )
        ],
    )
    running = holder.cancel(f"cancelled by {request.requested_by}: {request.reason}")
    stopped = f"; {running} running child{'ren' if running != 1 else ''} stopped" if running else ""
    # A child that left our environment and no record. (A fenced executor that still holds the locks holds
    # .children.lock itself: it stops its own children when it thaws.)
    if not holder.live and children_still_run(holder.store) and not held_by_fenced_owner(holder.store):
        return Result(
            EXIT_FAILED,
            f"backfill {holder.store.id} cancelled{stopped}, but a child of an earlier executor still runs and was "
            f"not found (it holds .children.lock): find processes with BACKFILL_ID={holder.store.id} in their "
            "environment and stop them",
            1,
        )
    remote = holder.left_on_dask
    if remote:  # their children are on other machines: only a takeover's connection to the cluster reaches them
        which, child, it = (
            ("1 partition", "its child", "it") if remote == 1 else (f"{remote} partitions", "their children", "them")
        )
        stopped += (
            f"; {which} ran on a Dask cluster, where {child} may still run: stop {it} there, or "
            f"`backfill --continue {holder.store.id}` stops {it} as it takes over"
        )
    return Result(EXIT_OK, f"backfill {holder.store.id} cancelled{stopped}", 1)


def _pause(request: Request, holder: Holder) -> Result:
    control = read_control(holder.store.directory)
    if control.paused is not None:
        return Result(EXIT_OK, f"backfill {holder.store.id} is paused already ({control.paused.sentence()})")
    decision = Decision("paused", request.requested_by, now_text(), request.reason)
    holder.before_write()
    write_control(holder.store.directory, replace(control, paused=decision))
    holder.before_write()
    audit.append(
        holder.store.directory,
        [_line(request, holder.store, holder.applied_by, action="PAUSE", from_status="open", to_status="paused")],
    )
    holder.pause(True, f"paused by {request.requested_by}: {request.reason}")
    running = len(holder.running())
    finishing = f"; {running} running child{'ren' if running != 1 else ''} will finish" if running else ""
    return Result(EXIT_OK, f"backfill {holder.store.id} paused{finishing}", 1)


def _resume(request: Request, holder: Holder) -> Result:
    control = read_control(holder.store.directory)
    if control.paused is None:
        return Result(EXIT_OK, f"backfill {holder.store.id} is not paused: nothing to resume")
    holder.before_write()
    write_control(holder.store.directory, replace(control, paused=None))
    holder.before_write()
    audit.append(
        holder.store.directory,
        [
            _line(
                request,
                holder.store,
                holder.applied_by,
                action="RESUME",
                from_status="paused",
                to_status="open",
                previous_message=control.paused.sentence(),
            )
        ],
    )
    holder.pause(False, "")
    return Result(EXIT_OK, f"backfill {holder.store.id} resumed: backfill --continue {holder.store.id} goes on", 1)


def _set(request: Request, holder: Holder) -> Result:
    """``backfill set --max-parallel N``: the live run takes it at once (running children are never stopped
    for it: above the new value, none starts until enough have ended), and later resumes start from it."""
    value = request.params.get("max_parallel")
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MOST_PARALLEL:
        return Result(
            EXIT_BAD_INPUT, f"--max-parallel {value!r} is not allowed: give a whole number from 1 to {MOST_PARALLEL:,}"
        )
    before = holder.requested_parallel()
    if value == before:
        return Result(EXIT_OK, f"backfill {holder.store.id} has --max-parallel {value} already: nothing changed")
    control = read_control(holder.store.directory)
    holder.before_write()
    effect = holder.set_parallel(value)
    try:
        setting = Setting(value, request.requested_by, now_text(), request.reason)
        write_control(holder.store.directory, replace(control, max_parallel=setting))
        holder.before_write()
        audit.append(
            holder.store.directory,
            [
                _line(
                    request,
                    holder.store,
                    holder.applied_by,
                    action="SET",
                    from_status=f"max-parallel {before}",
                    to_status=f"max-parallel {value}",
                )
            ],
        )
    except BaseException:
        holder.set_parallel(before)  # not recorded: the run goes on as before
        raise
    return Result(EXIT_OK, f"backfill {holder.store.id}: --max-parallel {before} → {value}; {effect}", 1)


def _stop(request: Request, holder: Holder) -> Result:
    """``backfill cancel ID --ids P``: stop running partitions now, each recorded cancelled (resumable); the
    rest of the backfill goes on. Only a running partition can be stopped: anything else is refused whole."""
    indices = sorted({int(index) for index in request.params.get("indices") or ()})
    if not indices:
        return Result(EXIT_BAD_INPUT, "name the running partitions to stop (--ids)")
    if not holder.live:
        return Result(
            EXIT_REFUSED,
            f"no executor runs backfill {holder.store.id}: no partition of it runs, nothing to stop "
            "(one still recorded running is settled by backfill reconcile or --continue)",
        )
    running = holder.running()
    idle = [index for index in indices if index not in running]
    if idle:
        shown = ", ".join(
            f"{holder.spec.ids.of(*_bounds(holder, index))[:12]} ({holder.board.status(index).label})"
            for index in idle[:3]
        )
        more = f" and {len(idle) - 3} more" if len(idle) > 3 else ""
        return Result(
            EXIT_REFUSED,
            f"partition {shown}{more} of backfill {holder.store.id} is not running: only a running partition can "
            "be stopped (backfill mark changes one that is not): nothing was stopped",
        )
    ids = [holder.spec.ids.of(*_bounds(holder, index)) for index in indices]
    lines = [
        _line(
            request,
            holder.store,
            holder.applied_by,
            partition_id=partition_id,
            action="CANCEL",
            from_status="running",
            to_status=RecordStatus.CANCELLED,
        )
        for partition_id in ids
    ]
    holder.before_write()
    audit.append(holder.store.directory, lines)
    which = f"partition {ids[0][:12]}" if len(ids) == 1 else f"{len(ids)} partitions"
    holder.stop_partitions(indices, f"stopped {which} by {request.requested_by}: {request.reason}")
    return Result(
        EXIT_OK,
        f"{which} of backfill {holder.store.id} stopping: recorded cancelled once it has exited; the rest goes on, "
        "and --continue runs it again",
        len(indices),
    )


def reopen_for_continue(store: StateStore, reason: str, requested_by: str, applied_by: str) -> None:
    """A ``--continue`` given its own reason opens a backfill ended by a mark or a cancel (under the lock)."""
    request = Request("reopen", reason, requested_by, now_text())
    audit.append(store.directory, _reopen(request, store, applied_by, read_control(store.directory), lambda: None))
