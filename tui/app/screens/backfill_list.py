"""The list of saved backfills: the same columns as `backfill list`, newest first; Enter opens one."""

from __future__ import annotations

from pathlib import Path

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static

from engine.store.catalog import BackfillSummary, list_backfills

STATE_STYLES = {"complete": "green3", "incomplete": "yellow3", "running": "dodger_blue1"}
COUNT_STYLES = (
    ("succeeded", "✓", "green3"),
    ("failed", "✗", "red1"),
    ("running", "▶", "dodger_blue1"),
    ("cancelled", "⊘", "yellow3"),
    ("queued", "·", "grey58"),
)
REFRESH_SECONDS = 2.0


def counts_text(summary: BackfillSummary) -> Text:
    text = Text()
    for name, symbol, style in COUNT_STYLES:
        count = summary.counts.get(name, 0)
        if count:
            text.append(f"{symbol}{count} ", style=style)
    return text


def shown_path(path: Path) -> str:
    """``path`` relative to the working directory when it is below it, else as is."""
    try:
        return str(path.relative_to(Path.cwd())) or "."
    except ValueError:
        return str(path)


class BackfillListScreen(Screen[None]):
    """A DataTable is fine here: backfills number in the hundreds, partitions never go in one."""

    BINDINGS = [
        Binding("enter", "open", "Open"),
        Binding("ctrl+r,f5", "reload", "Reload"),
        Binding("question_mark", "help", "Help"),
        Binding("q,escape", "app.quit", "Quit"),
    ]

    def __init__(self, root: Path, *, frozen: bool = False) -> None:
        super().__init__()
        self.root = root
        self.frozen = frozen
        self.summaries: list[BackfillSummary] = []

    def compose(self) -> ComposeResult:
        yield Static(f"[b]Saved backfills[/b]  under {shown_path(self.root)}", id="list-title")
        yield DataTable(id="backfills", cursor_type="row", zebra_stripes=True)
        yield Static("", id="list-status")
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        table.add_columns(
            "ID", "state", "partitions", "name", "range (end exclusive)", "unit", "created", "last activity"
        )
        self.reload()
        table.focus()
        if not self.frozen:
            self.set_interval(REFRESH_SECONDS, self.reload)

    def reload(self) -> None:
        table = self.query_one(DataTable)
        current = table.cursor_row
        self.summaries = list_backfills(self.root)
        table.clear()
        for s in self.summaries:
            table.add_row(
                s.id,
                Text(s.state, style=STATE_STYLES.get(s.state, "")),
                Text.assemble(f"{s.total} ", counts_text(s)),
                s.name[:28],
                f"{s.start[:16].replace('T', ' ')} → {s.end[:16].replace('T', ' ')}",
                s.partition,
                s.created_at[:16].replace("T", " "),
                s.last_activity[:16].replace("T", " "),
                key=s.id,
            )
        if self.summaries:
            table.move_cursor(row=min(current, len(self.summaries) - 1))
        broken = sum(1 for s in self.summaries if s.error)
        status = f"{len(self.summaries)} backfill(s)" + (f"; {broken} could not be read" if broken else "")
        self.query_one("#list-status", Static).update(
            status if self.summaries else f"no saved backfills under {shown_path(self.root)}"
        )

    def action_reload(self) -> None:
        self.reload()

    def action_open(self) -> None:
        table = self.query_one(DataTable)
        if not self.summaries:
            return
        summary = self.summaries[table.cursor_row]
        self.app.open_backfill(summary.directory)  # type: ignore[attr-defined]

    def on_data_table_row_selected(self, _event: DataTable.RowSelected) -> None:
        self.action_open()

    def action_help(self) -> None:
        from tui.app.screens.help import HelpScreen

        self.app.push_screen(HelpScreen())
