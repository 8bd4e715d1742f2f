"""A child's log, read inline: virtualized, so a 200 MB log opens at once, and tailing while it grows.

Line start offsets are indexed in chunks (the file is never held in memory);
only visible lines are read and decoded, through a small cache. In wrap mode the
scroll position stays in logical lines and each visible line is wrapped to the
width. Follow-end mode keeps the last line in view while the file grows; any
scrolling up turns it off, End or F turns it back on (F again pauses it).

``/`` searches the log (toolong's habit): the file's bytes are scanned a chunk at a
time from the line in view, ``n``/``N`` find the next and previous match (wrapping
around), and every match on screen is highlighted. ``v`` opens the log in ``$PAGER``.
"""

from __future__ import annotations

import os
import re
from array import array
from bisect import bisect_right
from itertools import accumulate
from pathlib import Path

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from textual.binding import Binding
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from engine.base.printable import printable

CHUNK = 8 * 1024 * 1024
# Bytes of a line's start and of its end that are read and shown. A child's progress bar (\r, no newline) makes one
# line of its whole run: read whole at every poll, a 50 MB one took 84 % of a core while shown, beside the executor.
LINE_SHOWN = 16 * 1024
TEXT = Style()
EMPTY_NOTE = Style(color="grey50", italic=True)
MATCH = Style(reverse=True)
CURRENT_MATCH = Style(color="black", bgcolor="yellow", bold=True)
SEARCH_CHUNK = 4 * 1024 * 1024


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
        self.scanned = 0  # bytes looked through for line starts: a long unfinished line is not read again
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
        if size < self.scanned:  # truncated: start over
            self.starts, self.scanned = array("Q", [0]), 0
        changed = size != self.size or not self.complete
        self.size = size
        with open(self.path, "rb") as handle:
            while budget > 0 and self.scanned < size:
                position = self.scanned
                handle.seek(position)
                chunk = handle.read(min(CHUNK, budget, size - position))
                if not chunk:  # shorter than its size said (truncated meanwhile): the next call starts over
                    break
                budget -= len(chunk)
                self.scanned = position + len(chunk)
                last_newline = chunk.rfind(b"\n")
                if last_newline >= 0:
                    lengths = map(len, chunk[:last_newline].split(b"\n"))
                    self.starts.extend(position + end for end in accumulate(n + 1 for n in lengths))
        self.complete = self.scanned >= size
        return changed

    def line(self, number: int, handle) -> str:
        """Line ``number`` as shown: a line longer than twice LINE_SHOWN bytes keeps its start and its end."""
        start = self.starts[number]
        end = self.starts[number + 1] - 1 if number + 1 < len(self.starts) else self.size  # its newline left out
        length = max(0, end - start)
        handle.seek(start)
        if length <= 2 * LINE_SHOWN:
            return _shown(handle.read(length))
        head = handle.read(LINE_SHOWN)
        handle.seek(end - LINE_SHOWN)
        tail = handle.read(LINE_SHOWN)
        left_out = length - 2 * LINE_SHOWN
        return f"{_shown(head)} … {left_out:,} bytes of this line not shown (v opens the whole log) … {_shown(tail)}"


class LogView(ScrollView, can_focus=True):
    """The log file of one attempt."""

    class StateChanged(Message):
        """Following or paused, the search and its match changed: the pane's title says so."""

    class SearchRequested(Message):
        """/ in the log: the screen asks for the text (a widget never opens a screen itself)."""

        def __init__(self, log: LogView) -> None:
            super().__init__()
            self.log = log

    BINDINGS = [
        Binding("slash", "search", "Search log", show=False),
        Binding("n", "find(1)", "Next match", show=False),
        Binding("N", "find(-1)", "Previous match", show=False),
        Binding("F", "toggle_follow", "Follow/pause", show=False),
        Binding("v", "pager", "Pager", show=False),
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
        self._pieces: dict[tuple[int, int], list[str]] = {}  # (line, width) → the line wrapped: once, not per row
        self.note = "no log selected"
        self.pattern = ""  # what / searched for (case-insensitive), highlighted wherever it shows
        self.match_line: int | None = None  # the line of the match found last
        self.search_note = ""  # "no match", "wrapped": said in the pane's title

    def show(self, path: Path | None, note: str = "") -> None:
        """Display a log file (None: show ``note`` instead)."""
        if self._handle is not None:
            self._handle.close()
            self._handle = None
        self.path, self._cache, self._pieces = path, {}, {}
        self.note = note
        self.index = LineIndex(path) if path is not None else None
        self.follow_end = True
        self.match_line, self.search_note = None, ""
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
            self._forget(before - 1)  # the previously last line may have been completed
        self._forget(self.index.line_count - 1)
        self.virtual_size = Size(self.size.width, max(1, self.index.line_count))
        if self.follow_end:
            self.scroll_to(y=self._bottom(), animate=False)
        self.refresh()

    def _bottom(self) -> int:
        lines = self.index.line_count if self.index else 0
        return max(0, lines - self.size.height)

    def _forget(self, number: int) -> None:
        """Line ``number`` changed (it grew): read and wrap it again when next shown."""
        self._cache.pop(number, None)
        for key in [key for key in self._pieces if key[0] == number]:
            del self._pieces[key]

    def _wrapped(self, number: int, width: int) -> list[str]:
        pieces = self._pieces.get((number, width))
        if pieces is None:
            pieces = _wrap(self._text(number), width)
            if len(self._pieces) > 256:
                self._pieces.clear()
            self._pieces[number, width] = pieces
        return pieces

    def _text(self, number: int) -> str:
        text = self._cache.get(number)
        if text is None:
            assert self.index is not None and self._handle is not None
            text = self.index.line(number, self._handle)
            if len(self._cache) > 2048:
                self._cache.clear()
            self._cache[number] = text
        return text

    def watch_follow_end(self) -> None:
        self.post_message(self.StateChanged())

    def state_text(self) -> str:
        """What the pane's title says of the log: following or paused, and the search."""
        if self.index is None:
            return ""
        lines = self.index.line_count
        top = int(self.scroll_offset.y)
        where = "following the end" if self.follow_end else f"paused at line {min(lines, top + 1):,} of {lines:,}"
        text = f"log {where} (F {'pauses' if self.follow_end else 'follows'})"
        if self.pattern:
            found = f"line {self.match_line + 1:,}" if self.match_line is not None else "no match"
            text += f" · /{self.pattern}: {found}{self.search_note} (n/N)"
        return text

    # ---------------------------------------------------------------- search

    def search(self, pattern: str) -> None:
        """Find ``pattern`` from the line in view onwards (wrapping around) and highlight every match."""
        self.pattern = pattern
        self.match_line = None
        if pattern:
            self.find(1, start=int(self.scroll_offset.y) - 1)
        else:
            self.search_note = ""
            self.post_message(self.StateChanged())
        self.refresh()

    def find(self, direction: int, start: int | None = None) -> None:
        """The next (1) or previous (-1) line holding the pattern after ``start`` (the last match, else the top
        line in view), wrapping around the file's ends; brought into view, following paused."""
        if not self.pattern or self.index is None or self._handle is None:
            return
        while not self.index.complete and self.index.update():  # every line start known: a match has a line
            pass
        lines = self.index.line_count
        if lines == 0:
            return
        if start is None:
            start = self.match_line if self.match_line is not None else int(self.scroll_offset.y)
        found, wrapped = self._scan(start, direction)
        self.match_line = found
        self.search_note = "" if found is None or not wrapped else " (wrapped)"
        if found is not None:
            self.follow_end = False
            self.scroll_to(y=max(0, found - self.size.height // 2), animate=False)
        self.post_message(self.StateChanged())
        self.refresh()

    def _scan(self, line: int, direction: int) -> tuple[int | None, bool]:
        """(the line of the nearest match past ``line`` in ``direction``, whether it wrapped around)."""
        assert self.index is not None
        starts, size = self.index.starts, self.index.size
        needle = re.compile(re.escape(self.pattern.encode("utf-8")), re.IGNORECASE)
        if direction > 0:
            after = starts[line + 1] if 0 <= line + 1 < len(starts) else (0 if line < 0 else size)
            at = self._search_bytes(needle, after, size, first=True)
            if at is None:
                return self._line_of(self._search_bytes(needle, 0, after, first=True)), True
            return self._line_of(at), False
        before = starts[line] if 0 <= line < len(starts) else (0 if line < 0 else size)
        at = self._search_bytes(needle, 0, before, first=False)
        if at is None:
            return self._line_of(self._search_bytes(needle, before, size, first=False)), True
        return self._line_of(at), False

    def _line_of(self, offset: int | None) -> int | None:
        if offset is None:
            return None
        assert self.index is not None
        return max(0, bisect_right(self.index.starts, offset) - 1)

    def _search_bytes(self, needle: re.Pattern[bytes], begin: int, end: int, *, first: bool) -> int | None:
        """The offset of the first (or last) match wholly inside [begin, end), reading a chunk at a time."""
        handle = self._handle
        assert handle is not None
        overlap = len(needle.pattern) + 8  # an escaped pattern is never shorter than its match
        if first:
            position = begin
            while position < end:
                handle.seek(position)
                chunk = handle.read(min(SEARCH_CHUNK, end - position))
                hit = needle.search(chunk)
                if hit is not None:
                    return position + hit.start()
                if position + len(chunk) >= end:
                    return None
                position += max(1, len(chunk) - overlap)
            return None
        position = end
        while position > begin:
            low = max(begin, position - SEARCH_CHUNK)
            handle.seek(low)
            chunk = handle.read(position - low)
            last = None
            for last in needle.finditer(chunk):  # noqa: B007 - the last one is wanted
                pass
            if last is not None:
                return low + last.start()
            if low == begin:
                return None
            position = min(position - 1, low + overlap)  # always back, even when a chunk is no longer than the overlap
        return None

    def _painted(self, text: str, number: int) -> list[Segment]:
        """The line's text with every match of the pattern highlighted (the current match's line brighter)."""
        if not self.pattern:
            return [Segment(text, TEXT)]
        style = CURRENT_MATCH if number == self.match_line else MATCH
        segments, last = [], 0
        for hit in re.finditer(re.escape(self.pattern), text, re.IGNORECASE):
            if hit.start() > last:
                segments.append(Segment(text[last : hit.start()], TEXT))
            segments.append(Segment(hit.group(), style))
            last = hit.end()
        if last < len(text):
            segments.append(Segment(text[last:], TEXT))
        return segments

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
            left = int(self.scroll_offset.x)  # only what can show: a cell is a character or more (bar zero-width ones)
            text = self._text(number)[left : left + 4 * width]
            return Strip(self._painted(text, number)).crop_extend(0, width, TEXT)
        # Wrap: fill the viewport with wrapped pieces of consecutive lines from the top line.
        remaining = y
        number = top
        while number < self.index.line_count:
            pieces = self._wrapped(number, width)
            if remaining < len(pieces):
                return Strip(self._painted(pieces[remaining], number)).crop_extend(0, width, TEXT)
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

    def action_search(self) -> None:
        """/ in the log: the screen asks for the text, then ``search`` finds it from the line in view."""
        self.post_message(self.SearchRequested(self))

    def action_find(self, direction: int) -> None:
        if not self.pattern:
            self.notify("/ searches the log first; then n and N find the next and previous match", timeout=3)
            return
        self.find(direction)

    def action_toggle_follow(self) -> None:
        """F: pause following where the view is, or follow the end again."""
        if self.follow_end:
            self.follow_end = False
        else:
            self.action_log_end()
        self.post_message(self.StateChanged())

    def action_pager(self) -> None:
        """v: the whole log in $PAGER (less when unset); the dashboard comes back when it exits."""
        import shlex
        import subprocess

        from textual.app import SuspendNotSupported

        if self.path is None or not self.path.exists():
            self.notify("no log file to open", severity="warning", timeout=3)
            return
        command = shlex.split(os.environ.get("PAGER") or "less") or ["less"]
        try:
            with self.app.suspend():
                subprocess.run([*command, str(self.path)], check=False)
        except SuspendNotSupported:
            self.notify("this terminal cannot hand the screen to a pager", severity="warning", timeout=4)
        except OSError as error:
            self.notify(f"$PAGER {command[0]!r} cannot run: {error.strerror or error}", severity="error", timeout=6)
        self.refresh()

    def action_toggle_wrap(self) -> None:
        self.wrap = not self.wrap
        self.refresh()

    def on_unmount(self) -> None:
        if self._handle is not None:
            self._handle.close()


def _shown(data: bytes) -> str:
    """Bytes of a log as text for the screen: tabs as spaces, and a child's colours, cursor moves and titles
    removed, so they never reach the terminal."""
    return printable(data.decode("utf-8", "replace").replace("\t", "    "))


def _wrap(text: str, width: int) -> list[str]:
    if width <= 0 or cell_len(text) <= width:
        return [text]
    return [text[i : i + width] for i in range(0, len(text), width)]
