"""The details pane: the selected partition's interval (zone and UTC), ID, every attempt, and a log.

Attempts come from the partition's record, as the source's record cache holds it:
read again whenever the record changes. ``[`` and ``]`` choose the attempt whose log is shown; the latest
is shown by default and tails live while its child runs.
"""

from __future__ import annotations

import os
import textwrap

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static

from engine.base.errors import StateUnreadable
from engine.dates.instants import UTC, format_instant, offset_micros
from engine.store.records import Attempt
from engine.store.split_tree import SplitNode, read_tree
from engine.store.status import Status
from tui import human
from tui.app.sources import BackfillSource
from tui.app.widgets.log_view import LogView
from tui.diff_text import changes_text

ATTEMPT_STYLES = {
    "succeeded": "green3",
    "failed": "red1",
    "cancelled": "yellow3",
    "starting": "dodger_blue1",
    "running": "dodger_blue1",
    "skipped": "grey58",
    "lost": "magenta",
}


VERIFICATION_STYLES = {"verified": "green3", "warning": "yellow3", "failed": "red1"}


def verification_text(verification: dict) -> str:
    """``verification: verified · staging.order_lines 44 rows in 23–92 (Friday mean 46 over 4)``."""
    parts = []
    for asset in verification.get("assets") or []:
        rows = asset.get("rows")
        if "mean" in asset:
            parts.append(
                f"{asset['asset']} {rows:,} rows {'in' if asset['status'] == 'inside' else 'outside'} "
                f"{asset['low']:,.0f}–{asset['high']:,.0f} ({asset['bucket']} mean {asset['mean']:,.0f} over "
                f"{asset['values']})"
            )
        elif rows is not None:
            parts.append(f"{asset['asset']} {rows:,} rows ({asset['status']}: {asset.get('values', 0)} past values)")
    detail = " · ".join(parts) if parts else verification.get("detail", "")
    return f"verification: {verification.get('status')} · {detail}"


def asset_resume_text(attempt: Attempt, attempts: list[Attempt]) -> str:
    """What an asset-level resume ran, and which attempt (or mark) each asset it carried came from."""
    numbers = {a.run_id: position + 1 for position, a in enumerate(attempts)}
    by_source: dict[str, list[str]] = {}
    for name, run_id in (attempt.carried or {}).items():
        source = numbers.get(run_id)
        by_source.setdefault(f"#{source}" if source else run_id, []).append(name)
    taken = "; ".join(f"took {', '.join(names)} from {source}" for source, names in by_source.items())
    return f"ran {', '.join(attempt.assets or []) or 'nothing'}" + (f"; {taken}" if taken else "")


def _clock(text: str | None) -> str:
    """``2026-11-29T09:45:13.002Z`` → ``2026-11-29 09:45:13``."""
    return text[:19].replace("T", " ") if text else "—"


def _process_text(attempt: Attempt) -> str:
    """``  pid 4242``, ``  warm runner pid 4242``, ``  pid 4242 on worker tcp://… (host)``."""
    who = "warm runner pid" if attempt.launcher == "warm" else "pid"
    where = f" on worker {attempt.remote['worker']} ({attempt.remote.get('host')})" if attempt.remote else ""
    return f"  {who} {attempt.pid}{where}"


def _span(started: str | None, finished: str | None, *, short: bool) -> str:
    """When an attempt ran; ``short`` (80 columns): the month and day once, then the two times."""
    if not short:
        return f"{_clock(started)} → {_clock(finished)}"
    begin, end = _clock(started), _clock(finished)
    same_day = begin[:10] == end[:10]
    return f"{begin[5:]} → {end[11:] if same_day else end[5:]}"


class PartitionDetails(Vertical):
    def __init__(self, source: BackfillSource, **kwargs) -> None:
        super().__init__(**kwargs)
        self.source = source
        self.index: int | None = None
        self.attempts: list[Attempt] = []
        self.split_tree: SplitNode | None = None  # a split partition's halves, when the selected one split
        self.owners: dict[int, SplitNode] = {}  # positions in attempts of the halves' attempts
        self.chosen: int | None = None  # position in attempts of the attempt whose log is shown
        self._signature: tuple | None = None
        self.error: str | None = None

    def compose(self) -> ComposeResult:
        yield Static("", id="details-summary")
        yield LogView(id="details-log")

    @property
    def log(self) -> LogView:
        return self.query_one(LogView)

    def show_partition(self, index: int, *, force: bool = False) -> None:
        board = self.source.board
        loaded = self.source.records.load(index) if board.attempts(index) else None
        # The record's own version, not the board's counts: the record lags the board by a few milliseconds
        # (another thread writes it), and may still hold the running attempt of a partition the board calls done.
        record = loaded.record if loaded is not None else None
        tree = self._tree_of(record)
        shape = tuple((n.record.id, n.record.status, len(n.record.attempts)) for n in tree.nodes()) if tree else None
        signature = (index, board.raw()[index], board.attempts(index), loaded.version if loaded else None, shape)
        if not force and signature == self._signature:
            return
        same_partition = self.index == index
        was_latest = self.chosen is None or self.chosen == len(self.attempts) - 1
        previous_log = self._chosen_log()
        self._signature, self.index = signature, index
        self.split_tree = tree
        self.attempts = list(record.attempts) if record is not None else []
        self.owners = {}  # a half's attempts follow the partition's: position → the half it belongs to
        for node in list(tree.nodes())[1:] if tree is not None else []:
            for attempt in node.record.attempts:
                self.owners[len(self.attempts)] = node
                self.attempts.append(attempt)
        self.error = loaded.error if loaded is not None else None
        if not same_partition or was_latest:
            self.chosen = len(self.attempts) - 1 if self.attempts else None
        self._render_summary()
        if not same_partition or self._chosen_log() != previous_log:
            self._show_log()

    def _tree_of(self, record) -> SplitNode | None:
        """The tree of a split partition (its halves' records read again on each poll: they change while the
        partition's own record does not), None otherwise."""
        if record is None or not record.is_split:
            return None
        try:
            return read_tree(self.source.store.splits, record)
        except StateUnreadable as error:
            self.error = str(error)
            return None

    def _chosen_log(self) -> str | None:
        if self.chosen is None or not self.attempts or self.chosen >= len(self.attempts):
            return None
        return self.attempts[self.chosen].log

    def choose_attempt(self, delta: int) -> None:
        if not self.attempts or self.chosen is None:
            return
        self.chosen = max(0, min(len(self.attempts) - 1, self.chosen + delta))
        self._render_summary()
        self._show_log()

    def _show_log(self) -> None:
        if self.chosen is None or not self.attempts:
            status = self.source.board.status(self.index) if self.index is not None else Status.QUEUED
            self.log.show(None, "not attempted yet" if status is Status.QUEUED else "no log")
            self._title()
            return
        attempt = self.attempts[self.chosen]
        path = self.source.store.directory / attempt.log if attempt.log else None
        self.log.show(path, "" if path and path.exists() else "the log file is missing")
        self._title()

    def _render_summary(self) -> None:
        assert self.index is not None
        spec = self.source.spec
        interval = spec.plan.interval(self.index)
        partition_id = spec.ids.of(interval.start, interval.end)
        status = self.source.board.status(self.index)
        text = Text(no_wrap=True, overflow="ellipsis")
        # Most important first: at 80×24 only the first three lines show (interval, reason, ID).
        label = self._status_label(status)
        text.append(f"partition {self.index}", style="bold")
        text.append(f"  {label}  ", style=ATTEMPT_STYLES.get(status.label, "grey58"))
        text.append(f"{format_instant(interval.start, spec.zone)} → {format_instant(interval.end, spec.zone)}")
        text.append("  (end exclusive)\n", style="grey58")
        latest = self.attempts[-1] if self.attempts else None
        if latest is not None and latest.error and status in (Status.FAILED, Status.CANCELLED):
            text.append(f"  {latest.error}\n", style="red1" if status is Status.FAILED else "yellow3")
        text.append("  id ", style="grey58")
        text.append(f"{partition_id}\n")  # plain text: selectable with the mouse, y copies it
        if offset_micros(interval.start, spec.zone) or offset_micros(interval.end, spec.zone):
            text.append(
                f"  {format_instant(interval.start, UTC)} → {format_instant(interval.end, UTC)}", style="grey70"
            )
            text.append("  UTC\n", style="grey58")
        width = self.size.width - 2 if self.size.width else 118  # inside the summary's padding
        if self.error:  # wrapped, its path under the backfill's directory: what is wrong comes after the path
            shown = self.error.replace(f"{self.source.store.directory}{os.sep}", "")
            for line in textwrap.wrap(shown, max(20, width - 2)):
                text.append(f"  {line}\n", style="red1")
        if not self.attempts:
            text.append("  no attempt yet\n", style="grey58")
        narrow = width < 98  # 80×24: every attempt on one line, so the last two fit in five
        own = len(self.attempts) - len(self.owners)
        for position, attempt in reversed(list(enumerate(self.attempts[:own]))):
            self._attempt_line(text, position, attempt, latest, width, narrow)
        if self.split_tree is not None:
            self._tree_lines(text, width, narrow)
        if len(self.attempts) > 1:
            text.append("  [ and ] choose the attempt whose log is shown\n", style="grey50")
        self.query_one("#details-summary", Static).update(text)

    def _tree_lines(self, text: Text, width: int, narrow: bool) -> None:
        """A split partition's halves under its attempts: each node indented by depth, a leaf with its attempts."""
        assert self.split_tree is not None
        done, leaves = self.split_tree.counts()
        text.append(
            f"  ⑂ split: {done}/{leaves} leaves done, {self.split_tree.deepest()} level"
            f"{'s' if self.split_tree.deepest() != 1 else ''} deep\n",
            style="magenta",
        )
        positions = {id(attempt): position for position, attempt in enumerate(self.attempts)}
        zone = self.source.spec.zone
        for node in list(self.split_tree.nodes())[1:]:
            record = node.record
            indent = "  " * node.depth
            text.append(f"{indent}└ ", style="grey58")
            text.append(f"{format_instant(record.start_us, zone)} → {format_instant(record.end_us, zone)}  ")
            text.append(f"{record.status}\n", style=ATTEMPT_STYLES.get(record.status, "grey58"))
            latest = record.attempts[-1] if record.attempts else None
            for attempt in reversed(record.attempts):
                self._attempt_line(text, positions[id(attempt)], attempt, latest, width, narrow, indent=indent + "  ")
                if attempt is latest and attempt.error and record.status in ("failed", "cancelled"):
                    text.append(f"{indent}      {attempt.error}\n", style="red1")

    def _attempt_line(
        self, text: Text, position: int, attempt: Attempt, latest, width: int, narrow: bool, indent: str = ""
    ) -> None:
        chosen = position == self.chosen
        line = Text(indent)
        line.append("▸ " if chosen else "  ", style="bold")
        line.append(f"#{position + 1} ", style="bold" if chosen else "")
        line.append(f"{attempt.status:<9}", style=ATTEMPT_STYLES.get(attempt.status, ""))
        duration = human.duration(attempt.duration) if attempt.duration is not None else ""
        exit_text = f"exit {attempt.exit_code}" if attempt.exit_code is not None else ""
        span = _span(attempt.started_at, attempt.finished_at, short=narrow)
        line.append(f" {span} {duration:>8} {exit_text:>8}")
        process = _process_text(attempt) if chosen and attempt.pid else ""
        # Never cut: the run ID shows whole or not at all (Y copies it, whole, whatever the width).
        if line.cell_len + 2 + len(attempt.run_id) <= width:
            line.append(f"  {attempt.run_id}", style="grey58")
        if process and narrow and line.cell_len + len(process) <= width:
            line.append(process, style="grey58")
        elif process:  # on a line of its own: the run ID already fills 120 columns
            line.append(f"\n    {process}", style="grey58")
        text.append_text(line)
        if attempt.assets is not None:
            text.append("\n      " + asset_resume_text(attempt, self.attempts), style="grey70")
        if chosen and attempt.verification:
            text.append(
                "\n      " + verification_text(attempt.verification),
                style=VERIFICATION_STYLES.get(attempt.verification.get("status"), "grey58"),
            )
        if attempt.error and attempt is not latest:
            text.append(f"\n      {attempt.error}", style="red1" if attempt.status == "failed" else "yellow3")
        if attempt.split:
            text.append(f"\n      {attempt.split}", style="magenta")
        changed = changes_text(attempt.row_changes)
        if changed:
            text.append(f"\n      changed {changed}  (d: the rows)", style="cyan")
        text.append("\n")

    def on_resize(self) -> None:
        if self.index is not None:
            self._render_summary()  # narrower or wider: the attempt lines are laid out again

    def _status_label(self, status: Status) -> str:
        """A partition recorded running in a backfill nobody runs is shown as interrupted."""
        if status is Status.RUNNING and self.source.nobody_runs:
            return "interrupted"
        return status.label

    def poll(self) -> None:
        """Follow the selected partition's progress and its growing log."""
        if self.index is not None:
            self.show_partition(self.index)
        self.log.poll()
        self._title()

    def on_log_view_state_changed(self, _message: LogView.StateChanged) -> None:
        self._title()

    def _title(self) -> None:
        """The pane's top border says what the log does: following or paused, and the search."""
        title = self.log.state_text()
        if self.border_title != title:
            self.border_title = title
