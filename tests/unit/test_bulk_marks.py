"""Bulk marks in-process over a real state directory: one file for a mark of many partitions, read back as
written in the order made, merged into each record exactly once (by counting its entries), an asset's mark
leaving the partition's status alone, and a damaged file refused."""

from __future__ import annotations

import os

import orjson
import pytest

from engine.base.errors import StateUnreadable
from engine.store.bulk_marks import BULK_MARKS, BulkMark, merge, read_bulk_marks, write_bulk_mark
from engine.store.records import Attempt, PartitionRecord


def mark(stem: str, numbers: dict[int, int], *, to: str = "succeeded", asset: str | None = None) -> BulkMark:
    return BulkMark(stem, to, f"why {stem}", "2024-02-01T00:00:00Z", "ops", 7, asset, numbers)


def record(index: int, attempts: int = 0, status: str = "failed") -> PartitionRecord:
    made = [Attempt(run_id=f"r{i}", status="failed", started_at="2024-01-01T00:00:00Z") for i in range(attempts)]
    return PartitionRecord(f"p{index}", index, "s", "e", 0, 1, status, made)


@pytest.fixture
def directory(tmp_path):
    (tmp_path / "partitions").mkdir()
    return tmp_path


def test_a_mark_is_written_once_read_back_as_written_and_in_the_order_made(directory):
    """Each mark is one file under bulk-marks/; reading gives them back field for field, sorted by stem (made
    earlier first), hidden and other files ignored; writing one touches partitions/ so cached counts go stale."""
    os.utime(directory / "partitions", (0, 0))
    later, earlier = mark("002", {3: 2, 1: 1}), mark("001", {2: 1}, to="skipped", asset="s.a")
    write_bulk_mark(directory, later)
    assert os.stat(directory / "partitions").st_mtime > 0
    write_bulk_mark(directory, earlier)
    (directory / BULK_MARKS / ".002.json.tmp").write_bytes(b"{")
    (directory / BULK_MARKS / "notes.txt").write_bytes(b"x")
    (directory / BULK_MARKS / ".003.json").write_bytes(b"{")  # a hidden file is never a mark
    assert read_bulk_marks(directory) == [earlier, later]
    saved = orjson.loads((directory / BULK_MARKS / "002.json").read_bytes())
    assert saved == {
        "format": 1, "stem": "002", "to": "succeeded", "message": "why 002", "at": "2024-02-01T00:00:00Z",
        "by": "ops", "rows": 7, "asset": None, "numbers": [[1, 1], [3, 2]],
    }  # fmt: skip


def test_no_folder_is_no_mark(directory):
    assert read_bulk_marks(directory) == []


@pytest.mark.parametrize("content", [b"{", b'{"stem": "x"}', b'{"stem": "x", "to": "s", "message": "m", "at": "a", '
                                     b'"by": "b", "numbers": [["one", 1]]}'])  # fmt: skip
def test_a_damaged_mark_is_refused_naming_it(directory, content):
    """Torn JSON, a missing field, a partition number that is not one: StateUnreadable naming the file."""
    (directory / BULK_MARKS).mkdir()
    (directory / BULK_MARKS / "001.json").write_bytes(content)
    with pytest.raises(StateUnreadable, match="bulk mark .*001.json cannot be read .*: it was not written by backfill"):
        read_bulk_marks(directory)


def test_merging_appends_each_mark_once_as_its_numbered_entry(directory):
    """A record with fewer entries than a mark's number gets the mark's entry (run ID, status, who, why, rows,
    kind) and its status; one that already holds it (as many entries) is left alone; a partition the mark does not
    name is untouched; merging twice changes nothing more."""
    first, second = mark("001", {0: 1, 1: 3}), mark("002", {0: 2}, to="skipped")
    fresh = merge(record(0), [first, second], "bf")
    assert [a.run_id for a in fresh.attempts] == ["bf-p0-m1", "bf-p0-m2"] and fresh.status == "skipped"
    entry = fresh.attempts[0]
    assert (entry.status, entry.error, entry.by, entry.rows, entry.kind, entry.launcher) == (
        "succeeded",
        "why 001",
        "ops",
        7,
        "mark",
        "none",
    )
    assert (entry.started_at, entry.finished_at, entry.duration, entry.asset) == (
        "2024-02-01T00:00:00Z",
        "2024-02-01T00:00:00Z",
        0.0,
        None,
    )
    assert merge(fresh, [first, second], "bf").attempts == fresh.attempts
    folded = merge(record(1, attempts=3), [first], "bf")
    assert len(folded.attempts) == 3 and folded.status == "failed"
    behind = merge(record(1, attempts=2), [first], "bf")
    assert [a.run_id for a in behind.attempts][-1] == "bf-p1-m3" and behind.status == "succeeded"
    later = merge(record(1, attempts=3), [first, mark("003", {1: 4})], "bf")  # first folded in already
    assert [a.run_id for a in later.attempts][-1] == "bf-p1-m4"
    untouched = merge(record(5, attempts=1), [first, second], "bf")
    assert len(untouched.attempts) == 1 and untouched.status == "failed"


def test_an_asset_mark_keeps_the_partition_status(directory):
    """A mark of one asset is an entry in the history, naming the asset; the partition's status stays."""
    merged = merge(record(0), [mark("001", {0: 1}, asset="s.a")], "bf")
    assert merged.status == "failed" and merged.attempts[0].asset == "s.a"
