"""The rerun form: which partitions, and the execution controls, for resuming a saved backfill.

It adds no behaviour the command line lacks: its result is exactly what
``backfill --continue ID [--rerun ...|--ids ...] [controls]`` would run, and the
app resumes through the same engine call.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Grid, Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Checkbox, Footer, Input, Label, RadioButton, RadioSet, Select, Static

from engine.base.errors import BadInput
from engine.dates.durations import format_duration, parse_duration
from engine.execute.rerun import PartitionSelection
from engine.spec.backfill_spec import ON_FAILURE, ExecutionOptions
from tui import human
from tui.app.sources import BackfillSource

MOST = 100_000  # retries, parallelism, workers: as the command line, anything above is a typo


@dataclass(frozen=True)
class RerunRequest:
    options: ExecutionOptions
    selection: PartitionSelection
    description: str
    whole_partitions: bool = False  # --rerun-whole-partition: no asset of a failed attempt is carried over


@dataclass(frozen=True)
class Choice:
    key: str
    label: str
    selection: PartitionSelection
    count: int


def partition_choices(
    source: BackfillSource,
    *,
    selected: int | None,
    marked: frozenset[int],
    filter_label: str | None,
    filter_indices: frozenset[int] | None,
) -> list[Choice]:
    board = source.board
    choices = []
    for key, label, mode in (
        ("failed", "failed", "failed"),
        ("missing", "missing: queued or interrupted", "missing"),
        ("all", "all, successes included", "all"),
    ):
        selection = PartitionSelection(mode=mode)
        choices.append(Choice(key, label, selection, selection.count(board)))
    if marked:
        choices.append(Choice("marked", "the marked partitions", PartitionSelection(indices=marked), len(marked)))
    elif selected is not None:
        start = source.spec.plan.interval(selected)
        from engine.dates.instants import format_instant

        label = f"the selected partition ({selected}: {format_instant(start.start, source.spec.zone)})"
        choices.append(Choice("selected", label, PartitionSelection(indices=frozenset({selected})), 1))
    if filter_indices is not None and filter_label:
        choices.append(
            Choice(
                "filter",
                f"those matching the filter '{filter_label}'",
                PartitionSelection(indices=filter_indices),
                len(filter_indices),
            )
        )
    return choices


class RerunForm(ModalScreen[RerunRequest | None]):
    CSS_PATH = "screens.tcss"  # read as it first opens: not parsed before the first frame
    BINDINGS = [Binding("escape", "cancel", "Cancel"), Binding("ctrl+s", "submit", "Run")]

    def __init__(
        self, source: BackfillSource, choices: list[Choice], *, blocked: str | None = None, chosen: str | None = None
    ) -> None:
        super().__init__()
        self.source = source
        self.choices = choices
        self.blocked = blocked
        self.chosen = chosen  # the choice to start from (a kind of failure from triage: "filter")
        self.errors: dict[str, str] = {}

    def compose(self) -> ComposeResult:
        default = next((c.key for c in self.choices if c.key == self.chosen and c.count), None)
        default = default or next((c.key for c in self.choices if c.key == "failed" and c.count), None) or "missing"
        with Vertical(id="rerun-box"):
            yield Static(f"[b]Rerun backfill {self.source.store.id}[/b]", id="rerun-title")
            yield from self._body(default)
            with Horizontal(id="rerun-buttons"):  # outside the scrolling body: always on screen
                yield Button("Run", variant="primary", id="submit", compact=True)
                yield Button("Cancel", id="cancel", compact=True)
                yield Static("Ctrl+S runs · Esc cancels", id="rerun-keys")
        yield Footer()

    def _body(self, default: str) -> ComposeResult:
        options = self.source.options
        with VerticalScroll(id="rerun-body"):
            if self.blocked:
                yield Static(self.blocked, id="rerun-blocked")
            yield Label("Partitions")
            with RadioSet(id="rerun-which"):
                for choice in self.choices:
                    yield RadioButton(
                        f"{choice.label} ({human.count(choice.count)})",
                        value=choice.key == default,
                        id=f"which-{choice.key}",
                    )
            yield Static("", id="error-which", classes="error")
            with Grid(id="rerun-fields"):
                yield Label("Retries")
                yield Input(str(options.retries), id="retries", compact=True)
                yield Static("", id="error-retries", classes="error")
                yield Label("Max parallel")
                yield Input(str(options.max_parallel), id="max_parallel", compact=True)
                yield Static("", id="error-max_parallel", classes="error")
                yield Label("Workers")
                yield Input(str(options.workers), id="workers", compact=True)
                yield Static("", id="error-workers", classes="error")
                yield Label("On failure")
                yield Select(
                    [(p, p) for p in ON_FAILURE],
                    value=options.on_failure,
                    allow_blank=False,
                    id="on_failure",
                    compact=True,
                )
                yield Static("", classes="error")
                yield Label("Per-child timeout")
                yield Input(
                    format_duration(options.timeout) if options.timeout else "",
                    id="timeout",
                    placeholder="none, or e.g. 30m",
                    compact=True,
                )
                yield Static("", id="error-timeout", classes="error")
            yield Checkbox("Newest first (reverse)", options.reverse, id="reverse", compact=True)
            if not self.source.spec.target.is_command:  # only a pipeline's partitions carry assets over
                yield Checkbox(
                    "Whole partitions (run every asset again, not only those that failed)",
                    False,
                    id="whole_partitions",
                    compact=True,
                )

    def on_mount(self) -> None:
        self.validate()
        self.query_one(RadioSet).focus()  # arrow keys choose the partitions from the first moment
        self.fit_body()

    def on_resize(self) -> None:
        self.fit_body()

    def fit_body(self) -> None:
        """The body scrolls; the title, the buttons, the key hint and the footer always stay visible."""
        self.query_one("#rerun-body").styles.max_height = max(3, self.size.height - 8)

    # ---------------------------------------------------------------- validation

    def _choice(self) -> Choice | None:
        pressed = self.query_one(RadioSet).pressed_button
        if pressed is None or pressed.id is None:
            return None
        key = pressed.id.removeprefix("which-")
        return next((c for c in self.choices if c.key == key), None)

    def _integer(self, field: str, minimum: int) -> int | None:
        """ASCII digits from ``minimum`` to 100,000, as the command line takes them (``int()`` alone would take
        ``٣``, ``1_0`` and a number of a hundred digits)."""
        text = self.query_one(f"#{field}", Input).value.strip()
        if not (text.isascii() and text.isdecimal()) or len(text) > 6:
            self.errors[field] = f"{text!r} is not a whole number: use ASCII digits from {minimum} to {MOST:,}"
            return None
        value = int(text)
        if value < minimum:
            self.errors[field] = f"{value} is too small: use {minimum} or more"
            return None
        if value > MOST:
            self.errors[field] = f"{value:,} is too large: use at most {MOST:,}"
            return None
        return value

    def validate(self) -> RerunRequest | None:
        """Check every field, show each problem beside its field, and enable Run only when all are fine."""
        self.errors = {}
        choice = self._choice()
        if choice is None:
            self.errors["which"] = "choose which partitions to run"
        elif choice.count == 0:
            self.errors["which"] = f"no partition is {choice.key}: choose another set"
        retries = self._integer("retries", 0)
        max_parallel = self._integer("max_parallel", 1)
        workers = self._integer("workers", 1)
        timeout_text = self.query_one("#timeout", Input).value.strip()
        timeout = None
        if timeout_text:
            try:
                timeout = parse_duration(timeout_text, "timeout")
            except BadInput:
                self.errors["timeout"] = f"{timeout_text!r} is not a duration (e.g. 30m)"
        for field in ("which", "retries", "max_parallel", "workers", "timeout"):
            self.query_one(f"#error-{field}", Static).update(self.errors.get(field, ""))
        self.query_one("#submit", Button).disabled = bool(self.errors) or self.blocked is not None
        if self.errors or self.blocked or choice is None:
            return None
        options = ExecutionOptions(
            max_parallel=max_parallel or 1,
            workers=workers or 16,
            retries=retries or 0,
            on_failure=str(self.query_one("#on_failure", Select).value),
            reverse=self.query_one("#reverse", Checkbox).value,
            timeout=timeout,
        )
        whole = self.query("#whole_partitions")
        return RerunRequest(
            options,
            choice.selection,
            f"{choice.label} ({human.count(choice.count)})",
            whole_partitions=bool(whole) and whole.first(Checkbox).value,
        )

    def on_input_changed(self, _event: Input.Changed) -> None:
        self.validate()

    def on_radio_set_changed(self, _event: RadioSet.Changed) -> None:
        self.validate()

    # ---------------------------------------------------------------- actions

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "submit":
            self.action_submit()
        else:
            self.dismiss(None)

    def action_submit(self) -> None:
        request = self.validate()
        if request is not None:
            self.dismiss(request)

    def action_cancel(self) -> None:
        self.dismiss(None)
