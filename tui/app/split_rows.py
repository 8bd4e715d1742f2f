"""The partition table's rows with split partitions opened: each opened one is followed by its halves, indented.

The rows of :class:`RowIndex` stay what they are (one per partition shown); a partition opened with ``→`` adds a
row per node of its tree under it (halves, their halves, …, in plan order). Few partitions are ever opened, so
a row is found by walking the opened ones: no per-partition cost at a million rows.
"""

from __future__ import annotations

from typing import Any

from engine.store.split_tree import SplitNode
from tui.app.row_index import RowIndex


class SplitRows:
    """Rows → (partition, node of its tree or None for the partition's own row)."""

    def __init__(self, base: RowIndex, opened: dict[int, list[SplitNode]] | None = None) -> None:
        self.base = base
        self.opened = opened if opened is not None else {}  # partition → its nodes shown under it, in order
        self._layout: list[tuple[int, int, int]] | None = None  # (base row, partition, how many nodes)

    def __getattr__(self, name: str) -> Any:  # the filter, the order, indices(), find(): the partitions' rows'
        return getattr(self.base, name)

    def changed(self) -> None:
        """The opened set or the base rows changed: the layout is computed again when next needed."""
        self._layout = None

    def rebuild(self) -> None:
        self.base.rebuild()
        self._layout = None

    def _opened_rows(self) -> list[tuple[int, int, int]]:
        if self._layout is None:
            layout = []
            for index, nodes in self.opened.items():
                row = self.base.row_of(index)
                if row is not None and nodes:
                    layout.append((row, index, len(nodes)))
            self._layout = sorted(layout)
        return self._layout

    def __len__(self) -> int:
        return len(self.base) + sum(count for _, _, count in self._opened_rows())

    def locate(self, row: int) -> tuple[int, SplitNode | None]:
        """The partition at ``row``, and the node of its tree when the row is one of its halves."""
        offset = 0
        for base_row, index, count in self._opened_rows():
            shown = base_row + offset
            if row <= shown:
                break
            if row <= shown + count:
                return index, self.opened[index][row - shown - 1]
            offset += count
        return self.base.index_at(row - offset), None

    def index_at(self, row: int) -> int:
        return self.locate(row)[0]

    def node_at(self, row: int) -> SplitNode | None:
        return self.locate(row)[1]

    def row_of(self, index: int) -> int | None:
        row = self.base.row_of(index)
        if row is None:
            return None
        return row + sum(count for base_row, _, count in self._opened_rows() if base_row < row)

    def nearest_row(self, index: int) -> int:
        row = self.base.nearest_row(index)
        return row + sum(count for base_row, _, count in self._opened_rows() if base_row < row)

    def open(self, index: int, nodes: list[SplitNode]) -> None:
        self.opened[index] = nodes
        self._layout = None

    def close(self, index: int) -> bool:
        self._layout = None
        return self.opened.pop(index, None) is not None
