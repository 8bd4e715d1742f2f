"""The reasons and signatures of failed partitions as a trusted record index holds them (``reason_log``).

The index vouches for a partition when its row holds the status the caller's board shows (a pending row's values
are zeros until written: it never shows a failure) and counts every bulk mark of it (a mark's reason is the
mark's); for any other, and for a line that is not there, the caller reads the record (with the marks merged).
"""

from __future__ import annotations

from array import array

from engine.store.reason_log import Reasons
from engine.store.record_index import Columns
from engine.store.state_store import StateStore
from engine.store.status import Status


class IndexedReasons:
    """What the index says of each partition's last reason; :meth:`knows` before asking."""

    COLUMNS = ((1, 1), (4, 2), (12, 4), (32, 8))  # status, attempts, signature ID, reason offset

    def __init__(self, found: Columns, reasons: Reasons, marked: dict[int, int]) -> None:
        self.count = found.count
        self._statuses, attempts, signatures, offsets = found.columns
        self._attempts = array("H", bytes(attempts))
        self._signatures = array("I", bytes(signatures))
        self._offsets = array("q", bytes(offsets))
        self._reasons = reasons
        self._marked = marked

    @classmethod
    def of(cls, store: StateStore, size: int) -> IndexedReasons | None:
        """The backfill's index and reason files when they can be trusted, else None."""
        found = store.index_columns(size, cls.COLUMNS)
        if found is None:
            return None
        reasons = Reasons.open(store.directory, found.token)
        if reasons is None:
            return None
        marked: dict[int, int] = {}  # partition → the number of its latest bulk mark entry
        for mark in store.bulk_marks():  # oldest first: a later mark of a partition has a higher number
            marked.update(mark.numbers)
        return cls(found, reasons, marked)

    def knows(self, index: int, status: Status) -> bool:
        """Whether the index's row of ``index`` is written with ``status`` (a failure or a cancellation) and holds
        every bulk mark of it (a row written before a mark, or rebuilt from the files, does not)."""
        return (
            index < self.count
            and self._statuses[index] == status
            and self._attempts[index] >= self._marked.get(index, 0)
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
