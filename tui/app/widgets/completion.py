"""Completion bar: percent, done/total, elapsed, ETA once estimable, and coloured status counts."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from rich.text import Text
from textual.widgets import Static

from tui import human
from tui.app.sources import IDLE, SourceState

COUNT_STYLES = (
    ("succeeded", "✓", "green3"),
    ("failed", "✗", "red1"),
    ("running", "▶", "dodger_blue1"),
    ("cancelled", "⊘", "yellow3"),
    ("skipped", "↷", "grey58"),
    ("queued", "·", "grey58"),
)


THROUGHPUT_WINDOW = 300.0  # seconds: partitions per minute over the last five minutes
THROUGHPUT_AFTER = 10.0  # seconds of samples before a rate is worth saying


class CompletionBar(Static):
    def __init__(self, clock: Callable[[], float], **kwargs) -> None:
        super().__init__("", **kwargs)
        self.clock = clock
        self.ended_elapsed: float | None = None  # once finished, elapsed stops: it is the run's span
        self.nobody_runs = False  # then partitions recorded running were interrupted
        self._samples: deque[tuple[float, int]] = deque()  # (clock, partitions done) of recent polls

    def throughput(self, done: int) -> float | None:
        """Partitions per minute over the last five minutes of polls; None before ten seconds of them."""
        now = self.clock()
        samples = self._samples
        if not samples or samples[-1][1] != done or now - samples[-1][0] >= 1.0:
            samples.append((now, done))
        while len(samples) > 2 and now - samples[1][0] >= THROUGHPUT_WINDOW:
            samples.popleft()
        since, then = samples[0]
        if now - since < THROUGHPUT_AFTER:
            return None
        return max(0, done - then) * 60.0 / (now - since)

    def show(self, state: SourceState) -> None:
        width = max(10, self.size.width - 2 if self.size.width else 60)
        counts = state.counts
        if state.state == IDLE:
            done, total = counts["succeeded"], state.total
            label = f"{human.count(done)}/{human.count(total)} succeeded"
        else:
            done, total = state.finished, state.selected
            label = f"{human.count(done)}/{human.count(total)} done"
        fraction = done / total if total else 1.0
        bar_width = max(10, min(40, width // 3))
        filled = int(bar_width * fraction)
        text = Text()
        text.append("█" * filled, style="green3")
        text.append("░" * (bar_width - filled), style="grey35")
        text.append(f" {fraction * 100:5.1f}%  {label}")
        if state.started_at is not None and state.state != IDLE:
            if self.ended_elapsed is None:
                elapsed = max(0.0, self.clock() - state.started_at)
                if state.state == "finished":
                    self.ended_elapsed = elapsed
            else:
                elapsed = self.ended_elapsed
            roomy = width >= 110  # words where there is room, compact units otherwise
            shown = human.duration_words(elapsed) if roomy and elapsed >= 60 else human.duration(elapsed)
            text.append(f"  elapsed {shown}", style="grey70")
            if 0 < done < total and elapsed >= 2 and state.state not in ("finished", "stopping"):
                left = elapsed / done * (total - done)
                eta = (
                    f"about {human.duration_words(left)} left"
                    if roomy and left >= 60
                    else f"ETA {human.duration(left)}"
                )
                text.append(f"  {eta}", style="grey70")
            rate = self.throughput(done) if state.state not in ("finished",) else None
            if rate is not None:
                text.append(f"  {rate:,.1f}/min" if rate < 10 else f"  {rate:,.0f}/min", style="grey70")
        text.append("\n")
        for name, symbol, style in COUNT_STYLES:
            count = counts.get(name, 0)
            if name == "skipped" and not count:
                continue  # only an operator's mark makes one: no room taken until then
            label = name
            if name == "running" and self.nobody_runs:
                symbol, label, style = "↯", "interrupted", "yellow3"
            text.append(f"{symbol} {human.count(count)} {label}", style=style if count else "grey35")
            text.append("   ")
        skipped = state.total - state.selected
        if skipped and state.state != IDLE:
            text.append(f"({human.count(skipped)} not selected this run)", style="grey50")
        self.update(text, layout=False)  # two lines high whatever it says: a layout each poll was a frame more
