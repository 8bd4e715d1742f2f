"""The floor the dashboard is measured against (issue 28, item 5): the smallest Textual app that paints one line,
and, on each key, repaints a whole page (40 numbered lines) — what any Textual screen costs to start and to redraw.

Run by ``tui_bench.py`` in the same pseudo-terminal as the real command: ``python _minimal_app.py``.
"""

from __future__ import annotations

from textual.app import App, ComposeResult
from textual.widgets import Static


class Minimal(App[None]):
    CSS = "Static { height: 1fr; }"

    def __init__(self) -> None:
        super().__init__()
        self.presses = 0

    def compose(self) -> ComposeResult:
        yield Static("minimal app ready")

    def on_key(self) -> None:
        self.presses += 1
        base = self.presses * 1000
        self.query_one(Static).update("\n".join(f"page {self.presses} line {base + n}" for n in range(40)))


if __name__ == "__main__":
    Minimal().run()
