"""Marks of split partitions in-process, over a real split tree a real executor left (engine/interventions/
split_marks.py): a mark reaches every leaf under the node it names and nothing else, every node above settles from
its leaves, the partition last; a mark that changes nothing writes nothing; halves are found by ID or prefix."""

from __future__ import annotations

import orjson
import pytest

from engine.interventions.split_marks import TreeMark, find_half, mark_tree
from engine.store.records import read_record
from engine.store.split_tree import read_tree
from tests.backfills import child_command
from tests.unit.test_scheduling import prepare

HOUR = 3_600_000_000
SPEC: list = []  # the split backfill's spec (its plan reads the records)


@pytest.fixture(scope="module")
def split_store(tmp_path_factory):
    """One day that fails "too many rows" at every length over 5 h, split until its 6 h leaves cannot halve (the
    minimum is 4 h): the day, two 12 h halves, four 6 h leaves, every one failed."""
    work = tmp_path_factory.mktemp("split")
    (work / ".git").mkdir()
    command = child_command("--fail-longer-than", "5")
    prepared = prepare(work, command, 1, split_pattern="too many rows", min_partition=4 * HOUR, on_failure="continue")
    assert prepared.executor(grace=5.0).run().status == "failed"
    SPEC[:] = [prepared.spec]
    return prepared


@pytest.fixture
def store(split_store, tmp_path):
    """A copy of the split backfill's store for one test to mark."""
    import shutil

    from engine.store.state_store import StateStore

    copy = tmp_path / split_store.store.directory.name
    shutil.copytree(split_store.store.directory, copy, ignore=shutil.ignore_patterns("*.lock", "lease.json"))
    return StateStore(copy)


def _root(store):
    """The split partition's record as the store reads it."""
    [path] = store.partitions.glob("*.json")
    return read_record(path, SPEC[0].plan, SPEC[0].ids.of)


def _on_disk(store) -> dict[str, tuple[str, list[str]]]:
    """Every node's status and the kinds of its attempts, from the files (the partition under its own ID)."""
    found = {}
    for path in [*store.partitions.glob("*.json"), *store.splits.glob("*.json")]:
        data = orjson.loads(path.read_bytes())
        found[data["id"]] = (data["status"], [a.get("kind") or "run" for a in data["attempts"]])
    return found


def test_the_tree_the_executor_left_is_the_one_the_marks_are_tested_on(store):
    """Four failed 6 h leaves under two failed 12 h halves under the failed day."""
    tree = read_tree(store.splits, _root(store))
    assert [leaf.path for leaf in tree.leaves()] == ["00", "01", "10", "11"]
    assert {status for status, _ in _on_disk(store).values()} == {"failed"} and len(_on_disk(store)) == 7


def test_a_mark_of_the_partition_marks_every_leaf_and_settles_every_node_the_partition_last(store):
    """Marked succeeded: each leaf gets one mark attempt (its own run ID, the operator, the message, no duration),
    each half and the day say succeeded on disk, and the day's record is written after every other."""
    root = _root(store)
    order: list[str] = []
    written = store.write_record

    def write_record(record, *, durable):
        assert durable
        order.append(record.id)
        written(record, durable=durable)

    store.write_record = write_record
    calls = []
    done = mark_tree(store, root, under=None, to="succeeded", message="fixed by hand", by="ann@host",
                     before_write=lambda: calls.append(1))  # fmt: skip
    assert done == TreeMark(root.id, "failed", "succeeded", 4)
    assert len(calls) == len(order) == 7 and order[-1] == root.id
    disk = _on_disk(store)
    assert {status for status, _ in disk.values()} == {"succeeded"}
    tree = read_tree(store.splits, _root(store))
    for leaf in tree.leaves():
        mark = leaf.record.attempts[-1]
        assert (mark.kind, mark.status, mark.by, mark.error, mark.duration, mark.launcher) == (
            "mark", "succeeded", "ann@host", "fixed by hand", 0.0, "none"
        )  # fmt: skip
        assert mark.run_id == f"{store.id}-p0-s{leaf.path}-m{len(leaf.record.attempts)}"
        assert mark.started_at == mark.finished_at and leaf.record.attempts[0].kind in (None, "run")
    assert [h.record.status for h in tree.halves] == ["succeeded", "succeeded"]


def test_a_mark_of_a_half_marks_its_leaves_only_and_the_partition_adds_up(store):
    """The first 12 h half marked succeeded: its two leaves and it succeed; the other half and its leaves stay
    failed, untouched; the day is still failed (a leaf failed). Marking it again changes and writes nothing; marking
    it failed reports it was succeeded."""
    root = _root(store)
    tree = read_tree(store.splits, root)
    first, second = tree.halves
    before = {path: path.read_bytes() for path in store.splits.glob("*.json")}
    done = mark_tree(store, root, under=first.record.id, to="succeeded", message="m", by="ann@host")
    assert done == TreeMark(first.record.id, "failed", "failed", 2)
    disk = _on_disk(store)
    assert [disk[n.record.id][0] for n in (first, *first.halves)] == ["succeeded"] * 3
    assert [disk[n.record.id] for n in (second, *second.halves)] == [("failed", ["run"])] * 3
    assert disk[root.id][0] == "failed"
    assert all(before[p] == p.read_bytes() for p in before if p.stem in {n.record.id for n in second.nodes()})
    unchanged = {p: p.read_bytes() for p in [*store.splits.glob("*.json"), *store.partitions.glob("*.json")]}
    assert mark_tree(store, _root(store), under=first.record.id, to="succeeded", message="m", by="ann@host") is None
    assert {p: p.read_bytes() for p in unchanged} == unchanged
    again = mark_tree(store, _root(store), under=first.record.id, to="failed", message="m", by="ann@host")
    assert again == TreeMark(first.record.id, "succeeded", "failed", 2)  # the node's status before, the day's after
    leaf = second.halves[1]
    done = mark_tree(store, _root(store), under=leaf.record.id, to="skipped", message="m", by="ann@host")
    assert done == TreeMark(leaf.record.id, "failed", "failed", 1)


def test_a_mark_of_a_node_not_in_the_tree_is_a_key_error(store):
    """An ID that is no node of this partition's tree: KeyError naming it, and nothing written."""
    unchanged = {p: p.read_bytes() for p in [*store.splits.glob("*.json"), *store.partitions.glob("*.json")]}
    with pytest.raises(KeyError, match="nope"):
        mark_tree(store, _root(store), under="nope", to="succeeded", message="m", by="ann@host")
    assert {p: p.read_bytes() for p in unchanged} == unchanged


def test_a_half_is_found_by_its_id_or_a_unique_prefix(store, tmp_path):
    """Its whole ID or a prefix only it has gives its ID and the plan partition it belongs to; a prefix of several
    halves (all six, or two) is a ValueError counting them; none, or a store with no splits, is None."""
    names = sorted(path.stem for path in store.splits.glob("*.json"))
    assert len(names) == 6
    for name in names:
        assert find_half(store, name) == (name, 0)
        unique = next(name[:n] for n in range(1, len(name) + 1) if sum(o.startswith(name[:n]) for o in names) == 1)
        assert find_half(store, unique) == (name, 0)
    with pytest.raises(ValueError, match="matches 6 halves"):
        find_half(store, "")
    twin = dict(orjson.loads((store.splits / f"{names[0]}.json").read_bytes()), index=3)  # a half of partition 3
    (store.splits / f"{names[0][:-1]}~.json").write_bytes(orjson.dumps(twin))
    with pytest.raises(ValueError, match="matches 2 halves"):
        find_half(store, names[0][:-1])
    assert find_half(store, f"{names[0][:-1]}~") == (f"{names[0][:-1]}~", 3)
    assert find_half(store, "zz-no-such-half") is None
    (store.splits / "notes.txt").write_text("not a half")
    assert find_half(store, "notes") is None
    from engine.store.state_store import StateStore

    empty = StateStore(tmp_path / "empty")
    assert find_half(empty, "ab") is None
