"""``Ctrl+F`` or ``\\``: filter the rows by free text (``tui.app.text_filter``); empty text shows every row again."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Footer, Input, Static


class FindScreen(ModalScreen[str | None]):
    """Returns the text to filter by ("" clears the text filter), or None when left with Esc."""

    CSS_PATH = "screens.tcss"  # read as it first opens: not parsed before the first frame

    BINDINGS = [Binding("escape", "dismiss_none", "Cancel")]

    def __init__(self, current: str = "") -> None:
        super().__init__()
        self.current = current

    def compose(self) -> ComposeResult:
        with Vertical(id="jump-box"):
            yield Static(
                "[b]Filter rows by text[/b]  in the ID, the interval, the status or the reason  "
                "(Enter applies; empty shows every row; Esc cancels)"
            )
            yield Input(self.current, placeholder="HTTP 503  ·  2024-03  ·  5f0c3a  ·  cancelled", id="find-input")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one(Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value.strip())

    def action_dismiss_none(self) -> None:
        self.dismiss(None)
