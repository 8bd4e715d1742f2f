"""The read-only DuckDB connections of one invocation.

Apart from ``warehouse.py`` (which reads the files) so that a command's pre-flight, which opens none, does not
load the pipeline's SQL and materialization modules that reading them needs.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engine.guardrails.warehouse import Warehouse


class Warehouses:
    """The read-only connections one invocation holds to its DuckDB files: each file opened once, shared by the
    pre-flight, the verification baselines and the snapshot. Closed before the first child starts (children
    write the files) and before a person is asked (other writers must not wait on us); opened again if needed."""

    def __init__(self) -> None:
        self._open: dict[Path, Warehouse] = {}

    def open(self, path: Path) -> Warehouse:
        """The file's shared read-only connection (``Held`` when another process writes it)."""
        from engine.guardrails.warehouse import Warehouse  # a command's pre-flight opens none

        warehouse = self._open.get(path)
        if warehouse is None or (warehouse.connection is None and path.exists()):
            warehouse = self._open[path] = Warehouse.open(path)
        return warehouse

    def close(self) -> None:
        for warehouse in self._open.values():
            warehouse.close()
        self._open.clear()
