"""Failures grouped by what went wrong (``failure_signature``): a thousand failed partitions are usually three
problems.

Through a trusted record index, the signatures were computed when the records were written and the reasons are
read from ``reasons.log`` (``reason_log``); only the partitions the index cannot vouch for (a write in flight, a
bulk mark not folded in yet) have their records read. Without one, every failed record is read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from engine.base.errors import StateUnreadable
from engine.spec.backfill_spec import BackfillSpec
from engine.store.failure_signature import NO_REASON, signature
from engine.store.indexed_reasons import IndexedReasons
from engine.store.state_store import StateStore
from engine.store.status import Status, StatusBoard

GROUPS_SHOWN = 50  # a record, a JSON document or a summary names at most this many groups (and says how many)


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
    found: dict[str, list[int]] = {}
    examples: dict[str, str | None] = {}
    for index, reason in reasons:
        key = signature(reason)
        if key not in found:
            found[key], examples[key] = [], reason
        found[key].append(index)
    return _groups(found, lambda key, _first: examples[key])


def _groups(found: dict[str, list[int]], example_of: Callable[[str, int], str | None]) -> list[FailureGroup]:
    """Groups of the partitions ``found`` under each signature; ``example_of(signature, first partition)`` is the
    reason shown for each."""
    groups = []
    for key, indices in found.items():
        ordered = sorted(indices)
        example = (example_of(key, ordered[0]) or "").strip() or NO_REASON
        groups.append(FailureGroup(key, example, len(ordered), ordered[0], ordered[-1], tuple(ordered)))
    return sorted(groups, key=lambda group: (-group.count, group.first))


def _record_reason(spec: BackfillSpec, store: StateStore, index: int) -> str | None:
    """Partition ``index``'s latest attempt's reason, read from its record (a record that cannot be read gives its
    own problem as the reason: it is a failure to look at too)."""
    interval = spec.plan.interval(index)
    try:
        record = store.read_record(spec.ids.of(interval.start, interval.end), spec.plan, spec.ids.of)
    except StateUnreadable as problem:
        return str(problem)
    return record.reason if record is not None else None


def failed_reasons(
    spec: BackfillSpec, store: StateStore, board: StatusBoard, *statuses: Status
) -> Iterator[tuple[int, str | None]]:
    """Each failed partition's (or each partition of ``statuses``, status after status) index and its latest
    attempt's reason, in plan order: from the index's reason file where it vouches for the partition, else from the
    record. The index is read once, and not at all when no partition has those statuses."""
    wanted = [status for status in statuses or (Status.FAILED,) if board.count(status)]
    if not wanted:
        return  # none: the index is not read at all (40 MB at a million partitions)
    indexed = IndexedReasons.of(store, len(spec.plan))
    for status in wanted:
        for index in board.each(status):
            known = indexed is not None and indexed.knows(index, status)
            found, reason = indexed.reason(index) if known else (False, None)
            yield index, reason if found else _record_reason(spec, store, index)


def failure_groups(spec: BackfillSpec, store: StateStore, board: StatusBoard) -> list[FailureGroup]:
    """The backfill's failed partitions, grouped by signature: the signatures the index holds, the records read
    only where it cannot vouch (and for no example it holds)."""
    if not board.count(Status.FAILED):
        return []
    indexed = IndexedReasons.of(store, len(spec.plan))
    if indexed is None:  # not to be trusted: every failed record is read (and the index not again)
        return group_failures((index, _record_reason(spec, store, index)) for index in board.each(Status.FAILED))
    found: dict[str, list[int]] = {}
    read: dict[int, str | None] = {}
    for index in board.each(Status.FAILED):
        if indexed.knows(index, Status.FAILED):
            key = indexed.signature(index)
        else:
            read[index] = _record_reason(spec, store, index)
            key = signature(read[index])
        found.setdefault(key, []).append(index)

    def example_of(key: str, first: int) -> str | None:
        if first in read:
            return read[first]
        known, reason = indexed.reason(first)
        return reason if known else _record_reason(spec, store, first)

    return _groups(found, example_of)


def groups_sentence(groups: list[FailureGroup], *, shown: int = 3) -> str | None:
    """``3 kinds of failure: mid.orders failed: … (412), … (7), … (1)``; None without failures."""
    if not groups:
        return None
    kinds = f"{len(groups)} kind{'s' if len(groups) != 1 else ''} of failure"
    listed = "; ".join(f"{group.signature} ({group.count:,})" for group in groups[:shown])
    more = f"; and {len(groups) - shown:,} more" if len(groups) > shown else ""
    return f"{kinds}: {listed}{more}"
