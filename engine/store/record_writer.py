"""Writes partition records on a thread of its own, in order, so the executor's loop never waits on disk.

Records are serialized when queued (later changes to the record do not leak
in), written atomically in FIFO order (a partition's "running" record can never
overtake its final one), and the directory is fsynced once per batch of durable
records. Of several versions of one file in a batch only the last is written
(durably if any of them had to be): the file goes from what it held straight to
its newest state, as it would have an instant later anyway.
:meth:`RecordWriter.drain` waits until everything queued is on disk; the
executor drains before it reports an outcome.

If the executor is killed, records still queued are lost: a partition then looks
queued or interrupted, and resume runs it again. Nothing is ever half-written.

A full disk (ENOSPC, EDQUOT) is not the end of the records: what cannot be written
is deferred, the latest version of each file kept, and ``full`` says
why; once the executor has stopped every child, :meth:`write_deferred` gives
back the store's reserve (``engine/store/space_reserve.py``) and writes them.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from pathlib import Path

from engine.base.atomic import sync_directory, write_atomic, write_atomic_many
from engine.store.record_index import RecordIndex
from engine.store.space_reserve import FULL

_STOP = object()
Row = tuple[int, bytes, str | None]  # a record's partition number, index row and reason (record_index.index_row)


class RecordWriter:
    def __init__(
        self, directory: Path, may_write: Callable[[], bool] = lambda: True, index: RecordIndex | None = None
    ) -> None:
        """``may_write`` is asked right before each record is written: a record queued by an owner that lost its
        lease since (a fenced executor) is dropped, not written late over what its new owner decided. ``index``
        gets each record's row: pending before the file is renamed into place, written after."""
        self.directory = directory
        self._may_write = may_write
        self._index = index
        self._queue: queue.Queue[object] = queue.Queue()
        self._error: BaseException | None = None
        self.full: OSError | None = None  # the disk filled: later records wait in _deferred
        self._deferred: dict[Path, tuple[bytes, Row | None]] = {}  # the latest version of each record not written
        self._pending: dict[Path, int] = {}  # queued writes per file, not yet done
        self._pending_lock = threading.Lock()
        self._thread = threading.Thread(target=self._work, name="record writer", daemon=True)
        self._thread.start()

    def put(self, path: Path, data: bytes, *, durable: bool, row: Row | None = None) -> None:
        if self._error is not None:
            raise self._error
        self._count(path, 1)
        self._queue.put((path, data, durable, row, None))

    def _write_indexed(self, path: Path, data: bytes, row: Row | None, *, durable: bool, sync_parent: bool) -> None:
        """The record, its index row pending while the file changes (left pending when the write fails)."""
        if row is not None and self._index is not None:
            self._index.pending(row[0])
        write_atomic(path, data, durable=durable, sync_parent=sync_parent)
        if row is not None and self._index is not None:
            self._index.written(*row)

    def write_ahead(self, path: Path, data: bytes, row: Row | None = None) -> None:
        """Write a record durably (file and directory synced) before returning: the attempt recorded before its
        child starts. See :meth:`write_ahead_many`."""
        self.write_ahead_many([(path, data, row)])

    def write_ahead_many(self, records: list[tuple[Path, bytes, Row | None]]) -> None:
        """Write records (of distinct files) durably before returning, with one sync of the directory for all of
        them: the attempts of the children about to start, recorded first (a group commit of launches). On the
        calling thread when no write of any of these files is queued — a batch of other records being synced is
        not waited for — else queued behind those writes and waited for, so a file's writes stay in order either
        way. (Only the executor's thread queues records, so none can be queued in between.)"""
        if self._error is not None:
            raise self._error
        with self._pending_lock:
            queued = any(self._pending.get(path, 0) for path, _, _ in records)
        if queued:
            *earlier, (path, data, row) = records
            for earlier_path, earlier_data, earlier_row in earlier:
                self.put(earlier_path, earlier_data, durable=True, row=earlier_row)
            self.put_and_wait(path, data, row)
        elif self._may_write():
            index = self._index
            rows = [row for _, _, row in records if row is not None] if index is not None else []
            for row in rows:
                index.pending(row[0])  # type: ignore[union-attr]  # rows only with an index
            try:
                write_atomic_many([(path, data) for path, data, _ in records])
            except OSError as error:
                if error.errno in FULL:
                    self.full = self.full or error
                raise
            for row in rows:
                index.written(*row)  # type: ignore[union-attr]

    def put_and_wait(self, path: Path, data: bytes, row: Row | None = None) -> None:
        """Queue a record and return once it, and everything queued before it, is on disk and synced (the
        directory too): the write-ahead of an attempt, which must be durable before its child starts."""
        if self._error is not None:
            raise self._error
        done = threading.Event()
        self._count(path, 1)
        self._queue.put((path, data, True, row, done))
        done.wait()
        if self._error is not None:
            raise self._error
        if self.full is not None:  # not written (a write-ahead is never deferred: its child does not start)
            raise self.full

    def _count(self, path: Path, change: int) -> None:
        with self._pending_lock:
            left = self._pending.get(path, 0) + change
            if left:
                self._pending[path] = left
            else:
                self._pending.pop(path, None)

    def drain(self) -> None:
        """Block until every queued record is written (and durable ones synced), or deferred (then ``full``)."""
        self._queue.join()
        if self._error is not None:
            raise self._error
        if self.full is not None:
            raise self.full

    def write_deferred(self, release: Callable[[], bool]) -> int:
        """After a full disk, once every child is stopped: give the reserve back (``release``) and write what was
        deferred, durably; how many records. OSError when even that room was not enough."""
        self._queue.join()
        if not self._deferred or self._error is not None:
            return 0
        release()
        deferred, self._deferred = self._deferred, {}
        for path, (data, row) in deferred.items():
            if self._may_write():
                self._write_indexed(path, data, row, durable=True, sync_parent=False)
        for directory in dict.fromkeys([self.directory, *(path.parent for path in deferred)]):
            sync_directory(directory)
        return len(deferred)

    def close(self) -> None:
        self._queue.put(_STOP)
        self._thread.join()
        if self._error is not None:
            raise self._error

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            batch = [item]
            while True:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            # Known before writing: a write that fails must not keep the thread (and close()) waiting forever.
            stop = any(entry is _STOP for entry in batch)
            latest, durable_files = _latest_versions(batch)
            try:
                synced: dict[Path, None] = {}  # the directories of durable writes (partitions/, splits/)
                for number, entry in enumerate(batch):
                    if entry is _STOP:
                        continue
                    path, data, durable, row, done = entry  # type: ignore[misc]
                    if latest[path] != number:
                        continue  # a later version of the file is in this batch: written instead, as durably
                    durable = durable or path in durable_files
                    if self._error is not None or not self._may_write():
                        continue
                    if self.full is None:
                        try:
                            self._write_indexed(path, data, row, durable=durable, sync_parent=False)
                            if durable:
                                synced[path.parent] = None
                            continue
                        except OSError as error:
                            if error.errno not in FULL:
                                raise
                            self.full = error
                    if done is None:  # a write-ahead's caller hears of it instead
                        self._deferred.pop(path, None)  # only the latest version of a file is written
                        self._deferred[path] = (data, row)
                if self._error is None:
                    for directory in synced:
                        sync_directory(directory)
            except BaseException as error:
                self._error = error
            finally:
                for entry in batch:
                    if entry is not _STOP:
                        self._count(entry[0], -1)  # type: ignore[index]
                        if entry[4] is not None:  # type: ignore[index]
                            entry[4].set()  # type: ignore[index]  # written and synced (or failed: the error says)
                    self._queue.task_done()
            if stop:
                return


def _latest_versions(batch: list[object]) -> tuple[dict[Path, int], set[Path]]:
    """Of a batch: the position of each file's last write, and the files any write of which must be durable. A
    partition's "running" record and its final one often meet in a batch (a short child): only the final is
    written. (A write-ahead waited for is never followed in its batch by a version of its file: only the
    executor's thread queues records, and it is the one waiting.)"""
    latest: dict[Path, int] = {}
    durable_files: set[Path] = set()
    for number, entry in enumerate(batch):
        if entry is not _STOP:
            path, _, durable, _, _ = entry  # type: ignore[misc]
            latest[path] = number
            if durable:
                durable_files.add(path)
    return latest, durable_files
