"""``/``: jump to a partition by date or timestamp, by index, or by a prefix of its ID."""

from __future__ import annotations

import os

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Footer, Input, Static

from engine.base.errors import BadInput
from engine.dates.instants import boundary_instant, parse_boundary
from engine.spec.backfill_spec import BackfillSpec
from engine.store.records import read_record
from engine.store.state_store import StateStore

SCAN_LIMIT = 2_000_000  # hashing every never-attempted partition ID beyond this would freeze the screen


def locate_partition(text: str, spec: BackfillSpec, store: StateStore | None) -> int:
    """The partition ``text`` names: an index (ASCII digits), a date/timestamp inside it, or a unique ID prefix.

    Raises :class:`BadInput` with what was tried."""
    value = text.strip()
    plan = spec.plan
    if not value:
        raise BadInput("type a date (2024-03-10), a timestamp, a partition number or an ID prefix")
    if value.isascii() and value.isdigit() and len(value) < 10:
        index = int(value)
        if index >= len(plan):
            raise BadInput(f"partition {index} does not exist: numbers go from 0 to {len(plan) - 1}")
        return index
    if value[:4].isascii() and value[:4].isdigit() and "-" in value:
        try:
            instant = boundary_instant(parse_boundary(value, "jump"), spec.zone, "jump", inclusive_date=False)
        except BadInput as error:
            raise BadInput(str(error).replace("jump ", "", 1)) from None
        index = plan.index_containing(instant)
        if index is None:
            raise BadInput(f"{value} is outside this backfill's range")
        return index
    prefix = value.lower()
    if not all(c in "0123456789abcdef" for c in prefix):
        raise BadInput(f"{value!r} is not a date, a partition number or a hex ID prefix")
    return _by_id_prefix(prefix, spec, store)


def _by_id_prefix(prefix: str, spec: BackfillSpec, store: StateStore | None) -> int:
    plan = spec.plan
    names: list[str] = []
    if store is not None:  # attempted partitions have a record named by their ID: no hashing needed
        try:
            names = [e.name[:-5] for e in os.scandir(store.partitions) if e.name.startswith(prefix)]
        except OSError:
            names = []
        if len(names) > 1:
            raise BadInput(f"{prefix!r} matches {len(names)} partitions: type more of the ID")
    if len(plan) > SCAN_LIMIT:  # too many to hash: only attempted partitions can be found
        if store is not None and len(names) == 1:
            return read_record(store.record_path(names[0]), plan, spec.ids.of).index
        raise BadInput(f"no attempted partition ID starts with {prefix!r} (a plan of {len(plan):,} is not scanned)")
    found = [i.index for i in plan if spec.ids.of(i.start, i.end).startswith(prefix)]
    if not found:
        raise BadInput(f"no partition ID starts with {prefix!r}")
    if len(found) > 1:
        raise BadInput(f"{prefix!r} matches {len(found)} partitions: type more of the ID")
    return found[0]


class JumpScreen(ModalScreen[int | None]):
    """Returns the partition index to jump to, or None."""

    CSS_PATH = "screens.tcss"  # read as it first opens: not parsed before the first frame

    BINDINGS = [Binding("escape", "dismiss_none", "Cancel")]

    def __init__(self, spec: BackfillSpec, store: StateStore | None) -> None:
        super().__init__()
        self.spec = spec
        self.store = store

    def compose(self) -> ComposeResult:
        with Vertical(id="jump-box"):
            yield Static("[b]Jump to[/b]  a date or timestamp, a partition number, or an ID prefix  (Esc cancels)")
            yield Input(placeholder="2024-03-10  ·  9794  ·  5f0c3a91", id="jump-input")
            yield Static("", id="jump-error")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one(Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        try:
            index = locate_partition(event.value, self.spec, self.store)
        except BadInput as error:
            self.query_one("#jump-error", Static).update(f"[red]{error}[/red]")
            return
        self.dismiss(index)

    def action_dismiss_none(self) -> None:
        self.dismiss(None)
