"""``Ctrl+F`` (or ``\\``): the rows whose text holds what was typed — the partition's ID, its interval as the
table shows it, its status, or the reason a failed or cancelled one ended with — case-insensitively.

The status column is matched from the status bytes; the reasons from the failed and cancelled records only;
IDs and intervals by one pass over the plan, and only when the text could be part of one (hex digits for an
ID, a digit for an interval), so that typing ``503`` over a million partitions reads no more than it must.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from engine.spec.backfill_spec import BackfillSpec
from engine.store.failure_groups import failed_reasons
from engine.store.state_store import StateStore
from engine.store.status import Status, StatusBoard

HEX = frozenset("0123456789abcdef")
SCAN_LIMIT = 2_000_000  # past this many partitions, IDs and intervals are not scanned (the screen would freeze)


@dataclass(frozen=True)
class TextMatch:
    """The partitions a text matches, and whether IDs and intervals were searched too."""

    text: str
    indices: frozenset[int]
    scanned_plan: bool


def rows_matching(
    text: str,
    *,
    spec: BackfillSpec,
    store: StateStore,
    board: StatusBoard,
    interval_text: Callable[[int], str],
) -> TextMatch:
    """Every partition whose ID, interval (``interval_text``: as the table shows it), status or reason holds
    ``text`` (case-insensitive)."""
    needle = text.strip().casefold()
    found: set[int] = set()
    statuses = frozenset(status for status in Status if needle in status.label)
    if statuses:
        found.update(board.indices_with(statuses))
    for index, reason in failed_reasons(spec, store, board, Status.FAILED, Status.CANCELLED):
        if reason and needle in reason.casefold():
            found.add(index)
    by_id = bool(needle) and set(needle) <= HEX
    by_interval = any(character.isdigit() for character in needle)
    scanned = len(spec.plan) <= SCAN_LIMIT
    if (by_id or by_interval) and scanned:
        for interval in spec.plan:
            index = interval.index
            if (by_id and needle in spec.ids.of(interval.start, interval.end)) or (
                by_interval and needle in interval_text(index).casefold()
            ):
                found.add(index)
    return TextMatch(text.strip(), frozenset(found), scanned or not (by_id or by_interval))
