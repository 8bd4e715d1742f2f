"""What has run before: our own run records (``logs/runs/``) and the backfills saved in the state root.

Intervals are half-open ``[start, end)`` in integer microseconds (a run record's
inclusive end plus one microsecond).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from statistics import median
from typing import Any

import orjson

from engine.pipeline.asset_status import AssetStatus
from engine.store import audit
from engine.store.bulk_marks import read_bulk_marks
from engine.store.manifest import spec_of
from engine.store.records import Attempt, PartitionRecord, RecordStatus
from engine.store.state_store import StateStore, saved_backfill_dirs

EPOCH = datetime.fromisoformat("1970-01-01T00:00:00+00:00")


def instant_of(text: str) -> int:
    """An ISO instant with its offset (``Z`` or ``±hh:mm``) as microseconds since the epoch."""
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    delta = moment - EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


@dataclass(frozen=True)
class AssetRun:
    status: str
    start: int  # the asset's own interval (modifiers applied), half-open
    end: int
    rows_in_interval: int | None
    rows_written: int | None = None


@dataclass(frozen=True)
class PastRun:
    run_id: str
    status: str
    started_at: int
    duration: float
    environment: str | None
    backfill_id: str | None
    start: int
    end: int
    assets: dict[str, AssetRun]
    ran: bool = True  # False for a stand-in run or a mark: it satisfies gates, but nothing ran


@dataclass
class History:
    runs: list[PastRun] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)  # record files that could not be read

    def succeeded_assets(self) -> set[str]:
        """Assets that really ran and succeeded: a stand-in or a mark is no history of running."""
        return {
            name for run in self.runs if run.ran for name, a in run.assets.items() if a.status == AssetStatus.SUCCEEDED
        }

    def coverage(self, asset: str) -> list[tuple[int, int]]:
        """The merged intervals over which ``asset`` has succeeded."""
        spans = [
            (a.start, a.end)
            for run in self.runs
            if (a := run.assets.get(asset)) is not None and a.status == AssetStatus.SUCCEEDED
        ]
        return merge_spans(spans)

    def median_duration(self) -> float | None:
        """Of the succeeded runs that ran: a stand-in or a mark took no time, and would pull the estimate down."""
        durations = [run.duration for run in self.runs if run.status == AssetStatus.SUCCEEDED and run.ran]
        return median(durations) if durations else None


def merge_spans(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def missing_spans(start: int, end: int, covered: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The parts of ``[start, end)`` that ``covered`` (merged, sorted) leaves out."""
    missing, cursor = [], start
    for low, high in covered:
        if high <= cursor:
            continue
        if low >= end:
            break
        if low > cursor:
            missing.append((cursor, min(low, end)))
        cursor = max(cursor, high)
        if cursor >= end:
            break
    if cursor < end:
        missing.append((cursor, end))
    return missing


def read_run_history(runs_directory: Path, pipeline_name: str, pipeline_dir: Path) -> History:
    """The run records of one pipeline (matched by name and by a target inside its directory)."""
    history = History()
    try:
        names = os.listdir(runs_directory)
    except OSError:
        return history
    inside = str(pipeline_dir)
    for name in names:
        if not name.endswith(".json"):
            continue
        path = runs_directory / name
        try:
            data = orjson.loads(path.read_bytes())
            if data.get("pipeline") != pipeline_name or not str(data.get("target", "")).startswith(inside):
                continue
            history.runs.append(_past_run(data))
        except (OSError, orjson.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError):
            history.unreadable.append(str(path))
    history.runs.sort(key=lambda run: run.started_at)
    return history


def _past_run(data: dict[str, Any]) -> PastRun:
    interval = data["interval"]
    start, end = instant_of(interval["start"]), instant_of(interval["end"]) + 1
    assets = {}
    for entry in data.get("assets") or []:
        window = entry.get("interval") or interval
        assets[entry["name"]] = AssetRun(
            entry["status"],
            instant_of(window["start"]),
            instant_of(window["end"]) + 1,
            entry.get("rows_in_interval"),
            entry.get("rows_written"),
        )
    return PastRun(
        data["run_id"],
        data["status"],
        instant_of(data["started_at"]) if data.get("started_at") else 0,
        float(data.get("duration_seconds") or 0.0),
        data.get("environment"),
        data.get("backfill_id"),
        start,
        end,
        assets,
        ran=not data.get("stand_in"),
    )


@dataclass(frozen=True)
class EarlierBackfill:
    id: str
    target_identity: dict[str, Any]
    target_path: str | None
    environment: str | None
    run_options: dict[str, Any]
    start: int
    end: int
    directory: Path


def earlier_backfills(state_root: Path, *, exclude: str | None = None) -> list[EarlierBackfill]:
    """Every saved backfill of the state root (newest first). Whether one runs now is the live-work registry's
    to say (``engine.store.live_work``), for every state root at once."""
    found = []
    directories = sorted(saved_backfill_dirs(state_root), reverse=True)
    for directory in directories:
        if directory.name == exclude:
            continue
        store = StateStore(directory)
        try:
            manifest = store.read_manifest()
            spec = spec_of(manifest)
        except Exception:  # an unreadable neighbour is not our backfill's problem
            continue
        found.append(
            EarlierBackfill(
                store.id,
                spec.target.identity,
                spec.target.path,
                spec.environment,
                spec.run_options.to_json(),
                spec.start,
                spec.end,
                directory,
            )
        )
    return found


def command_history(backfills: list[EarlierBackfill], identity: dict[str, Any], *, limit: int = 1000) -> History:
    """Succeeded partitions of earlier backfills of the same command, as past runs (durations, coverage)."""
    history = History()
    for backfill in backfills:
        if backfill.target_identity != identity:
            continue
        partitions = backfill.directory / "partitions"
        try:
            files = sorted(os.listdir(partitions))[:limit]
        except OSError:
            continue
        for name in files:
            try:
                record = orjson.loads((partitions / name).read_bytes())
                last = record["attempts"][-1]
                history.runs.append(
                    PastRun(
                        last["run_id"],
                        record["status"],
                        0,
                        float(last.get("duration") or 0.0),
                        backfill.environment,
                        backfill.id,
                        int(record["start_us"]) if "start_us" in record else instant_of(record["start"]),
                        int(record["end_us"]) if "end_us" in record else instant_of(record["end"]),
                        {},
                    )
                )
            except (OSError, orjson.JSONDecodeError, KeyError, IndexError, TypeError, ValueError):
                history.unreadable.append(str(partitions / name))
        if len(history.runs) >= limit:
            break
    return history


def marked_runs(backfills: list[EarlierBackfill], history: History, pipeline_dir: Path) -> list[PastRun]:
    """Partitions of saved backfills of this pipeline whose *current* record says an operator marked them
    succeeded *with* ``--rows``, as past runs: such a mark satisfies coverage and row-count checks like a run
    (one without rows does not). The audit only says which partitions were ever marked; the record decides,
    so a mark later retracted (marked ``failed``, or run again) covers nothing. A bulk mark's partitions are read
    from its file (its audit lines name slices). A mark with ``--asset`` stands for that asset; one of the whole
    partition for the assets the backfill's own runs ran."""
    inside = str(pipeline_dir)
    found: list[PastRun] = []
    for backfill in backfills:
        if not (backfill.target_path or "").startswith(inside):
            continue
        wanted: dict[str, set[str | None]] = {}
        for line in audit.read(backfill.directory).entries:
            if (
                line.get("action") == "MARK"
                and line.get("to_status") == RecordStatus.SUCCEEDED
                and isinstance(line.get("target_count"), int)
                and line.get("partition_id")
            ):
                wanted.setdefault(line["partition_id"], set()).add(line.get("asset"))
        store = StateStore(backfill.directory)
        try:
            bulk = [
                mark
                for mark in read_bulk_marks(backfill.directory)
                if mark.to == RecordStatus.SUCCEEDED and isinstance(mark.rows, int)
            ]
            if not (wanted or bulk):
                continue
            spec = spec_of(store.read_manifest())
        except Exception:  # an unreadable neighbour is not our backfill's problem
            continue
        for mark in bulk:
            for index in mark.numbers:
                if 0 <= index < len(spec.plan):
                    interval = spec.plan.interval(index)
                    wanted.setdefault(spec.ids.of(interval.start, interval.end), set()).add(mark.asset)
        ran = {name for run in history.runs if run.backfill_id == backfill.id for name in run.assets}
        for partition_id, marked in wanted.items():
            try:
                record = store.read_record(partition_id, spec.plan, spec.ids.of)
            except Exception:  # unreadable: it proves nothing
                continue
            if record is None:
                continue
            names = {n for n in marked if n is not None} | (ran if None in marked else set())
            for name in sorted(names):
                mark = _standing_mark(record, name, whole=name in ran)
                if mark is None:
                    continue
                rows = mark.rows
                found.append(
                    PastRun(
                        f"mark:{mark.run_id}",
                        AssetStatus.SUCCEEDED,
                        instant_of(mark.finished_at) if mark.finished_at else 0,
                        0.0,
                        backfill.environment,
                        backfill.id,
                        record.start_us,
                        record.end_us,
                        {name: AssetRun(AssetStatus.SUCCEEDED, record.start_us, record.end_us, rows, rows)},
                        ran=False,
                    )
                )
    return found


def _standing_mark(record: PartitionRecord, asset: str, *, whole: bool) -> Attempt | None:
    """The succeeded mark with rows that is the latest word on ``asset`` in ``record``, or None: a later
    run, failure or mark without rows has replaced it. Entries of the whole partition speak for the asset
    only when the backfill ran it (``whole``)."""
    speaking = (None, asset) if whole else (asset,)
    for attempt in reversed(record.attempts):
        if attempt.asset not in speaking:
            continue
        standing = attempt.kind == "mark" and attempt.status == RecordStatus.SUCCEEDED
        return attempt if standing and isinstance(attempt.rows, int) else None
    return None
