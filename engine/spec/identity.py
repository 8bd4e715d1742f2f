"""Partition IDs: SHA-256 of a canonical encoding of what a partition computes.

The encoding is the canonical JSON (sorted keys, no spaces) of
``{"environment", "run_options", "target", "version"}``, a newline, then the
interval start and end as integer microseconds since 1970-01-01T00:00:00Z
separated by a newline. It never depends on execution order, the machine, the
working directory or the time zone used to display the interval.
"""

from __future__ import annotations

import hashlib
from typing import Any

import orjson

ID_VERSION = 1
SHORT_ID = 12


class PartitionIds:
    """Computes IDs for one backfill's partitions; the constant prefix is hashed once."""

    def __init__(self, target: dict[str, Any], environment: str | None, run_options: dict[str, Any]) -> None:
        prefix = orjson.dumps(
            {"environment": environment, "run_options": run_options, "target": target, "version": ID_VERSION},
            option=orjson.OPT_SORT_KEYS,
        )
        self._base = hashlib.sha256(prefix + b"\n")

    def of(self, start: int, end: int) -> str:
        """The ID of the partition ``[start, end)``."""
        digest = self._base.copy()
        digest.update(b"%d\n%d" % (start, end))
        return digest.hexdigest()
