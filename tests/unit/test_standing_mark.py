"""Which mark still covers an asset: the record's latest word on it, never the audit's history."""

from engine.guardrails.history import _standing_mark
from engine.store.records import Attempt, PartitionRecord, RecordStatus


def _record(*attempts: Attempt, status: RecordStatus = RecordStatus.SUCCEEDED) -> PartitionRecord:
    return PartitionRecord("p", 0, "a", "b", 0, 10, status, list(attempts))


def _mark(status=RecordStatus.SUCCEEDED, rows: int | None = 5, asset: str | None = None) -> Attempt:
    return Attempt(run_id=f"m-{status}-{rows}-{asset}", status=status, started_at="t", finished_at="t",
                   kind="mark", rows=rows, asset=asset)  # fmt: skip


def _run(status=RecordStatus.SUCCEEDED) -> Attempt:
    return Attempt(run_id=f"r-{status}", status=status, started_at="t")


def test_a_rows_mark_of_the_asset_covers_it():
    """The asset's own succeeded mark with rows is the standing word."""
    mark = _mark(asset="a")
    assert _standing_mark(_record(_run(RecordStatus.FAILED), mark), "a", whole=False) is mark


def test_a_mark_without_rows_covers_nothing():
    """Rows are what make a mark evidence; none, no coverage."""
    assert _standing_mark(_record(_mark(rows=None, asset="a")), "a", whole=True) is None


def test_a_later_failed_mark_retracts():
    """Marked failed after the rows mark: the rows mark no longer stands."""
    record = _record(_mark(asset="a"), _mark(RecordStatus.FAILED, rows=None, asset="a"))
    assert _standing_mark(record, "a", whole=True) is None


def test_a_later_run_replaces_the_mark():
    """A run after the mark speaks for itself (through its run record), not through the mark."""
    assert _standing_mark(_record(_mark(), _run()), "a", whole=True) is None


def test_entries_of_other_assets_are_passed_over():
    """A mark of asset b says nothing about a: the earlier mark of a still stands."""
    mark = _mark(asset="a")
    assert _standing_mark(_record(mark, _mark(RecordStatus.FAILED, asset="b")), "a", whole=False) is mark


def test_whole_partition_entries_speak_only_for_assets_the_backfill_ran():
    """A whole-partition mark covers an asset the backfill ran, and not one it did not."""
    whole = _mark()
    record = _record(_mark(RecordStatus.FAILED, rows=None, asset="a"), whole)
    assert _standing_mark(record, "a", whole=True) is whole
    assert _standing_mark(record, "a", whole=False) is None
