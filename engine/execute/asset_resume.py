"""Asset-level resume inside a pipeline partition (seed ``interventions.txt``: "mark a failed task SUCCESS and
the tasks waiting on it run; the rest of the run is not repeated").

A pipeline partition whose attempt failed at asset A runs again only A and what is downstream of it: the
assets that succeeded in the failed attempt are carried over. What a partition holds is read from its own
record, attempt by attempt, with each run attempt's run record (``logs/runs/<run-id>.json``)::

    a run attempt        its assets that succeeded (or were skipped) hold; those that failed, were upstream of
                         nothing that ran, or are missing from its run record do not. No readable run record:
                         nothing holds (a child killed before writing one).
    an asset mark        ``mark --asset A --status succeeded`` (or skipped): A holds; ``failed``: A does not
    a partition mark     nothing holds (an operator's word on the whole partition is a whole rerun)
    an operator's rerun  (``--asset``) its assets update what held before

An asset that holds is carried only over the same definition (its file's digest, with the pipeline's
``default:``, as its run record states it); everything downstream of an asset that runs runs too (its input
changes). When nothing would be carried, or nothing would run (the failure was in verification, say), the
whole partition runs, as ``--rerun-whole-partition`` always does.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from engine.pipeline.asset_status import AssetStatus
from engine.store.records import PartitionRecord

HOLDS = (AssetStatus.SUCCEEDED, AssetStatus.SKIPPED)  # what lets the downstream run, as in the runner


@dataclass(frozen=True)
class AssetPlan:
    """What one attempt of a partition runs, and what it takes from earlier attempts or marks."""

    run: tuple[str, ...]
    carried: dict[str, str]  # asset → the run ID of the attempt (or asset mark) it is taken from


@dataclass(frozen=True)
class _Held:
    run_id: str
    digest: str | None  # None: an operator's mark, which states no definition


class AssetResume:
    """Plans each attempt of a pipeline partition from what its earlier attempts left."""

    def __init__(self, runs_directory: Path, digests: Mapping[str, str], downstream: Mapping[str, list[str]]) -> None:
        self.runs_directory = runs_directory
        self.digests = dict(digests)  # the selected assets, each with its definition's digest now
        self.downstream = downstream

    def plan(self, record: PartitionRecord | None) -> AssetPlan | None:
        """The assets the next attempt runs and carries, or None when it runs the whole selection."""
        if record is None or not record.attempts:
            return None
        held = self.held(record)
        carried = {
            name: source.run_id
            for name, source in held.items()
            if name in self.digests and source.digest in (None, self.digests[name])
        }
        run = self._with_downstream(set(self.digests) - set(carried))
        carried = {name: run_id for name, run_id in carried.items() if name not in run}
        if not run or not carried:
            return None
        return AssetPlan(tuple(sorted(run)), dict(sorted(carried.items())))

    def held(self, record: PartitionRecord) -> dict[str, _Held]:
        """The assets of the partition that hold after its last attempt, and where each was taken from."""
        held: dict[str, _Held] = {}
        for attempt in record.attempts:
            if attempt.kind == "mark":
                if attempt.asset is None:
                    held = {}
                elif attempt.status in HOLDS:
                    held[attempt.asset] = _Held(attempt.run_id, None)
                else:
                    held.pop(attempt.asset, None)
                continue
            entries = self._entries(attempt.run_id)
            if entries is None:
                held = {}
                continue
            if attempt.kind == "run":  # it ran the whole selection, or what it did not carry
                held = {name: source for name, source in held.items() if name in (attempt.carried or {})}
            for entry in entries:
                name = entry.get("name")
                if not isinstance(name, str):
                    continue
                if entry.get("status") in HOLDS:
                    digest = entry.get("digest")
                    held[name] = _Held(attempt.run_id, digest if isinstance(digest, str) else "")
                else:
                    held.pop(name, None)
        return held

    def _entries(self, run_id: str) -> list[dict[str, Any]] | None:
        try:
            record = orjson.loads((self.runs_directory / f"{run_id}.json").read_bytes())
        except (OSError, orjson.JSONDecodeError):
            return None
        assets = record.get("assets") if isinstance(record, dict) else None
        return [a for a in assets if isinstance(a, dict)] if isinstance(assets, list) else None

    def _with_downstream(self, names: set[str]) -> set[str]:
        found, todo = set(names), list(names)
        while todo:
            for child in self.downstream.get(todo.pop(), []):
                if child in self.digests and child not in found:
                    found.add(child)
                    todo.append(child)
        return found
