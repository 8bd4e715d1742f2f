"""A run's split trees in memory: cutting a node, which leaves run, and what every node above a leaf adds up to."""

from __future__ import annotations

from zoneinfo import ZoneInfo

from engine.dates.formatting import InstantFormatter
from engine.dates.split import SplitUnit, leaf_id
from engine.execute.splitting import SplitRun, split_text
from engine.spec.split_policy import SplitPolicy, SplitTrigger
from engine.store.records import Attempt, PartitionRecord, RecordStatus
from engine.store.split_tree import SplitNode, fresh_half, read_tree, settle_node

UTC = ZoneInfo("UTC")
HOUR = 3_600_000_000
DAY = 24 * HOUR
START = 1_704_067_200_000_000  # 2024-01-01T00:00:00Z
POLICY = SplitPolicy(frozenset({SplitTrigger.TIMEOUT}), None, 6 * HOUR)


def _run(policy: SplitPolicy | None = POLICY, read_tree=lambda record: SplitNode(record)) -> SplitRun:
    return SplitRun(policy, UTC, InstantFormatter(UTC), read_tree)


def split_now(run: SplitRun, node: SplitNode) -> list[SplitNode] | None:
    """Cut ``node`` and make the split at once (the executor writes the record listing the halves in between)."""
    children = run.cut(node)
    return None if children is None else run.apply(node, children)


def _day(index: int = 3) -> PartitionRecord:
    start = START + index * DAY
    record = PartitionRecord(f"p{index}", index, "", "", start, start + DAY, RecordStatus.RUNNING)
    record.attempts.append(Attempt(run_id="r", status=RecordStatus.FAILED, started_at="t", error="timed out"))
    return record


def test_a_split_lists_its_halves_and_puts_them_in_flight():
    """A day splits at noon: its record lists both halves (IDs derived from its own), is running, and the halves
    (fresh, queued, naming their parent and plan partition) wait in this run; the run counts the split."""
    run = _run()
    record = _day()
    root = run.root(3, record)
    halves = split_now(run, root)
    assert halves is not None and [h.path for h in halves] == ["0", "1"]
    start = record.start_us
    assert [(c.start_us, c.end_us) for c in record.children] == [
        (start, start + 12 * HOUR),
        (start + 12 * HOUR, start + DAY),
    ]
    assert [c.id for c in record.children] == [
        leaf_id("p3", start, start + 12 * HOUR),
        leaf_id("p3", start + 12 * HOUR, start + DAY),
    ]
    assert record.status == RecordStatus.RUNNING
    assert [(h.record.status, h.record.parent, h.record.index, h.record.attempts) for h in halves] == [
        (RecordStatus.QUEUED, "p3", 3, [])
    ] * 2
    assert run.in_flight == {h.record.id for h in halves}
    assert (run.splits, run.deepest, run.split_indices) == (1, 1, {3})
    assert split_text(SplitTrigger.TIMEOUT, record.children) == "split on timeout into 12h + 12h"


def test_no_split_without_a_policy_twice_or_below_the_minimum():
    """Without a policy nothing splits; a node that split already does not again; halves under the minimum
    (a 12-hour half at 7 h) are refused, and the run counts nothing."""
    assert _run(None).cut(SplitNode(_day())) is None
    run = _run()
    root = run.root(0, _day(0))
    first, _ = split_now(run, root)
    assert split_now(run, root) is None
    strict = _run(SplitPolicy(POLICY.triggers, None, 7 * HOUR))
    assert split_now(strict, first) is None and strict.splits == 0
    deeper = split_now(run, first)
    assert deeper is not None and [h.path for h in deeper] == ["00", "01"] and run.deepest == 2


def test_a_date_key_stops_a_split_at_days():
    """With days the finest cut, a day does not split."""
    run = _run(SplitPolicy(POLICY.triggers, None, HOUR, SplitUnit.DAY))
    assert run.cut(run.root(0, _day(0))) is None


def test_settling_a_leaf_updates_every_node_above_it():
    """While a sibling is in flight its ancestors stay running; once the last leaf ends they add up (failed, with
    the failed leaf's reason), and only the records whose status changed are returned, nearest first."""
    run = _run()
    root = run.root(0, _day(0))
    first, second = split_now(run, root)
    left, right = split_now(run, second)
    first.record.status = RecordStatus.SUCCEEDED
    assert run.settle(first, final=True) == []  # the others still run: everything above stays running
    left.record.status = RecordStatus.FAILED
    left.record.attempts.append(Attempt(run_id="x", status=RecordStatus.FAILED, started_at="t", error="MemoryError"))
    assert run.settle(left, final=False) == []  # to be retried: still in flight
    assert run.busy(root)
    assert run.settle(left, final=True) == []  # right still runs
    right.record.status = RecordStatus.SUCCEEDED
    changed = run.settle(right, final=True)
    assert changed == [second.record, root.record]
    assert (second.record.status, root.record.status) == (RecordStatus.FAILED, RecordStatus.FAILED)
    assert root.record.reason == "MemoryError" and second.record.reason == "MemoryError"
    assert not run.busy(root) and root.counts() == (2, 3) and root.deepest() == 2


def test_wanted_leaves_are_those_the_selection_judges():
    """A resume runs the leaves its judgement wants, puts them in flight, and leaves the others out."""
    run = _run()
    root = run.root(0, _day(0))
    first, second = split_now(run, root)
    run.in_flight.clear()
    first.record.status, second.record.status = RecordStatus.SUCCEEDED, RecordStatus.FAILED
    assert run.wanted(root, lambda status: status == RecordStatus.FAILED) == [second]
    assert run.in_flight == {second.record.id}


def test_a_tree_read_back_from_the_store(tmp_path):
    """Halves written under splits/ are read back under their parent, a half never written reads as queued, and a
    half that lies about its parent is refused."""
    import pytest

    from engine.base.errors import StateUnreadable

    run = _run()
    record = _day(0)
    root = run.root(0, record)
    first, second = split_now(run, root)
    first.record.status = RecordStatus.SUCCEEDED
    first.record.attempts.append(Attempt(run_id="a", status=RecordStatus.SUCCEEDED, started_at="t"))
    (tmp_path / f"{first.record.id}.json").write_bytes(first.record.to_bytes())
    tree = read_tree(tmp_path, record)
    assert [(n.path, n.record.status) for n in tree.nodes()] == [("", "running"), ("0", "succeeded"), ("1", "queued")]
    assert tree.find(second.record.id).record.status == "queued" and tree.find("nope") is None
    liar = fresh_half(record, record.children[1])
    liar.parent = "someone else"
    (tmp_path / f"{liar.id}.json").write_bytes(liar.to_bytes())
    with pytest.raises(StateUnreadable, match="is not the half"):
        read_tree(tmp_path, record)


def test_settle_node_reports_change_once():
    """A node settled twice to the same status and reason reports a change only the first time."""
    run = _run()
    root = run.root(0, _day(0))
    first, second = split_now(run, root)
    first.record.status = second.record.status = RecordStatus.SUCCEEDED
    assert settle_node(root) and root.record.status == RecordStatus.SUCCEEDED and root.record.reason is None
    assert not settle_node(root)
