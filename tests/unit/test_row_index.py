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
