"""The list of saved backfills: the same columns as `backfill list`, newest first; Enter opens one."""

from __future__ import annotations

from pathlib import Path

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static

from engine.store.catalog import BackfillSummary, list_backfills
from tui import human

STATE_STYLES = {
    "complete": "green3",
    "incomplete": "yellow3",
    "running": "dodger_blue1",
    "paused": "magenta",
    "cancelled": "yellow3",
    "marked-succeeded": "green3",
    "marked-failed": "red1",
    "unreadable": "red1",
}
COUNT_STYLES = (
    ("succeeded", "✓", "green3"),
    ("failed", "✗", "red1"),
    ("running", "▶", "dodger_blue1"),
    ("cancelled", "⊘", "yellow3"),
    ("skipped", "↷", "grey58"),
    ("queued", "·", "grey58"),
)
REFRESH_SECONDS = 2.0


def counts_text(summary: BackfillSummary) -> Text:
    text = Text()
    for name, symbol, style in COUNT_STYLES:
        count = summary.counts.get(name, 0)
        if count:
            text.append(f"{symbol}{human.count(count)} ", style=style)
    text.rstrip()
    return text


def short_counts(summary: BackfillSummary) -> Text:
    """``40/90 ✗2``: succeeded of total, and failures when any (narrow terminals)."""
    text = Text(f"{human.count(summary.counts.get('succeeded', 0))}/{human.count(summary.total)}")
    if summary.counts.get("failed"):
        text.append(f" ✗{human.count(summary.counts['failed'])}", style="red1")
    return text


def cell_width(cell: str | Text) -> int:
    return cell.cell_len if isinstance(cell, Text) else len(cell)


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

    WIDE = 150  # from this width the unit, range and creation time have room too

    def compose(self) -> ComposeResult:
        title = f"[b]Saved backfills[/b]  under {shown_path(self.root)}  ·  times in {human.local_zone()}"
        yield Static(title, id="list-title")
        yield DataTable(id="backfills", cursor_type="row", zebra_stripes=True)
        yield Static("", id="list-status")
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        self._wide = None
        self.reload()
        table.focus()
        if not self.frozen:
            self.set_interval(REFRESH_SECONDS, self.reload)

    def on_resize(self) -> None:
        if (self.size.width >= self.WIDE) != self._wide:
            self.reload()

    def reload(self) -> None:
        """Columns that fit the width (80 columns: ID, state, activity, partitions, name cut to fit; wider:
        also the unit, range and creation time), times relative and in the local zone."""
        table = self.query_one(DataTable)
        current = table.cursor_row
        self.summaries = list_backfills(self.root)
        wide = self.size.width >= self.WIDE
        if wide != self._wide:
            table.clear(columns=True)
            names = ["ID", "state", "activity", "partitions", "name"]
            table.add_columns(*([*names, "unit", "range (end exclusive)", "created"] if wide else names))
            self._wide = wide
        table.clear()
        now = self.app.clock() if hasattr(self.app, "clock") else None
        rows = []
        for s in self.summaries:
            row = [
                s.id,
                Text(
                    s.state + (f" ✎{s.interventions}" if s.interventions else ""), style=STATE_STYLES.get(s.state, "")
                ),
                human.relative_time(s.last_activity, now),
                Text.assemble(f"{human.count(s.total)} ", counts_text(s)) if wide else short_counts(s),
                s.name,
            ]
            if wide:
                row += [s.partition, f"{s.start[:16].replace('T', ' ')} → {s.end[:16].replace('T', ' ')}"]
                row.append(human.relative_time(s.created_at, now))
            rows.append(row)
        # every column but the name takes its widest cell plus the table's padding (1 each side); the name
        # gets what is left of the width (less the scrollbar), so nothing scrolls sideways
        others = [i for i in range(len(rows[0])) if i != 4] if rows else []
        fixed = sum(max(cell_width(r[i]) for r in rows) + 2 for i in others)
        room = max(6, self.size.width - 1 - fixed - 2)
        for s, row in zip(self.summaries, rows, strict=True):
            name = row[4]
            row[4] = name if len(name) <= room else name[: room - 1] + "…"
            table.add_row(*row, key=s.id)
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
