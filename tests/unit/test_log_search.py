"""The log's search (``/``, ``n``, ``N``) against a plain oracle: chunked byte scans find the nearest matching
line in each direction, wrapping around, whatever the chunk size and wherever a match straddles a chunk."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tui.app.widgets import log_view
from tui.app.widgets.log_view import LineIndex, LogView


def viewer(path: Path, pattern: str) -> LogView:
    view = LogView()
    view.index = LineIndex(path)
    while view.index.update():
        pass
    view._handle = open(path, "rb")  # noqa: SIM115 - closed by the test
    view.pattern = pattern
    return view


def oracle(lines: list[str], pattern: str, line: int, direction: int) -> tuple[int | None, bool]:
    """The nearest line past ``line`` holding ``pattern`` (case-insensitive), and whether it wrapped."""
    hits = [n for n, text in enumerate(lines) if pattern.lower() in text.lower()]
    if not hits:
        return None, True
    if direction > 0:
        after = [n for n in hits if n > line]
        return (after[0], False) if after else (hits[0], True)
    before = [n for n in hits if n < line]
    return (before[-1], False) if before else (hits[-1], True)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    lines=st.lists(st.sampled_from(["row", "an ERROR here", "xx", "", "errorerror", "err", "or error"]), max_size=40),
    chunk=st.integers(min_value=24, max_value=80),
    direction=st.sampled_from([1, -1]),
    data=st.data(),
)
def test_the_nearest_match_in_each_direction_is_found_whatever_the_chunks(
    tmp_path, monkeypatch, lines, chunk, direction, data
):
    """Random logs, chunk sizes small enough that matches straddle chunks: n and N land where a line-by-line
    search lands, wrapped or not."""
    monkeypatch.setattr(log_view, "SEARCH_CHUNK", chunk)
    path = tmp_path / "log"
    path.write_text("".join(f"{text}\n" for text in lines))
    line = data.draw(st.integers(min_value=-1, max_value=max(0, len(lines) - 1)))
    view = viewer(path, "error")
    try:
        found, wrapped = view._scan(line, direction)
    finally:
        view._handle.close()
    expected, expected_wrap = oracle(lines, "error", line, direction)
    assert found == expected
    if expected is not None:
        assert wrapped == expected_wrap


def test_a_match_on_an_unfinished_last_line_is_found(tmp_path):
    """The last line has no newline yet (a child still writing it): a match there is on that line."""
    path = tmp_path / "log"
    path.write_text("a\nb\nthe error so far")
    view = viewer(path, "ERROR")
    try:
        assert view._scan(-1, 1) == (2, False)
        assert view._scan(2, -1) == (2, True)
    finally:
        view._handle.close()


@pytest.mark.parametrize("text", ["no such thing", "ÉRROR"])
def test_no_match_is_none(tmp_path, text):
    """Nothing holds it: no line, in either direction."""
    path = tmp_path / "log"
    path.write_text("error\nerror\n")
    view = viewer(path, text)
    try:
        assert view._scan(0, 1)[0] is None and view._scan(0, -1)[0] is None
    finally:
        view._handle.close()


@pytest.mark.parametrize("chunk", range(6, 40))
def test_a_single_match_straddling_any_chunk_boundary_is_found_both_ways(tmp_path, monkeypatch, chunk):
    """One match, with the chunk size moving the boundary across every byte of it (forward and backward, the
    scans overlap their chunks): it is found, never skipped for a later or earlier line."""
    monkeypatch.setattr(log_view, "SEARCH_CHUNK", chunk)
    path = tmp_path / "log"
    path.write_text("row\n" * 3 + "0123456789 the error is here\n" + "row\n" * 3)
    view = viewer(path, "error")
    try:
        assert view._scan(-1, 1) == (3, False)
        assert view._scan(6, -1) == (3, False)
        assert view._scan(3, 1) == (3, True)
    finally:
        view._handle.close()
