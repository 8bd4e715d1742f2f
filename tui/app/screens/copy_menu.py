"""``Y``: everything about the selected partition an operator may paste elsewhere, each shown whole (wrapped,
never cut at 80 columns) beside the key that copies it: the partition ID, its reason, the shown attempt's run ID
and log, the backfill ID and the exact resume command."""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Footer, Static


@dataclass(frozen=True)
class Copyable:
    key: str  # the letter that copies it
    label: str  # what it is, for the menu and the notification
    value: str


class CopyMenu(ModalScreen[Copyable | None]):
    """Returns the item whose key was pressed, or None (Esc)."""

    CSS_PATH = "screens.tcss"  # read as it first opens: not parsed before the first frame

    BINDINGS = [Binding("escape", "dismiss_none", "Close")]

    def __init__(self, items: list[Copyable]) -> None:
        super().__init__()
        self.items = items

    def compose(self) -> ComposeResult:
        text = Text()
        text.append("Copy to the clipboard", style="bold")
        text.append("  (press a key; Esc closes)", style="grey58")
        for item in self.items:
            text.append(f"\n {item.key} ", style="bold cyan")
            text.append(f"{item.label}\n", style="bold")
            text.append(f"   {item.value}")
        with VerticalScroll(id="copy-box"):
            yield Static(text, id="copy-items")
        yield Footer()

    def on_key(self, event) -> None:
        chosen = next((item for item in self.items if item.key == event.character), None)
        if chosen is not None:
            event.stop()
            self.dismiss(chosen)

    def action_dismiss_none(self) -> None:
        self.dismiss(None)
