"""Splitting at its edges: exact boundaries to the microsecond, a fair cut exactly a quarter in, each half's minimum,
a half-hour zone shift, the IDs a store already holds, and a run's trees read once and in full."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from engine.dates.formatting import InstantFormatter
from engine.dates.instants import to_micros
from engine.dates.split import cut_of, halves, leaf_id
from engine.execute.splitting import SplitRun
from engine.spec.split_policy import SplitPolicy, SplitTrigger
from engine.store.records import Attempt, PartitionRecord, RecordStatus
from engine.store.split_tree import SplitNode, fresh_half, read_tree
from tests.unit.test_split_run import split_now

HOUR = 3_600_000_000
MINUTE = 60_000_000
UTC_ZONE = ZoneInfo("UTC")


def _at(*fields: int) -> int:
    return to_micros(datetime(*fields, tzinfo=UTC))


def test_a_leap_year_splits_at_the_first_of_july():
    """A year's coarsest fair cut is a month boundary (1 July), not the day nearest its midpoint (2 July)."""
    assert cut_of(_at(2024, 1, 1), _at(2025, 1, 1), UTC_ZONE) == _at(2024, 7, 1)


def test_a_boundary_exactly_a_quarter_in_is_fair():
    """18:00 to 18:00 the next day cuts at midnight, six hours of twenty-four in: a quarter is fair."""
    assert cut_of(_at(2024, 1, 1, 18), _at(2024, 1, 2, 18), UTC_ZONE) == _at(2024, 1, 2)


def test_local_boundaries_are_exact_to_the_microsecond_wherever_the_middle_falls():
    """Two hours (minutes, seconds) starting at any microsecond past a boundary cut on the boundary nearest their
    middle, exactly."""
    for unit in (HOUR, MINUTE, 1_000_000):
        base = _at(2024, 3, 31, 10)
        for offset in (*range(1, 40), 12_345, 999_999, unit // 3, unit - 1):
            start = base + offset
            nearest = base + unit if 2 * offset <= unit else base + 2 * unit
            assert cut_of(start, start + 2 * unit, ZoneInfo("Europe/Berlin")) == nearest, (unit, offset)


def test_each_half_must_hold_the_minimum():
    """A cut leaving either half under ``min_length`` is refused: the first (2 h of 5 h) and the second (1 h of
    2½ h); at the minimum each half is accepted."""
    assert halves(_at(2024, 1, 1), _at(2024, 1, 1, 5), UTC_ZONE, min_length=150 * MINUTE) is None
    assert halves(_at(2024, 1, 1), _at(2024, 1, 1, 5), UTC_ZONE, min_length=2 * HOUR) == (
        (_at(2024, 1, 1), _at(2024, 1, 1, 2)),
        (_at(2024, 1, 1, 2), _at(2024, 1, 1, 5)),
    )
    start, end = _at(2024, 1, 1, 0, 30), _at(2024, 1, 1, 3)
    assert halves(start, end, UTC_ZONE, min_length=75 * MINUTE) is None
    assert halves(start, end, UTC_ZONE, min_length=HOUR) == ((start, _at(2024, 1, 1, 2)), (_at(2024, 1, 1, 2), end))


def test_the_half_hour_after_lord_howes_shift_ends_where_the_next_local_hour_starts():
    """Lord Howe moves 02:00 → 02:30 (15:30 UTC): its local hour 02 lasts 30 minutes, so 15:35–16:15 UTC cuts at the
    next hour's start, 16:00 UTC, not an hour after the shift."""
    zone = ZoneInfo("Australia/Lord_Howe")
    assert cut_of(_at(2024, 10, 5, 15, 35), _at(2024, 10, 5, 16, 15), zone) == _at(2024, 10, 5, 16)


def test_a_halfs_id_is_the_one_stores_already_hold():
    """The derivation of a half's ID never changes: records written by earlier versions name their halves so."""
    assert leaf_id("p3", 1, 2) == "0fa1b6aeacc9a12f253ab8aa3e8ab18c48ca91972337e5d16eb0936e2dc510cf"


def _run(read=lambda record: SplitNode(record)) -> SplitRun:
    policy = SplitPolicy(frozenset({SplitTrigger.TIMEOUT}), None, HOUR)
    return SplitRun(policy, UTC_ZONE, InstantFormatter(UTC_ZONE), read)


def _day(record_id: str = "p0") -> PartitionRecord:
    record = PartitionRecord(record_id, 0, "", "", _at(2024, 1, 1), _at(2024, 1, 2), RecordStatus.RUNNING)
    record.attempts.append(Attempt(run_id="r", status=RecordStatus.FAILED, started_at="t", error="timed out"))
    return record


def test_a_run_reads_a_partitions_tree_once_and_whole(tmp_path):
    """A run keeps the tree it read (the same node, with what it learned, on every call), and the tree of a record
    that split is read from the store with its halves, not taken for a single node."""
    reads = []

    def read(record):
        reads.append(record.id)
        return read_tree(tmp_path, record)

    first_run = _run()
    record = _day()
    split_now(first_run, first_run.root(0, record))
    run = _run(read)
    root = run.root(0, record)
    assert run.root(0, record) is root and reads == ["p0"]
    assert [node.path for node in root.nodes()] == ["", "0", "1"]
    plain = _run(read)
    assert plain.root(1, _day("p1")).halves == [] and reads == ["p0"]


def test_every_split_counts_and_the_halves_take_their_parents_place_in_flight():
    """A split half's record names its interval in text and microseconds; two splits count two; the node that split
    leaves the run's in-flight set for its halves."""
    run = _run()
    root = run.root(0, _day())
    run.in_flight.add(root.record.id)
    first, second = split_now(run, root)
    assert (first.record.start, first.record.end) == ("2024-01-01T00:00:00Z", "2024-01-01T12:00:00Z")
    assert (second.record.start_us, second.record.end_us) == (_at(2024, 1, 1, 12), _at(2024, 1, 2))
    assert [(c.start, c.end) for c in root.record.children] == [
        ("2024-01-01T00:00:00Z", "2024-01-01T12:00:00Z"),
        ("2024-01-01T12:00:00Z", "2024-01-02T00:00:00Z"),
    ]
    split_now(run, second)
    assert run.splits == 2
    assert run.in_flight == {first.record.id, *(h.record.id for h in second.halves)}


def test_a_deeper_tree_is_read_back_with_each_node_under_its_own_parent(tmp_path):
    """Two levels written under splits/ read back whole: every node's parent is the node above it, and a leaf's
    ancestors are its half and the partition."""
    run = _run()
    record = _day()
    _, second = split_now(run, run.root(0, record))
    left, _ = split_now(run, second)
    left.record.status = RecordStatus.SUCCEEDED
    left.record.attempts.append(Attempt(run_id="a", status=RecordStatus.SUCCEEDED, started_at="t"))
    for node in (second, left):
        (tmp_path / f"{node.record.id}.json").write_bytes(node.record.to_bytes())
    tree = read_tree(tmp_path, record)
    assert [(n.path, n.record.status) for n in tree.nodes()] == [
        ("", "running"),
        ("0", "queued"),
        ("1", "running"),
        ("10", "succeeded"),
        ("11", "queued"),
    ]
    read_second = tree.halves[1]
    assert tree.parent is None and tree.halves[0].parent is tree and read_second.parent is tree
    assert [list(leaf.ancestors()) for leaf in read_second.halves] == [[read_second, tree]] * 2
    queued = fresh_half(record, record.children[0])
    assert (queued.start, queued.end, queued.start_us, queued.end_us) == (
        "2024-01-01T00:00:00Z",
        "2024-01-01T12:00:00Z",
        _at(2024, 1, 1),
        _at(2024, 1, 1, 12),
    )
