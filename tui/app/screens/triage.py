"""Failure triage: the failed partitions grouped by what went wrong, largest group first.

Each line is one kind of failure — how many partitions, the first and last of them, and its signature (the
reason with dates, numbers, IDs and paths left out). Enter shows only that group in the table; ``r`` opens the
rerun form for it.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Footer, OptionList, Static
from textual.widgets.option_list import Option

from engine.store.failure_groups import FailureGroup
from tui import human


@dataclass(frozen=True)
class TriageChoice:
    action: str  # "filter" (Enter) or "rerun" (r)
    group: FailureGroup


class TriageScreen(ModalScreen[TriageChoice | None]):
    CSS_PATH = "screens.tcss"  # read as it first opens: not parsed before the first frame
    BINDINGS = [
        Binding("escape", "dismiss_none", "Close"),
        Binding("r", "rerun", "Rerun this kind"),
    ]

    def __init__(self, groups: list[FailureGroup]) -> None:
        super().__init__()
        self.groups = groups

    def compose(self) -> ComposeResult:
        failed = sum(group.count for group in self.groups)
        kinds = len(self.groups)
        title = (
            f"[b]Failures by kind[/b]  {human.count(failed)} failed, {human.count(kinds)} "
            f"kind{'s' if kinds != 1 else ''}  (Enter shows a kind, r reruns it, Esc closes)"
            if self.groups
            else "[b]Failures by kind[/b]  no partition failed  (Esc closes)"
        )
        width = max((len(human.count(group.count)) for group in self.groups), default=1)
        options = [
            Option(
                f"{human.count(group.count).rjust(width)}  #{group.first}–#{group.last}  {group.signature}",
                id=str(position),
            )
            for position, group in enumerate(self.groups)
        ]
        with Vertical(id="triage-box"):
            yield Static(title, markup=True)
            yield OptionList(*options, id="triage-options")
            yield Static("", id="triage-example")
        yield Footer()

    def on_mount(self) -> None:
        self._show_example(0)

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        self._show_example(event.option_index)

    def _show_example(self, position: int | None) -> None:
        if position is None or not 0 <= position < len(self.groups):
            return
        group = self.groups[position]
        self.query_one("#triage-example", Static).update(f"e.g. partition {group.first}: {group.example}")

    def _highlighted(self) -> FailureGroup | None:
        position = self.query_one("#triage-options", OptionList).highlighted
        return self.groups[position] if position is not None and position < len(self.groups) else None

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(TriageChoice("filter", self.groups[event.option_index]))

    def action_rerun(self) -> None:
        group = self._highlighted()
        if group is not None:
            self.dismiss(TriageChoice("rerun", group))

    def action_dismiss_none(self) -> None:
        self.dismiss(None)
