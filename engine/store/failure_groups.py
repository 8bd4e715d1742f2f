"""Failures grouped by what went wrong: a thousand failed partitions are usually three problems.

A failure's signature is its reason — the failing asset and its error, or the child's last words — with what
varies from partition to partition written as placeholders: dates and times, UUIDs and long hexadecimal IDs,
paths and numbers. Partitions whose reasons share a signature failed the same way, whatever day they cover.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from engine.base.errors import StateUnreadable
from engine.spec.backfill_spec import BackfillSpec
from engine.store.state_store import StateStore
from engine.store.status import Status, StatusBoard

NO_REASON = "no reason recorded"
GROUPS_SHOWN = 50  # a record, a JSON document or a summary names at most this many groups (and says how many)

# In this order: a date's digits are not numbers of their own, nor a UUID's hex an ID of its own.
_PLACEHOLDERS = (
    (
        re.compile(
            r"\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?)?(?:Z|[+-]\d{2}(?::?\d{2})?)?"
            r"|\b\d{2}:\d{2}:\d{2}(?:\.\d+)?\b"
        ),
        "<time>",
    ),
    (re.compile(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"), "<id>"),
    (re.compile(r"(?<![\w/.])(?:~|\.{1,2})?/[^\s'\"():,;]+"), "<path>"),
    (re.compile(r"\b(?=[0-9a-fA-F]*\d)(?=[0-9a-fA-F]*[a-fA-F])[0-9a-fA-F]{8,}\b"), "<id>"),
    (re.compile(r"(?<![\w.])[-+]?\d+(?:[.,]\d+)*\b"), "<n>"),
)
_SPACES = re.compile(r"\s+")


def signature(reason: str | None) -> str:
    """``mid.orders failed: Conversion Error at line <n> in <path>``: the reason with what varies left out."""
    text = (reason or "").strip()
    if not text:
        return NO_REASON
    for pattern, placeholder in _PLACEHOLDERS:
        text = pattern.sub(placeholder, text)
    return _SPACES.sub(" ", text)


@dataclass(frozen=True)
class FailureGroup:
    """Partitions that failed the same way: how many, the first and last of them, and one reason as written."""

    signature: str
    example: str  # the first partition's reason, as the record holds it
    count: int
    first: int  # partition indices, in plan order
    last: int
    indices: tuple[int, ...]

    def to_json(self, spec: BackfillSpec) -> dict[str, Any]:
        def partition(index: int) -> dict[str, Any]:
            interval = spec.plan.interval(index)
            return {"index": index, "id": spec.ids.of(interval.start, interval.end)}

        return {
            "signature": self.signature,
            "example": self.example,
            "count": self.count,
            "first": partition(self.first),
            "last": partition(self.last),
        }


def group_failures(reasons: Iterable[tuple[int, str | None]]) -> list[FailureGroup]:
    """Group ``(partition index, reason)`` pairs by signature: the largest group first, then by first partition."""
    found: dict[str, tuple[str, list[int]]] = {}
    for index, reason in reasons:
        key = signature(reason)
        if key not in found:
            found[key] = ((reason or "").strip() or NO_REASON, [])
        found[key][1].append(index)
    groups = []
    for key, (example, indices) in found.items():
        ordered = sorted(indices)
        groups.append(FailureGroup(key, example, len(ordered), ordered[0], ordered[-1], tuple(ordered)))
    return sorted(groups, key=lambda group: (-group.count, group.first))


def failed_reasons(
    spec: BackfillSpec, store: StateStore, board: StatusBoard, status: Status = Status.FAILED
) -> Iterator[tuple[int, str | None]]:
    """Each failed (or ``status``) partition's index and its latest attempt's reason, in plan order (a record
    that cannot be read gives its own problem as the reason: it is a failure to look at too)."""
    index = board.find(status, 0)
    while index >= 0:
        interval = spec.plan.interval(index)
        try:
            record = store.read_record(spec.ids.of(interval.start, interval.end), spec.plan, spec.ids.of)
            reason = record.attempts[-1].error if record is not None and record.attempts else None
        except StateUnreadable as problem:
            reason = str(problem)
        yield index, reason
        index = board.find(status, index + 1)


def failure_groups(spec: BackfillSpec, store: StateStore, board: StatusBoard) -> list[FailureGroup]:
    """The backfill's failed partitions, grouped by signature."""
    return group_failures(failed_reasons(spec, store, board))


def groups_sentence(groups: list[FailureGroup], *, shown: int = 3) -> str | None:
    """``3 kinds of failure: mid.orders failed: … (412), … (7), … (1)``; None without failures."""
    if not groups:
        return None
    kinds = f"{len(groups)} kind{'s' if len(groups) != 1 else ''} of failure"
    listed = "; ".join(f"{group.signature} ({group.count:,})" for group in groups[:shown])
    more = f"; and {len(groups) - shown:,} more" if len(groups) > shown else ""
    return f"{kinds}: {listed}{more}"
