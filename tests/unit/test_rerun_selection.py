"""What a ``--continue`` runs (``PartitionSelection``), against an oracle written from the modes' definitions in
``docs/cli.md``: over any board of statuses, the count, the byte mask and the order (forward and reverse) agree,
and a partition that succeeded or was skipped runs again only when ``all`` or its ID asks."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from engine.execute.rerun import PartitionSelection, RerunMode
from engine.store.status import Status, StatusBoard

# What each mode runs, by status, written out rather than derived from the code's DONE set.
RUNS = {
    RerunMode.DEFAULT: {Status.QUEUED, Status.RUNNING, Status.FAILED, Status.CANCELLED},
    RerunMode.FAILED: {Status.FAILED},
    RerunMode.MISSING: {Status.QUEUED, Status.CANCELLED, Status.RUNNING},
    RerunMode.ALL: set(Status),
}

statuses = st.lists(st.sampled_from(list(Status)), min_size=0, max_size=60)


def board_of(values: list[Status]) -> StatusBoard:
    board = StatusBoard(len(values))
    for index, status in enumerate(values):
        board.set(index, status)
    return board


@given(statuses, st.sampled_from(list(RerunMode)), st.booleans())
def test_a_mode_selects_exactly_the_statuses_it_names_in_execution_order(values, mode, reverse):
    """By mode: the partitions whose status the mode names, first to last (or last to first), counted and masked
    alike."""
    board = board_of(values)
    selection = PartitionSelection(mode=mode)
    expected = [index for index, status in enumerate(values) if status in RUNS[mode]]
    assert list(selection.iterate(board, reverse=reverse)) == (expected[::-1] if reverse else expected)
    assert selection.count(board) == len(expected)
    assert selection.mask(board) == bytes(1 if status in RUNS[mode] else 0 for status in values)
    assert all(selection.wants(status) == (status in RUNS[mode]) for status in Status)


@given(statuses.filter(bool), st.data(), st.booleans())
def test_ids_select_exactly_themselves_whatever_their_status(values, data, reverse):
    """By IDs: exactly those partitions, succeeded and skipped ones included, in index order (or reverse)."""
    board = board_of(values)
    chosen = data.draw(st.frozensets(st.integers(0, len(values) - 1)))
    selection = PartitionSelection(indices=chosen)
    assert list(selection.iterate(board, reverse=reverse)) == sorted(chosen, reverse=reverse)
    assert selection.count(board) == len(chosen)
    assert selection.mask(board) == bytes(1 if index in chosen else 0 for index in range(len(values)))


def test_nothing_done_runs_again_by_default():
    """The default --continue of a board holding every status leaves succeeded and skipped partitions alone."""
    board = board_of(list(Status))
    assert list(PartitionSelection().iterate(board, reverse=False)) == [
        Status.QUEUED,
        Status.RUNNING,
        Status.FAILED,
        Status.CANCELLED,
    ]
