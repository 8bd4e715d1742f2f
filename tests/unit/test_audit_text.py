"""How `backfill audit` prints a line: the rows a mark stated, and the rows it replaced."""

from __future__ import annotations

from tui.cli.audit_command import entry_text
from tui.cli.terminal import Paint

LINE = {
    "action": "MARK",
    "partition_id": "3fa2c1d0e4b5aa",
    "from_status": "failed",
    "to_status": "succeeded",
    "target_count": 1200,
    "previous_count": None,
    "requested_by": "ann@box",
    "reason": "loaded by hand",
    "applied_at": "2026-11-30T21:40:00.000000Z",
}


def test_a_mark_with_rows_prints_them():
    """A change of status with rows: the rows stated."""
    assert entry_text(LINE, Paint(False)).endswith("failed → succeeded  ann@box: loaded by hand (rows 1200)")


def test_rows_stated_on_a_partition_already_succeeded_print_what_they_replaced():
    """succeeded → succeeded with rows: the previous count (— for none) and the new one."""
    added = {**LINE, "from_status": "succeeded"}
    assert entry_text(added, Paint(False)).endswith("(rows — → 1200)")
    corrected = {**added, "previous_count": 900}
    assert entry_text(corrected, Paint(False)).endswith("(rows 900 → 1200)")


def test_a_slice_of_a_bulk_mark_prints_its_first_partition_and_how_many_follow():
    """A bulk mark's line for 100,000 consecutive partitions: the first one's ID and ``+99,999``; one of a single
    partition, or an asset's, as before."""
    whole = {**LINE, "partitions": 100_000, "last_partition_id": "ffff"}
    assert "  3fa2c1d0e4b5 +99,999  failed → succeeded  " in entry_text(whole, Paint(False))
    assert "  3fa2c1d0e4b5  failed → " in entry_text({**whole, "partitions": 1}, Paint(False))
    assert "  3fa2c1d0e4b5 +1 mart.x  failed → " in entry_text(
        {**whole, "partitions": 2, "asset": "mart.x"}, Paint(False)
    )
