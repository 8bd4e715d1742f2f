"""Completion bar: percent, done/total, elapsed, ETA once estimable, and coloured status counts."""

from __future__ import annotations

from collections.abc import Callable

from rich.text import Text
from textual.widgets import Static

from engine.dates.durations import format_elapsed
from tui.app.sources import IDLE, SourceState

COUNT_STYLES = (
    ("succeeded", "✓", "green3"),
    ("failed", "✗", "red1"),
    ("running", "▶", "dodger_blue1"),
    ("cancelled", "⊘", "yellow3"),
    ("queued", "·", "grey58"),
)


class CompletionBar(Static):
    def __init__(self, clock: Callable[[], float], **kwargs) -> None:
        super().__init__("", **kwargs)
        self.clock = clock

    def show(self, state: SourceState) -> None:
        width = max(10, self.size.width - 2 if self.size.width else 60)
        counts = state.counts
        if state.state == IDLE:
            done, total = counts["succeeded"], state.total
            label = f"{done}/{total} succeeded"
        else:
            done, total = state.finished, state.selected
            label = f"{done}/{total} done"
        fraction = done / total if total else 1.0
        bar_width = max(10, min(40, width // 3))
        filled = int(bar_width * fraction)
        text = Text()
        text.append("█" * filled, style="green3")
        text.append("░" * (bar_width - filled), style="grey35")
        text.append(f" {fraction * 100:5.1f}%  {label}")
        if state.started_at is not None and state.state != IDLE:
            elapsed = max(0.0, self.clock() - state.started_at)
            text.append(f"  elapsed {format_elapsed(elapsed)}", style="grey70")
            if 0 < done < total and elapsed >= 2 and state.state not in ("finished", "stopping"):
                text.append(f"  ETA {format_elapsed(elapsed / done * (total - done))}", style="grey70")
        text.append("\n")
        for name, symbol, style in COUNT_STYLES:
            text.append(f"{symbol} {counts.get(name, 0)} {name}", style=style if counts.get(name) else "grey35")
            text.append("   ")
        skipped = state.total - state.selected
        if skipped and state.state != IDLE:
            text.append(f"({skipped} not selected this run)", style="grey50")
        self.update(text)
