"""Partitions that split themselves when they fail (``--split-on``; docs/splitting.md).

An attempt that failed in a way a smaller window would not — our timeout stopped it, memory ran out, or its
reason matches the operator's expression — makes its partition (or half) split in two along the calendar
(:mod:`engine.dates.split`), down to ``--min-partition``. The halves run, retry and are verified like any
partition; the partition keeps its ID and interval, its record lists its halves, and its status is what its
leaves add up to. Everything a run learns of the trees it touches is kept here, per plan partition.
"""

from __future__ import annotations

import re
import signal
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import tzinfo

from engine.dates.durations import format_duration
from engine.dates.formatting import InstantFormatter
from engine.dates.split import halves, leaf_id
from engine.spec.split_policy import SplitPolicy, SplitTrigger
from engine.store.records import PartitionRecord, RecordStatus, SplitChild
from engine.store.split_tree import SplitNode, fresh_half, settle_node

# What a child says when memory ran out: Python, the C and C++ runtimes, the JVM, the shell.
_OUT_OF_MEMORY = re.compile(
    r"MemoryError|out of memory|Cannot allocate memory|std::bad_alloc|OutOfMemoryError|\bOOM\b", re.IGNORECASE
)


def trigger_of(
    policy: SplitPolicy, *, timed_out: bool, stopped: bool, exit_code: int | None, error: str | None
) -> SplitTrigger | None:
    """What, of the policy's triggers, made this failed attempt fail; None when nothing it names did. A child we
    stopped for any other reason (a cancel, a fail-fast) never splits."""
    if timed_out:
        return SplitTrigger.TIMEOUT if SplitTrigger.TIMEOUT in policy.triggers else None
    if stopped:
        return None
    if SplitTrigger.OOM in policy.triggers and (
        exit_code == -signal.SIGKILL or (error is not None and _OUT_OF_MEMORY.search(error) is not None)
    ):
        return SplitTrigger.OOM
    if policy.pattern is not None and error is not None and re.search(policy.pattern, error):
        return SplitTrigger.PATTERN
    return None


@dataclass
class SplitRun:
    """The split trees one run has touched: index → the partition's root node, and the leaves waiting or running
    in this run (``in_flight``: a node's status is ``running`` while any of its leaves is)."""

    policy: SplitPolicy | None
    zone: tzinfo
    formatter: InstantFormatter
    read_tree: Callable[[PartitionRecord], SplitNode]
    trees: dict[int, SplitNode] = field(default_factory=dict)
    in_flight: set[str] = field(default_factory=set)
    splits: int = 0  # splits made in this run
    split_indices: set[int] = field(default_factory=set)  # the plan partitions they were made in
    deepest: int = 0  # the deepest leaf this run made

    def root(self, index: int, record: PartitionRecord) -> SplitNode:
        """The tree of a partition whose record is ``record`` (read once per run; a record that never split is a
        tree of one node)."""
        tree = self.trees.get(index)
        if tree is None:
            tree = self.trees[index] = self.read_tree(record) if record.is_split else SplitNode(record)
        return tree

    def cut(self, node: SplitNode) -> list[SplitChild] | None:
        """The two halves ``node`` splits into when the policy allows it; None when it cannot split further. Nothing
        changes yet: the split is made (:meth:`apply`) once the record listing them is on disk."""
        policy = self.policy
        record = node.record
        if policy is None or record.is_split:
            return None
        parts = halves(record.start_us, record.end_us, self.zone, min_length=policy.min_length, finest=policy.finest)
        if parts is None:
            return None
        return [
            SplitChild(leaf_id(record.id, a, b), self.formatter.format(a), self.formatter.format(b), a, b)
            for a, b in parts
        ]

    def apply(self, node: SplitNode, children: list[SplitChild]) -> list[SplitNode]:
        """Split ``node`` into ``children`` (from :meth:`cut`): its record lists them and is ``running``, and its
        halves (fresh, queued) wait in this run."""
        record = node.record
        record.children = children
        record.status = RecordStatus.RUNNING
        node.halves = [
            SplitNode(fresh_half(record, child), node.path + str(number), parent=node)
            for number, child in enumerate(children)
        ]
        self.splits += 1
        self.split_indices.add(record.index)
        self.deepest = max(self.deepest, node.depth + 1)
        self.in_flight.discard(record.id)
        self.in_flight.update(half.record.id for half in node.halves)
        return node.halves

    def wanted(self, root: SplitNode, wants: Callable[[str], bool]) -> list[SplitNode]:
        """The leaves of ``root`` this run runs (``wants`` judges each leaf's status), now in flight."""
        leaves = [leaf for leaf in root.leaves() if wants(leaf.record.status)]
        self.in_flight.update(leaf.record.id for leaf in leaves)
        return leaves

    def settle(self, node: SplitNode, *, final: bool) -> list[PartitionRecord]:
        """``node`` (a leaf) ended an attempt; ``final``: it runs no more in this run. Each ancestor's status again,
        from its leaves' (``running`` while any leaf is in flight): the records whose status changed, nearest
        first."""
        if final:
            self.in_flight.discard(node.record.id)
        changed = []
        for ancestor in node.ancestors():
            busy = any(leaf.record.id in self.in_flight for leaf in ancestor.leaves())
            if settle_node(ancestor, RecordStatus.RUNNING if busy else None):
                changed.append(ancestor.record)
        return changed

    def busy(self, root: SplitNode) -> bool:
        """Whether any leaf of ``root`` waits or runs in this run."""
        return any(leaf.record.id in self.in_flight for leaf in root.leaves())


def split_text(trigger: SplitTrigger, children: list[SplitChild]) -> str:
    """``split on timeout into 12h0m0s + 13h0m0s``: what a split event, the record and the audit say."""
    lengths = " + ".join(format_duration(child.end_us - child.start_us) for child in children)
    return f"split on {trigger.value} into {lengths}"
