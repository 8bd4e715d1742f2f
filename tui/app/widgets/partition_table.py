"""The partition table: a Line-API ScrollView drawing only visible rows from the plan and status arrays.

There is no row object per partition. ``render_line`` computes a row from the
plan (interval), the status board (status, attempts, duration) and the running
partitions (live elapsed time). After each poll, only visible rows whose
signature changed are repainted.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.binding import Binding
from textual.geometry import Size
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from engine.dates.formatting import InstantFormatter
from engine.execute.executor_snapshot import RunningPartition
from engine.store.split_tree import SplitNode, read_tree
from engine.store.status import Status
from tui import human
from tui.app.messages import FollowChanged, PartitionSelected
from tui.app.row_index import RowIndex, SortKey
from tui.app.sources import BackfillSource
from tui.app.split_rows import SplitRows

SYMBOLS = {
    Status.QUEUED: "·",
    Status.RUNNING: "▶",
    Status.SUCCEEDED: "✓",
    Status.FAILED: "✗",
    Status.CANCELLED: "⊘",
    Status.SKIPPED: "↷",
}
STATUS_STYLES = {
    Status.QUEUED: Style(color="grey50"),
    Status.RUNNING: Style(color="dodger_blue1", bold=True),
    Status.SUCCEEDED: Style(color="green3"),
    Status.FAILED: Style(color="red1", bold=True),
    Status.CANCELLED: Style(color="yellow3"),
    Status.SKIPPED: Style(color="grey58"),
}
INTERRUPTED = Style(color="yellow3")
STOPPING = Style(color="yellow3", bold=True)
REASON_STYLES = {Status.FAILED: Style(color="red1"), Status.CANCELLED: Style(color="yellow3")}
CURSOR = Style(bgcolor="grey23", bold=True)
MARK = Style(color="magenta", bold=True)
DIM = Style(color="grey58")
PLAIN = Style()


# Verification of the latest attempt, drawn in the status column's last two cells (codes of the status board).
VERIFICATION_MARKS = {
    1: ("✓", Style(color="green")),
    2: ("!", Style(color="yellow", bold=True)),
    3: ("✗", Style(color="red", bold=True)),
    4: ("?", Style(dim=True)),
}


def compact(text: str) -> str:
    """``2024-03-10T00:00:00-05:00`` → ``2024-03-10 00:00-05``; ``Z`` is dropped (the zone is in the header),
    zero seconds too, and whole-hour offsets lose their minutes."""
    text = text.replace("T", " ", 1)
    if text.endswith("Z"):
        text = text[:-1]
    elif text.endswith(":00") and len(text) > 6 and text[-6] in "+-":
        text = text[:-3]
    if text[16:19] == ":00" and (len(text) == 19 or text[19] in "+-"):
        text = text[:16] + text[19:]
    return text


def _date_if_midnight(text: str) -> str:
    """``2024-01-04 00:00`` (or ``2024-03-10 00:00-05``) → ``2024-01-04``; any other time is kept whole."""
    return text[:10] if text[10:16] == " 00:00" else text


class PartitionTable(ScrollView, can_focus=True):
    """Every partition of the plan, queued work included, in plan order."""

    BINDINGS = [
        Binding("up,k", "cursor(-1)", "Up", show=False),
        Binding("down,j", "cursor(1)", "Down", show=False),
        Binding("pageup", "page(-1)", "Page up", show=False),
        Binding("pagedown", "page(1)", "Page down", show=False),
        Binding("home", "home", "Home", show=False),
        Binding("end", "end", "End", show=False),
        Binding("right,l", "open_split", "Open split", show=False),
        Binding("left,h", "close_split", "Close split", show=False),
    ]

    cursor_row: reactive[int] = reactive(0, always_update=True)
    follow: reactive[bool] = reactive(True)

    def __init__(self, source: BackfillSource, clock: Callable[[], float], **kwargs) -> None:
        super().__init__(**kwargs)
        self.source = source
        self.clock = clock
        self.plan = source.spec.plan
        self.board = source.board
        self.formatter = InstantFormatter(source.spec.zone)
        self.rows = SplitRows(RowIndex(self.board))
        self.trees: dict[int, tuple[tuple, SplitNode]] = {}  # split partitions on screen: record version, tree
        self.running: dict[int, RunningPartition] = {}
        self.marked: set[int] = set()
        self._painted: dict[int, tuple] = {}
        self._index_width = len(str(max(len(self.plan) - 1, 0)))
        self.dates_only = False  # below 100 columns a midnight boundary drops its time: the reason keeps room
        self._interval_width = self._measure_interval_width()
        self.virtual_size = Size(0, len(self.rows))

    # ---------------------------------------------------------------- layout

    def _measure_interval_width(self) -> int:
        widths = [len(self.interval_text(i)) for i in {0, len(self.plan) - 1, len(self.plan) // 2}]
        return max(widths)

    def interval_text(self, index: int) -> str:
        interval = self.plan.interval(index)
        start, end = compact(self.formatter.format(interval.start)), compact(self.formatter.format(interval.end))
        if self.dates_only:
            start, end = _date_if_midnight(start), _date_if_midnight(end)
        return f"{start} → {end}"

    def set_dates_only(self, dates_only: bool) -> bool:
        """Narrow terminals (the dashboard decides): a boundary at local midnight is shown as its date alone
        (the zone is in the header), so that the reason column keeps its room beside the scrollbar. True when
        it changed (the column titles change with it)."""
        if dates_only == self.dates_only:
            return False
        self.dates_only = dates_only
        self._interval_width = self._measure_interval_width()
        self._painted.clear()
        self.refresh()
        return True

    def header_text(self) -> Text:
        """Column titles aligned with the rows."""
        return Text(
            f"  {'#'.rjust(self._index_width)}  {'interval (end exclusive)'.ljust(self._interval_width)}  "
            f"{'status':<11}  {'try':>3}  {'elapsed':>8}  reason",
            no_wrap=True,
        )

    # ---------------------------------------------------------------- data

    @property
    def selected_index(self) -> int | None:
        return self.rows.index_at(self.cursor_row) if len(self.rows) else None

    def set_filter(self, statuses: frozenset[Status] | None, only: frozenset[int] | None = None) -> None:
        """Show only partitions with these statuses (None: all), and of ``only`` when given (a kind of failure);
        keeps the selected partition if shown."""
        keep = self.selected_index
        self.rows = SplitRows(RowIndex(self.board, statuses, only, self.rows.order), self.rows.opened)
        self._reset_rows(keep)

    def set_order(self, order: SortKey) -> None:
        """Order the rows (the filter kept): plan order, or by duration, attempts or status."""
        keep = self.selected_index
        self.rows = SplitRows(RowIndex(self.board, self.rows.statuses, self.rows.only, order), self.rows.opened)
        self._reset_rows(keep)

    def _reset_rows(self, keep: int | None) -> None:
        self.rows.changed()
        self.virtual_size = Size(self.virtual_size.width, len(self.rows))
        self._painted.clear()
        self.cursor_row = self.rows.nearest_row(keep) if keep is not None else 0
        self._scroll_cursor_into_view()
        self._load_visible()
        self.refresh()

    def update_running(self, running: tuple[RunningPartition, ...], changed: bool) -> None:
        """After a poll: refilter, follow, and repaint the visible rows whose content changed."""
        self.running = {r.index: r for r in running}
        if changed and self.rows.changes_with_statuses:
            keep = self.selected_index
            before = len(self.rows)
            self.rows.rebuild()
            if len(self.rows) != before or keep is None or self.rows.row_of(keep) != self.cursor_row:
                self._reset_rows(keep)
        if self.follow and running and not self.source.nobody_runs:
            self._follow_earliest(running)
        self._repaint_changed()

    def _follow_earliest(self, running: tuple[RunningPartition, ...]) -> None:
        earliest = min(r.index for r in running)
        row = self.rows.row_of(earliest)
        if row is None:
            return
        if row != self.cursor_row:
            self.cursor_row = row
        self._scroll_cursor_into_view(center=True)

    def _signature(self, row: int) -> tuple:
        index, node = self.rows.locate(row)
        if node is not None:
            return self._half_signature(row, index, node)
        status = self.board.raw()[index]
        running = self.running.get(index)
        elapsed = max(0, int(self.clock() - running.started_at)) if running else None
        # Being stopped: the seconds its grace has left before SIGKILL, shown instead of the elapsed time.
        kill_in = max(0, math.ceil(running.kill_at - self.clock())) if running and running.kill_at else None
        return (
            index,
            status,
            self.board.attempts(index),
            self.board.duration(index),
            elapsed,
            kill_in,
            self.board.verification(index),
            row == self.cursor_row,
            index in self.marked,
            self.reason(index, status),
            self._split_counts(index),
        )

    def _half_signature(self, row: int, index: int, node: SplitNode) -> tuple:
        """A half's row: what its own record says (its live elapsed time when it is the one running)."""
        record = node.record
        last = record.attempts[-1] if record.attempts else None
        running = self.running.get(index)
        live = running is not None and last is not None and running.run_id == last.run_id
        status = Status.parse(record.status)
        reason = record.reason if status in (Status.FAILED, Status.CANCELLED) else None
        return (
            index,
            status,
            len(record.attempts),
            last.duration if last is not None and not live else None,
            max(0, int(self.clock() - running.started_at)) if live and running else None,
            None,
            0,
            row == self.cursor_row,
            False,
            reason,
            node.counts() if node.halves else None,
            node,
        )

    def _split_counts(self, index: int) -> tuple[int, int] | None:
        """``(leaves done, leaves)`` of a split partition on screen (its tree as last loaded), else None."""
        tree = self.trees.get(index)
        return tree[1].counts() if tree is not None else None

    def reason(self, index: int, status: int) -> str | None:
        """Why a failed or cancelled partition ended (its latest attempt's error), as its record was last loaded:
        painting never reads the disk (``_load_visible`` does, on a poll or a scroll)."""
        if status not in (Status.FAILED, Status.CANCELLED):
            return None
        loaded = self.source.records.cached(index)
        return loaded.reason if loaded is not None else None

    def _load_visible(self) -> None:
        """Load the records of the failed and cancelled rows on screen, each read again only when it changed; once
        the backfill has split partitions, every attempted row's, and the trees of those that split (read again
        while they run: their halves change under a record that may not)."""
        top = int(self.scroll_offset.y)
        raw = self.board.raw()
        splits = self.source.store.splits.is_dir()
        for row in range(top, min(top + max(1, self.size.height), len(self.rows))):
            index, node = self.rows.locate(row)
            if node is not None:
                continue
            if raw[index] in (Status.FAILED, Status.CANCELLED) or (splits and self.board.attempts(index)):
                loaded = self.source.records.load(index)
                if splits and loaded.record is not None and loaded.record.is_split:
                    self._load_tree(index, loaded.version, loaded.record, raw[index] == Status.RUNNING)

    def _load_tree(self, index: int, version: tuple, record, running: bool) -> None:
        known = self.trees.get(index)
        if known is not None and known[0] == version and not running:
            return
        try:
            tree = read_tree(self.source.store.splits, record)
        except Exception:  # a half's record unreadable: the partition's row still shows; its halves do not
            return
        self.trees[index] = (version, tree)
        if index in self.rows.opened:
            self.rows.open(index, list(tree.nodes())[1:])
            self.virtual_size = Size(self.virtual_size.width, len(self.rows))

    def _repaint_changed(self) -> None:
        self._load_visible()
        top = int(self.scroll_offset.y)
        height = self.size.height
        for row in range(top, min(top + height, len(self.rows))):
            signature = self._signature(row)
            if self._painted.get(row) != signature:
                self.refresh_line(row)

    # ---------------------------------------------------------------- rendering

    def render_line(self, y: int) -> Strip:
        row = int(self.scroll_offset.y) + y
        width = self.scrollable_content_region.width  # the scrollbar takes its column
        if row >= len(self.rows):
            return Strip.blank(width, PLAIN)
        signature = self._signature(row)
        self._painted[row] = signature
        index, status_code, attempts, duration, elapsed, kill_in, verification, is_cursor, is_marked, reason = (
            signature[:10]
        )
        split = signature[10]
        node = signature[11] if len(signature) > 11 else None
        status = Status(status_code)
        if kill_in is not None:
            time_text = f"kill {kill_in}s"
        elif elapsed is not None:
            time_text = human.duration(elapsed) if elapsed >= 10 else f"{elapsed}s"
        elif duration is not None:
            time_text = human.duration(duration)
        else:
            time_text = ""
        base = CURSOR if is_cursor else PLAIN
        if status is Status.RUNNING and self.source.nobody_runs:  # recorded running, but nobody runs it
            symbol, label, style = "↯", "interrupted", INTERRUPTED
        elif kill_in is not None:
            symbol, label, style = "■", "stopping", STOPPING
        else:
            symbol, label, style = SYMBOLS[status], status.label, STATUS_STYLES[status]
        if node is not None:  # a half, under its partition: indented by its depth
            where = "  " * (node.depth - 1) + "└ " + self._span_text(node.record.start_us, node.record.end_us)
            number = ""
        else:
            where, number = self.interval_text(index), str(index)
        segments = [
            Segment("▸" if is_cursor else " ", base + DIM),
            Segment("●" if is_marked else " ", base + MARK),
            Segment(number.rjust(self._index_width) + "  ", base + DIM),
            Segment(where[: self._interval_width].ljust(self._interval_width) + "  ", base),
            Segment(f"{symbol} {label[:9]:<9}", base + style),
            Segment(f" {VERIFICATION_MARKS[verification][0]}", base + VERIFICATION_MARKS[verification][1])
            if verification and len(label) <= 9
            else Segment(f"{label[9:]:<2}" if len(label) > 9 else "  ", base + style),
            Segment(f"{attempts if attempts else '':>3}  {time_text:>8}", base),
        ]
        if split is not None:  # ⑂ leaves done / leaves; ▸ when opened
            opened = node is None and index in self.rows.opened
            segments.append(Segment(f"  {'▾' if opened else '⑂'} {split[0]}/{split[1]}", base + MARK))
        room = width - sum(len(segment.text) for segment in segments) - 2
        if reason and room >= 8:
            text = reason if len(reason) <= room else reason[: room - 1] + "…"
            segments.append(Segment("  " + text, base + REASON_STYLES[status]))
        strip = Strip(segments)
        return strip.crop_extend(0, width, base)

    # ---------------------------------------------------------------- navigation

    def _span_text(self, start: int, end: int) -> str:
        first, last = compact(self.formatter.format(start)), compact(self.formatter.format(end))
        if first[:10] == last[:10]:
            last = last[11:]  # a half within one day: its end's time alone
        elif last[10:16] == " 00:00" and end - start <= 86_400_000_000 + 3_600_000_000:
            last = "24:00" + last[16:]  # up to the next midnight (a 25-hour day's included)
        return f"{first} → {last}"

    def action_open_split(self) -> None:
        """``→`` on a split partition: its halves (and theirs) shown under it."""
        row = self.cursor_row
        if not len(self.rows):
            return
        index, node = self.rows.locate(row)
        tree = self.trees.get(index)
        if node is not None or tree is None or index in self.rows.opened:
            return
        self.rows.open(index, list(tree[1].nodes())[1:])
        self._rows_changed()

    def action_close_split(self) -> None:
        """``←`` on a split partition or one of its halves: the halves folded back, the cursor on the partition."""
        if not len(self.rows):
            return
        index, _ = self.rows.locate(self.cursor_row)
        if self.rows.close(index):
            self._rows_changed()
            row = self.rows.row_of(index)
            if row is not None:
                self.cursor_row = row
            self._scroll_cursor_into_view()

    def _rows_changed(self) -> None:
        self.virtual_size = Size(self.virtual_size.width, len(self.rows))
        self._painted.clear()
        self.refresh()

    def _scroll_cursor_into_view(self, *, center: bool = False) -> None:
        height = max(1, self.size.height)
        top = int(self.scroll_offset.y)
        row = self.cursor_row
        if center and not top <= row < top + height:
            self.scroll_to(y=max(0, row - height // 3), animate=False)
        elif row < top:
            self.scroll_to(y=row, animate=False)
        elif row >= top + height:
            self.scroll_to(y=row - height + 1, animate=False)

    def watch_cursor_row(self, old: int, new: int) -> None:
        self.refresh_line(old)
        self.refresh_line(new)
        index = self.selected_index
        if index is not None:
            self.post_message(PartitionSelected(index))

    def watch_follow(self, following: bool) -> None:
        self.post_message(FollowChanged(following))

    def watch_scroll_y(self, old: float, new: float) -> None:
        super().watch_scroll_y(old, new)
        self._painted.clear()
        self._load_visible()

    def on_resize(self) -> None:
        # A pane opened, a terminal shrank: the selected row stays on screen. Done here, once the new height is
        # known, not after the next refresh, which under load can come before the layout that halves the table.
        self._scroll_cursor_into_view(center=True)
        self._load_visible()

    def _move_to(self, row: int) -> None:
        self.follow = False
        if not len(self.rows):
            return
        self.cursor_row = max(0, min(len(self.rows) - 1, row))
        self._scroll_cursor_into_view()

    def toggle_mark(self) -> None:
        index = self.selected_index
        if index is None:
            return
        self.marked.symmetric_difference_update({index})
        self.refresh_line(self.cursor_row)

    def select_index(self, index: int) -> None:
        """Move the cursor to a partition (turns follow off)."""
        row = self.rows.row_of(index)
        if row is not None:
            self.follow = False
            self.cursor_row = row
            self._scroll_cursor_into_view(center=True)

    def on_click(self, event) -> None:
        """A click selects the row under the pointer (and turns follow off, like any navigation)."""
        row = int(self.scroll_offset.y) + event.y
        if 0 <= row < len(self.rows):
            self.follow = False
            self.cursor_row = row
            self.focus()

    def action_cursor(self, delta: int) -> None:
        self._move_to(self.cursor_row + delta)

    def action_page(self, direction: int) -> None:
        height = max(1, self.size.height)
        self.follow = False
        if not len(self.rows):
            return
        self.cursor_row = max(0, min(len(self.rows) - 1, self.cursor_row + direction * height))
        target = int(self.scroll_offset.y) + direction * height
        self.scroll_to(y=max(0, min(target, len(self.rows) - height)), animate=False)
        self._scroll_cursor_into_view()

    def action_home(self) -> None:
        self._move_to(0)

    def action_end(self) -> None:
        self._move_to(len(self.rows) - 1)
