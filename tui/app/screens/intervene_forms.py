"""The forms of stepping in from a screen: mark partitions, and the reason for a cancel, pause or resume.

They add nothing the command line lacks: each result becomes exactly the request ``backfill mark``,
``cancel``, ``pause`` or ``resume`` would send (see ``tui.app.intervening``).
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Footer, Input, Label, RadioButton, RadioSet, Static

from engine.guardrails.request import MAX_REASON
from engine.interventions.apply import MARK_STATUSES
from engine.store.status import Status, StatusBoard

MAX_ROWS = 10**15


@dataclass(frozen=True)
class MarkTarget:
    """What ``m`` can mark: the selected partition, or every partition the filter shows."""

    key: str
    label: str
    indices: tuple[int, ...]


@dataclass(frozen=True)
class MarkChoice:
    to: str
    reason: str
    rows: int | None
    indices: tuple[int, ...]


def reason_problem(text: str) -> str | None:
    if not text.strip():
        return "say why: the reason is recorded with who and when"
    if len(text) > MAX_REASON:
        return f"{len(text):,} characters: keep it under {MAX_REASON:,}"
    return None


def rows_problem(text: str) -> str | None:
    if not text:
        return None
    if not (text.isascii() and text.isdecimal()) or int(text) > MAX_ROWS:
        return f"{text!r} is not a row count: give ASCII digits from 0 to {MAX_ROWS:,}"
    return None


class InterveneForm(ModalScreen):
    """What both forms share: the submit button submits (``action_submit``), any other button and Esc leave
    without sending anything."""

    CSS_PATH = "screens.tcss"  # read as it first opens: not parsed before the first frame

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "submit":
            self.action_submit()
        else:
            self.dismiss(None)

    def action_submit(self) -> None:
        raise NotImplementedError

    def action_cancel(self) -> None:
        self.dismiss(None)


class MarkForm(InterveneForm):
    BINDINGS = [Binding("escape", "cancel", "Cancel"), Binding("ctrl+s", "submit", "Mark")]

    def __init__(self, backfill_id: str, board: StatusBoard, targets: list[MarkTarget], running: frozenset[int]):
        super().__init__()
        self.backfill_id = backfill_id
        self.board = board
        self.targets = targets
        self.running = running

    def compose(self) -> ComposeResult:
        with Vertical(id="mark-box", classes="intervene-box"):
            yield Static(f"[b]Mark partitions of backfill {self.backfill_id}[/b]", classes="intervene-title")
            yield Label("Partitions")
            with RadioSet(id="mark-which"):
                for number, target in enumerate(self.targets):
                    yield RadioButton(f"{target.label} ({len(target.indices):,})", value=number == 0, id=target.key)
            yield Label("New status")
            with RadioSet(id="mark-status"):
                for number, status in enumerate(MARK_STATUSES):
                    yield RadioButton(status, value=number == 0, id=f"to-{status}")
            yield Label("Reason (required)")
            yield Input(id="mark-reason", placeholder="e.g. loaded by hand from the 06:00 file", compact=True)
            yield Static("", id="error-reason", classes="error")
            yield Label("Rows loaded by hand (succeeded only; optional)")
            yield Input(id="mark-rows", placeholder="e.g. 1200", compact=True)
            yield Static("", id="error-rows", classes="error")
            yield Static("", id="mark-preview")
            with Horizontal(classes="intervene-buttons"):
                yield Button("Mark", variant="primary", id="submit", compact=True)
                yield Button("Cancel", id="cancel", compact=True)
                yield Static("Ctrl+S marks · Esc cancels", classes="intervene-keys")
        yield Footer()

    def on_mount(self) -> None:
        self.validate()
        self.query_one("#mark-which", RadioSet).focus()

    def _pressed(self, radio: str) -> str | None:
        button = self.query_one(f"#{radio}", RadioSet).pressed_button
        return button.id if button is not None else None

    def validate(self) -> MarkChoice | None:
        """Show each problem beside its field and the preview of what changes; Mark only when all is fine."""
        target = next((t for t in self.targets if t.key == self._pressed("mark-which")), None)
        to = (self._pressed("mark-status") or "").removeprefix("to-")
        reason = self.query_one("#mark-reason", Input).value
        rows_text = self.query_one("#mark-rows", Input).value.strip()
        reason_error = reason_problem(reason)
        rows_error = rows_problem(rows_text)
        if rows_text and not rows_error and to != "succeeded":
            rows_error = f"rows mean nothing for a partition marked {to}: only a success loaded rows"
        self.query_one("#error-reason", Static).update(reason_error or "")
        self.query_one("#error-rows", Static).update(rows_error or "")
        preview, blocked = self._preview(target, to)
        self.query_one("#mark-preview", Static).update(preview)
        problems = reason_error or rows_error or blocked or target is None or not to
        self.query_one("#submit", Button).disabled = bool(problems)
        if problems or target is None:
            return None
        return MarkChoice(to, reason.strip(), int(rows_text) if rows_text else None, target.indices)

    def _preview(self, target: MarkTarget | None, to: str) -> tuple[str, bool]:
        """How many partitions change (those already ``to`` stay as they are); running ones block the mark."""
        if target is None or not to:
            return "choose the partitions and the status", True
        busy = sum(1 for index in target.indices if index in self.running)
        if busy:
            return f"[red1]{busy} of them running: cancel the backfill first, or wait[/]", True
        wanted = Status.parse(to)
        change = sum(1 for index in target.indices if self.board.status(index) is not wanted)
        if not change:
            return f"every one is {to} already: nothing would change", True
        same = len(target.indices) - change
        kept = f" ({same:,} already {to} stay as they are)" if same else ""
        return f"[b]{change:,} partition{'s' if change != 1 else ''} will be marked {to}[/b]{kept}", False

    def on_input_changed(self, _event: Input.Changed) -> None:
        self.validate()

    def on_radio_set_changed(self, _event: RadioSet.Changed) -> None:
        self.validate()

    def action_submit(self) -> None:
        choice = self.validate()
        if choice is not None:
            self.dismiss(choice)


class ReasonForm(InterveneForm):
    """A reason, and a plain statement of what pressing Enter does: the confirmation of a cancel, pause or
    resume (Esc keeps things as they are)."""

    BINDINGS = [Binding("escape", "cancel", "Keep as is")]

    def __init__(self, title: str, consequence: str, verb: str) -> None:
        super().__init__()
        self.title_text = title
        self.consequence = consequence
        self.verb = verb

    def compose(self) -> ComposeResult:
        with Vertical(classes="intervene-box"):
            yield Static(f"[b]{self.title_text}[/b]", classes="intervene-title")
            yield Static(self.consequence, id="reason-consequence")
            yield Label("Reason (required)")
            yield Input(id="reason", compact=True)
            yield Static("", id="error-reason", classes="error")
            with Horizontal(classes="intervene-buttons"):
                yield Button(self.verb, variant="warning", id="submit", compact=True)
                yield Button("Keep as is", id="cancel", compact=True)
                yield Static(f"Enter: {self.verb.lower()} · Esc keeps it as is", classes="intervene-keys")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#reason", Input).focus()
        self.query_one("#submit", Button).disabled = True

    def on_input_changed(self, event: Input.Changed) -> None:
        problem = reason_problem(event.value)
        self.query_one("#error-reason", Static).update(problem if event.value and problem else "")
        self.query_one("#submit", Button).disabled = problem is not None

    def on_input_submitted(self, _event: Input.Submitted) -> None:
        self.action_submit()

    def action_submit(self) -> None:
        reason = self.query_one("#reason", Input).value
        problem = reason_problem(reason)
        if problem is not None:
            self.query_one("#error-reason", Static).update(problem)
            return
        self.dismiss(reason.strip())


MOST_PARALLEL = 100_000


def parallel_problem(text: str) -> str | None:
    if not (text.isascii() and text.isdecimal()) or not 1 <= int(text) <= MOST_PARALLEL:
        return f"{text!r} is not a count of partitions at once: give ASCII digits from 1 to {MOST_PARALLEL:,}"
    return None


@dataclass(frozen=True)
class ParallelChoice:
    value: int
    reason: str


class ParallelForm(InterveneForm):
    """``+``/``-``: the new --max-parallel (one more or one less than now, to edit) and why; Enter sets it, as
    ``backfill set ID --max-parallel N`` does."""

    BINDINGS = [Binding("escape", "cancel", "Keep as is")]

    def __init__(self, backfill_id: str, now: int, proposed: int, consequence: str) -> None:
        super().__init__()
        self.backfill_id = backfill_id
        self.now = now
        self.proposed = proposed
        self.consequence = consequence

    def compose(self) -> ComposeResult:
        with Vertical(classes="intervene-box"):
            yield Static(f"[b]Partitions at once for backfill {self.backfill_id}[/b]", classes="intervene-title")
            yield Static(self.consequence, id="parallel-consequence")
            yield Label(f"--max-parallel (now {self.now:,})")
            yield Input(str(self.proposed), id="parallel-value", compact=True)
            yield Static("", id="error-parallel", classes="error")
            yield Label("Reason (required)")
            yield Input(id="reason", compact=True)
            yield Static("", id="error-reason", classes="error")
            with Horizontal(classes="intervene-buttons"):
                yield Button("Set", variant="warning", id="submit", compact=True)
                yield Button("Keep as is", id="cancel", compact=True)
                yield Static("Enter: set · Esc keeps it as is", classes="intervene-keys")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#reason", Input).focus()
        self.validate()

    def validate(self, *, show_reason: bool = False) -> ParallelChoice | None:
        value = self.query_one("#parallel-value", Input).value.strip()
        reason = self.query_one("#reason", Input).value
        value_error = parallel_problem(value)
        reason_error = reason_problem(reason)
        self.query_one("#error-parallel", Static).update(value_error or "")
        shown = reason_error if (reason or show_reason) else None
        self.query_one("#error-reason", Static).update(shown or "")
        self.query_one("#submit", Button).disabled = bool(value_error or reason_error)
        if value_error or reason_error:
            return None
        return ParallelChoice(int(value), reason.strip())

    def on_input_changed(self, _event: Input.Changed) -> None:
        self.validate()

    def on_input_submitted(self, _event: Input.Submitted) -> None:
        self.action_submit()

    def action_submit(self) -> None:
        choice = self.validate(show_reason=True)
        if choice is not None:
            self.dismiss(choice)
