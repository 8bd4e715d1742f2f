"""``e``: write the table's visible rows to a CSV or JSON file, and say where."""

from __future__ import annotations

from pathlib import Path

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Footer, Input, Label, Static

from engine.base.errors import BadInput
from tui import human


class ExportForm(ModalScreen[Path | None]):
    """The file to write (its extension chooses CSV or JSON); Enter writes, Esc cancels."""

    CSS_PATH = "screens.tcss"  # read as it first opens: not parsed before the first frame

    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, rows: int, default: Path, write) -> None:
        super().__init__()
        self.rows = rows
        self.default = default
        self.write = write  # Path -> rows written; raises BadInput with one line

    def compose(self) -> ComposeResult:
        with Vertical(classes="intervene-box"):
            yield Static(f"[b]Export {human.count(self.rows)} row{'s' if self.rows != 1 else ''}[/b] (as shown)")
            yield Label("File (.csv or .json)")
            yield Input(str(self.default), id="export-path", compact=True)
            yield Static("", id="error-export", classes="error")
            yield Static("Enter: write · Esc: cancel", classes="intervene-keys")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#export-path", Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        text = event.value.strip()
        if not text:
            self.query_one("#error-export", Static).update("type a file name ending in .csv or .json")
            return
        path = Path(text).expanduser()
        try:
            self.write(path)
        except BadInput as problem:
            self.query_one("#error-export", Static).update(str(problem))
            return
        self.dismiss(path.resolve())

    def action_cancel(self) -> None:
        self.dismiss(None)
