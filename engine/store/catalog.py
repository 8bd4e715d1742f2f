"""The saved backfills of a state root, each summarized: inputs, counts per status, activity, state.

Counts come from ``.summary.json``, a derived cache stamped with the
``partitions/`` directory's modification time. Every record write renames a
file into that directory, which changes the time, so a stale cache is always
noticed and recomputed by reading the records (strictly). The executor writes
the cache when it finishes and every few seconds while it runs, so listing a
backfill of a million partitions reads two small files, not a million.
"""

from __future__ import annotations

import contextlib
import socket
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any

import orjson

from engine.base.atomic import write_atomic
from engine.base.errors import StateUnreadable
from engine.store import audit
from engine.store.control import Control, read_control
from engine.store.lease import read_lease
from engine.store.manifest import spec_of
from engine.store.ownership import children_still_run
from engine.store.record_index import stamp_of
from engine.store.records import PartitionRecord, RecordStatus
from engine.store.state_store import StateStore, saved_backfill_dirs
from engine.store.status import STATUS_NAMES, Status, StatusBoard

SUMMARY = ".summary.json"


class ListedState(StrEnum):
    """What ``backfill list`` says of a saved backfill."""

    COMPLETE = "complete"
    INCOMPLETE = "incomplete"
    RUNNING_NOW = "running"
    PAUSED = "paused"
    UNREADABLE = "unreadable"  # its manifest, a partition file or its control file cannot be read: the error says why


COMPLETE, INCOMPLETE, RUNNING_NOW, PAUSED, UNREADABLE = ListedState


def partitions_stamp(store: StateStore) -> int:
    """The ``partitions/`` directory's time: every record write moves it (the record index stamps the same)."""
    return stamp_of(store.partitions)


def write_summary(store: StateStore, board: StatusBoard, stamp: int) -> None:
    """Cache the counts of ``board`` as of the directory time ``stamp`` (taken before the board was read)."""
    counts = board.counts()
    data = {"format": 1, "partitions_mtime_ns": stamp, "counts": counts, "check": _check(store, stamp, counts)}
    with contextlib.suppress(OSError):  # a cache: a read-only store just recomputes next time
        write_atomic(store.directory / SUMMARY, orjson.dumps(data), durable=False)


def read_counts(store: StateStore, manifest: dict[str, Any]) -> dict[str, int]:
    """Counts per status, from the cache when it is current, else from every record (then cached)."""
    stamp = partitions_stamp(store)
    spec = spec_of(manifest)
    try:
        cached = orjson.loads((store.directory / SUMMARY).read_bytes())
        if cached.get("format") == 1 and cached.get("partitions_mtime_ns") == stamp:
            counts = {name: cached["counts"].get(name, 0) for name in STATUS_NAMES}
            if cached.get("check") == _check(store, stamp, counts) and _plausible(counts, len(spec.plan)):
                return counts
    except (OSError, orjson.JSONDecodeError, AttributeError, KeyError, TypeError, ValueError):
        pass  # no cache, or one that cannot be read (a directory in its place, no permission): recompute
    board, _ = store.load_board(spec.plan, spec.ids.of)
    write_summary(store, board, stamp)  # the cache is optional: a read-only store is read, never written
    return board.counts()


def _check(store: StateStore, stamp: int, counts: dict[str, Any]) -> str:
    """Binds the cached counts to the directory they summarise: an edited, copied or forged cache fails it."""
    import hashlib

    text = orjson.dumps({"id": store.id, "stamp": stamp, "counts": counts}, option=orjson.OPT_SORT_KEYS)
    return hashlib.sha256(b"backfill summary 1\0" + text).hexdigest()[:32]


def _plausible(counts: dict[str, Any], total: int) -> bool:
    """Whole non-negative counts adding up to the plan (the digest already binds them to this directory)."""
    whole = all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in counts.values())
    return whole and sum(counts.values()) == total


def is_running(store: StateStore) -> bool:
    """Whether an executor holds the backfill's lock right now."""
    return store.lock_held_elsewhere()


def owner_gone(store: StateStore) -> bool:
    """Whether no executor can be running the backfill: none holds its lock on this host (a frozen one still
    does), no child of one holds ``.children.lock``, and no other host holds a lease on it that runs, with that
    host's grace. Records still saying ``running`` were then left by an executor that ended without recording
    their outcome (a full disk, a crash): they are interrupted, whatever the records say."""
    if is_running(store):
        return False
    if children_still_run(store):
        return False  # a child of a dead executor still runs (it holds .children.lock): its partition runs too
    lease = read_lease(store.directory)
    if lease is None or lease.host is None or lease.host == socket.gethostname():
        return True
    return time.time() >= lease.held_elsewhere_until()


def interrupted_for_reading(store: StateStore, board: StatusBoard, running: list[PartitionRecord]) -> int:
    """How readers see partitions left ``running`` by an executor that is gone: cancelled on ``board`` (never
    written: ``--continue`` settles the records); how many. None are touched while an owner may live."""
    if not running or not owner_gone(store):
        return 0
    for record in running:
        board.set(record.index, Status.CANCELLED)
    return len(running)


def interrupted_note(store: StateStore, count: int) -> str:
    """The line readers print about partitions left running by an executor that is gone."""
    return (
        f"{count} partition{'s' if count != 1 else ''} recorded running but no executor owns backfill {store.id} "
        "(its last one ended without recording their outcome: a full disk, a crash): shown cancelled; "
        f"backfill --continue {store.id} settles and resumes them"
    )


@dataclass(frozen=True)
class BackfillSummary:
    id: str
    directory: Path
    name: str
    target: str
    target_kind: str
    start: str
    end: str
    timezone: str
    partition: str
    created_at: str
    last_activity: str
    total: int
    counts: dict[str, int]
    state: str  # complete, incomplete, running, paused, cancelled, marked-succeeded, marked-failed
    error: str | None = None  # why this backfill could not be summarized
    interventions: int = 0  # interventions in its audit log (whole lines)
    torn_interventions: int = 0  # lines of its audit log that cannot be read (a crash while appending)
    decision: str | None = None  # who paused, cancelled or marked it, when and why

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "state_dir": str(self.directory),
            "name": self.name,
            "target": self.target,
            "target_kind": self.target_kind,
            "start": self.start,
            "end": self.end,
            "timezone": self.timezone,
            "partition": self.partition,
            "created_at": self.created_at,
            "last_activity": self.last_activity,
            "total": self.total,
            "counts": self.counts,
            "state": self.state,
            "error": self.error,
            "interventions": self.interventions,
            "torn_interventions": self.torn_interventions,
            "decision": self.decision,
        }


def _text(value: Any) -> str:
    """A manifest field for display: a damaged one shows as what it is, never breaks the listing."""
    return value if isinstance(value, str) else "" if value is None else repr(value)


def _iso(nanoseconds: int) -> str:
    return datetime.fromtimestamp(nanoseconds / 1e9, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def summarize(
    store: StateStore, manifest: dict[str, Any] | None = None, counts: dict[str, int] | None = None
) -> BackfillSummary:
    """A backfill's summary; ``manifest`` and ``counts`` when the caller has read them already."""
    manifest = manifest if manifest is not None else store.read_manifest()
    target = manifest.get("target") if isinstance(manifest.get("target"), dict) else {}
    stamp = partitions_stamp(store)
    error = None
    if counts is None:
        try:
            counts = read_counts(store, manifest)
        except StateUnreadable as problem:
            counts, error = {name: 0 for name in STATUS_NAMES}, str(problem)
    counts = {name: counts.get(name, 0) for name in STATUS_NAMES}  # every status, whoever counted
    left_running = counts[Status.RUNNING.label]
    try:
        if left_running and owner_gone(store):  # see interrupted_for_reading
            cancelled = counts[Status.CANCELLED.label] + left_running
            counts = {**counts, Status.RUNNING.label: 0, Status.CANCELLED.label: cancelled}
    except StateUnreadable as problem:
        error = error or str(problem)
    total = manifest.get("partition_count", 0)
    total = total if isinstance(total, int) and not isinstance(total, bool) else 0
    try:
        control = read_control(store.directory)
    except StateUnreadable as problem:
        control, error = Control(), error or str(problem)
    decision = control.paused or control.ended
    if is_running(store):
        state = RUNNING_NOW if control.paused is None else PAUSED
    elif error is not None:  # a record or the control file cannot be read: a resume would stop on it (exit 5)
        state = UNREADABLE
    elif control.paused is not None:
        state = PAUSED
    elif control.ended is not None:
        state = (
            control.ended.status if control.ended.status == RecordStatus.CANCELLED else f"marked-{control.ended.status}"
        )
    elif counts[Status.SUCCEEDED.label] + counts[Status.SKIPPED.label] == total:
        state = COMPLETE
    else:
        state = INCOMPLETE
    attempted = sum(counts.values()) - counts[Status.QUEUED.label]
    logged = audit.count(store.directory)
    return BackfillSummary(
        id=store.id,
        directory=store.directory,
        name=_text(target.get("name")),
        target=_text(target.get("template") or target.get("path")),
        target_kind=_text(target.get("kind")),
        start=_text(manifest.get("start")),
        end=_text(manifest.get("end")),
        timezone=_text(manifest.get("timezone")),
        partition=_text(manifest.get("partition")),
        created_at=_text(manifest.get("created_at")),
        last_activity=_iso(stamp) if attempted and stamp else _text(manifest.get("created_at")),
        total=total,
        counts=counts,
        state=state,
        error=error,
        interventions=logged.readable,
        torn_interventions=logged.torn,
        decision=decision.sentence() if decision else None,
    )


def list_backfills(root: Path) -> list[BackfillSummary]:
    """Every backfill under ``root``, newest first (IDs sort by creation time)."""
    if not root.is_dir():
        return []
    directories = sorted(saved_backfill_dirs(root), reverse=True)  # one parent: by name
    return [_summarize_or_unreadable(StateStore(directory)) for directory in directories]


def _summarize_or_unreadable(store: StateStore) -> BackfillSummary:
    """A backfill whose manifest cannot be read is listed as ``unreadable`` with why, never takes the listing of
    the others down."""
    try:
        return summarize(store)
    except StateUnreadable as problem:
        return BackfillSummary(
            id=store.id,
            directory=store.directory,
            name="",
            target="",
            target_kind="",
            start="",
            end="",
            timezone="",
            partition="",
            created_at="",
            last_activity="",
            total=0,
            counts={name: 0 for name in STATUS_NAMES},
            state=UNREADABLE,
            error=str(problem),
        )
