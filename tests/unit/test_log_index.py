"""The log view's line index against a plain oracle: however a log grows and however the scan is chunked, its lines
are the file's; a line too long to show whole keeps its start and its end; and nothing already scanned is read
again (a child's progress bar, ``\\r`` without a newline, makes one line of its whole run)."""

from __future__ import annotations

import builtins

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tui.app.widgets import log_view
from tui.app.widgets.log_view import LINE_SHOWN, LineIndex


class Counting:
    """A file opened for reading whose reads are counted, in bytes."""

    def __init__(self, handle, tally: list[int]) -> None:
        self.handle, self.tally = handle, tally

    def read(self, size: int = -1) -> bytes:
        data = self.handle.read(size)
        self.tally.append(len(data))
        return data

    def seek(self, offset: int) -> int:
        return self.handle.seek(offset)

    def __enter__(self) -> Counting:
        return self

    def __exit__(self, *exc) -> None:
        self.handle.close()


def scanned(index: LineIndex) -> None:
    while index.update():
        pass


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    pieces=st.lists(st.text(alphabet="ab\n", max_size=30), min_size=1, max_size=8),
    chunk=st.integers(min_value=1, max_value=40),
)
def test_a_growing_log_s_lines_are_the_file_s_whatever_the_chunks(tmp_path, monkeypatch, pieces, chunk):
    """The log written piece by piece and indexed after each: its lines (the last one unfinished) are the file's."""
    monkeypatch.setattr(log_view, "CHUNK", chunk)
    path = tmp_path / "grow.log"
    path.write_bytes(b"")
    index = LineIndex(path)
    written = ""
    for piece in pieces:
        written += piece
        with open(path, "a") as log:
            log.write(piece)
        scanned(index)
        expected = written.split("\n")
        if expected[-1] == "":
            expected.pop()  # a final newline ends the last line; it starts none
        with open(path, "rb") as handle:
            assert [index.line(n, handle) for n in range(index.line_count)] == expected


def test_a_line_too_long_to_show_keeps_its_start_and_its_end(tmp_path):
    """Past twice LINE_SHOWN bytes, a line shows its first and last LINE_SHOWN bytes and how many it leaves out."""
    path = tmp_path / "long.log"
    middle = 5 * LINE_SHOWN
    path.write_bytes(b"s" * LINE_SHOWN + b"m" * middle + b"e" * (LINE_SHOWN - 3) + b"END\nnext\n")
    index = LineIndex(path)
    scanned(index)
    assert index.line_count == 2
    with open(path, "rb") as handle:
        shown = index.line(0, handle)
        assert shown == (
            "s" * LINE_SHOWN
            + f" … {middle:,} bytes of this line not shown (v opens the whole log) … "
            + "e" * (LINE_SHOWN - 3)
            + "END"
        )
        assert index.line(1, handle) == "next"
    exact = tmp_path / "exact.log"
    exact.write_bytes(b"x" * (2 * LINE_SHOWN) + b"\n")
    index = LineIndex(exact)
    scanned(index)
    with open(exact, "rb") as handle:
        assert index.line(0, handle) == "x" * (2 * LINE_SHOWN)  # at the limit: whole


def test_a_long_line_is_read_within_the_bytes_it_shows(tmp_path):
    """Showing a 5 MB line reads its start and its end, not the 5 MB."""
    path = tmp_path / "bar.log"
    path.write_bytes(b"\r 1% [#    ]" * 500_000)
    index = LineIndex(path)
    scanned(index)
    tally: list[int] = []
    with open(path, "rb") as handle:
        text = index.line(0, Counting(handle, tally))
    assert sum(tally) == 2 * LINE_SHOWN
    assert "bytes of this line not shown" in text


def test_an_unfinished_line_is_not_read_again_as_it_grows(tmp_path, monkeypatch):
    """A progress bar's line of 4 MB with 20 bytes appended: the next update reads the 20 bytes, not the line again
    (it read the whole unfinished line at every poll, twice)."""
    path = tmp_path / "bar.log"
    path.write_bytes(b"\r 1% [#    ]" * 350_000)
    index = LineIndex(path)
    scanned(index)
    assert index.line_count == 1 and index.complete
    with open(path, "ab") as log:
        log.write(b"\r 2% [##   ] eta 9s")
    tally: list[int] = []
    real_open = builtins.open
    monkeypatch.setattr(log_view, "open", lambda *a, **k: Counting(real_open(*a, **k), tally), raising=False)
    assert index.update()
    assert sum(tally) == 19
    assert index.line_count == 1 and index.complete


def test_a_truncated_log_is_indexed_again_from_its_start(tmp_path):
    """A log cut short (rotated, rewritten) is read again from its first byte."""
    path = tmp_path / "cut.log"
    path.write_bytes(b"one\ntwo\nthree unfinished")
    index = LineIndex(path)
    scanned(index)
    assert index.line_count == 3
    path.write_bytes(b"new\n")
    scanned(index)
    with open(path, "rb") as handle:
        assert [index.line(n, handle) for n in range(index.line_count)] == ["new"]


def test_a_log_emptied_mid_line_starts_over(tmp_path):
    """Truncated to fewer bytes than were scanned of an unfinished line (not fewer than the lines before it)."""
    path = tmp_path / "mid.log"
    path.write_bytes(b"done\n" + b"p" * 100)
    index = LineIndex(path)
    scanned(index)
    path.write_bytes(b"done\nq\nr")
    scanned(index)
    with open(path, "rb") as handle:
        assert [index.line(n, handle) for n in range(index.line_count)] == ["done", "q", "r"]
