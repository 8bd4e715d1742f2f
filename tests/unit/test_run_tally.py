"""The run's tally: what a run's ended attempts add up to, without keeping them."""

from __future__ import annotations

from engine.store.records import Attempt, RecordStatus
from engine.store.run_tally import RunTally


def ended(run_id: str, status: str, verification: str | None = None) -> Attempt:
    checked = {"status": verification, "detail": f"{run_id} checked"} if verification else None
    return Attempt(run_id=run_id, status=status, started_at="t", log=f"children/{run_id}.log", verification=checked)


def test_a_retried_partition_counts_once_and_every_attempt_counts():
    """Two attempts of partition 3 (failed, then succeeded) and one cancelled of partition 0: three attempts, two
    partitions ran, one cancelled; each status and verification counted, a running attempt's verification not."""
    tally = RunTally(5)
    tally.add(3, ended("b-p3-a1", RecordStatus.FAILED, "failed"))
    tally.add(3, ended("b-p3-a2", RecordStatus.SUCCEEDED, "verified"))
    tally.add(0, ended("b-p0-a1", RecordStatus.CANCELLED))
    tally.add(1, ended("b-p1-a1", RecordStatus.RUNNING))
    assert (tally.total, tally.ran, tally.statuses["cancelled"], tally.succeeded_any) == (4, 3, 1, True)
    assert tally.verifications == {"failed": 1, "verified": 1, "none": 1}
    assert tally.verification_failures == [{"run_id": "b-p3-a1", "detail": "b-p3-a1 checked"}]
    assert [run["run_id"] for run in tally.listed] == ["b-p3-a1", "b-p3-a2", "b-p0-a1", "b-p1-a1"]


def test_names_are_kept_up_to_the_limit_and_the_totals_go_on():
    """Past the limit no name is kept, the totals count every attempt, and nothing grows but the counters."""
    tally = RunTally(10_000, listed_limit=3)
    for index in range(10_000):
        tally.add(index, ended(f"b-p{index}-a1", RecordStatus.SUCCEEDED, "warning"))
    assert len(tally.listed) == 3 and len(tally.verification_failures) == 3
    assert (tally.total, tally.ran, tally.verification_failures_total) == (10_000, 10_000, 10_000)
    assert tally.succeeded_any


def test_counts_add_up_names_are_whole_and_an_index_outside_the_plan_is_not_a_partition():
    """Two verified successes count two of each; a listed run is its ID, status and log; an index past the plan
    (never one of ours) counts as an attempt but as no partition, without failing."""
    tally = RunTally(2)
    tally.add(0, ended("b-p0-a1", RecordStatus.SUCCEEDED, "verified"))
    tally.add(1, ended("b-p1-a1", RecordStatus.SUCCEEDED, "verified"))
    tally.add(2, ended("b-p2-a1", RecordStatus.SUCCEEDED))
    assert tally.statuses["succeeded"] == 3 and tally.verifications["verified"] == 2
    assert tally.listed[0] == {"run_id": "b-p0-a1", "status": "succeeded", "log": "children/b-p0-a1.log"}
    assert (tally.total, tally.ran) == (3, 2)
