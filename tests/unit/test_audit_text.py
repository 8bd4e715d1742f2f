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
