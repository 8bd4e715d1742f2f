"""The help screen: every key of the dashboard and browser."""

from __future__ import annotations

from rich.table import Table
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Footer, Static

KEYS = [
    ("↑ ↓  j k", "move through partitions"),
    ("PgUp PgDn", "a page up or down"),
    ("Home End", "first or last partition"),
    ("→ ←  l h", "open a split partition (⑂) to show its halves under it; fold them back"),
    ("f", "follow execution again (any navigation turns it off)"),
    ("Enter", "open or close the details pane (interval, ID, attempts, log)"),
    ("Tab", "move between the table and the log"),
    ("/", "jump to a date or timestamp, a partition number or an ID prefix"),
    ("s", "filter partitions by status"),
    ("Ctrl+F  \\", "filter rows by text: in the ID, the interval, the status or the reason (empty: all rows)"),
    ("t", "triage: failures grouped by kind (Enter shows a kind, r reruns it)"),
    ("o", "sort by interval, duration (longest first), attempts (most first) or status (failed first)"),
    ("e", "export the rows shown (after the filter) to a .csv or .json file"),
    ("n  N", "next or previous failed partition (wraps around)"),
    ("y", "copy the selected partition's ID (also shown, selectable, in the details)"),
    ("Y", "copy menu: the ID, the reason, the attempt's run ID and log, the backfill ID, the resume command, whole"),
    ("click", "select the row"),
    ("space", "mark or unmark a partition (the rerun form can run the marked ones)"),
    ("r", "rerun form: which partitions, retries, parallelism, policy, timeout"),
    ("m", "mark the selected partition, or those the filter shows: succeeded, failed or skipped, with a reason"),
    ("c", "cancel the run, here or in another process (a reason; only while something runs)"),
    ("p", "pause the backfill (running children finish, none start), or resume it"),
    ("+  -", "one partition more or fewer at once (editable; a reason; kept for --continue)"),
    ("x", "stop the selected running partition now (a reason): cancelled, resumable; the rest goes on"),
    ("a", "the audit: every intervention on this backfill (Enter: every field)"),
    ("d", "what the selected partition changed, row by row, against the snapshot (pipelines with a snapshot)"),
    ("q", "stop (asks first while children run: q or y confirms); quit once finished"),
    ("Ctrl+C", "stop at once: stop scheduling, cancel active runs (SIGINT); again: SIGTERM now; again: SIGKILL"),
    ("q  Esc", "a backfill not run here: leave it (back to the list); in the list: quit"),
    ("Enter  Ctrl+R", "in the list: open the backfill; reload the list"),
    ("Esc", "close the details pane or this screen"),
    ("?", "this help"),
    # The log pane's own keys (Tab puts the focus there), after the table's: they matter once it is open.
    ("[ ]", "previous or next attempt whose log is shown"),
    ("w  G/End", "in the log: wrap lines, jump to the end (and tail it)"),
    ("F", "in the log: pause following where it is, or follow the end again"),
    ("/  n N", "in the log: search (case-insensitive), next and previous match; matches are highlighted"),
    ("v", "in the log: open it whole in $PAGER (less when unset); q there comes back"),
]


def legend() -> list[tuple[str, str]]:
    """Every glyph the table draws, from the constants it draws them with (one source for both)."""
    from engine.store.status import Status
    from tui.app.widgets.partition_table import SYMBOLS, VERIFICATION_MARKS

    meaning = {
        Status.QUEUED: "queued: not attempted yet (or to run again)",
        Status.RUNNING: "running: a child runs it now",
        Status.SUCCEEDED: "succeeded",
        Status.FAILED: "failed: the reason is the latest attempt's error",
        Status.CANCELLED: "cancelled: stopped, resumable",
        Status.SKIPPED: "skipped: marked done by an operator, without data",
    }
    verified = {1: "verified", 2: "a verification warning (--verify warn)", 3: "failed verification",
                4: "insufficient history to verify"}  # fmt: skip
    rows = [(SYMBOLS[status], text) for status, text in meaning.items()]
    rows += [
        ("↯", "interrupted: recorded running, but nothing runs it (--continue resumes it)"),
        ("■", "stopping: the seconds left before SIGKILL (kill 27s)"),
    ]
    rows += [
        (f"{status_symbol} after the status", verified[code]) for code, (status_symbol, _) in VERIFICATION_MARKS.items()
    ]
    rows += [("▸", "the selected row"), ("●", "marked with space (the rerun form can run them)"),
             ("✎N", "in the list: N interventions (who paused, cancelled or marked it is printed below)")]  # fmt: skip
    return rows


class HelpScreen(ModalScreen[None]):
    CSS_PATH = "screens.tcss"  # read as it first opens: not parsed before the first frame
    BINDINGS = [Binding("escape,q,question_mark", "dismiss", "Close")]

    def compose(self) -> ComposeResult:
        table = Table.grid(padding=(0, 2))
        table.add_column(style="bold cyan", no_wrap=True)
        table.add_column()
        for keys, meaning in KEYS:
            table.add_row(keys, meaning)
        glyphs = Table.grid(padding=(0, 2))
        glyphs.add_column(style="bold", no_wrap=True)
        glyphs.add_column()
        for glyph, meaning in legend():
            glyphs.add_row(glyph, meaning)
        with VerticalScroll(id="help-box"):  # scrolls when the terminal is shorter than the list
            yield Static("[b]Keys[/b]  (Esc to close, ↑ ↓ to scroll)", id="help-title")
            yield Static(table)
            yield Static("\n[b]What the table draws[/b]")
            yield Static(glyphs)
        yield Footer()
