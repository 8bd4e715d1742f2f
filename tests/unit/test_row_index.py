"""The filtered row index against a brute-force list, at sizes around every block boundary."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.store.status import Status, StatusBoard
from tui.app.row_index import BLOCK, RowIndex

SIZES = sorted({n for k in range(0, 4) for n in (k * BLOCK - 1, k * BLOCK, k * BLOCK + 1) if n > 0})


@st.composite
def boards(draw):
    size = draw(st.sampled_from([*SIZES, 3 * BLOCK + 777]))
    board = StatusBoard(size)
    density = draw(st.sampled_from([0.0, 0.01, 0.5, 0.99, 1.0]))
    seed = draw(st.integers(0, 2**32 - 1))
    import random

    rng = random.Random(seed)
    for index in range(size):
        if rng.random() < density:
            board.set(index, Status.SUCCEEDED)
        elif rng.random() < 0.5:
            board.set(index, Status.FAILED)
    statuses = draw(
        st.sampled_from(
            [frozenset({Status.SUCCEEDED}), frozenset({Status.QUEUED}), frozenset({Status.FAILED, Status.QUEUED})]
        )
    )
    return board, statuses


@settings(max_examples=60, deadline=None)
@given(boards(), st.data())
def test_filtered_rows_match_a_brute_force_list(case, data):
    """index_at, row_of, indices and len agree with a plain list of matching partitions, across block boundaries."""
    board, statuses = case
    rows = RowIndex(board, statuses)
    expected = [i for i in range(board.size) if board.status(i) in statuses]
    assert len(rows) == len(expected)
    assert rows.indices() == expected
    probes = {0, len(expected) - 1, *(b * BLOCK + d for b in range(4) for d in (-1, 0, 1))}
    probes |= set(data.draw(st.lists(st.integers(0, max(0, len(expected) - 1)), max_size=20)))
    for row in sorted(p for p in probes if 0 <= p < len(expected)):
        assert rows.index_at(row) == expected[row]
        assert board.status(rows.index_at(row)) in statuses
        assert rows.row_of(expected[row]) == row


def test_a_row_past_the_end_is_an_index_error_not_a_wrong_partition():
    """Asking for a row the filter does not have raises, rather than reading past the mask."""
    board = StatusBoard(BLOCK + 10)
    for index in range(0, BLOCK + 10, 2):
        board.set(index, Status.SUCCEEDED)
    rows = RowIndex(board, frozenset({Status.SUCCEEDED}))
    assert rows.index_at(len(rows) - 1) == BLOCK + 8
    try:
        rows.index_at(len(rows))
    except IndexError:
        pass
    else:
        raise AssertionError("index_at past the end returned a partition")


def sorted_board() -> StatusBoard:
    """Six partitions: durations, attempts and statuses that order them differently."""
    board = StatusBoard(6)
    for index, (status, attempts, seconds) in enumerate([
        (Status.SUCCEEDED, 1, 3.0), (Status.FAILED, 3, 1.0), (Status.QUEUED, 0, None),
        (Status.SUCCEEDED, 2, 9.0), (Status.CANCELLED, 1, 0.5), (Status.FAILED, 1, 9.0),
    ]):  # fmt: skip
        board.set(index, status)
        board.set_attempts(index, attempts)
        board.set_duration(index, seconds)
    return board


def test_rows_sort_by_duration_attempts_or_status_ties_in_plan_order_and_rows_map_back():
    """Duration: the longest first, never attempted last; attempts: the most first; status: failed, cancelled,
    running, queued, skipped, succeeded; ties keep plan order; row_of inverts index_at and the filter still
    applies."""
    from tui.app.row_index import SortKey

    board = sorted_board()
    expected = {
        SortKey.INTERVAL: [0, 1, 2, 3, 4, 5],
        SortKey.DURATION: [3, 5, 0, 1, 4, 2],
        SortKey.ATTEMPTS: [1, 3, 0, 4, 5, 2],
        SortKey.STATUS: [1, 5, 4, 2, 0, 3],
    }
    for order, rows in expected.items():
        index = RowIndex(board, None, None, order)
        assert [index.index_at(r) for r in range(len(index))] == rows, order
        assert [index.row_of(i) for i in rows] == list(range(6)) and index.indices() == rows
    failed = RowIndex(board, frozenset({Status.FAILED}), None, SortKey.DURATION)
    assert [failed.index_at(r) for r in range(len(failed))] == [5, 1] and failed.row_of(0) is None
    assert failed.nearest_row(0) == 0 and failed.nearest_row(1) == 1
    board.set_duration(1, 20.0)
    failed.rebuild()  # statuses or durations changed: sorted again
    assert [failed.index_at(r) for r in range(len(failed))] == [1, 5]
    assert failed.changes_with_statuses and RowIndex(board, None, None, SortKey.ATTEMPTS).changes_with_statuses
    assert not RowIndex(board).changes_with_statuses
