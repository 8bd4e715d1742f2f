"""``backfill run TARGET --continue``: the last run by hand of the pipeline again, as Bruin's ``--continue`` does
it (``cmd/run.go``, ``Scheduler.RestoreState``): the same interval and options, only the assets that did not
succeed (failed, upstream_failed) — the downstream of a failed asset is among them, as ``upstream_failed`` —
and nothing else. A pipeline whose assets changed since that run is refused, as Bruin refuses it.

Our run records are the state: ``logs/runs/<run-id>.json``. A backfill's partition runs are not continued
this way (``backfill --continue ID`` resumes a backfill).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import orjson

from engine.base.errors import BadInput, NothingToRun
from engine.dates.durations import parse_duration
from engine.pipeline.asset_status import AssetStatus
from engine.pipeline.options import RunOptions
from engine.pipeline.repository import Target, logs_root
from engine.pipeline.run_types import RunRequest

RERUN = (AssetStatus.FAILED, AssetStatus.UPSTREAM_FAILED)


@dataclass(frozen=True)
class Continuation:
    run_id: str  # the run continued
    request: RunRequest  # the run again, for the assets to rerun only
    assets: tuple[str, ...]


def _records(target: Target) -> list[dict[str, Any]]:
    directory = logs_root(target.repository) / "runs"
    found = []
    for path in directory.glob("*.json") if directory.is_dir() else ():
        try:
            record = orjson.loads(path.read_bytes())
        except (OSError, orjson.JSONDecodeError):
            continue  # a torn or foreign file is not a run to continue
        if isinstance(record, dict) and record.get("started_at") and isinstance(record.get("assets"), list):
            found.append(record)
    return found


def last_run(target: Target, pipeline: str) -> dict[str, Any]:
    """The latest run by hand of ``pipeline`` (by its start), or BadInput when it has none."""
    runs = [
        r
        for r in _records(target)
        if r.get("pipeline") == pipeline and not r.get("backfill_id") and not r.get("stand_in")
    ]
    if not runs:
        raise BadInput(f"--continue: pipeline {pipeline!r} has no run by hand to continue (no record in logs/runs)")
    return max(runs, key=lambda r: r["started_at"])


def continuation(request: RunRequest, target: Target, pipeline: str, assets: set[str]) -> Continuation:
    """The request that continues the last run of ``pipeline`` (whose assets are now ``assets``)."""
    record = last_run(target, pipeline)
    recorded = {a["name"]: a.get("status") for a in record["assets"] if isinstance(a, dict)}
    gone = sorted(set(recorded) - assets)
    if gone:
        raise BadInput(
            f"--continue: the pipeline has changed since run {record['run_id']} ({', '.join(gone[:5])} no longer "
            "an asset of it): run it again without --continue"
        )
    again = tuple(sorted(name for name, status in recorded.items() if status in RERUN))
    if not again:
        raise NothingToRun(f"nothing to continue: every asset of run {record['run_id']} succeeded or was skipped")
    options = record.get("options") or {}
    interval = record["interval"]
    run_options = RunOptions(
        selector=(" ".join(f"fqn:{name}" for name in again),),
        only=options.get("only"),
        variables=dict(options.get("variables") or {}),
        apply_interval_modifiers=bool(options.get("apply_interval_modifiers")),
        config_file=request.options.config_file,
        query_annotations=request.options.query_annotations,
        variant=options.get("variant"),
    )
    continued = replace(
        request,
        start=interval["start"],
        end=interval["end"],
        timezone=interval.get("timezone") or "UTC",
        environment=request.environment or record.get("environment"),
        workers=int(options.get("workers") or request.workers),
        options=run_options,
        full_refresh=bool(options.get("full_refresh")),
        timeout=parse_duration(options["timeout"], "the continued run's timeout") if options.get("timeout") else None,
    )
    return Continuation(record["run_id"], continued, again)
