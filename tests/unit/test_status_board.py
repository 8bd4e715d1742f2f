"""The status board in-process: one byte of status per partition with counts kept exact on every change,
attempts, durations and verification allocated only when first needed, finds forwards and backwards, and the
whole backfill's status from the counts."""

from __future__ import annotations

import pytest

from engine.base.errors import BadInput, StateUnreadable
from engine.store.status import (
    DONE,
    FINISHED,
    MAX_PARTITIONS,
    STATUS_NAMES,
    BackfillStatus,
    RunOutcome,
    Status,
    StatusBoard,
    backfill_status,
    check_plan_size,
)


def test_statuses_their_names_and_groups():
    """Labels are the lower-case names, parse reads any case; finished and done are the documented groups."""
    assert STATUS_NAMES == ("queued", "running", "succeeded", "failed", "cancelled", "skipped")
    assert Status.parse("Skipped") is Status.SKIPPED and Status.FAILED.label == "failed"
    assert {Status.SUCCEEDED, Status.FAILED, Status.CANCELLED, Status.SKIPPED} == FINISHED
    assert {Status.SUCCEEDED, Status.SKIPPED} == DONE


def test_a_plan_too_large_is_refused_before_anything_is_held():
    """The largest plan is allowed; one more partition is refused, as bad input for a new plan and as unreadable
    state for a saved one."""
    check_plan_size(MAX_PARTITIONS)
    with pytest.raises(BadInput) as refused:
        check_plan_size(MAX_PARTITIONS + 1)
    assert str(refused.value) == (
        "the plan has 50,000,001 partitions; a backfill holds at most 50,000,000: use a coarser --partition or a "
        "shorter range"
    )
    with pytest.raises(StateUnreadable):
        StatusBoard(MAX_PARTITIONS + 1)


def test_counts_follow_every_change_and_never_need_a_scan():
    """Every partition starts queued; a change moves one count to another; setting the same status twice
    changes nothing."""
    board = StatusBoard(5)
    assert board.counts() == {"queued": 5, "running": 0, "succeeded": 0, "failed": 0, "cancelled": 0, "skipped": 0}
    board.set(0, Status.RUNNING)
    board.set(0, Status.RUNNING)
    board.set(1, Status.FAILED)
    board.set(2, Status.FAILED)
    assert board.count(Status.FAILED) == 2
    board.set(2, Status.QUEUED)
    board.set(0, Status.SUCCEEDED)
    assert board.count(Status.QUEUED) == 3 and board.count(Status.SUCCEEDED) == 1 and board.count(Status.RUNNING) == 0
    assert board.status(0) is Status.SUCCEEDED and board.status(4) is Status.QUEUED
    assert board.raw()[1] == Status.FAILED
    assert board.indices_with(frozenset({Status.FAILED, Status.SUCCEEDED})) == [0, 1]


def test_attempts_durations_and_verification_are_held_only_once_needed():
    """None is stored until a first real value: zero attempts, no duration and no verification allocate nothing;
    attempts cap at 65,535; a duration can be unknown again, and is unknown without an attempt; unknown verification
    words are 0."""
    board = StatusBoard(3)
    board.set_attempts(0, 0)
    board.set_duration(0, None)
    board.set_verification(0, None)
    board.set_verification(0, {"status": "nonsense"})
    assert (board._attempts, board._durations, board._verification) == (None, None, None)
    assert board.attempts(2) == 0 and board.duration(2) is None and board.verification(2) == 0
    board.set_attempts(1, 70_000)
    board.set_duration(1, 2.5)
    board.set_verification(1, {"status": "insufficient history"})
    assert board.attempts(1) == 65_535 and board.attempts(0) == 0
    assert board.duration(1) == 2.5 and board.duration(0) is None
    board.set_duration(1, None)
    assert board.duration(1) is None
    assert board.verification(1) == 4 and board.verification(0) == 0
    board.set_duration(2, 0.0)
    assert board.duration(2) is None  # a duration belongs to an attempt: none without one
    board.set_attempts(2, 1)
    assert board.duration(2) == 0.0


def test_find_forwards_and_backwards():
    """The next index with a status at or after a start, or at or before it going backwards; -1 when none."""
    board = StatusBoard(6)
    for index in (1, 4):
        board.set(index, Status.FAILED)
    assert board.find(Status.FAILED, 0) == 1 and board.find(Status.FAILED, 1) == 1 and board.find(Status.FAILED, 2) == 4
    assert board.find(Status.FAILED, 5) == -1
    assert board.find(Status.FAILED, 5, backwards=True) == 4 and board.find(Status.FAILED, 4, backwards=True) == 4
    assert board.find(Status.FAILED, 3, backwards=True) == 1 and board.find(Status.FAILED, 0, backwards=True) == -1
    assert board.find(Status.FAILED, -1, backwards=True) == -1
    board.set(0, Status.FAILED)
    assert board.find(Status.FAILED, 0, backwards=True) == 0 and board.find(Status.FAILED, 0) == 0


def test_a_copy_takes_everything():
    """copy_from takes statuses, attempts, durations, verification and counts."""
    source = StatusBoard(3)
    source.set(2, Status.SKIPPED)
    source.set_attempts(2, 3)
    source.set_duration(2, 1.5)
    source.set_verification(2, {"status": "verified"})
    target = StatusBoard(3)
    target.copy_from(source)
    assert target.status(2) is Status.SKIPPED and target.attempts(2) == 3 and target.duration(2) == 1.5
    assert target.verification(2) == 1 and target.counts() == source.counts()
    source.set(0, Status.FAILED)
    assert target.status(0) is Status.QUEUED and target.count(Status.FAILED) == 0  # its own statuses and counts


@pytest.mark.parametrize(
    "counts, outcome, expected",
    [
        ({"succeeded": 3}, RunOutcome.CANCELLED, BackfillStatus.CANCELLED),
        ({"failed": 1}, RunOutcome.PAUSED, BackfillStatus.PAUSED),
        ({"succeeded": 2, "failed": 1, "queued": 1}, RunOutcome.FAILED, BackfillStatus.FAILED),
        ({"succeeded": 2, "queued": 1}, RunOutcome.SUCCEEDED, BackfillStatus.INCOMPLETE),
        ({"succeeded": 2, "running": 1}, None, BackfillStatus.INCOMPLETE),
        ({"succeeded": 2, "cancelled": 1}, None, BackfillStatus.INCOMPLETE),
        ({"succeeded": 2, "skipped": 1, "queued": 0}, RunOutcome.SUCCEEDED, BackfillStatus.SUCCEEDED),
    ],
)
def test_the_whole_backfills_status_from_the_counts(counts, outcome, expected):
    """Stopped or paused runs say so; any failed partition is failed; any left to run is incomplete; else
    succeeded — an invocation that ran only some partitions never makes the backfill look done."""
    assert backfill_status(counts, outcome) is expected
