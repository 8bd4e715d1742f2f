"""How the executor splits a partition whose attempt failed by a trigger of ``--split-on`` (docs/splitting.md):
the record listing its halves durable before either starts, the split audited, and, when a run ends, halves that
never started settled into what their partition adds up to.

A mixin of :class:`engine.execute.executor.Executor`, on the executor's own thread: the state it reads is made
there; the trees themselves are :class:`engine.execute.splitting.SplitRun`'s.
"""

from __future__ import annotations

import os
from dataclasses import replace

from engine.execute.splitting import split_text
from engine.spec.split_policy import SplitTrigger
from engine.store import audit
from engine.store.manifest import now_text
from engine.store.records import Attempt, PartitionRecord, RecordStatus
from engine.store.split_tree import SplitNode, settle_node
from engine.store.status import Status


class ExecutorSplits:
    def _split(
        self, index: int, record: PartitionRecord, node: SplitNode | None, attempt: Attempt, trigger: SplitTrigger
    ) -> list[SplitNode] | None:
        """Cut the partition (or half) whose attempt failed by ``trigger`` in two, when it can split further: its
        record, listing its halves, is durable before either starts, and the split is audited. None: it fails (or
        retries) as it would without ``--split-on``."""
        target = node if node is not None else self.splits.root(index, record)
        children = self.splits.cut(target)
        if children is None:
            return None
        attempt.split = split_text(trigger, children)
        # Written as it will be, before anything changes: a store that cannot take it leaves no split behind.
        if not self._write_ahead([replace(record, children=children, status=RecordStatus.RUNNING)]):
            attempt.split = None
            return None
        halves = self.splits.apply(target, children)
        try:
            audit.append(
                self.store.directory,
                [
                    audit.entry(
                        backfill_id=self.store.id,
                        partition_id=record.id,
                        action="SPLIT",
                        from_status=RecordStatus.FAILED.value,
                        to_status=RecordStatus.RUNNING.value,
                        reason=f"{attempt.error}: {attempt.split}",
                        requested_by=(
                            f"--split-on: a failing partition splits {self.splits.policy.describe()}"
                            if self.splits.policy
                            else None
                        ),
                        requested_at=attempt.finished_at,
                        applied_at=now_text(),
                        applied_by=f"backfill executor (PID {os.getpid()})",
                    )
                ],
            )
        except OSError as error:
            self._storage_failed(error)
        return halves

    @staticmethod
    def _span(node: SplitNode | None) -> tuple[int, int] | None:
        return (node.record.start_us, node.record.end_us) if node is not None else None

    def _settle_unstarted_halves(self) -> None:
        """Halves that waited in this run but never started (it stopped or halted first): no longer in flight, so
        every split partition is again what its leaves add up to, on disk and on the board."""
        for index, root in self.splits.trees.items():
            if not self.splits.busy(root):
                continue
            self.splits.in_flight.difference_update(leaf.record.id for leaf in root.leaves())
            for node in reversed(list(root.nodes())):
                if node.halves and settle_node(node):
                    self._write(node.record, durable=True)
            with self._lock:
                self.board.set(index, Status.parse(root.record.status))
