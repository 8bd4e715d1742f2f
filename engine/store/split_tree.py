"""A split partition as a tree of records: the partition's own, then its halves', recursively.

The partition's record (``partitions/``) lists its two halves; each half has a record of its own in ``splits/``
once it has been attempted (one never attempted reads as queued), and lists its own halves when it split in turn.
Only the leaves run; a node's status is what its leaves add up to (:func:`aggregate`). See docs/splitting.md.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from engine.base.errors import StateUnreadable
from engine.store.records import PartitionRecord, RecordStatus, SplitChild, read_half

SPLITS = "splits"


@dataclass(eq=False)  # a node is itself: comparing trees field by field would walk parent ↔ halves forever
class SplitNode:
    """One node of a split partition: its record, its halves once it split, and its place (``path``: "" the
    partition, "0" and "1" its halves, "01" the second half of the first, …)."""

    record: PartitionRecord
    path: str = ""
    halves: list[SplitNode] = field(default_factory=list)
    parent: SplitNode | None = field(default=None, repr=False)

    @property
    def depth(self) -> int:
        return len(self.path)

    def leaves(self) -> Iterator[SplitNode]:
        if not self.halves:
            yield self
            return
        for half in self.halves:
            yield from half.leaves()

    def nodes(self) -> Iterator[SplitNode]:
        yield self
        for half in self.halves:
            yield from half.nodes()

    def ancestors(self) -> Iterator[SplitNode]:
        node = self.parent
        while node is not None:
            yield node
            node = node.parent

    def find(self, record_id: str) -> SplitNode | None:
        return next((node for node in self.nodes() if node.record.id == record_id), None)

    def counts(self) -> tuple[int, int]:
        """(leaves succeeded or skipped, leaves): what ``⑂ 2/4`` shows."""
        leaves = list(self.leaves())
        done = sum(1 for leaf in leaves if leaf.record.status in (RecordStatus.SUCCEEDED, RecordStatus.SKIPPED))
        return done, len(leaves)

    def deepest(self) -> int:
        return max(leaf.depth for leaf in self.leaves())


def aggregate(statuses: list[str]) -> RecordStatus:
    """A split node's status from its leaves': running, else failed, cancelled or queued when any leaf is, else
    skipped when all were, else succeeded."""
    for status in (RecordStatus.RUNNING, RecordStatus.FAILED, RecordStatus.CANCELLED, RecordStatus.QUEUED):
        if status in statuses:
            return status
    if statuses and all(s == RecordStatus.SKIPPED for s in statuses):
        return RecordStatus.SKIPPED
    return RecordStatus.SUCCEEDED


def settle_node(node: SplitNode, status: str | None = None) -> bool:
    """A split node's status (``status``, else what its leaves add up to) and reason (its first failed, else
    cancelled, leaf's); whether either changed."""
    leaves = [leaf.record for leaf in node.leaves()]
    status = status or aggregate([leaf.status for leaf in leaves])
    reason = None
    for wanted in (RecordStatus.FAILED, RecordStatus.CANCELLED):
        if status == wanted:
            reason = next((leaf.reason for leaf in leaves if leaf.status == wanted), None)
    record = node.record
    changed = (record.status, record.leaf_reason) != (status, reason)
    record.status, record.leaf_reason = status, reason
    return changed


def fresh_half(parent: PartitionRecord, child: SplitChild) -> PartitionRecord:
    """The record of a half never attempted: queued, with no attempt."""
    return PartitionRecord(
        child.id,
        parent.index,
        child.start,
        child.end,
        child.start_us,
        child.end_us,
        RecordStatus.QUEUED,
        parent=parent.id,
    )


def half_path(splits: Path, half_id: str) -> Path:
    return splits / f"{half_id}.json"


def read_tree(splits: Path, record: PartitionRecord, path: str = "", parent: SplitNode | None = None) -> SplitNode:
    """The tree under ``record`` (a partition's or a half's), every half's record read and checked against its
    parent's list (a half never attempted is a fresh queued record)."""
    node = SplitNode(record, path, parent=parent)
    for number, child in enumerate(record.children or []):
        file = half_path(splits, child.id)
        try:
            half = read_half(file, record, child)
        except StateUnreadable:
            if file.exists():
                raise
            half = fresh_half(record, child)
        node.halves.append(read_tree(splits, half, path + str(number), node))
    return node
