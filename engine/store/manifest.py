"""``manifest.json``: the immutable inputs of a backfill, from which resume regenerates the plan."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from engine.base.errors import BackfillError, StateUnreadable
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
    """Rebuild the spec exactly as saved (instants from integer microseconds); a field of the wrong type is
    unreadable state, named, never a traceback."""
    where = f"manifest of backfill {manifest.get('id')!r}"
    for field, kind in (("target", dict), ("timezone", str), ("partition", str), ("run_options", dict)):
        if not isinstance(manifest.get(field), kind):
            raise StateUnreadable(f"{where}: {field} is {manifest.get(field)!r}, not a {kind.__name__}")
    for field in ("start_us", "end_us"):
        if not isinstance(manifest.get(field), int) or isinstance(manifest.get(field), bool):
            raise StateUnreadable(f"{where}: {field} is {manifest.get(field)!r}, not whole microseconds")
    # Fields a backfill saved before guardrails lacks; present, they must hold what backfill wrote: the choices a
    # resume is judged by, and the reason every child is told.
    for field, kind in (("guardrails", dict), ("reason", str), ("working_directory", str)):
        if field in manifest and (not isinstance(manifest[field], kind) or manifest[field] == ""):
            raise StateUnreadable(f"{where}: {field} is {manifest[field]!r}, not a {kind.__name__}")
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
    except (KeyError, TypeError, ValueError, AttributeError) as error:
        raise StateUnreadable(f"{where} is incomplete: {error}") from None
    except BackfillError as error:  # a zone or unit this version does not know
        raise StateUnreadable(f"{where}: {error}") from None
    if len(spec.plan) != manifest.get("partition_count", len(spec.plan)):
        raise StateUnreadable(
            f"manifest of backfill {manifest.get('id')!r} plans {manifest['partition_count']} partitions but this "
            f"version of backfill plans {len(spec.plan)} from the same inputs"
        )
    return spec


def initial_options(manifest: dict[str, Any]) -> ExecutionOptions:
    """The execution controls of the backfill's first invocation (the defaults of a resume)."""
    saved = manifest.get("initial_execution") or {}
    if not isinstance(saved, dict):
        raise StateUnreadable(f"manifest of backfill {manifest.get('id')!r}: initial_execution is not a mapping")
    options = ExecutionOptions(
        max_parallel=saved.get("max_parallel", 1),
        workers=saved.get("workers", 16),
        retries=saved.get("retries", 0),
        on_failure=saved.get("on_failure", "stop"),
        reverse=saved.get("reverse", False),
        timeout=saved.get("timeout"),
        launcher=saved.get("launcher", "exec"),  # stores from before the warm launcher ran each partition fresh
        dask_scheduler=saved.get("dask_scheduler"),
        split_on=tuple(saved["split_on"]) if isinstance(saved.get("split_on"), list) else saved.get("split_on", ()),
        split_pattern=saved.get("split_pattern"),
        min_partition=saved.get("min_partition"),
    )
    for field, value in options.to_json().items():  # checked before anything is launched with them
        wanted = (
            bool
            if field == "reverse"
            else str
            if field in ("on_failure", "launcher", "dask_scheduler", "split_pattern")
            else list
            if field == "split_on"
            else int
        )
        if field in ("timeout", "dask_scheduler", "split_pattern", "min_partition") and value is None:
            continue
        if field == "split_on" and not (
            isinstance(options.split_on, tuple) and set(options.split_on) <= {"timeout", "oom"}
        ):
            raise StateUnreadable(
                f"manifest of backfill {manifest.get('id')!r}: initial_execution.split_on is {value!r}, "
                "not a list of timeout and oom"
            )
        if not isinstance(value, wanted) or (wanted is int and isinstance(value, bool)):
            raise StateUnreadable(
                f"manifest of backfill {manifest.get('id')!r}: initial_execution.{field} is {value!r}, "
                f"not a {wanted.__name__}"
            )
    return options
