"""The record every run leaves: ``<repository>/logs/runs/<run-id>.json``.

Outside a git repository the records go to the user state directory
(``platformdirs.user_state_dir("backfill")/runs``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from engine.base.atomic import write_atomic
from engine.dates.durations import format_duration
from engine.dates.instants import format_instant
from engine.pipeline.asset_status import AssetStatus
from engine.pipeline.options import RUN_OPTIONS
from engine.pipeline.repository import logs_root
from engine.pipeline.run_types import PreparedRun, RunResult
from engine.pipeline.templating import Window


def _window_json(window: Window) -> dict[str, str]:
    return {
        "start": format_instant(window.start, window.zone, micros="always"),
        "end": format_instant(window.end, window.zone, micros="always"),
    }


def _seconds(value: float | None) -> str | None:
    if value is None:
        return None
    from datetime import UTC, datetime

    return datetime.fromtimestamp(value, UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def record_json(result: RunResult) -> dict[str, Any]:
    prepared = result.prepared
    request = prepared.request
    return {
        "run_id": prepared.run_id,
        "status": AssetStatus.SUCCEEDED if result.ok else AssetStatus.FAILED,
        "target": str(prepared.target.path),
        "pipeline": prepared.pipeline.name,
        "environment": prepared.environment.name,
        "interval": {
            **_window_json(prepared.window),
            "timezone": getattr(prepared.window.zone, "key", "UTC"),
            "end_inclusive": True,
        },
        "options": {
            "workers": request.workers,
            **{
                option.record_key: option.recorded(getattr(request.options, option.attribute))
                for option in RUN_OPTIONS
                if option.record_key is not None
            },
            "variables": prepared.variables,  # as resolved (defaults, the variant, the overrides)
            "full_refresh": request.full_refresh,
            "timeout": format_duration(request.timeout) if request.timeout else None,
        },
        "backfill_id": request.backfill_id,
        "reason": request.reason,
        "backfill_total": request.backfill_total,
        "partition_id": request.partition_id,
        "started_at": _seconds(result.started_at),
        "finished_at": _seconds(result.finished_at),
        "duration_seconds": round(result.finished_at - result.started_at, 6),
        "error": result.error,
        "notes": prepared.notes,
        "warnings": list(prepared.warnings),
        "row_changes": result.row_changes,
        "assets": [
            {
                "name": r.name,
                "type": r.kind,
                "digest": prepared.pipeline.assets[r.name].digest,
                "status": r.status,
                "started_at": _seconds(r.started_at),
                "finished_at": _seconds(r.finished_at),
                "duration_seconds": round(r.duration, 6) if r.duration is not None else None,
                "rows_written": r.rows,
                "rows_in_interval": r.rows_in_interval,
                "checks": [c.to_json() for c in r.checks],
                "error": r.error,
                "interval": _window_json(r.window) if r.window else None,
            }
            for r in result.results
        ],
    }


def write_run_record(result: RunResult) -> Path:
    directory = logs_root(result.prepared.target.repository) / "runs"
    path = directory / f"{result.prepared.run_id}.json"
    write_atomic(path, orjson.dumps(record_json(result), option=orjson.OPT_INDENT_2) + b"\n")
    return path


STAND_IN_STATUSES = (AssetStatus.SUCCEEDED, AssetStatus.SKIPPED)


def write_stand_in_record(
    prepared: PreparedRun, *, status: str, rows: int | None, reason: str, requested_by: str, now: float
) -> tuple[Path, dict[str, Any]]:
    """Record a run that did not really run (an upstream that only runs in production, say): every selected
    asset gets ``status`` over the interval, and the guardrails' coverage check judges it like any other run
    (a ``skipped`` one covers nothing)."""
    record = record_json(RunResult(prepared, [], now, now))
    record["status"] = status
    record["stand_in"] = True
    record["reason"] = reason
    record["requested_by"] = requested_by
    record["assets"] = [
        {
            "name": name,
            "type": prepared.pipeline.assets[name].kind,
            "status": status,
            "started_at": record["started_at"],
            "finished_at": record["finished_at"],
            "duration_seconds": 0.0,
            "rows_written": rows,
            "rows_in_interval": rows,
            "checks": [],
            "error": None,
            "interval": None,
        }
        for name in sorted(prepared.selected)
    ]
    directory = logs_root(prepared.target.repository) / "runs"
    path = directory / f"{prepared.run_id}.json"
    write_atomic(path, orjson.dumps(record, option=orjson.OPT_INDENT_2) + b"\n")
    return path, record
