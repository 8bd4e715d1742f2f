"""Marks of split partitions: a mark of a partition (or of a half that split again) marks every leaf under it.

Only leaves run, so only leaves take a mark's entry; every node above them is then what its leaves add up to
(:func:`engine.store.split_tree.aggregate`), the partition last, with its index row. See docs/splitting.md.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.store.manifest import now_text
from engine.store.records import Attempt, PartitionRecord
from engine.store.split_tree import SplitNode, read_tree, settle_node
from engine.store.state_store import StateStore


@dataclass(frozen=True)
class TreeMark:
    """What a mark did to one split partition: the node marked and its status before, the partition's status
    after, and how many leaves it marked."""

    partition_id: str
    before: str
    after: str
    leaves: int


def mark_tree(
    store: StateStore,
    root: PartitionRecord,
    *,
    under: str | None,
    to: str,
    message: str,
    by: str,
    before_write=lambda: None,
) -> TreeMark | None:
    """Mark every leaf under the node ``under`` (a half's ID; None: the whole partition) of the split partition
    ``root`` as ``to``, write what changed (leaves, the nodes above, the partition last) durably. None when every
    leaf was ``to`` already; KeyError when ``under`` is not a node of this tree."""
    tree = read_tree(store.splits, root)
    node = tree if under is None else tree.find(under)
    if node is None:
        raise KeyError(under)
    before = node.record.status
    now = now_text()
    marked = [leaf for leaf in node.leaves() if leaf.record.status != to]
    if not marked:
        return None
    for leaf in marked:
        record = leaf.record
        record.attempts.append(
            Attempt(
                run_id=f"{store.id}-p{root.index}-s{leaf.path}-m{len(record.attempts) + 1}",
                status=to,
                started_at=now,
                finished_at=now,
                error=message,
                duration=0.0,
                launcher="none",
                kind="mark",
                by=by,
            )
        )
        record.status = to
        before_write()
        store.write_record(record, durable=True)
    for ancestor in _ancestors_of(marked):
        settle_node(ancestor)
        before_write()
        store.write_record(ancestor.record, durable=True)  # the partition's own last: with its index row
    return TreeMark(node.record.id, before, root.status, len(marked))


def _ancestors_of(leaves: list[SplitNode]) -> list[SplitNode]:
    """Every node above ``leaves``, deepest first (the partition last)."""
    seen: dict[int, SplitNode] = {}
    for leaf in leaves:
        for ancestor in leaf.ancestors():
            seen.setdefault(id(ancestor), ancestor)
    return sorted(seen.values(), key=lambda node: -node.depth)


def find_half(store: StateStore, prefix: str) -> tuple[str, int] | None:
    """A half's ID and its plan partition from its whole ID or a unique prefix, looked up in ``splits/``; None when
    no half has it. ValueError when the prefix names several."""
    try:
        names = [entry.name for entry in store.splits.iterdir() if entry.name.startswith(prefix)]
    except FileNotFoundError:
        return None
    names = [name for name in names if name.endswith(".json")]
    if len(names) > 1:
        raise ValueError(f"{prefix!r} matches {len(names)} halves of split partitions")
    if not names:
        return None
    import orjson

    data = orjson.loads((store.splits / names[0]).read_bytes())
    return names[0].removesuffix(".json"), int(data["index"])
