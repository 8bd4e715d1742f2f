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

from engine.base.printable import printable
from engine.pipeline.config import Connection


class DatabaseUnavailable(Exception):
    """A connection's DuckDB file cannot be opened: the run fails with this one line, before any asset."""


class DatabaseLocked(DatabaseUnavailable):
    """The DuckDB file is held by another process."""


class ParkedDatabases:
    """Database handles a long-lived process (the warm runner) keeps open between runs: opening and closing
    a DuckDB file costs more than a small partition's SQL. Only handles of runs that fully succeeded are
    kept; anything else is closed, so a run never starts on a handle an interrupted one left behind."""

    def __init__(self) -> None:
        self.enabled = False
        self._handles: dict[tuple[Path, bool], Any] = {}

    def take(self, connection: Connection) -> Any | None:
        return self._handles.pop((connection.path, connection.read_only), None)

    def put(self, connection: Connection, handle: Any) -> None:
        if not self.enabled:
            handle.close()
            return
        previous = self._handles.pop((connection.path, connection.read_only), None)
        if previous is not None and previous is not handle:
            previous.close()
        self._handles[(connection.path, connection.read_only)] = handle

    def close_all(self) -> None:
        while self._handles:
            _key, handle = self._handles.popitem()
            handle.close()


PARKED = ParkedDatabases()


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
                connection = self._connections[name]
                handle = PARKED.take(connection) or open_database(connection)
                self._handles[name] = handle
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

    def close_all(self, *, park: bool = False) -> None:
        """Close every handle; with ``park``, hand them to :data:`PARKED` instead (kept only when enabled)."""
        for name in list(self._handles):
            if park:
                with self._lock:
                    handle = self._handles.pop(name)
                PARKED.put(self._connections[name], handle)
            else:
                self.close(name)


def open_database(connection: Connection) -> Any:
    """Open a DuckDB file; a lock held by another process becomes :class:`DatabaseLocked`."""
    import duckdb

    path = connection.path
    assert path is not None
    try:
        if not connection.read_only:
            path.parent.mkdir(parents=True, exist_ok=True)
        return duckdb.connect(str(path), read_only=connection.read_only)
    except (duckdb.IOException, duckdb.InvalidInputException, OSError) as error:
        holder = lock_holder(error, path)
        if holder is not None:
            raise DatabaseLocked(
                f"DuckDB file {path} (connection {connection.name!r}) is locked by {holder}: DuckDB allows one "
                "writer process per file; wait for it to finish or close it"
            ) from None
        reason = error.strerror if isinstance(error, OSError) and error.strerror else str(error).strip()
        raise DatabaseUnavailable(
            f"DuckDB file {path} (connection {connection.name!r}) cannot be opened: "
            f"{printable(reason.splitlines()[0] if reason else type(error).__name__)}: fix its path in .bruin.yml"
        ) from None


def lock_holder(error: Exception, path: Path) -> str | None:
    """Who holds ``path``, when DuckDB's error says another process locks it ("process 123" or "another
    process"); None for any other error. Only DuckDB's own words count: a path may say "lock" too
    ("/data/blockchain.duckdb" that is no database once read as locked)."""
    text = str(error).replace(str(path), "")
    if "could not set lock" not in text.lower():
        return None
    pid = re.search(r"\(PID (\d+)\)", text)
    return f"process {pid.group(1)}" if pid else "another process"
