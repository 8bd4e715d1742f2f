"""The backfill record: a YAML file, written when a backfill invocation ends, saying what was done.

It goes to ``<repository>/.context/backfill-<name>-<UTC timestamp>.yml`` (outside a
repository: the backfill's state directory), with a copy in the state directory.
A backfill whose record cannot be written does not report success.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import Any

import yaml

from engine.base.atomic import write_new
from engine.dates.durations import format_duration
from engine.dates.instants import format_instant
from engine.guardrails.facts import Facts
from engine.guardrails.preflight import Approval, Preflight
from engine.guardrails.warehouse import Held, Warehouse
from engine.store import audit
from engine.store.run_tally import RunTally
from engine.store.status import Status

NAME_LENGTH = 80  # of the name in a record's file name (a file name may hold 255 bytes)


def record_path(repository: Path | None, state_directory: Path, name: str, now: float) -> Path:
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now))
    # "./load.sh {start}": no leading dot; a long command's template: the file name's first 80 characters of it
    safe = re.sub(r"[^A-Za-z0-9._-]+", "-", name)[:NAME_LENGTH].strip("-.") or "backfill"
    base = repository / ".context" if repository is not None else state_directory
    return base / f"backfill-{safe}-{stamp}.yml"


def is_table(asset) -> bool:
    """Assets whose rows the record counts: tables and seeds."""
    return asset.kind == "seed" or asset.materialization.type == "table"


def tables_after_run(
    facts: Facts, *, with_checks: bool, visit: Callable[[Path, Any], None] = lambda path, connection: None
) -> tuple[dict[str, int | None], list[dict[str, Any]]]:
    """Rows of every selected table now (None: no table, or the file could not be read) and, with
    ``with_checks``, the selected assets' checks run once over the whole tables: one open per file, which
    ``visit`` is also given (what the run left in the snapshot's tables is read through it)."""
    from engine.pipeline.quality_checks import run_checks
    from engine.pipeline.templating import base_context

    counts: dict[str, int | None] = {}
    checks: list[dict[str, Any]] = []
    context: dict[str, Any] = {}
    if with_checks and facts.pipeline is not None:
        context = base_context(
            facts.range_window(), run_id="after-range", pipeline=facts.pipeline.name, variables=facts.variables,
            full_refresh=False,
        )  # fmt: skip
    for path, assets in facts.by_file(facts.selected).items():
        tables = [a for a in assets if is_table(a.asset)]
        checked = [a for a in assets if context and a.asset.has_checks]
        try:
            warehouse = Warehouse.open(path)
        except (Held, Exception) as error:  # held or unreadable: the record says unknown, and why checks did not run
            counts.update(dict.fromkeys(a.asset.name for a in tables))
            checks += [{"asset": a.asset.name, "check": "*", "passed": False, "detail": str(error)} for a in checked]
            continue
        try:
            visit(path, warehouse.connection)
            for a in tables:
                counts[a.asset.name] = warehouse.rows(a.asset.name)
            for a in checked:
                if warehouse.connection is None or not warehouse.exists(a.asset.name):
                    continue
                for check in run_checks(warehouse.database(), a.asset, {**context, "this": a.asset.name}):
                    checks.append(
                        {"asset": a.asset.name, "check": check.name, "passed": check.passed, "detail": check.detail}
                    )
        finally:
            warehouse.close()
    return counts, checks


INTERVENTIONS_LISTED = 100


def build_record(
    *,
    backfill_id: str,
    preflight: Preflight,
    approval: Approval | None,
    reason: str | None,
    counts: dict[str, int],
    total: int,
    tally: RunTally,
    status: str,
    seconds: float,
    before: dict[str, int | None],
    after: dict[str, int | None],
    snapshot: dict[str, Any] | None,
    after_range: list[dict[str, Any]],
    state_directory: Path,
    failure_groups: list[dict[str, Any]] | None = None,
    failure_groups_total: int = 0,
) -> dict[str, Any]:
    facts = preflight.facts
    request = facts.request
    spec = request.spec
    selected = facts.selected
    counted = {status: counts.get(status.label, 0) for status in Status}  # every status, whoever counted
    verifications, failures = tally.verifications, tally.verification_failures
    unverified = _unverified_because(
        status, request.guard.verify, failures, tally.succeeded_any, verifications, after_range
    )
    row_counts = {}
    for name in sorted(set(before) | set(after)):
        b, n = before.get(name), after.get(name)
        delta = None if not b or n is None else round((n - b) * 100 / b, 2)
        row_counts[name] = {"before": b, "after": n, "delta_pct": delta}
    return {
        "backfill_id": backfill_id,
        "status": status,
        "asset": sorted(a.asset.name for a in selected) if selected else spec.target.name,
        "pipeline": facts.pipeline.name if facts.pipeline else None,
        "command": spec.target.template,
        "environment": spec.environment,
        "range": f"{format_instant(spec.start, spec.zone)} to {format_instant(spec.end, spec.zone)} (end exclusive)",
        "partition": f"{spec.unit.name} in {getattr(spec.zone, 'key', 'UTC')}",
        "reason": reason,
        "mode": request.mode,
        "materialization_strategy": {a.asset.name: a.strategy for a in selected} or None,
        "layer": {a.asset.name: a.layer for a in selected} or None,
        "intervals_attempted": total - counted[Status.QUEUED],
        "intervals_succeeded": counted[Status.SUCCEEDED],
        "intervals_failed": counted[Status.FAILED],
        "intervals_cancelled": counted[Status.CANCELLED],
        "intervals_skipped": counted[Status.SKIPPED],
        "partial": counted[Status.SUCCEEDED] + counted[Status.SKIPPED] != total,
        "runs": [
            {
                "run_id": run["run_id"],
                "status": run["status"],
                "log": str(state_directory / run["log"]) if run["log"] else None,
            }
            for run in tally.listed
        ],
        "runs_total": tally.total,
        "row_counts": row_counts,
        "duration_total": duration_total(seconds),
        "verified": not unverified,
        "unverified_because": unverified,
        "verification": dict(verifications),
        "verification_failures": failures,
        "verification_failures_total": tally.verification_failures_total,
        "row_changes": {table: dict(counts) for table, counts in sorted(tally.row_changes.items())},
        # The kinds of failure (engine.store.failure_groups): count, first and last partition, an example.
        "failure_groups": failure_groups or [],
        "failure_groups_total": failure_groups_total,
        "checks_after_range": after_range,
        "preflight": {
            "verdict": preflight.verdict,
            "digest": preflight.digest,
            "level": preflight.settings.level,
            "checks": [
                {"name": c.name, "status": c.status, "tier": c.tier, "detail": c.detail} for c in preflight.checks
            ],
        },
        "approval": approval.to_json() if approval else None,
        "snapshot": _snapshot_summary(snapshot, state_directory),
        "downstream_blocked_until_rerun": sorted(a.asset.name for a in facts.downstream) if tally.succeeded_any else [],
        "interventions": _interventions(state_directory),
    }


def _unverified_because(
    status: str,
    verify: str,
    failures: list[dict[str, Any]],
    succeeded_any: bool,
    verifications: Counter[str],
    after_range: list[dict[str, Any]],
) -> list[str]:
    """Why the invocation is not ``verified``, one sentence each (empty: it is). A failed or cancelled
    invocation, or a check that failed without blocking, is never reported verified."""
    why = []
    if verify == "off":
        why.append("verification was off (--verify off)")
    if status != "succeeded":
        why.append(f"the invocation ended {status}")
    if not succeeded_any:
        why.append("no partition succeeded in this invocation")
    if failures:
        why.append(f"{len(failures)} partition{'s' if len(failures) != 1 else ''} failed or warned in verification")
    unknown = sorted(set(verifications) - {"verified", "insufficient history", "none", "failed", "warning"})
    if unknown:
        why.append(f"verification statuses not known to be safe: {', '.join(unknown)}")
    why += [
        f"check {check['check']} of {check['asset']} failed over the whole table: {check['detail']}"
        for check in after_range
        if not check["passed"]
    ]
    return why


def _interventions(state_directory: Path) -> dict[str, Any]:
    """Every intervention on the backfill so far (the first INTERVENTIONS_LISTED lines in full)."""
    log = audit.read(state_directory)
    return {
        "count": len(log.entries),
        "torn_lines": log.torn,
        "entries": [
            {
                key: entry.get(key)
                for key in (
                    "action",
                    "partition_id",
                    "asset",
                    "from_status",
                    "to_status",
                    "target_count",
                    "reason",
                    "requested_by",
                    "applied_at",
                )
            }
            for entry in log.entries[:INTERVENTIONS_LISTED]
        ],
        "all": f"backfill audit {state_directory.name}",
    }


def _snapshot_summary(snapshot: dict[str, Any] | None, state_directory: Path) -> dict[str, Any] | None:
    if snapshot is None:
        return None
    return {
        "taken_at": snapshot.get("taken_at"),
        "bytes": snapshot.get("bytes"),
        "tables": [t["name"] for f in snapshot.get("files", []) for t in f.get("tables", [])],
        "restore": f"backfill restore {state_directory.name} --reason TEXT",
    }


class _RecordDumper(getattr(yaml, "CSafeDumper", yaml.SafeDumper)):  # libyaml's: 4x faster on 2,000 runs
    """Safe YAML in which tiers, statuses and levels (``StrEnum``) are written as their text."""


_RecordDumper.add_multi_representer(StrEnum, lambda dumper, value: dumper.represent_str(str(value)))


def write_record(record: dict[str, Any], path: Path, copy: Path) -> Path:
    """Write the record and its copy, each whole and under a name of its own (a record of the same name and second
    — another invocation, another backfill of that name — is never replaced: ``-2``, ``-3``… is added); the path
    written. Any failure is an OSError for the caller to report."""
    text = yaml.dump(record, Dumper=_RecordDumper, sort_keys=False, allow_unicode=True, width=120).encode()
    written = write_new(path, text)
    if copy != path:
        write_new(copy.with_name(written.name) if copy.name == path.name else copy, text)
    return written


def duration_total(seconds: float) -> str:
    """The invocation's length to a tenth of a second, in Go's spelling (``4.1s``, ``14m32s``), never ``0s``.
    Tenths are counted as integers: ``round(4.1, 1) * 1e6`` is ``4099999.99…``, which printed ``4.099999s``."""
    return format_duration(max(1, round(seconds * 10)) * 100_000)
