"""How the executor stops children: one signal to the process group, SIGKILL once the grace has passed (or at once
when an operator asked a third time), timeouts, what an ended child left in its group, and the last wait for every
child whatever happened.

A mixin of :class:`engine.execute.executor.Executor`, on the executor's own thread: the state it reads is made
there.
"""

from __future__ import annotations

import signal
import time

from engine.base.processes import TrackedFamily
from engine.dates.durations import format_duration
from engine.execute.active_child import ActiveChild
from engine.execute.executor_controls import ESCALATION
from engine.execute.executor_snapshot import STOPPING
from engine.store.records import RecordStatus


class ExecutorStopping:
    def _begin_stop(self, active: ActiveChild, reason: str, status: str, signum: int | None = None) -> None:
        if active.stop_reason is not None:
            return
        active.stop_reason, active.stop_status, active.stop_started = reason, status, time.monotonic()
        active.child.signal_group(signum if signum is not None else signal.SIGINT)

    def _begin_cancel_all(self) -> None:
        self._set_state(STOPPING)
        for active in list(self._active.values()):
            self._begin_stop(active, f"cancelled: {self._stop_reason}", RecordStatus.CANCELLED, self._stop_signal)

    def _enforce_deadlines(self) -> None:
        now = time.monotonic()
        timeout = self.options.timeout
        for active in list(self._active.values()):
            if active.stop_reason is None and timeout and now - active.started >= timeout / 1_000_000:
                active.timed_out = True
                self._begin_stop(active, f"timed out after {format_duration(timeout)}", RecordStatus.FAILED)
            if active.stop_reason is None:
                continue
            while active.escalated < self._escalation and not active.kill_sent:
                active.escalated += 1
                signum = ESCALATION[active.escalated - 1]
                active.kill_sent = signum == signal.SIGKILL
                active.child.signal_group(signum)
            if not active.kill_sent and now - active.stop_started >= self.grace:
                active.kill_sent = True
                active.child.signal_group(signal.SIGKILL)

    def _stop_leftovers(self, leftovers: TrackedFamily) -> None:
        """An attempt has ended, but processes of its group may remain (``sleep 30 &``): SIGTERM them now,
        SIGKILL whatever is left after the grace period, each through the handle taken before the attempt's child
        was reaped (never a group number that may have been reused). A grandchild that left the group (setsid) is
        out of reach."""
        if leftovers.alive():
            leftovers.signal(signal.SIGTERM)
            self._leftovers.append((leftovers, time.monotonic() + self.grace))
        else:
            leftovers.close()

    def _sweep_leftovers(self, *, wait: bool) -> None:
        while self._leftovers:
            now = time.monotonic()
            for entry in list(self._leftovers):
                leftovers, deadline = entry
                if not leftovers.alive():
                    leftovers.close()
                    self._leftovers.remove(entry)
                elif now >= deadline:
                    leftovers.signal(signal.SIGKILL)
            if not wait:
                return
            time.sleep(0.02)

    def _stop_everything_and_wait(self) -> None:
        """Whatever happened, no child outlives the loop: stop what is left and wait for every one."""
        for active in list(self._active.values()):
            self._begin_stop(active, f"cancelled: {self._stop_reason or 'executor stopped'}", RecordStatus.CANCELLED)
        while self._active:
            self._wait_for_exits(self._next_wakeup())
            self._reap()
            self._enforce_deadlines()
        self._sweep_leftovers(wait=True)
