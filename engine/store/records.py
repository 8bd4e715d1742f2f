"""Partition records: ``partitions/<partition-id>.json``, one per partition that has been attempted.

A record holds the interval (as text and as integer microseconds, so reading
never parses dates), the status, and every attempt. Reading is strict: a file
that does not parse, does not belong to the plan, or has an unknown status is
an error naming the file.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

import orjson

from engine.base.errors import StateUnreadable
from engine.dates.formatting import InstantFormatter
from engine.dates.plan import Interval, Plan
from engine.store.status import Status

RECORD_FORMAT = 1


class RecordStatus(StrEnum):
    """What a record on disk says: a partition's status (``queued`` … ``skipped``, the labels of
    :class:`Status`) or an attempt's (``running`` … ``lost``)."""

    QUEUED = "queued"
    STARTING = "starting"  # an attempt recorded before its child starts (write-ahead): it may never have started
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    SKIPPED = "skipped"
    LOST = "lost"


# ``lost``: an attempt whose executor's lease expired while it ran, or whose executor died while starting it:
# its outcome is uncertain (its work may have committed, or it may never have started). ``skipped``: only a mark
# gives it. A ``mark`` attempt has no child: an operator said so.
ATTEMPT_STATUSES = tuple(s for s in RecordStatus if s is not RecordStatus.QUEUED)
PARTITION_STATUSES = tuple(s for s in RecordStatus if s not in (RecordStatus.LOST, RecordStatus.STARTING))
LIVE_ATTEMPT_STATUSES = (RecordStatus.STARTING, RecordStatus.RUNNING)  # an owner that is gone left these open


# A child's start time (boot time in whole seconds plus clock ticks) against the launch's wall time: a process
# that started this much before its attempt was launched cannot be its child.
LAUNCH_SLACK = 2.0


def _seconds_of(text: str) -> float | None:
    from datetime import datetime

    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except (ValueError, AttributeError):
        return None


@dataclass(kw_only=True)
class Attempt:
    run_id: str
    status: RecordStatus
    started_at: str
    finished_at: str | None = None
    exit_code: int | None = None
    error: str | None = None
    log: str | None = None  # path relative to the backfill directory
    pid: int | None = None
    pid_started: float | None = None  # process start time (psutil), so a reused PID is never signalled
    pid_birth: str | None = None  # "<boot id>:<start ticks>": the same identity, exact whatever the clock does
    generation: int = 0
    duration: float | None = None  # seconds, once finished
    launcher: str = "exec"  # "warm": ``pid`` is the runner that served this attempt (and others)
    verification: dict[str, Any] | None = None  # what verification found after the child exited 0
    kind: str = "run"  # "mark": an operator's mark, no child ran
    rows: int | None = None  # a mark's rows loaded by hand (--rows)
    asset: str | None = None  # a mark of one asset of a pipeline partition (--asset)
    by: str | None = None  # who marked (user@host)
    remote: dict[str, Any] | None = None  # a Dask attempt: {scheduler or cluster, worker, host, pgid}
    # An asset-level resume of a pipeline partition: the assets this attempt ran, and those it took from an
    # earlier attempt or an operator's asset mark (name → that attempt's run ID). None: the whole selection ran.
    assets: list[str] | None = None
    carried: dict[str, str] | None = None
    split: str | None = None  # this failure split its partition: how ("split on timeout into 12h0m0s + 12h0m0s")
    row_changes: dict[str, Any] | None = None  # a pipeline attempt: table → rows added, removed, changed (diff.md)

    def child(self) -> tuple[int, float, str | None] | None:
        """The (PID, start time, birth) of this attempt's own child as recorded, when the record can name one at all: a
        process that started before the attempt was launched is not its child, whatever the record says (a warm
        runner serves many attempts and predates most; a Dask child is on another machine: neither is judged
        here). Only this identity, verified again, is ever signalled."""
        if self.pid is None or self.pid_started is None or self.launcher == "dask":
            return None
        if self.launcher != "warm":
            launched = _seconds_of(self.started_at)
            if launched is not None and self.pid_started < launched - LAUNCH_SLACK:
                return None
        return self.pid, self.pid_started, self.pid_birth

    def to_json(self) -> dict[str, Any]:
        extra = {"kind": self.kind, "rows": self.rows, "asset": self.asset, "by": self.by} if self.kind != "run" else {}
        if self.remote is not None:
            extra = extra | self.remote
        if self.assets is not None:
            extra = extra | {"assets": self.assets, "carried": self.carried}
        if self.split is not None:
            extra = extra | {"split": self.split}
        if self.row_changes is not None:
            extra = extra | {"row_changes": self.row_changes}
        return extra | {
            "run_id": self.run_id,
            "status": self.status,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "exit_code": self.exit_code,
            "error": self.error,
            "log": self.log,
            "pid": self.pid,
            "pid_started": self.pid_started,
            "pid_birth": self.pid_birth,
            "generation": self.generation,
            "duration": self.duration,
            "launcher": self.launcher,
            "verification": self.verification,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Attempt:
        return cls(
            run_id=data["run_id"],
            status=data["status"],
            started_at=data["started_at"],
            finished_at=data.get("finished_at"),
            exit_code=data.get("exit_code"),
            error=data.get("error"),
            log=data.get("log"),
            pid=data.get("pid"),
            pid_started=data.get("pid_started"),
            pid_birth=data.get("pid_birth"),
            generation=data.get("generation", 0),
            duration=data.get("duration"),
            launcher=data.get("launcher", "exec"),
            verification=data.get("verification") if isinstance(data.get("verification"), dict) else None,
            kind=data.get("kind", "run"),
            rows=data.get("rows"),
            asset=data.get("asset"),
            by=data.get("by"),
            remote={k: data[k] for k in ("scheduler", "cluster", "worker", "host", "pgid") if k in data} or None,
            assets=_names(data.get("assets")),
            carried=_carried(data.get("carried")),
            split=data.get("split") if isinstance(data.get("split"), str) else None,
            row_changes=data.get("row_changes") if isinstance(data.get("row_changes"), dict) else None,
        )


def _names(value: Any) -> list[str] | None:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else None


def _carried(value: Any) -> dict[str, str] | None:
    if not isinstance(value, dict):
        return None
    return {k: v for k, v in value.items() if isinstance(k, str) and isinstance(v, str)}


@dataclass
class PartitionRecord:
    id: str
    index: int
    start: str
    end: str
    start_us: int
    end_us: int
    status: str
    attempts: list[Attempt] = field(default_factory=list)
    # A partition that split (docs/splitting.md): its halves' IDs and intervals. A half's record lives in splits/
    # and names its ``parent``; its ``index`` is the plan partition it is part of.
    children: list[SplitChild] | None = None
    parent: str | None = None
    leaf_reason: str | None = None  # a split node failed or cancelled: the reason of its first such leaf

    @property
    def is_split(self) -> bool:
        return bool(self.children)

    @property
    def reason(self) -> str | None:
        """Why it ended as it did: its last attempt's error, or for a split node its first failed leaf's."""
        if self.is_split:
            return self.leaf_reason
        return self.attempts[-1].error if self.attempts else None

    @classmethod
    def fresh(cls, partition_id: str, interval: Interval, formatter: InstantFormatter, status: str) -> PartitionRecord:
        """The record of a partition never attempted before (its first attempt or mark is appended next)."""
        start, end = interval.start, interval.end
        return cls(partition_id, interval.index, formatter.format(start), formatter.format(end), start, end, status)

    def to_bytes(self) -> bytes:
        return orjson.dumps(
            {
                "format": RECORD_FORMAT,
                "id": self.id,
                "index": self.index,
                "start": self.start,
                "end": self.end,
                "start_us": self.start_us,
                "end_us": self.end_us,
                "status": self.status,
                "attempts": [attempt.to_json() for attempt in self.attempts],
            }
            | ({"children": [child.to_json() for child in self.children]} if self.children else {})
            | ({"parent": self.parent} if self.parent is not None else {})
            | ({"leaf_reason": self.leaf_reason} if self.leaf_reason is not None else {})
        )


@dataclass(frozen=True)
class SplitChild:
    """One half of a split partition, as its parent's record lists it."""

    id: str
    start: str
    end: str
    start_us: int
    end_us: int

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "start": self.start, "end": self.end, "start_us": self.start_us, "end_us": self.end_us}

    @classmethod
    def from_json(cls, data: Any, path: Path) -> SplitChild:
        if not isinstance(data, dict) or not all(_is_int(data.get(k)) for k in ("start_us", "end_us")):
            raise StateUnreadable(f"partition file {path}: a child {data!r} is not an ID with an interval")
        if not isinstance(data.get("id"), str) or not data["id"]:
            raise StateUnreadable(f"partition file {path}: a child {data!r} has no ID")
        return cls(data["id"], str(data.get("start", "")), str(data.get("end", "")), data["start_us"], data["end_us"])


def read_record(path: Path, plan: Plan, partition_id_of) -> PartitionRecord:
    """Parse and verify one record against the plan; anything wrong is :class:`StateUnreadable`."""
    record = _parse(path)
    index = record.index
    if not isinstance(index, int) or not 0 <= index < len(plan):
        raise StateUnreadable(f"partition file {path} has index {index!r}, outside this backfill's plan of {len(plan)}")
    interval = plan.interval(index)
    expected_id = partition_id_of(interval.start, interval.end)
    if (
        (record.start_us, record.end_us) != (interval.start, interval.end)
        or record.id != expected_id
        or path.stem != expected_id
        or record.parent is not None
    ):
        raise StateUnreadable(
            f"partition file {path} does not belong to this backfill's plan (its interval or ID does not match "
            f"partition {index})"
        )
    return _checked(record, path)


def read_half(path: Path, parent: PartitionRecord, child: SplitChild) -> PartitionRecord:
    """Parse one half's record and verify it against what its parent's record lists."""
    record = _parse(path)
    if (
        record.parent != parent.id
        or record.index != parent.index
        or (record.id, record.start_us, record.end_us) != (child.id, child.start_us, child.end_us)
        or path.stem != child.id
    ):
        raise StateUnreadable(
            f"partition file {path} is not the half {child.id[:12]} of partition {parent.id[:12]} its parent lists"
        )
    return _checked(record, path)


def _parse(path: Path) -> PartitionRecord:
    try:
        with open(path, "rb") as handle:
            data = orjson.loads(handle.read())
    except OSError as error:
        raise StateUnreadable(f"cannot read partition file {path}: {error.strerror}") from None
    except orjson.JSONDecodeError as error:
        raise StateUnreadable(
            f"partition file {path} is not valid JSON ({error}): move it away to let the partition run again"
        ) from None
    try:
        index, start_us, end_us, status = data["index"], data["start_us"], data["end_us"], data["status"]
        record_id = data["id"]
        if not isinstance(data["attempts"], list):
            raise TypeError("attempts")
        for number, attempt in enumerate(data["attempts"]):
            _check_attempt(attempt, path, number)
        attempts = [Attempt.from_json(a) for a in data["attempts"]]
    except (KeyError, TypeError) as error:
        raise StateUnreadable(
            f"partition file {path} lacks the field {error}: it was not written by backfill"
        ) from None
    children = data.get("children")
    if children is not None and (not isinstance(children, list) or len(children) != 2):
        raise StateUnreadable(f"partition file {path}: children is {children!r}, not the two halves of a split")
    parent = data.get("parent")
    if parent is not None and not isinstance(parent, str):
        raise StateUnreadable(f"partition file {path}: parent is {parent!r}, not a partition ID")
    return PartitionRecord(
        record_id,
        index,
        data.get("start", ""),
        data.get("end", ""),
        start_us,
        end_us,
        status,
        attempts,
        [SplitChild.from_json(child, path) for child in children] if children is not None else None,
        parent,
        data.get("leaf_reason") if isinstance(data.get("leaf_reason"), str) else None,
    )


def _checked(record: PartitionRecord, path: Path) -> PartitionRecord:
    """Its statuses known, and attempts behind any status but queued (a split partition's are its halves')."""
    status = record.status
    if status not in PARTITION_STATUSES:
        raise StateUnreadable(
            f"partition file {path} has unknown status {status!r} (known: {', '.join(PARTITION_STATUSES)})"
        )
    for attempt in record.attempts:
        if attempt.status not in ATTEMPT_STATUSES:
            raise StateUnreadable(f"partition file {path} has an attempt with unknown status {attempt.status!r}")
    if status != RecordStatus.QUEUED and not record.attempts and not record.is_split:
        raise StateUnreadable(
            f"partition file {path}: status is {status!r} with no attempts: only a queued partition has none "
            "(every run and every mark is an attempt)"
        )
    return record


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_birth(value: Any) -> bool:
    if not isinstance(value, str):
        return False
    boot, _, ticks = value.rpartition(":")
    return boot != "" and ticks.isascii() and ticks.isdigit()


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


# What each attempt field may hold; a record that says otherwise is not trusted for anything, least of all a
# signal: a PID is a process above 1 (PID 1 is never a child of ours) and comes with its start time.
_ATTEMPT_FIELDS: tuple[tuple[str, Any, str], ...] = (
    ("run_id", lambda v: isinstance(v, str) and v != "", "a run ID"),
    ("started_at", lambda v: isinstance(v, str), "a time"),
    ("finished_at", lambda v: v is None or isinstance(v, str), "a time or null"),
    ("pid", lambda v: v is None or (_is_int(v) and v > 1), "a process ID above 1 or null"),
    ("pid_started", lambda v: v is None or (_is_number(v) and v >= 0), "a process start time in seconds or null"),
    ("pid_birth", lambda v: v is None or _is_birth(v), "a process birth (boot ID:start ticks) or null"),
    ("exit_code", lambda v: v is None or _is_int(v), "an exit code or null"),
    ("generation", lambda v: _is_int(v) and v >= 0, "a generation number"),
    ("duration", lambda v: v is None or _is_number(v), "seconds or null"),
    ("kind", lambda v: v in ("run", "mark", "rerun"), "run, mark or rerun"),
    ("rows", lambda v: v is None or (_is_int(v) and v >= 0), "a count of rows or null"),
)
_ATTEMPT_DEFAULTS = {"generation": 0, "kind": "run"}


def _check_attempt(data: Any, path: Path, number: int) -> None:
    """One line naming the file and the field when an attempt holds what backfill never writes."""
    if not isinstance(data, dict):
        raise StateUnreadable(f"partition file {path}: attempts[{number}] is {data!r}, not an object")
    for name, valid, accepted in _ATTEMPT_FIELDS:
        value = data.get(name, _ATTEMPT_DEFAULTS.get(name))
        if name in ("run_id", "started_at") and name not in data:
            raise KeyError(f"attempts[{number}].{name}")
        if not valid(value):
            raise StateUnreadable(f"partition file {path}: attempts[{number}].{name} is {value!r}: {accepted}")


def status_of(record: PartitionRecord) -> Status:
    return Status.parse(record.status)
