"""The audit view: every intervention on a backfill, one line each, oldest first; Enter shows every field.

The log is read as raw lines and a line is parsed only when it is drawn, so 100,000 interventions open as
fast as ten. A torn line (a crash mid-append) is shown as such, never hidden.
"""

from __future__ import annotations

from pathlib import Path

import orjson
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.geometry import Size
from textual.reactive import reactive
from textual.screen import Screen
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.widgets import Footer, Static

from engine.store import audit
from engine.store.audit import AUDIT

ACTION_STYLES = {
    "CANCEL": Style(color="yellow3", bold=True),
    "PAUSE": Style(color="magenta", bold=True),
    "RESUME": Style(color="green3", bold=True),
    "RECONCILE_LOST": Style(color="red1", bold=True),
    "GATE_BYPASS": Style(color="yellow3"),
}
PLAIN, DIM, CURSOR = Style(), Style(color="grey58"), Style(bgcolor="grey23", bold=True)
TORN = Style(color="red1")


def read_lines(directory: Path) -> list[bytes]:
    try:
        data = (directory / AUDIT).read_bytes()
    except FileNotFoundError:
        return []
    return [line for line in data.split(b"\n") if line.strip()]


def parse(line: bytes) -> dict | None:
    try:
        value = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def summary(entry: dict | None) -> list[tuple[str, Style]]:
    if entry is None:
        return [("torn line (a crash while appending): kept as written", TORN)]
    action = str(entry.get("action"))
    what = audit.subject(entry)
    change = f"{entry.get('from_status') or '—'} → {entry.get('to_status') or '—'}"
    return [
        (f"{str(entry.get('applied_at') or '')[:19]}  ", DIM),
        (f"{action:<19} ", ACTION_STYLES.get(action, Style(bold=True))),
        (f"{what:<14} {change:<24} ", PLAIN),
        (f"{entry.get('requested_by')}: {entry.get('reason')}", DIM),
    ]


class AuditList(ScrollView, can_focus=True):
    BINDINGS = [
        Binding("up,k", "move(-1)", "Up", show=False),
        Binding("down,j", "move(1)", "Down", show=False),
        Binding("pageup", "page(-1)", "Page up", show=False),
        Binding("pagedown", "page(1)", "Page down", show=False),
        Binding("home", "edge(0)", "First", show=False),
        Binding("end", "edge(1)", "Last", show=False),
    ]
    cursor = reactive(0)

    def __init__(self, lines: list[bytes], **kwargs) -> None:
        super().__init__(**kwargs)
        self.lines = lines
        self._parsed: dict[int, dict | None] = {}
        self.virtual_size = Size(200, len(lines))

    def entry(self, number: int) -> dict | None:
        if number not in self._parsed:
            self._parsed[number] = parse(self.lines[number])
        return self._parsed[number]

    def render_line(self, y: int) -> Strip:
        number = int(self.scroll_y) + y
        width = self.size.width
        if number >= len(self.lines):
            return Strip.blank(width, PLAIN)
        segments = [Segment(f"{number + 1:>7}  ", DIM)]
        segments += [Segment(text, style) for text, style in summary(self.entry(number))]
        strip = Strip(segments).crop_extend(0, width, PLAIN)
        if number == self.cursor:
            strip = strip.apply_style(CURSOR)
        return strip

    def watch_cursor(self, old: int, new: int) -> None:
        top = int(self.scroll_y)
        height = max(1, self.size.height)
        if new < top:
            self.scroll_to(y=new, animate=False)
        elif new >= top + height:
            self.scroll_to(y=new - height + 1, animate=False)
        self.refresh()

    def action_move(self, delta: int) -> None:
        if self.lines:
            self.cursor = max(0, min(len(self.lines) - 1, self.cursor + delta))

    def action_page(self, direction: int) -> None:
        self.action_move(direction * max(1, self.size.height - 1))

    def action_edge(self, last: int) -> None:
        if self.lines:
            self.cursor = len(self.lines) - 1 if last else 0


class AuditDetail(VerticalScroll, can_focus=True):
    """Every field of the selected line, wrapped; it scrolls when they do not fit (an 80×24 terminal)."""

    BINDINGS = [
        Binding("up,k", "scroll_up", "Up", show=False),
        Binding("down,j", "scroll_down", "Down", show=False),
        Binding("pageup", "page_up", "Page up", show=False),
        Binding("pagedown", "page_down", "Page down", show=False),
    ]


class AuditScreen(Screen[None]):
    CSS_PATH = "screens.tcss"  # read as it first opens: not parsed before the first frame
    BINDINGS = [
        Binding("enter", "details", "Details"),
        Binding("tab", "switch", "List/details"),
        Binding("escape,q,a", "close", "Close"),
    ]

    def __init__(self, directory: Path) -> None:
        super().__init__()
        self.directory = directory
        self.lines = read_lines(directory)

    def compose(self) -> ComposeResult:
        count = len(self.lines)
        yield Static(
            f"[b]Audit of backfill {self.directory.name}[/b] — {count:,} intervention{'s' if count != 1 else ''}"
            + ("" if count else " (none yet)"),
            id="audit-title",
        )
        yield AuditList(self.lines, id="audit-lines")
        with AuditDetail(id="audit-detail"):
            yield Static("", id="audit-fields")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one(AuditList).focus()
        self.query_one(AuditDetail).display = False

    def action_details(self) -> None:
        """Every field of the selected line below the list, the detail focused (arrows scroll it; Tab goes back)."""
        listing = self.query_one(AuditList)
        detail = self.query_one(AuditDetail)
        if not self.lines:
            return
        entry = listing.entry(listing.cursor)
        text = Text()
        if entry is None:
            text.append(f"line {listing.cursor + 1} is torn:\n{self.lines[listing.cursor][:300]!r}")
        else:
            for number, (key, value) in enumerate(entry.items()):
                text.append(("\n" if number else "") + f"{key}: ", style="bold")
                text.append(str(value))
        self.query_one("#audit-fields", Static).update(text)
        detail.display = True
        detail.scroll_home(animate=False)
        detail.focus()

    def action_switch(self) -> None:
        """Tab: between the list and the details, when they are shown."""
        detail = self.query_one(AuditDetail)
        if detail.display and not detail.has_focus:
            detail.focus()
        else:
            self.query_one(AuditList).focus()

    def action_close(self) -> None:
        self.app.pop_screen()
