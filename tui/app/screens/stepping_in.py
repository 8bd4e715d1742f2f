"""The dashboard's keys that step in on a backfill (m, c, p, +, -, x, a): each opens its form and sends exactly
the request ``backfill mark``, ``cancel``, ``pause``, ``resume`` or ``set`` would (``tui.app.intervening``),
from a worker thread, and says what came of it. The dashboard screen mixes them in."""

from __future__ import annotations

from engine.execute.executor_snapshot import FINISHED
from tui.app.sources import IDLE
from tui.app.widgets.partition_table import PartitionTable
from tui.app.widgets.status_line import StatusLine


class SteppingIn:
    """Stepping in (docs/interventions.md): mixed into the dashboard screen, whose source, table, last state and
    footer these use."""

    def _send(self, action: str, reason: str, params: dict | None = None) -> None:
        """Send the request from a worker thread (a live executor answers within 2 s); say what came of it."""
        from tui.app.intervening import send

        def work() -> None:
            result = send(self.source, action, reason, params, wait=self.app.settings.request_wait)
            self.app.call_from_thread(self._sent, result)

        self.run_worker(work, thread=True, exclusive=False, group="intervene")

    def _sent(self, result) -> None:
        if not self.query(PartitionTable):
            return  # the screen was taken down while the answer came (the app is closing): nothing to show it on
        self.notify(result.message, severity="information" if result.exit_code == 0 else "error", timeout=6)
        self.table.refresh()
        self.refresh_from_source()
        self._note_pause()
        self.refresh_bindings()

    def action_intervene_mark(self) -> None:
        """m: mark the selected partition, or every partition the filter shows."""
        from tui.app.screens.intervene_forms import MarkForm, MarkTarget

        targets = []
        index = self.table.selected_index
        if index is not None:
            interval = self.source.spec.plan.interval(index)
            partition_id = self.source.spec.ids.of(interval.start, interval.end)
            targets.append(MarkTarget("selected", f"the selected partition {index} ({partition_id[:12]})", (index,)))
        rows = self.table.rows
        label = self.query_one(StatusLine).filter_label
        if rows.filtered and label:
            targets.append(
                MarkTarget("filter", f"every partition matching the filter '{label}'", tuple(rows.indices()))
            )
        if not targets:
            self.notify("no partition to mark", severity="warning", timeout=2)
            return
        state = self.last_state
        running = frozenset(p.index for p in state.running) if state is not None else frozenset()

        def chosen(choice) -> None:
            if choice is not None:
                params = {"to": choice.to, "rows": choice.rows, "asset": None, "indices": list(choice.indices)}
                self._send("mark", choice.reason, params)

        self.app.push_screen(MarkForm(self.source.store.id, self.source.board, targets, running), chosen)

    def action_intervene_cancel(self) -> None:
        """c: cancel the run (here or in another process), after a reason."""
        from tui.app.screens.intervene_forms import ReasonForm

        active = len(self.last_state.running) if self.last_state is not None else 0
        consequence = (
            f"Every running child ({active}) is stopped now and nothing more starts; the backfill is recorded "
            "cancelled, by you, with this reason. --continue needs a reason of its own to go on."
        )

        def chosen(reason) -> None:
            if reason is not None:
                self._send("cancel", reason)

        self.app.push_screen(ReasonForm(f"Cancel backfill {self.source.store.id}", consequence, "Cancel it"), chosen)

    def _note_pause(self) -> None:
        """Read whether the backfill is paused (the control file) and let the footer say p Pause or p Resume."""
        from tui.app.intervening import is_paused

        paused = is_paused(self.source)
        if paused != self.paused:
            self.paused = paused
            self.call_later(self.refresh_bindings)

    def action_intervene_resume(self) -> None:
        """p while paused: resume."""
        self.action_intervene_pause()

    def action_intervene_pause(self) -> None:
        """p: pause the backfill, or resume it when it is paused."""
        from tui.app.intervening import is_paused
        from tui.app.screens.intervene_forms import ReasonForm

        paused = is_paused(self.source)
        verb = "resume" if paused else "pause"
        consequence = (
            "The backfill may go on: backfill --continue (or the rerun form) runs it again."
            if paused
            else "Running children finish; nothing more starts; --continue starts nothing until it is resumed."
        )

        def chosen(reason) -> None:
            if reason is not None:
                self._send(verb, reason)

        title = f"{verb.capitalize()} backfill {self.source.store.id}"
        self.app.push_screen(ReasonForm(title, consequence, verb.capitalize()), chosen)

    def action_parallel(self, delta: int) -> None:
        """+/-: one partition more or fewer at once (editable), with a reason: ``backfill set --max-parallel``."""
        from tui.app.screens.intervene_forms import ParallelForm

        state = self.last_state
        now = state.parallel[0] if state is not None and state.parallel else self.source.options.max_parallel
        running = state is not None and state.state not in (FINISHED, IDLE)
        consequence = (
            "More children start at once at the next turn; fewer, and none starts until enough have ended (none is "
            "stopped for it). Saved and audited: every later --continue starts from it."
            if running
            else "Nothing runs it now: saved and audited, every later --continue starts from it."
        )

        def chosen(choice) -> None:
            if choice is not None:
                self._send("set", choice.reason, {"max_parallel": choice.value})

        form = ParallelForm(self.source.store.id, now, max(1, now + delta), consequence)
        self.app.push_screen(form, chosen)

    def action_stop_partition(self) -> None:
        """x on a running row: stop that partition now (a reason first), as ``backfill cancel ID --ids P``."""
        from tui.app.screens.intervene_forms import ReasonForm

        index = self.table.selected_index
        state = self.last_state
        running = {p.index for p in state.running} if state is not None and state.state != IDLE else set()
        if index is None or index not in running:
            self.notify(
                "x stops a running partition: select one that runs (m marks one that does not)",
                severity="warning",
                timeout=4,
            )
            return
        interval = self.source.spec.plan.interval(index)
        partition_id = self.source.spec.ids.of(interval.start, interval.end)
        consequence = (
            f"Partition {index} ({partition_id[:12]}) is stopped now (SIGINT; SIGKILL after the grace) and recorded "
            "cancelled, not retried; every other partition goes on. --continue runs it again."
        )

        def chosen(reason) -> None:
            if reason is not None:
                self._send("stop", reason, {"indices": [index]})

        self.app.push_screen(ReasonForm(f"Stop partition {index} now", consequence, "Stop it"), chosen)

    def action_audit(self) -> None:
        """a: every intervention on this backfill."""
        from tui.app.screens.audit_view import AuditScreen

        self.app.push_screen(AuditScreen(self.source.store.directory))
