"""The dashboard screen: header, completion bar, partition table, details pane, status line, footer."""

from __future__ import annotations

from collections.abc import Callable

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.css.query import NoMatches
from textual.screen import Screen
from textual.widgets import Footer, Static

from engine.execute.executor_snapshot import FINISHED, STOPPING
from engine.store.status import Status, backfill_status
from tui import human
from tui.app.messages import FollowChanged, PartitionSelected
from tui.app.screens.filter import FilterScreen
from tui.app.screens.help import HelpScreen
from tui.app.screens.jump import JumpScreen
from tui.app.screens.log_search import LogSearchScreen
from tui.app.screens.stepping_in import SteppingIn
from tui.app.sources import IDLE, RUNNING_ELSEWHERE, BackfillSource, SourceState
from tui.app.widgets.completion import CompletionBar
from tui.app.widgets.details import PartitionDetails
from tui.app.widgets.log_view import LogView
from tui.app.widgets.partition_table import PartitionTable
from tui.app.widgets.run_header import RunHeader
from tui.app.widgets.status_line import StatusLine

OUTCOME_STYLES = {
    "succeeded": "bold green3",
    "failed": "bold red1",
    "cancelled": "bold yellow3",
    "incomplete": "bold yellow3",
    "paused": "bold magenta",
}


# The keys that change a backfill: off in a read-only attach (`backfill watch`).
ACTING = frozenset(
    {
        "rerun",
        "intervene_mark",
        "intervene_cancel",
        "intervene_pause",
        "intervene_resume",
        "stop_run",
        "quit_finished",
        "parallel",
        "stop_partition",
    }
)

# Past this many records to read (failures to group, reasons to search), the work leaves the screen's thread.
READ_IN_BACKGROUND = 5_000

# What the status line says while stopping, after as many stop requests beyond the first (Ctrl+C again).
ESCALATION_HINTS = (
    "Ctrl+C again sends SIGTERM now",
    "SIGTERM sent; Ctrl+C again sends SIGKILL now",
    "SIGKILL sent",
)


class DashboardScreen(SteppingIn, Screen[None]):
    BINDINGS = [
        Binding("f", "follow", "Follow"),
        Binding("enter", "details", "Details"),
        Binding("escape", "close_details", "Close", show=False),
        Binding("slash", "jump", "Jump"),
        Binding("ctrl+f,backslash", "find", "Find", show=False),
        Binding("s", "filter", "Filter"),
        Binding("t", "triage", "Triage", show=False),  # help lists it; the footer keeps its 80 columns
        Binding("e", "export", "Export", show=False),
        Binding("o", "sort", "Sort", show=False),
        Binding("n", "next_failed(1)", "Next failed", show=False),  # the status line says so when any failed
        Binding("N", "next_failed(-1)", "Prev failed", show=False),
        Binding("left_square_bracket", "attempt(-1)", "Prev attempt", show=False),
        Binding("right_square_bracket", "attempt(1)", "Next attempt", show=False),
        Binding("space", "mark", "Mark", show=False),
        Binding("y", "copy_id", "Copy ID", show=False),
        Binding("Y", "copy_menu", "Copy…", show=False),
        Binding("r", "rerun", "Rerun"),
        Binding("question_mark", "help", "Help"),
        Binding("q", "stop_run", "Stop"),
        Binding("q", "quit_finished", "Quit"),
        Binding("q", "leave", "Leave"),
        # Stepping in (after q and ?, which must stay in an 80-column footer; help lists these too):
        Binding("m", "intervene_mark", "Mark"),
        Binding("c", "intervene_cancel", "Cancel"),
        Binding("p", "intervene_pause", "Pause"),
        Binding("p", "intervene_resume", "Resume"),
        Binding("a", "audit", "Audit"),
        Binding("d", "diff", "Diff", show=False),
        Binding("plus", "parallel(1)", "More at once", show=False),
        Binding("minus", "parallel(-1)", "Fewer at once", show=False),
        Binding("x", "stop_partition", "Stop partition", show=False),
    ]

    def __init__(self, source: BackfillSource, clock: Callable[[], float]) -> None:
        super().__init__()
        self.source = source
        self.clock = clock
        self.last_version = -1
        self.last_state: SourceState | None = None
        self.confirming_stop = False  # q was pressed once while children run: q or y stops, anything else keeps
        self.paused = False  # as the control file says: the footer offers p Resume instead of p Pause
        self._intervention_seen: str | None = None
        self.status_filter_label: str | None = None  # what s or t chose; a text filter is said after it
        self.found_text = ""  # the text filter (Ctrl+F), if any

    def compose(self) -> ComposeResult:
        table = PartitionTable(self.source, self.clock, id="partitions")
        yield RunHeader(self.source, id="run-header")
        yield CompletionBar(self.clock, id="completion")
        yield Static(table.header_text(), id="columns")
        yield table
        yield PartitionDetails(self.source, id="details")
        yield StatusLine(id="status-line")
        yield Footer()

    @property
    def table(self) -> PartitionTable:
        return self.query_one(PartitionTable)

    @property
    def details(self) -> PartitionDetails:
        return self.query_one(PartitionDetails)

    LOG_MIN_LINES = 8
    SUMMARY_MIN_LINES = 5  # interval, reason, ID, and the last two attempts
    FIXED_ROWS = 7  # header 2, completion 2, column titles 1, status line 1, footer 1

    def on_resize(self) -> None:
        self.size_details()
        if self.table.set_dates_only(self.size.width < 100):
            self.query_one("#columns", Static).update(self.table.header_text())
        # Below 110 columns the footer packs its keys tight, so no label is cut ("c Cance") at 80 columns.
        self.query_one(Footer).compact = self.size.width < 110

    def size_details(self) -> None:
        """Split the height between table and details so the log keeps at least 8 lines and the summary 5
        (interval, reason, ID and the last two attempts) — at 80×24 too, where the table keeps 3 rows (5 from
        30 rows on)."""
        available = max(0, self.size.height - self.FIXED_ROWS)
        wanted = max(int(available * 0.55), 1 + self.SUMMARY_MIN_LINES + self.LOG_MIN_LINES)
        table_rows = 3 if self.size.height < 30 else 5
        height = max(1, min(wanted, available - table_rows))
        self.details.styles.height = height
        summary = self.details.query_one("#details-summary")
        summary.styles.max_height = max(1, min(9, height - 1 - self.LOG_MIN_LINES))

    def on_mount(self) -> None:
        self.size_details()
        self.details.display = False
        self.table.focus()
        self.refresh_from_source()
        self.call_after_refresh(self.refresh_from_source)  # again once laid out, so follow can scroll

    # ---------------------------------------------------------------- polling

    def refresh_from_source(self) -> SourceState:
        state = self.source.poll()
        if not self.is_attached or not self.children:
            return state  # not composed yet, or being torn down at exit
        changed = state.version != self.last_version
        self.last_version = state.version
        if self.last_state is None or state.state != self.last_state.state:
            self.call_later(self.refresh_bindings)  # the footer's q: Stop while it runs here, Quit once finished
        if self.last_state is None or state.intervention != self._intervention_seen:
            self._intervention_seen = state.intervention  # a pause or resume, from here or from anywhere else
            self._note_pause()
        self.last_state = state
        try:
            bar = self.query_one(CompletionBar)
            bar.nobody_runs = self.source.nobody_runs
            bar.show(state)
            self.table.update_running(state.running, changed)
            if self.details.display:
                self.details.poll()
            self._show_state(state)
        except NoMatches:  # widgets are being removed while the app exits
            pass
        return state

    def _show_state(self, state: SourceState) -> None:
        self.query_one(RunHeader).show_parallel(state.parallel)
        line = self.query_one(StatusLine)
        text = Text()
        if self.confirming_stop and state.state != FINISHED:
            active = len(state.running)
            text.append(
                f"Stop the backfill? {active} running child{'ren' if active != 1 else ''} will be cancelled "
                "(resumable) — q or y stops, any other key keeps it running",
                style="bold yellow3",
            )
        elif state.state == STOPPING:
            active = len(state.running)
            text.append(
                f"Stopping… waiting for {active} active run{'s' if active != 1 else ''} to exit", style="bold yellow3"
            )
            text.append(f" · {ESCALATION_HINTS[min(state.escalation, 2)]}", style="yellow3")
            if state.intervention:
                text.append(f" — {state.intervention}", style="yellow3")
        elif state.state == IDLE and state.intervention:
            said = state.intervention
            style = "bold magenta" if said.startswith("paused") else "bold yellow3"
            text.append(f"{said[0].upper()}{said[1:]}", style=style)
            text.append(" · saved backfill (nothing runs it) · q leaves", style="grey70")
        elif state.intervention and state.state != FINISHED and state.intervention.startswith("paused"):
            active = len(state.running)
            text.append(f"{state.intervention[0].upper()}{state.intervention[1:]}", style="bold magenta")
            text.append(
                f" — {active} running child{'ren' if active != 1 else ''} finish, none start "
                "(backfill resume ID lets it go on)",
                style="magenta",
            )
        elif state.state == FINISHED and state.outcome:
            status = backfill_status(state.counts, state.outcome)  # the whole backfill, not only this run
            text.append(f"Backfill {status}", style=OUTCOME_STYLES.get(status, "bold"))
            if state.intervention:
                text.append(f" — {state.intervention}", style="yellow3")
            failed = state.counts.get("failed", 0)
            if failed:
                text.append(f" — {failed} failed: n jumps to the next one", style="red1")
            record = getattr(self.source, "record", None)
            if record:  # never cut to "· record": the middle of the path goes, its start and file name stay
                room = max(24, line.size.width - 2 - text.cell_len - len(" · record ") - len(" · q to quit"))
                text.append(f" · record {human.shorten_middle(str(record), room)}", style="grey70")
            text.append(" · q to quit", style="grey70")
        elif state.state == IDLE:
            text.append("saved backfill (nothing runs it) · q leaves", style="grey70")
        elif state.state == RUNNING_ELSEWHERE:
            pid = getattr(self.source, "pid", None)
            text.append(
                f"running in another process{f' (PID {pid})' if pid else ''} · q leaves it running", style="grey70"
            )
        if self.read_only:
            text.append(" · read-only: no key acts on it", style="bold grey70")
        line.state_text = text if text.plain else None
        line.live = not self.source.nobody_runs
        line.following = self.table.follow
        line.refresh_text()

    # ---------------------------------------------------------------- messages

    def on_partition_selected(self, message: PartitionSelected) -> None:
        if self.details.display:
            self.details.show_partition(message.index)

    def on_follow_changed(self, message: FollowChanged) -> None:
        line = self.query_one(StatusLine)
        line.following = message.following
        line.refresh_text()

    def on_log_view_search_requested(self, message: LogView.SearchRequested) -> None:
        log = message.log

        def chosen(text: str | None) -> None:
            if text is not None:
                log.search(text)

        self.app.push_screen(LogSearchScreen(log.pattern), chosen)

    # ---------------------------------------------------------------- leaving and stopping

    def _runs_here(self) -> bool:
        """A live executor in this process that has not finished: q stops it."""
        state = self.last_state
        return self.source.can_stop and (state is None or state.state != FINISHED)

    @property
    def read_only(self) -> bool:
        """``backfill watch``: a second operator looks; every key that acts is off (and off the footer)."""
        return bool(getattr(self.app, "read_only", False))

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if self.read_only and action in ACTING:
            return False
        if action == "follow":
            return not self.source.nobody_runs  # nothing runs: nothing to follow
        if action == "stop_run":
            return self._runs_here()
        if action == "rerun":  # a run going on here cannot be rerun until it ends: r is off, out of the footer
            return not self._runs_here()
        if action == "quit_finished":
            return self.source.can_stop and not self._runs_here()
        if action == "leave":
            return not self.source.can_stop
        if action == "intervene_pause":
            return not self.paused
        if action == "intervene_resume":
            return self.paused
        if action == "intervene_cancel":  # only something running can be cancelled from here
            state = self.last_state
            return state is not None and state.state not in (FINISHED, IDLE)
        return True

    def action_stop_run(self) -> None:
        state = self.source.poll()
        if state.running and not self.confirming_stop:
            self.confirming_stop = True
            self._show_state(state)
            return
        self._stop_now()

    def _stop_now(self) -> None:
        self.confirming_stop = False
        self.app.action_stop("stopped from the dashboard (q)")  # type: ignore[attr-defined]
        self.refresh_bindings()

    def action_quit_finished(self) -> None:
        self.app.action_stop("stopped from the dashboard (q)")  # type: ignore[attr-defined]

    def action_leave(self) -> None:
        """A backfill this process does not run: q only leaves it (back to the list, or out)."""
        if len(self.app.screen_stack) > 2:
            self.app.pop_screen()
        else:
            self.app.exit(None)

    def on_key(self, event) -> None:
        if not self.confirming_stop:
            return
        event.stop()
        event.prevent_default()
        if event.key in ("q", "y"):
            self._stop_now()
        else:
            self.confirming_stop = False
            self.notify("the backfill keeps running", timeout=2)
            if self.last_state is not None:
                self._show_state(self.last_state)

    # ---------------------------------------------------------------- actions

    def action_follow(self) -> None:
        self.table.follow = True
        if self.last_state is not None:
            self.table.update_running(self.last_state.running, False)

    def action_details(self) -> None:
        details = self.details
        details.display = not details.display
        index = self.table.selected_index
        if details.display and index is not None:
            details.show_partition(index, force=True)
        if not details.display:
            self.table.focus()

    def action_close_details(self) -> None:
        if self.details.display:
            self.details.display = False
            self.table.focus()

    def action_attempt(self, delta: int) -> None:
        if self.details.display:
            self.details.choose_attempt(delta)

    def action_filter(self) -> None:
        counts = self.last_state.counts if self.last_state else self.source.board.counts()

        def chosen(result: tuple[str, frozenset | None] | None) -> None:
            if result is None:
                return
            label, statuses = result
            self.found_text = ""  # s starts over: a status filter, no text
            self.table.set_filter(statuses)
            self._say_filter(None if statuses is None else label)

        self.app.push_screen(FilterScreen(counts), chosen)

    def action_triage(self) -> None:
        """t: the failed partitions grouped by kind; Enter shows one kind, r reruns it."""
        from engine.store.failure_groups import failure_groups
        from tui.app.screens.triage import TriageScreen

        source = self.source

        def chosen(choice) -> None:
            if choice is None:
                return
            group = choice.group
            label = f"failure: {group.signature[:40]}{'…' if len(group.signature) > 40 else ''}"
            self.found_text = ""
            self.table.set_filter(frozenset({Status.FAILED}), frozenset(group.indices))
            self._say_filter(label)
            if choice.action == "rerun" and not self.read_only:
                self.action_rerun(chosen="filter")  # that kind, not every failure

        failed = source.board.counts().get("failed", 0)
        self._off_the_screen(
            lambda: failure_groups(source.spec, source.store, source.board),
            lambda groups: self.app.push_screen(TriageScreen(groups), chosen),
            f"grouping {failed:,} failures by kind…",
            heavy=failed > READ_IN_BACKGROUND,
        )

    def _off_the_screen(self, work, done, saying: str, *, heavy: bool) -> None:
        """Work that reads thousands of records: in a worker thread, the screen answering keys meanwhile and
        saying what it does; small work at once."""
        if not heavy:
            done(work())
            return
        self.notify(saying, timeout=3)

        def run() -> None:
            result = work()
            self.app.call_from_thread(done, result)

        self.run_worker(run, thread=True, exclusive=True, group="records")

    def _say_filter(self, status_label: str | None) -> None:
        """The status line's filter: what s or t chose, then the text filter's text."""
        self.status_filter_label = status_label
        text = f'"{self.found_text}"' if self.found_text else None
        line = self.query_one(StatusLine)
        line.filter_label = " · ".join(part for part in (status_label, text) if part) or None
        line.refresh_text()

    def action_find(self) -> None:
        """Ctrl+F or backslash: show only the rows whose ID, interval, status or reason holds a text (the status
        filter is kept; a kind chosen in triage is replaced)."""
        from tui.app.screens.find import FindScreen
        from tui.app.text_filter import rows_matching

        def chosen(text: str | None) -> None:
            if text is None:
                return
            statuses = self.table.rows.statuses if self.status_filter_label else None
            if self.table.rows.only is not None and not self.found_text:
                statuses, self.status_filter_label = None, None  # a triage kind: the text replaces it
            self.found_text = text
            if not text:
                self.table.set_filter(statuses)
                self._say_filter(self.status_filter_label)
                return
            source = self.source

            def show(match) -> None:
                self.table.set_filter(statuses, match.indices)
                self._say_filter(self.status_filter_label)
                shown = len(self.table.rows)
                note = "" if match.scanned_plan else " (IDs and intervals of a plan this large are not searched)"
                self.notify(f"{shown:,} row{'s' if shown != 1 else ''} hold {text!r}{note}", timeout=3)

            counts = source.board.counts()
            ended = counts.get("failed", 0) + counts.get("cancelled", 0)
            self._off_the_screen(
                lambda: rows_matching(
                    text,
                    spec=source.spec,
                    store=source.store,
                    board=source.board,
                    interval_text=self.table.interval_text,
                ),
                show,
                f"looking for {text!r} in {ended:,} reasons…",
                heavy=ended > READ_IN_BACKGROUND or source.board.size > READ_IN_BACKGROUND * 20,
            )

        self.app.push_screen(FindScreen(self.found_text), chosen)

    def action_sort(self) -> None:
        """o: order the rows by interval (the plan), duration, attempts or status, in turn."""
        from tui.app.row_index import SortKey

        keys = list(SortKey)
        order = keys[(keys.index(self.table.rows.order) + 1) % len(keys)]
        self.table.set_order(order)
        line = self.query_one(StatusLine)
        line.sort_label = None if order is SortKey.INTERVAL else str(order)
        line.refresh_text()

    def action_export(self) -> None:
        """e: write the visible rows (after the filter) to a CSV or JSON file, and say where."""
        from pathlib import Path

        from tui.app.export import write_export
        from tui.app.screens.export_form import ExportForm

        indices = self.table.rows.indices()
        label = self.query_one(StatusLine).filter_label
        suffix = "" if label is None else "-" + "".join(c if c.isalnum() else "-" for c in label)[:30].strip("-")
        default = Path.cwd() / f"backfill-{self.source.store.id}{suffix}.csv"
        written: dict[str, int] = {}

        def write(path: Path) -> None:
            written["rows"] = write_export(path, self.source, indices)

        def done(path: Path | None) -> None:
            if path is not None:
                rows = written.get("rows", 0)
                self.notify(f"wrote {rows:,} row{'s' if rows != 1 else ''} to {path}", timeout=8)

        self.app.push_screen(ExportForm(len(indices), default, write), done)

    def action_jump(self) -> None:
        def chosen(index: int | None) -> None:
            if index is None:
                return
            if self.table.rows.row_of(index) is None:
                self.table.set_filter(None)  # the filter hides it: show everything rather than jump nowhere
                line = self.query_one(StatusLine)
                line.filter_label = None
                line.refresh_text()
                self.notify("the filter hid that partition: filter cleared", timeout=3)
            self.table.select_index(index)

        self.app.push_screen(JumpScreen(self.source.spec, getattr(self.source, "store", None)), chosen)

    def action_next_failed(self, direction: int) -> None:
        current = self.table.selected_index
        size = self.source.board.size
        start = current if current is not None else (-1 if direction > 0 else size)
        found = self.table.rows.find(Status.FAILED, start, backwards=direction < 0)
        if found is None:  # wrap around, as search does in an editor
            found = self.table.rows.find(Status.FAILED, -1 if direction > 0 else size, backwards=direction < 0)
            if found is None:
                self.notify("no failed partition", severity="warning", timeout=2)
                return
            if found == current:
                self.notify("this is the only failed partition", timeout=2)
                return
            self.notify("wrapped to the " + ("first" if direction > 0 else "last") + " failure", timeout=2)
        self.table.select_index(found)

    def action_copy_id(self) -> None:
        """Copy the selected partition's full ID to the clipboard (OSC 52: works over SSH and in tmux)."""
        index = self.table.selected_index
        if index is None:
            return
        interval = self.source.spec.plan.interval(index)
        partition_id = self.source.spec.ids.of(interval.start, interval.end)
        self.app.copy_to_clipboard(partition_id)
        self.notify(f"copied partition {index}'s ID {partition_id[:12]}…", timeout=2)

    def action_copy_menu(self) -> None:
        """Y: the partition ID, its reason, the shown attempt's run ID and log, the backfill ID and the resume
        command, each whole, one key each."""
        from pathlib import Path

        from engine.base.errors import BackfillError
        from engine.store.control import read_control
        from engine.store.locate import resume_command
        from tui.app.screens.copy_menu import Copyable, CopyMenu

        source = self.source
        items: list[Copyable] = []
        index = self.table.selected_index
        if index is not None:
            interval = source.spec.plan.interval(index)
            items.append(Copyable("i", f"partition {index}'s ID", source.spec.ids.of(interval.start, interval.end)))
            loaded = source.records.load(index) if source.board.attempts(index) else None
            attempts = loaded.record.attempts if loaded is not None and loaded.record is not None else []
            shown = self.details.chosen if self.details.display and self.details.index == index else None
            attempt = attempts[shown] if shown is not None and shown < len(attempts) else (attempts or [None])[-1]
            if loaded is not None and loaded.reason:
                items.append(Copyable("r", f"partition {index}'s reason", loaded.reason))
            if attempt is not None:
                number = attempts.index(attempt) + 1
                items.append(Copyable("a", f"attempt #{number}'s run ID", attempt.run_id))
                if attempt.log:
                    items.append(Copyable("l", f"attempt #{number}'s log", str(source.store.directory / attempt.log)))
        items.append(Copyable("b", "the backfill's ID", source.store.id))
        command = resume_command(source.store.id, source.store.directory.parent, Path.cwd())
        try:
            if read_control(source.store.directory).ended is not None:
                command += " --reason TEXT"  # an operator ended it: --continue must say why it goes on
        except BackfillError:
            pass
        items.insert(0, Copyable("c", "the resume command", command))  # first: what is pasted most

        def chosen(item: Copyable | None) -> None:
            if item is not None:
                self.app.copy_to_clipboard(item.value)
                self.notify(f"copied {item.label}", timeout=3)

        self.app.push_screen(CopyMenu(items), chosen)

    def action_help(self) -> None:
        self.app.push_screen(HelpScreen())

    def action_diff(self) -> None:
        """What the selected partition changed, row by row, against the snapshot (docs/diff.md)."""
        from tui.app.screens.diff_view import DiffScreen

        index = self.table.selected_index
        if index is not None:
            self.app.push_screen(DiffScreen(self.source, index))

    def action_mark(self) -> None:
        """Mark or unmark the selected partition (the rerun form can run the marked ones)."""
        self.table.toggle_mark()

    def action_rerun(self, chosen: str | None = None) -> None:
        from tui.app.screens.rerun_form import RerunForm, partition_choices

        state = self.source.poll()
        if self.source.can_stop and state.state != FINISHED:
            self.notify(
                "the backfill is running here: wait for it to end (or stop it with q) to rerun",
                severity="warning",
                timeout=4,
            )
            return
        blocked = None
        if state.state == RUNNING_ELSEWHERE:
            pid = getattr(self.source, "pid", None)
            blocked = (
                f"This backfill is running in another process{f' (PID {pid})' if pid else ''}: "
                "it cannot be resumed here. Wait for it to end, or stop it there."
            )
        line = self.query_one(StatusLine)
        rows = self.table.rows
        filtered = frozenset(rows.indices()) if rows.filtered else None
        choices = partition_choices(
            self.source,
            selected=self.table.selected_index,
            marked=frozenset(self.table.marked),
            filter_label=line.filter_label,
            filter_indices=filtered,
        )

        def submitted(request) -> None:
            if request is not None:
                self.app.start_rerun(  # type: ignore[attr-defined]
                    self.source, request.options, request.selection, whole_partitions=request.whole_partitions
                )

        self.app.push_screen(RerunForm(self.source, choices, blocked=blocked, chosen=chosen), submitted)
