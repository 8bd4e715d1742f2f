"""How the executor reaps: an ended child becomes its attempt's outcome (succeeded and verified, failed with its
reason, stopped, lost), recorded durably, and then the partition is done, split, retried, or the failure policy
decides what else stops.

A mixin of :class:`engine.execute.executor.Executor`, on the executor's own thread: the state it reads is made
there.
"""

from __future__ import annotations

import selectors
import time
from dataclasses import dataclass, replace

from engine.execute.active_child import ActiveChild
from engine.execute.failure_reason import failure_reason, row_changes_of
from engine.execute.launcher import ForkExecLauncher
from engine.execute.splitting import trigger_of
from engine.spec.split_policy import SplitTrigger
from engine.store.manifest import now_text
from engine.store.records import Attempt, PartitionRecord, RecordStatus
from engine.store.split_tree import SplitNode
from engine.store.status import Status


@dataclass
class Pending:
    """A partition (or a half of one) waiting for a slot."""

    index: int
    attempts_left: int  # attempts this invocation may still make, this one included
    record: PartitionRecord | None = None  # known already when retrying
    node: SplitNode | None = None  # a half of a split partition; None: the partition itself


class ExecutorReaping:
    def _record_identity(self, active: ActiveChild, *, write: bool) -> None:
        """A remote child's PID, start time and worker, recorded as soon as its task reports them (written with
        the attempt's end when that came first)."""
        remote = getattr(active.child, "remote", None)
        if remote is None or "pgid" not in remote:
            return
        active.identity_pending = False
        attempt = active.attempt
        attempt.pid, attempt.pid_started = active.child.pid, remote.pop("pid_started", None)
        attempt.pid_birth = remote.pop("pid_birth", None)
        attempt.remote = remote
        if write:
            self._write(active.record, durable=False)

    def _reap(self) -> None:
        for key, active in list(self._active.items()):
            index = active.index
            code = active.child.poll()
            if active.identity_pending:
                self._record_identity(active, write=code is None)
            if code is None:
                continue
            fd = active.child.exit_fd()
            if fd is not None:
                self._selector.unregister(fd)
            active.child.close()
            leftovers = active.child.leftovers()
            if leftovers is not None:
                self._stop_leftovers(leftovers)
            with self._lock:
                del self._active[key]
            attempt = active.attempt
            if active.verifying is None:  # the attempt's own child; not its --verify-command
                attempt.exit_code = code
            attempt.finished_at = now_text()
            lost = getattr(active.child, "lost", None)
            if lost is not None and active.stop_reason is None:
                attempt.status, attempt.error = RecordStatus.LOST, lost
            elif active.stop_reason is not None:
                attempt.status, attempt.error = active.stop_status, active.stop_reason
            elif code == 0 and active.verifying is None and self._start_verifying(key, active):
                continue  # the attempt ends when its --verify-command does
            elif code == 0 or active.verifying is not None:
                attempt.status = RecordStatus.SUCCEEDED
                if not self.spec.target.is_command:
                    attempt.row_changes = row_changes_of(self.spec, attempt.run_id)
                verification = self._verification(active, code)
                if verification is not None:
                    attempt.verification = verification.to_json()
                    if verification.fails_partition:
                        attempt.status, attempt.error = RecordStatus.FAILED, f"verification: {verification.detail}"
                        self._verification_failed = True
            else:
                log_path = self.store.log_path(attempt.run_id)
                attempt.status, attempt.error = (
                    RecordStatus.FAILED,
                    failure_reason(self.spec, attempt.run_id, log_path, code),
                )
            trigger = None
            if self.splits.policy is not None and attempt.status == RecordStatus.FAILED:
                trigger = trigger_of(
                    self.splits.policy,
                    timed_out=active.timed_out,
                    stopped=active.stop_reason is not None,
                    exit_code=code,
                    error=attempt.error,
                )
            self._finish(index, active.record, attempt, active.attempts_left, active.started, active.node, trigger)

    def _start_verifying(self, key: str, active: ActiveChild) -> bool:
        """``--verify-command``, started as the attempt's second child in place of the first, which exited 0: on
        this machine, holding the descriptors the first held, its output in the same log; whether it started."""
        verifying = self.hooks.verify_child(active.index, active.interval, active.attempt, active.record.id)
        if verifying is None:
            return False
        active.verifying = verifying
        try:
            child = ForkExecLauncher().launch(replace(verifying.spec, inherit_fds=self.factory.inherit_fds))
        except OSError as error:
            active.verify_failure = error
            return False
        active.child = child
        fd = child.exit_fd()
        if fd is not None:
            self._selector.register(fd, selectors.EVENT_READ, active)
        with self._lock:
            self._active[key] = active
        return True

    def _verification(self, active: ActiveChild, code: int):
        """The verification of an attempt whose child exited 0: its --verify-command's (``code`` is that
        command's exit status), or the hook's."""
        verifying = active.verifying
        if verifying is None:
            return self.hooks.verify(active.index, active.interval, active.attempt, active.record.id)
        if active.verify_failure is not None:
            return verifying.cannot_start(active.verify_failure)
        return verifying.judge(code)

    def _finish(
        self,
        index: int,
        record: PartitionRecord,
        attempt: Attempt,
        attempts_left: int,
        started: float | None = None,
        node: SplitNode | None = None,
        trigger: SplitTrigger | None = None,
    ) -> None:
        """Record an ended attempt durably, then decide: done, split (docs/splitting.md), retry, or apply the failure
        policy. Its duration is measured on the monotonic clock: a wall-clock step mid-attempt is not part of it."""
        attempt.duration = round(time.monotonic() - started, 6) if started is not None else 0.0
        # A lost attempt (its worker died: outcome unknown) leaves its partition failed, as a reconcile does.
        record.status = RecordStatus.FAILED if attempt.status == RecordStatus.LOST else attempt.status
        verification_failed, self._verification_failed = self._verification_failed, False
        halves = None
        if trigger is not None and not verification_failed and self._stop_reason is None and not self._halted:
            halves = self._split(index, record, node, attempt, trigger)
        if halves is None:
            self._write(record, durable=True)
        retry = (
            halves is None
            and attempt.status in (RecordStatus.FAILED, RecordStatus.LOST)
            and attempts_left > 1
            and self._stop_reason is None
            and not self._halted
            and not verification_failed  # the same data would fail the same way: stop and report instead
        )
        root = self.splits.trees.get(index) if node is not None or halves is not None else None
        if node is not None and root is not None:
            for changed in self.splits.settle(node, final=not retry):
                self._write(changed, durable=True)
        with self._lock:
            self.board.set(index, Status.parse(root.record.status if root is not None else record.status))
            if node is None:
                self.board.set_attempts(index, len(record.attempts))
            self.board.set_duration(index, attempt.duration)
            self.board.set_verification(index, attempt.verification)
            final = halves is None and not retry and (root is None or not self.splits.busy(root))
            span = self._span(node)
            self._event(attempt.status, index, attempt.run_id, attempt.duration, attempt.error, final=final, span=span)
            if halves is not None:
                self._event("split", index, attempt.run_id, None, attempt.split, final=False, span=span)
            elif retry:
                self._event("retrying", index, attempt.run_id, final=False, span=span)
            if final:
                self._finished += 1
        self._tally.add(index, attempt)
        self.hooks.after_partition(index, attempt)
        if halves is not None:  # run next, before anything else waiting
            self._retries.extendleft(reversed([Pending(index, self.options.retries + 1, h.record, h) for h in halves]))
            return
        if retry:
            self._retries.appendleft(Pending(index, attempts_left - 1, record, node))
            return
        if record.status == RecordStatus.FAILED:
            if index not in self._failed_set:
                self._failed_set.add(index)
                self._failed.append(index)
            policy = self.options.on_failure
            if verification_failed:
                # Whatever --on-failure says: nothing new starts, and the partitions in flight are cancelled
                # (resumable) so that nothing more lands unverified after the first bad partition.
                self._halted = True
                for other in list(self._active.values()):
                    self._begin_stop(other, f"cancelled: partition {index} failed verification", RecordStatus.CANCELLED)
            elif policy == "stop":
                self._halted = True
            elif policy == "fail-fast":
                self._halted = True
                for other in list(self._active.values()):
                    self._begin_stop(
                        other, f"cancelled: fail-fast after partition {index} failed", RecordStatus.CANCELLED
                    )
