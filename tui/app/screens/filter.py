"""Choose a status filter for the partition table."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Footer, OptionList, Static
from textual.widgets.option_list import Option

from engine.store.status import Status
from tui import human

CHOICES = [("all", None)] + [(status.label, frozenset({status})) for status in Status]
CHOICES.insert(5, ("failed or cancelled", frozenset({Status.FAILED, Status.CANCELLED})))


class FilterScreen(ModalScreen[tuple[str, frozenset | None] | None]):
    CSS_PATH = "screens.tcss"  # read as it first opens: not parsed before the first frame
    BINDINGS = [Binding("escape", "dismiss_none", "Cancel")]

    def __init__(self, counts: dict[str, int]) -> None:
        super().__init__()
        self.counts = counts

    def compose(self) -> ComposeResult:
        options = []
        for label, statuses in CHOICES:
            count = sum(self.counts.get(s.label, 0) for s in statuses) if statuses else sum(self.counts.values())
            options.append(Option(f"{label}  ({human.count(count)})", id=label))
        with Vertical(id="filter-box"):
            yield Static("[b]Show partitions[/b]  (Enter to choose, Esc to cancel)")
            yield OptionList(*options, id="filter-options")
        yield Footer()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        label = event.option.id
        self.dismiss(next((label, statuses) for name, statuses in CHOICES if name == label) if label else None)

    def action_dismiss_none(self) -> None:
        self.dismiss(None)
