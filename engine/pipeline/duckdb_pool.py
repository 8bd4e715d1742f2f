"""One DuckDB handle per database file for the whole run, opened lazily and closable on demand.

SQL assets share a file's handle through their own cursors. A Python asset
runs in another process that opens the file itself, so while it runs the
file's handle here must be closed (DuckDB allows one writer process per file).
"""

from __future__ import annotations

import re
import threading
from pathlib import Path
from typing import Any

from engine.pipeline.config import Connection


class DatabaseLocked(Exception):
    """The DuckDB file is held by another process."""


class DuckDBPool:
    def __init__(self, connections: dict[str, Connection]) -> None:
        self._connections = connections
        self._handles: dict[str, Any] = {}
        self._lock = threading.Lock()

    def path_of(self, name: str) -> Path:
        path = self._connections[name].path
        assert path is not None
        return path

    def cursor(self, name: str) -> Any:
        """A new cursor on the connection's database (opening the file if needed)."""
        with self._lock:
            handle = self._handles.get(name)
            if handle is None:
                handle = self._handles[name] = open_database(self._connections[name])
            return handle.cursor()

    def open_all(self) -> None:
        """Open every file now, so that a locked database fails the run before any asset starts."""
        for name in self._connections:
            self.cursor(name).close()

    def close(self, name: str) -> None:
        with self._lock:
            handle = self._handles.pop(name, None)
        if handle is not None:
            handle.close()

    def close_all(self) -> None:
        for name in list(self._handles):
            self.close(name)


def open_database(connection: Connection) -> Any:
    """Open a DuckDB file; a lock held by another process becomes :class:`DatabaseLocked`."""
    import duckdb

    path = connection.path
    assert path is not None
    if not connection.read_only:
        path.parent.mkdir(parents=True, exist_ok=True)
    try:
        return duckdb.connect(str(path), read_only=connection.read_only)
    except duckdb.IOException as error:
        text = str(error)
        if "lock" in text.lower():
            holder = re.search(r"\(PID (\d+)\)", text)
            who = f" by process {holder.group(1)}" if holder else " by another process"
            raise DatabaseLocked(
                f"DuckDB file {path} (connection {connection.name!r}) is locked{who}: DuckDB allows one writer "
                "process per file; wait for it to finish or close it"
            ) from None
        raise
