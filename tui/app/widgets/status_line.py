"""One line above the footer: follow mode, the filter, and the run's state (stopping, outcome)."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static


class StatusLine(Static):
    def __init__(self, **kwargs) -> None:
        super().__init__("", **kwargs)
        self.following = True
        self.filter_label: str | None = None
        self.sort_label: str | None = None  # None: plan order
        self.state_text: Text | None = None
        self.live = True  # follow mode means something only while an executor runs the backfill
        self.shown: Text | None = None

    def render_line_text(self) -> Text:
        text = Text()
        if self.state_text is not None:
            text.append_text(self.state_text)
            text.append("   ")
        if not self.live:
            pass
        elif self.following:
            text.append("follow on", style="green3")
        else:
            text.append("follow off — press f to follow execution", style="yellow3")
        if self.filter_label:
            text.append(f"   filter: {self.filter_label} (s to change)", style="cyan")
        if self.sort_label:
            text.append(f"   sort: {self.sort_label} (o to change)", style="cyan")
        return text

    def refresh_text(self) -> None:
        text = self.render_line_text()
        if text != self.shown:  # called at every poll: a line that did not change is not a frame
            self.shown = text
            self.update(text, layout=False)  # one line high whatever it says
