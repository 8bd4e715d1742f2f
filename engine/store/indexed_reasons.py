"""The reasons and signatures of failed partitions as a trusted record index holds them (``reason_log``).

The index vouches for a partition when its row holds the status the caller's board shows (a pending row's values
are zeros until written: it never shows a failure) and no bulk mark names it (a mark's reason is the mark's, merged
at read); for any other, and for a line that is not there, the caller reads the record.
"""

from __future__ import annotations

from array import array

from engine.store.reason_log import Reasons
from engine.store.record_index import ROW, column
from engine.store.state_store import StateStore
from engine.store.status import Status


class IndexedReasons:
    """What the index says of each partition's last reason; :meth:`knows` before asking."""

    def __init__(self, rows: bytes, reasons: Reasons, marked: frozenset[int]) -> None:
        self.count = len(rows) // ROW.size
        self._statuses = rows[1 :: ROW.size]
        self._signatures = array("I")
        self._signatures.frombytes(bytes(column(rows, 12, 4, self.count)))
        self._offsets = array("q")
        self._offsets.frombytes(bytes(column(rows, 32, 8, self.count)))
        self._reasons = reasons
        self._marked = marked

    @classmethod
    def of(cls, store: StateStore, size: int) -> IndexedReasons | None:
        """The backfill's index and reason files when they can be trusted, else None."""
        trusted = store.trusted_index(size)
        if trusted is None:
            return None
        rows, token = trusted
        reasons = Reasons.open(store.directory, token)
        if reasons is None:
            return None
        marked = frozenset(number for mark in store.bulk_marks() for number in mark.numbers)
        return cls(rows, reasons, marked)

    def knows(self, index: int, status: Status) -> bool:
        """Whether the index's row of ``index`` is written with ``status`` (a failure or a cancellation) and no bulk
        mark covers it."""
        return (
            index < self.count
            and self._statuses[index] == status
            and index not in self._marked
            and self._signatures[index] < len(self._reasons.signatures)
        )

    def signature(self, index: int) -> str:
        """The signature of the reason of a partition the index :meth:`knows`."""
        return self._reasons.signatures[self._signatures[index]]

    def reason(self, index: int) -> tuple[bool, str | None]:
        """(found, the reason) of a partition the index :meth:`knows`: (True, None) when it has no reason,
        (False, None) when its line is not there (read the record)."""
        offset = self._offsets[index]
        if not offset:
            return True, None
        reason = self._reasons.reason(index, offset)
        return reason is not None, reason
