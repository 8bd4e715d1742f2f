"""``manifest.json``: the immutable inputs of a backfill, from which resume regenerates the plan."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from engine.base.errors import StateUnreadable
from engine.dates.instants import format_instant, load_zone, zone_name
from engine.dates.plan import parse_unit
from engine.pipeline.options import RunOptions
from engine.spec.backfill_spec import BackfillSpec, ExecutionOptions, TargetSpec

MANIFEST_FORMAT = 1


def now_text() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def manifest_of(
    spec: BackfillSpec, *, backfill_id: str, working_directory: str, options: ExecutionOptions
) -> dict[str, Any]:
    return {
        "format": MANIFEST_FORMAT,
        "id": backfill_id,
        "created_at": now_text(),
        "target": spec.target.to_json(),
        "command_template": spec.target.template,
        "working_directory": working_directory,
        "environment": spec.environment,
        "run_options": spec.run_options.to_json(),
        "variables": spec.run_options.variables,
        "config_file": spec.run_options.config_file,
        "query_annotations": spec.run_options.query_annotations,
        "start": format_instant(spec.start, spec.zone, micros="always"),
        "end": format_instant(spec.end, spec.zone, micros="always"),
        "start_us": spec.start,
        "end_us": spec.end,
        "timezone": zone_name(spec.zone),
        "partition": spec.unit.name,
        "partition_count": len(spec.plan),
        "initial_execution": options.to_json(),
    }


def spec_of(manifest: dict[str, Any]) -> BackfillSpec:
    """Rebuild the spec exactly as saved (instants from integer microseconds)."""
    try:
        spec = BackfillSpec(
            target=TargetSpec.from_json(manifest["target"]),
            environment=manifest["environment"],
            start=int(manifest["start_us"]),
            end=int(manifest["end_us"]),
            zone=load_zone(manifest["timezone"]),
            unit=parse_unit(manifest["partition"]),
            run_options=RunOptions.from_json(manifest["run_options"]),
        )
    except (KeyError, TypeError, ValueError) as error:
        raise StateUnreadable(f"manifest of backfill {manifest.get('id')!r} is incomplete: {error}") from None
    if len(spec.plan) != manifest.get("partition_count", len(spec.plan)):
        raise StateUnreadable(
            f"manifest of backfill {manifest.get('id')!r} plans {manifest['partition_count']} partitions but this "
            f"version of backfill plans {len(spec.plan)} from the same inputs"
        )
    return spec


def initial_options(manifest: dict[str, Any]) -> ExecutionOptions:
    """The execution controls of the backfill's first invocation (the defaults of a resume)."""
    saved = manifest.get("initial_execution") or {}
    return ExecutionOptions(
        max_parallel=saved.get("max_parallel", 1),
        workers=saved.get("workers", 16),
        retries=saved.get("retries", 0),
        on_failure=saved.get("on_failure", "stop"),
        reverse=saved.get("reverse", False),
        timeout=saved.get("timeout"),
    )
