"""The partition records the screens show, read again only when they changed.

A record's version is its file's identity — inode, size and modification time: every record is written by an
atomic rename, so any new record changes it — with the backfill's bulk marks, which readers merge in. The
table and the details pane take records from here: ``load`` (on a poll, a scroll or a selection) looks at the
file and reads it when its version moved; ``cached`` (while a line is painted) never touches the disk. So a
reason read while the record still held the running attempt is read again as soon as the record changes, however
many attempts it counts.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from engine.base.errors import StateUnreadable
from engine.spec.backfill_spec import BackfillSpec
from engine.store.bulk_marks import BULK_MARKS
from engine.store.records import PartitionRecord
from engine.store.state_store import StateStore

NEVER_WRITTEN = (0, 0, 0)


@dataclass(frozen=True)
class LoadedRecord:
    """A partition's record as last read (None: never attempted), or why it could not be read."""

    record: PartitionRecord | None
    error: str | None
    version: tuple

    @property
    def reason(self) -> str | None:
        """The latest attempt's error: why a failed or cancelled partition ended."""
        return self.record.reason if self.record is not None else None


class RecordCache:
    """Records by partition index, each read once per version; at most ``limit`` kept."""

    def __init__(self, spec: BackfillSpec, store: StateStore, *, limit: int = 4096) -> None:
        self.spec = spec
        self.store = store
        self.limit = limit
        self._loaded: dict[int, LoadedRecord] = {}
        self._marks = store.directory / BULK_MARKS  # a mark there changes what the folder's time says

    def _partition_id(self, index: int) -> str:
        interval = self.spec.plan.interval(index)
        return self.spec.ids.of(interval.start, interval.end)

    def version(self, index: int) -> tuple:
        """What changes whenever the partition's record does (one ``stat``)."""
        return (_identity(self.store.record_path(self._partition_id(index))), _identity(self._marks))

    def load(self, index: int) -> LoadedRecord:
        """The partition's record now: the cached one while its version holds, else read again."""
        version = self.version(index)
        loaded = self._loaded.get(index)
        if loaded is not None and loaded.version == version:
            return loaded
        try:
            record = self.store.read_record(self._partition_id(index), self.spec.plan, self.spec.ids.of)
            loaded = LoadedRecord(record, None, version)
        except StateUnreadable as error:
            loaded = LoadedRecord(None, str(error), version)
        if len(self._loaded) >= self.limit and index not in self._loaded:
            self._loaded.clear()
        self._loaded[index] = loaded
        return loaded

    def cached(self, index: int) -> LoadedRecord | None:
        """The record as last loaded, without looking at the disk (None: not loaded yet)."""
        return self._loaded.get(index)


def _identity(path: os.PathLike) -> tuple[int, int, int]:
    try:
        found = os.stat(path)
    except OSError:
        return NEVER_WRITTEN
    return (found.st_ino, found.st_size, found.st_mtime_ns)
