"""A child's log, read inline: virtualized, so a 200 MB log opens at once, and tailing while it grows.

Line start offsets are indexed in chunks (the file is never held in memory);
only visible lines are read and decoded, through a small cache. In wrap mode the
scroll position stays in logical lines and each visible line is wrapped to the
width. Follow-end mode keeps the last line in view while the file grows; any
scrolling up turns it off, End turns it back on.
"""

from __future__ import annotations

import os
from array import array
from itertools import accumulate
from pathlib import Path

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from textual.binding import Binding
from textual.geometry import Size
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

CHUNK = 8 * 1024 * 1024
TEXT = Style()
EMPTY_NOTE = Style(color="grey50", italic=True)


class LineIndex:
    """Offsets where each line of a growing file starts, found a budget of bytes at a time.

    ``starts[i]`` is where line *i* begins; the last entry is where the next, not yet
    terminated line begins. Bytes after it are shown as a last line only once the
    whole file has been scanned (they are then an unfinished line, not unscanned text).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.starts = array("Q", [0])
        self.size = 0
        self.complete = False  # True when everything up to ``size`` has been scanned

    @property
    def indexed(self) -> int:
        return self.starts[-1]

    @property
    def line_count(self) -> int:
        unfinished = 1 if self.complete and self.size > self.indexed else 0
        return len(self.starts) - 1 + unfinished

    def update(self, budget: int = 2 * CHUNK) -> bool:
        """Scan what was appended since the last call, up to ``budget`` bytes; True if anything changed."""
        try:
            size = os.path.getsize(self.path)
        except OSError:
            return False
        if size < self.indexed:  # truncated: start over
            self.starts = array("Q", [0])
        changed = size != self.size or not self.complete
        self.size = size
        with open(self.path, "rb") as handle:
            while budget > 0 and self.indexed < size:
                handle.seek(self.indexed)
                chunk = handle.read(min(CHUNK, budget, size - self.indexed))
                last_newline = chunk.rfind(b"\n")
                if last_newline < 0:
                    if len(chunk) == CHUNK:  # a line longer than a whole chunk: cut it there
                        self.starts.append(self.indexed + len(chunk))
                        budget -= len(chunk)
                        continue
                    break  # an unfinished line, or the budget ran out mid-line
                base = self.indexed
                lengths = map(len, chunk[:last_newline].split(b"\n"))
                self.starts.extend(base + end for end in accumulate(n + 1 for n in lengths))
                budget -= last_newline + 1
        self.complete = self.indexed >= size or (budget > 0 and b"\n" not in self._tail(size))
        return changed

    def _tail(self, size: int) -> bytes:
        with open(self.path, "rb") as handle:
            handle.seek(self.indexed)
            return handle.read(size - self.indexed)

    def line(self, number: int, handle) -> str:
        start = self.starts[number]
        end = self.starts[number + 1] if number + 1 < len(self.starts) else self.size
        handle.seek(start)
        return handle.read(max(0, end - start)).decode("utf-8", "replace").rstrip("\n").replace("\t", "    ")


class LogView(ScrollView, can_focus=True):
    """The log file of one attempt."""

    BINDINGS = [
        Binding("up,k", "scroll_lines(-1)", "Up", show=False),
        Binding("down,j", "scroll_lines(1)", "Down", show=False),
        Binding("pageup", "scroll_lines(-20)", "Page up", show=False),
        Binding("pagedown", "scroll_lines(20)", "Page down", show=False),
        Binding("home", "log_home", "Top", show=False),
        Binding("end,G", "log_end", "End of log"),
        Binding("w", "toggle_wrap", "Wrap"),
    ]

    wrap: reactive[bool] = reactive(False)
    follow_end: reactive[bool] = reactive(True)

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.path: Path | None = None
        self.index: LineIndex | None = None
        self._handle = None
        self._cache: dict[int, str] = {}
        self.note = "no log selected"

    def show(self, path: Path | None, note: str = "") -> None:
        """Display a log file (None: show ``note`` instead)."""
        if self._handle is not None:
            self._handle.close()
            self._handle = None
        self.path, self._cache = path, {}
        self.note = note
        self.index = LineIndex(path) if path is not None else None
        self.follow_end = True
        if path is not None and path.exists():
            self._handle = open(path, "rb")  # noqa: SIM115 - kept open while shown
        self.poll()
        self.scroll_to(y=self._bottom(), animate=False)
        self.refresh()

    def poll(self) -> None:
        """Pick up what was appended to the file; keep the end in view in follow-end mode."""
        if self.index is None:
            self.virtual_size = Size(self.size.width, 1)
            return
        if self._handle is None and self.path is not None and self.path.exists():
            self._handle = open(self.path, "rb")  # noqa: SIM115
        before = self.index.line_count
        if not self.index.update():
            return
        if self.index.line_count != before:
            self._cache.pop(before - 1, None)  # the previously last line may have been completed
        self._cache.pop(self.index.line_count - 1, None)
        self.virtual_size = Size(self.size.width, max(1, self.index.line_count))
        if self.follow_end:
            self.scroll_to(y=self._bottom(), animate=False)
        self.refresh()

    def _bottom(self) -> int:
        lines = self.index.line_count if self.index else 0
        return max(0, lines - self.size.height)

    def _text(self, number: int) -> str:
        text = self._cache.get(number)
        if text is None:
            assert self.index is not None and self._handle is not None
            text = self.index.line(number, self._handle)
            if len(self._cache) > 2048:
                self._cache.clear()
            self._cache[number] = text
        return text

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        if self.index is None or self._handle is None or self.index.line_count == 0:
            message = self.note or ("the log is empty" if self.index is not None else "no log")
            return Strip([Segment(message if y == 0 else "", EMPTY_NOTE)]).crop_extend(0, width, TEXT)
        top = int(self.scroll_offset.y)
        if not self.wrap:
            number = top + y
            if number >= self.index.line_count:
                return Strip.blank(width, TEXT)
            text = self._text(number)[int(self.scroll_offset.x) :]
            return Strip([Segment(text, TEXT)]).crop_extend(0, width, TEXT)
        # Wrap: fill the viewport with wrapped pieces of consecutive lines from the top line.
        remaining = y
        number = top
        while number < self.index.line_count:
            pieces = _wrap(self._text(number), width)
            if remaining < len(pieces):
                return Strip([Segment(pieces[remaining], TEXT)]).crop_extend(0, width, TEXT)
            remaining -= len(pieces)
            number += 1
        return Strip.blank(width, TEXT)

    def action_scroll_lines(self, delta: int) -> None:
        self.follow_end = delta > 0 and int(self.scroll_offset.y) + delta >= self._bottom()
        self.scroll_to(y=max(0, int(self.scroll_offset.y) + delta), animate=False)
        self.refresh()

    def action_log_home(self) -> None:
        self.follow_end = False
        self.scroll_to(y=0, animate=False)
        self.refresh()

    def action_log_end(self) -> None:
        self.follow_end = True
        self.scroll_to(y=self._bottom(), animate=False)
        self.refresh()

    def action_toggle_wrap(self) -> None:
        self.wrap = not self.wrap
        self.refresh()

    def on_unmount(self) -> None:
        if self._handle is not None:
            self._handle.close()


def _wrap(text: str, width: int) -> list[str]:
    if width <= 0 or cell_len(text) <= width:
        return [text]
    return [text[i : i + width] for i in range(0, len(text), width)]
