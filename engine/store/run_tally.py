"""What the attempts of one run add up to, kept as each ends.

The summary and the backfill record need counts, the verification outcomes, the first runs by name and which
partitions ran — never the attempts themselves. Holding every ended attempt cost the executor about 1 KiB per
partition (55 MB after 20 000; a million-partition run would have held over 700 MB); this holds a few counters,
one byte per planned partition and the first ``listed_limit`` names.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from engine.store.records import Attempt, RecordStatus

LISTED = 1000  # a record names at most this many runs, and this many verification failures (and says how many)


@dataclass
class RunTally:
    partitions: int  # the plan's size: which partitions ran is one byte each
    listed_limit: int = LISTED
    total: int = 0  # attempts that ended in this run
    statuses: Counter[str] = field(default_factory=Counter)
    verifications: Counter[str] = field(default_factory=Counter)  # per verification status ("none": unverified)
    listed: list[dict[str, Any]] = field(default_factory=list)  # the first runs: run ID, status, log
    verification_failures: list[dict[str, Any]] = field(default_factory=list)  # the first failed or warning ones
    verification_failures_total: int = 0
    succeeded_any: bool = False
    # table → rows added, removed and changed by this run's succeeded attempts (docs/diff.md)
    row_changes: dict[str, Counter[str]] = field(default_factory=dict)
    ran: int = 0  # distinct partitions with an attempt in this run
    _seen: bytearray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._seen = bytearray(self.partitions)

    def add(self, index: int, attempt: Attempt) -> None:
        """Count an attempt that ended (partition ``index`` of the plan)."""
        self.total += 1
        self.statuses[attempt.status] += 1
        if 0 <= index < self.partitions and not self._seen[index]:
            self._seen[index] = 1
            self.ran += 1
        if attempt.status != RecordStatus.RUNNING:
            self.verifications[(attempt.verification or {}).get("status", "none")] += 1
        if attempt.status == RecordStatus.SUCCEEDED:
            self.succeeded_any = True
            for table, change in (attempt.row_changes or {}).items():
                counts = self.row_changes.setdefault(table, Counter(added=0, removed=0, changed=0))
                for kind in ("added", "removed", "changed"):
                    if isinstance(change, dict) and isinstance(change.get(kind), int):
                        counts[kind] += change[kind]
        if len(self.listed) < self.listed_limit:
            self.listed.append({"run_id": attempt.run_id, "status": attempt.status, "log": attempt.log})
        if attempt.verification and attempt.verification.get("status") in ("failed", "warning"):
            self.verification_failures_total += 1
            if len(self.verification_failures) < self.listed_limit:
                failure = {"run_id": attempt.run_id, "detail": attempt.verification.get("detail")}
                self.verification_failures.append(failure)
