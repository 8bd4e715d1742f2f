"""How the executor writes its store: records queued or written ahead, each with its index row, the counts cache,
the reserve a full disk falls back on, and what a store that cannot be written does to the run (it stops).

A mixin of :class:`engine.execute.executor.Executor`, on the executor's own thread: the state it reads is made
there.
"""

from __future__ import annotations

import time
from typing import Any

from engine.base.errors import StateWriteFailed
from engine.store.catalog import partitions_stamp, write_summary
from engine.store.record_index import index_row
from engine.store.records import PartitionRecord

SUMMARY_SECONDS = 2.0  # how often the counts cache for `backfill list` is refreshed while running


class ExecutorStorage:
    def _maybe_write_summary(self, *, force: bool = False) -> None:
        """Refresh the counts cache that `backfill list` reads, at most every SUMMARY_SECONDS."""
        now = time.monotonic()
        if not self.owns():
            return
        if force or now - self._summary_written >= SUMMARY_SECONDS:
            self._summary_written = now
            write_summary(self.store, self.board, partitions_stamp(self.store))  # a cache: never fails the run

    def _write(self, record: PartitionRecord, *, durable: bool) -> None:
        """Queue a record; once the store cannot be written, stop the run instead of crashing out of it. On a
        full disk records are still queued: the writer defers them until the reserve is given back."""
        if not self.owns():
            return  # fenced: a reconcile decided these partitions' fate; our late word would overwrite it
        try:
            path, row = self._path_and_row(record)
            self._writer.put(path, record.to_bytes(), durable=durable, row=row)
        except OSError as error:
            self._storage_failed(error)

    def _write_ahead(self, records: list[PartitionRecord]) -> bool:
        """Write records and wait until they are durable; False when they could not be (a full disk stops the run)
        or this executor was fenced meanwhile: then nothing may start."""
        if self._storage_error is not None or not self.owns():
            return False
        try:
            entries = []
            for record in records:
                path, row = self._path_and_row(record)
                entries.append((path, record.to_bytes(), row))
            self._writer.write_ahead_many(entries)
        except OSError as error:
            self._storage_failed(error)
            return False
        return self.owns()

    def _path_and_row(self, record: PartitionRecord) -> tuple[Any, Any]:
        """Where a record goes, and its index row: a half's record lives in splits/ and has no row (the
        partition's own row says what its tree adds up to)."""
        if record.parent is not None:
            return self.store.half_path(record.id), None
        return self.store.record_path(record.id), index_row(record)

    def _hold_reserve(self) -> None:
        """Keep room aside for the records a full disk would defer; no room for it: start nothing."""
        try:
            self._reserve.hold()
        except OSError as error:
            raise StateWriteFailed(
                f"the state store {self.store.directory} has no room for its {self._reserve.size // 1024} KiB "
                f"reserve ({error.strerror or error}): nothing was started; free space, then "
                f"backfill --continue {self.store.id}"
            ) from None

    def _write_deferred(self) -> None:
        """Every child stopped and waited for: the records a full disk deferred are written into the reserve's
        room; else the reserve is simply given back."""
        if not self.owns():
            return  # fenced: it changes nothing more in the store, not even its reserve (the next owner reuses it)
        try:
            self._writer.write_deferred(self._reserve.release)
        except OSError as error:  # not even that room: the next reader settles what is left running
            self._storage_failed(error)
        self._reserve.release()

    def _storage_failed(self, error: OSError) -> None:
        if self._storage_error is None:
            self._storage_error = error
            self.request_stop(f"the state store could not be written ({error.strerror or error})")
