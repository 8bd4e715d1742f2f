"""``audit.jsonl``: every intervention, one JSON object per line, appended and fsynced, never rewritten.

Appends from several processes are serialized by an ``flock`` on the file itself, so none is lost or
interleaved; each append also indexes its lines in ``audit.idx`` (:mod:`engine.store.audit_index`). A line
torn by a crash mid-append is never dropped or rewritten: the next append starts on a new line after it, and
every reader reports it with its line number.
"""

from __future__ import annotations

import fcntl
import os
import secrets
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from engine.base.atomic import FILE_MODE
from engine.store.audit_index import AUDIT, index_appended

ACTIONS = (
    "MARK",
    "STAND_IN",
    "CANCEL",
    "PAUSE",
    "RESUME",
    "REOPEN",
    "RESET",
    "RERUN",
    "IGNORE_DEPENDENCIES",
    "GATE_BYPASS",
    "RECONCILE_LOST",
    "RESTORE",
    "SET",
    "SPLIT",  # the executor split a failing partition in two (docs/splitting.md)
)
FIELDS = (
    "id",
    "backfill_id",
    "partition_id",
    "last_partition_id",  # a slice of a bulk mark: its last partition (partition_id is its first)
    "partitions",  # how many partitions a slice holds (consecutive in the plan); None for one partition
    "asset",
    "action",
    "from_status",
    "to_status",
    "target_count",
    "previous_count",
    "previous_message",
    "reason",
    "requested_by",
    "requested_at",
    "applied_at",
    "applied_by",
)


def new_entry_id() -> str:
    """Sortable by time, unique across processes: ``1764540000123456-3fa2c1``."""
    return f"{time.time_ns() // 1000}-{secrets.token_hex(3)}"


def entry(**values: Any) -> dict[str, Any]:
    """An audit line with every field present (None where it does not apply) and a fresh ``id``."""
    unknown = set(values) - set(FIELDS)
    if unknown:
        raise ValueError(f"unknown audit fields: {sorted(unknown)}")
    if values.get("action") not in ACTIONS:
        raise ValueError(f"unknown audit action {values.get('action')!r}")
    line = dict.fromkeys(FIELDS)
    line.update(values)
    line["id"] = line["id"] or new_entry_id()
    return line


def bulk_entry(common: dict[str, Any], stem: str, number: int, **values: Any) -> dict[str, Any]:
    """One of many lines made by one intervention at one moment: ``common`` holds the fields they share, and
    the IDs share one stem from :func:`new_entry_id` (``<µs>-<6 hex>-<n>``), which keeps a mark of 100,000
    partitions fast."""
    line = dict.fromkeys(FIELDS)
    line.update(common)
    line.update(values)
    line["id"] = f"{stem}-{number}"
    return line


def subject(line: dict[str, Any]) -> str:
    """What an entry is about, as a screen shows it: ``3fa2c1d0e4b5``, a slice of a bulk mark as
    ``3fa2c1d0e4b5 +99,999`` (its first partition and how many follow it), an asset after it, or ``backfill``."""
    what = str(line.get("partition_id") or "backfill")[:12]
    count = line.get("partitions")
    if isinstance(count, int) and count > 1:
        what += f" +{count - 1:,}"
    if line.get("asset"):
        what += f" {line['asset']}"
    return what


def append(directory: Path, entries: Iterable[dict[str, Any]]) -> int:
    """Append ``entries`` to ``directory/audit.jsonl`` in one locked write, fsynced; returns how many."""
    data = b"".join(orjson.dumps(line) + b"\n" for line in entries)
    if not data:
        return 0
    descriptor = os.open(directory / AUDIT, os.O_RDWR | os.O_APPEND | os.O_CREAT, FILE_MODE)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        size = os.fstat(descriptor).st_size
        if size and os.pread(descriptor, 1, size - 1) != b"\n":
            data = b"\n" + data  # a torn last line stays as it is: ours starts on a line of its own
        view = memoryview(data)
        while view:
            view = view[os.write(descriptor, view) :]
        os.fsync(descriptor)
        index_appended(descriptor, directory)
    finally:
        os.close(descriptor)  # releases the lock
    return data.count(b"\n") - (1 if data.startswith(b"\n") else 0)


@dataclass
class AuditLog:
    entries: list[dict[str, Any]] = field(default_factory=list)
    torn: list[int] = field(default_factory=list)  # 1-based numbers of lines that are not whole JSON objects

    def problem(self, path: Path) -> str | None:
        if not self.torn:
            return None
        lines = ", ".join(str(number) for number in self.torn[:5])
        return (
            f"{path}: line{'s' if len(self.torn) > 1 else ''} {lines} {'are' if len(self.torn) > 1 else 'is'} "
            "torn (a crash while appending); kept as written, every other line is read"
        )


def read(directory: Path) -> AuditLog:
    """Every line of the audit log (none when it does not exist); torn lines are counted, not dropped."""
    try:
        data = (directory / AUDIT).read_bytes()
    except FileNotFoundError:
        return AuditLog()
    log = AuditLog()
    for number, line in enumerate(data.split(b"\n"), start=1):
        if not line.strip():
            continue
        try:
            value = orjson.loads(line)
        except orjson.JSONDecodeError:
            log.torn.append(number)
            continue
        if isinstance(value, dict):
            log.entries.append(value)
        else:
            log.torn.append(number)
    return log


@dataclass(frozen=True)
class AuditCount:
    """How many lines of the audit log are interventions (whole JSON objects) and how many are torn."""

    readable: int = 0
    torn: int = 0


_COUNTED: dict[str, tuple[int, AuditCount]] = {}  # path → (bytes up to the last whole line counted, their count)


def count(directory: Path) -> AuditCount:
    """The interventions and torn lines of the audit log, judged as :func:`read` judges them, so ``list`` and
    ``show`` say the same. The log is append-only, so only the lines added since the last count in this process
    are parsed (the browser lists every few seconds); an unterminated last line is judged, and read again next
    time."""
    path = directory / AUDIT
    try:
        size = os.stat(path).st_size
    except FileNotFoundError:
        return AuditCount()
    counted, total = _COUNTED.get(str(path), (0, AuditCount()))
    if size < counted:  # not the file we counted (replaced by a restore of the directory): start again
        counted, total = 0, AuditCount()
    tail = b""
    if size > counted:
        with open(path, "rb") as handle:
            handle.seek(counted)
            added = handle.read(size - counted)
        whole, _, tail = added.rpartition(b"\n")
        readable, torn = _judge(whole.split(b"\n"))
        total = AuditCount(total.readable + readable, total.torn + torn)
        counted += len(added) - len(tail)
        _COUNTED[str(path)] = (counted, total)
    readable, torn = _judge([tail])  # an unterminated last line: judged now, read again next time
    return AuditCount(total.readable + readable, total.torn + torn)


def _judge(lines: list[bytes]) -> tuple[int, int]:
    readable = torn = 0
    for line in lines:
        if not line.strip():
            continue
        try:
            whole = isinstance(orjson.loads(line), dict)
        except orjson.JSONDecodeError:
            whole = False
        readable, torn = (readable + 1, torn) if whole else (readable, torn + 1)
    return readable, torn
