"""Bulk marks: one file for a mark of many partitions, merged into their records by every reader.

A mark is an entry in each partition's history, and each partition's history is its own atomically
written file. Writing 100,000 files costs the filesystem tens of seconds, so a mark of more than a few
partitions is written once, as ``bulk-marks/<stem>.json``: the status, who, why, the rows, and for each
partition the number its mark entry has in that partition's history. Readers merge it: a partition whose
record holds fewer entries than that number has not folded the mark in yet, so the mark entry is appended
(and the status set) as the reader returns the record. The first writer of such a record (the executor
running it again, a later mark) writes the merged record, so the mark lives on in it. Attempts are only
ever appended, which is what makes "fewer entries" the exact test.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from engine.base.atomic import write_atomic
from engine.base.errors import StateUnreadable
from engine.store.records import Attempt, PartitionRecord

BULK_MARKS = "bulk-marks"


@dataclass(frozen=True)
class BulkMark:
    stem: str  # sortable by time: marks are merged in the order they were made
    to: str
    message: str
    at: str
    by: str
    rows: int | None
    asset: str | None
    numbers: dict[int, int]  # partition index → the number of its mark entry (1-based)

    def attempt(self, backfill_id: str, index: int) -> Attempt:
        number = self.numbers[index]
        return Attempt(
            run_id=f"{backfill_id}-p{index}-m{number}",
            status=self.to,
            started_at=self.at,
            finished_at=self.at,
            error=self.message,
            duration=0.0,
            launcher="none",
            kind="mark",
            rows=self.rows,
            asset=self.asset,
            by=self.by,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "format": 1,
            "stem": self.stem,
            "to": self.to,
            "message": self.message,
            "at": self.at,
            "by": self.by,
            "rows": self.rows,
            "asset": self.asset,
            "numbers": [[index, number] for index, number in sorted(self.numbers.items())],
        }


def write_bulk_mark(directory: Path, mark: BulkMark) -> None:
    """Save the mark (durably) and touch ``partitions/`` so that cached counts are known to be stale."""
    write_atomic(directory / BULK_MARKS / f"{mark.stem}.json", orjson.dumps(mark.to_json()))
    os.utime(directory / "partitions")


def read_bulk_marks(directory: Path) -> list[BulkMark]:
    folder = directory / BULK_MARKS
    try:
        names = sorted(name for name in os.listdir(folder) if name.endswith(".json") and not name.startswith("."))
    except FileNotFoundError:
        return []
    marks = []
    for name in names:
        path = folder / name
        try:
            data = orjson.loads(path.read_bytes())
            marks.append(
                BulkMark(
                    str(data["stem"]),
                    str(data["to"]),
                    str(data["message"]),
                    str(data["at"]),
                    str(data["by"]),
                    data.get("rows"),
                    data.get("asset"),
                    {int(index): int(number) for index, number in data["numbers"]},
                )
            )
        except (OSError, orjson.JSONDecodeError, KeyError, TypeError, ValueError) as error:
            raise StateUnreadable(
                f"bulk mark {path} cannot be read ({error}): it was not written by backfill"
            ) from None
    return marks


def merge(record: PartitionRecord, marks: list[BulkMark], backfill_id: str) -> PartitionRecord:
    """``record`` with every mark it has not folded in yet appended, in the order they were made."""
    for mark in marks:
        number = mark.numbers.get(record.index)
        if number is None or len(record.attempts) >= number:
            continue
        record.attempts.append(mark.attempt(backfill_id, record.index))
        if mark.asset is None:
            record.status = mark.to
    return record
