"""``/`` in the log pane: the text to find in the log (case-insensitive); ``n``/``N`` then move between matches."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Footer, Input, Static


class LogSearchScreen(ModalScreen[str | None]):
    """Returns the text to find ("" stops highlighting), or None when left with Esc."""

    CSS_PATH = "screens.tcss"  # read as it first opens: not parsed before the first frame

    BINDINGS = [Binding("escape", "dismiss_none", "Cancel")]

    def __init__(self, current: str = "") -> None:
        super().__init__()
        self.current = current

    def compose(self) -> ComposeResult:
        with Vertical(id="jump-box"):
            yield Static("[b]Search the log[/b]  (Enter finds it from the line in view; n/N next/previous; Esc)")
            yield Input(self.current, placeholder="error  ·  Traceback  ·  rows", id="log-search-input")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one(Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value)

    def action_dismiss_none(self) -> None:
        self.dismiss(None)
