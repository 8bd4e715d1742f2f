"""The diff view (``d``): what the selected partition changed, row by row, against the backfill's snapshot.

The same text as ``backfill diff ID --ids P``. It reads the warehouse read-only; while a run writes it, the view
says so instead (a DuckDB file has one writer or many readers, never both). See docs/diff.md.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Footer, Static

from engine.base.errors import BackfillError
from engine.guardrails.partition_diff import DEFAULT_LIMIT, diff_partitions
from tui.app.sources import BackfillSource
from tui.diff_text import diff_lines


def diff_text(source: BackfillSource, index: int, limit: int = DEFAULT_LIMIT) -> str:
    """The partition's diff, or one line saying why there is none to show."""
    spec = source.spec
    interval = spec.plan.interval(index)
    try:
        [(_, diffs)] = diff_partitions(source.store.directory, spec, [interval], limit=limit)
    except BackfillError as error:
        return f"no diff for partition {index}: {error}"
    return diff_lines(spec, interval, diffs)


class DiffScreen(ModalScreen[None]):
    CSS_PATH = "screens.tcss"  # read as it first opens: not parsed before the first frame
    BINDINGS = [Binding("escape,q,d", "dismiss", "Close")]

    def __init__(self, source: BackfillSource, index: int) -> None:
        super().__init__()
        self.source, self.index = source, index

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="diff-box"):
            yield Static("[b]What this partition changed[/b]  (before → after, against the snapshot; Esc closes)")
            yield Static(Text(diff_text(self.source, self.index), no_wrap=True, overflow="ellipsis"), id="diff-text")
        yield Footer()
