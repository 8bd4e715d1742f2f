"""Verification after each partition, before it is recorded succeeded.

Pipelines: the partition's run record must say every selected asset and check
succeeded, and each asset with a time key must have landed a number of rows
within the seasonal bounds of its history. Commands: ``--verify-command`` runs
and must exit 0.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

import orjson

from engine.dates.plan import Interval
from engine.guardrails.facts import Facts
from engine.guardrails.seasonal import (
    Bounds,
    bucket_kind,
    bucket_name,
    bucket_of,
    bucket_of_local,
    seasonal_bounds,
    truncation_of,
)
from engine.pipeline.asset_status import AssetStatus


class VerificationStatus(StrEnum):
    """What verification found of a partition (``warning``: a failure under ``--verify warn``)."""

    VERIFIED = "verified"
    WARNING = "warning"
    FAILED = "failed"
    INSUFFICIENT = "insufficient history"


VERIFIED, WARNING, FAILED, INSUFFICIENT = VerificationStatus


@dataclass(frozen=True)
class Verification:
    status: VerificationStatus
    detail: str
    assets: list[dict[str, Any]] = field(default_factory=list)

    @property
    def fails_partition(self) -> bool:
        return self.status == FAILED

    def to_json(self) -> dict[str, Any]:
        return {"status": self.status, "detail": self.detail, "assets": self.assets}


def _judge(problems: list[str], assets: list[dict[str, Any]], mode: str) -> Verification:
    if problems:
        detail = "; ".join(problems)
        return Verification(FAILED if mode == "on" else WARNING, detail, assets)
    if any(a.get("status") == INSUFFICIENT for a in assets):
        names = ", ".join(a["asset"] for a in assets if a.get("status") == INSUFFICIENT)
        return Verification(INSUFFICIENT, f"run record OK; too little history to judge rows of {names}", assets)
    return Verification(VERIFIED, "run record OK" + ("; rows within bounds" if assets else ""), assets)


class PipelineVerifier:
    """Judges a pipeline partition from its run record and the baselines taken at pre-flight."""

    def __init__(self, facts: Facts, runs_directory: Path, mode: str) -> None:
        spec = facts.request.spec
        self.mode = mode
        self.runs_directory = runs_directory
        self.selected = {a.asset.name for a in facts.selected}
        self.unit, self.zone = spec.unit, spec.zone
        self.kind = bucket_kind(spec.unit)
        self.limits = facts.settings.limits
        self.baselines = baselines(facts)
        self.written = written_baselines(facts)  # tables without a time key: judged by the rows each run wrote

    def verify(
        self,
        interval: Interval,
        run_id: str,
        only: set[str] | None = None,
        carried: dict[str, str] | None = None,
    ) -> Verification:
        """``only``: the assets an operator's asset rerun ran (the others were not run again). ``carried``: an
        asset-level resume's assets taken from earlier attempts (name → run ID), judged by those attempts' run
        records, or as marked when an operator's asset mark carried them (a mark has no run record)."""
        path = self.runs_directory / f"{run_id}.json"
        try:
            record = orjson.loads(path.read_bytes())
        except (OSError, orjson.JSONDecodeError) as error:
            return Verification(FAILED if self.mode == "on" else WARNING, f"no readable run record {path} ({error})")
        problems: list[str] = []
        if record.get("status") != AssetStatus.SUCCEEDED:
            problems.append(f"the run record says {record.get('status')!r}")
        by_name = {a.get("name"): a for a in record.get("assets") or []}
        for name, source in (carried or {}).items():
            by_name.setdefault(name, self._carried_entry(name, source))
        for name in sorted(self.selected if only is None else self.selected & only):
            entry = by_name.get(name)
            if entry is None:
                problems.append(f"{name} is not in the run record")
            elif entry.get("status") != AssetStatus.SUCCEEDED:
                problems.append(f"{name} {entry.get('status')}")
            elif any(not c.get("passed") and c.get("blocking") for c in entry.get("checks") or []):
                problems.append(f"{name} has a failing check")
        bucket = bucket_of(interval.start, self.unit, self.zone)
        assets = []
        judged_by = [(name, values, "rows_in_interval") for name, values in self.baselines.items()]
        judged_by += [(name, values, "rows_written") for name, values in self.written.items()]
        for name, values, counted in sorted(judged_by):
            entry = by_name.get(name) or {}
            rows = entry.get(counted)
            bounds = seasonal_bounds(values.get(bucket, []), self.limits.verify_low, self.limits.verify_high)
            judged: dict[str, Any] = {"asset": name, "rows": rows, "bucket": bucket_name(bucket, self.kind)}
            if rows is None:
                judged["status"] = "no count"
            elif bounds is None:
                judged["status"] = INSUFFICIENT
                judged["values"] = len(values.get(bucket, []))
            else:
                judged.update(bounds.to_json())
                judged["status"] = "inside" if bounds.admits(rows) else "outside"
                if not bounds.admits(rows):
                    problems.append(describe_outside(name, rows, bounds, bucket_name(bucket, self.kind)))
            assets.append(judged)
        return _judge(problems, assets, self.mode)

    def _carried_entry(self, name: str, run_id: str) -> dict[str, Any]:
        try:
            earlier = orjson.loads((self.runs_directory / f"{run_id}.json").read_bytes())
        except FileNotFoundError:
            return {"name": name, "status": AssetStatus.SUCCEEDED}  # an operator's asset mark
        except (OSError, orjson.JSONDecodeError):
            return {"name": name, "status": f"unreadable in {run_id}"}
        found = [a for a in earlier.get("assets") or [] if isinstance(a, dict) and a.get("name") == name]
        return found[0] if found else {"name": name, "status": f"missing from {run_id}"}


def describe_outside(name: str, rows: int, bounds: Bounds, bucket: str) -> str:
    return (
        f"{name}: {rows:,} rows, outside {bounds.low:,.0f}–{bounds.high:,.0f} ({bucket} mean {bounds.mean:,.0f} "
        f"over {bounds.values})"
    )


def baselines(facts: Facts) -> dict[str, dict[int, list[int]]]:
    """Past rows per period of each selected asset with a time key, grouped by bucket: from the table outside the
    backfill's range (taken now, at pre-flight), then from run records of periods the table did not give."""
    from engine.guardrails.warehouse import local_start  # a pipeline's tables: a command's run never loads it

    spec = facts.request.spec
    kind = bucket_kind(spec.unit)
    period = truncation_of(spec.unit)
    keyed = [
        a for a in facts.selected if a.asset.materialization.type == "table" and a.asset.materialization.incremental_key
    ]
    result: dict[str, dict[int, list[int]]] = {a.asset.name: {} for a in keyed}
    by_file = facts.by_file(keyed) if period is not None else {}
    seen: dict[str, set] = {name: set() for name in result}  # period starts (local, naive) already counted
    window = facts.range_window()
    for path, assets in by_file.items():
        try:
            warehouse = facts.warehouses.open(path)  # the pre-flight's connection
        except Exception:  # held or unreadable: the run records are all the history there is
            continue
        for asset_facts in assets:
            name = asset_facts.asset.name
            try:
                counts = warehouse.period_counts(asset_facts.asset, period, window)  # type: ignore[arg-type]
            except Exception:  # a table we cannot group leaves run records only
                counts = {}
            for start, count in counts.items():
                result[name].setdefault(bucket_of_local(start, kind), []).append(count)
                seen[name].add(start)
    length = None
    if facts.first is not None:
        length = facts.first.end - facts.first.start
    for run in facts.history.runs:
        if length is not None and run.end - run.start != length:
            continue
        if facts.span[0] < run.end and run.start < facts.span[1]:
            continue  # inside the range being backfilled: not history
        for name in result:
            entry = run.assets.get(name)
            if entry is None or entry.status != AssetStatus.SUCCEEDED or entry.rows_in_interval is None:
                continue
            start = local_start(run.start, spec.zone)
            if start in seen[name]:
                continue
            seen[name].add(start)
            result[name].setdefault(bucket_of(run.start, spec.unit, spec.zone), []).append(entry.rows_in_interval)
    return result


def written_baselines(facts: Facts) -> dict[str, dict[int, list[int]]]:
    """Rows each past run wrote, per bucket, for the selected table assets without a time key (a keyed merge,
    a rebuilt table): their runs one partition long outside the range, the only history there is of them."""
    spec = facts.request.spec
    unkeyed = [
        a.asset.name
        for a in facts.selected
        if a.asset.materialization.type == "table"
        and not a.asset.materialization.incremental_key
        and a.strategy not in ("ddl",)
    ]
    result: dict[str, dict[int, list[int]]] = {name: {} for name in unkeyed}
    if not unkeyed or facts.first is None:
        return result
    length = facts.first.end - facts.first.start
    for run in facts.history.runs:
        if not run.ran or run.end - run.start != length or (facts.span[0] < run.end and run.start < facts.span[1]):
            continue
        bucket = bucket_of(run.start, spec.unit, spec.zone)
        for name in unkeyed:
            entry = run.assets.get(name)
            if entry is not None and entry.status == AssetStatus.SUCCEEDED and entry.rows_written is not None:
                result[name].setdefault(bucket, []).append(entry.rows_written)
    return result


class CommandVerifier:
    """Runs ``--verify-command`` (its placeholders substituted) after each successful partition."""

    def __init__(self, template: str, mode: str, values: Callable[[Interval, str, str], dict[str, str]]) -> None:
        from engine.spec.command_template import split_template

        self.words = split_template(template)
        self.mode = mode
        self.values = values

    def prepare(self, interval: Interval, partition_id: str, run_id: str, *, log: Path) -> list[str]:
        """The command line for this partition, announced in its log, where its output follows (a log that cannot be
        written fails the command's start, which opens it too). The executor runs it as the attempt's second child,
        stopped as its first would be."""
        from engine.spec.command_template import substitute

        values = self.values(interval, partition_id, run_id)
        argv = [substitute(word, values) for word in self.words]
        with contextlib.suppress(OSError), open(log, "ab") as output:
            output.write(b"\n--- verify-command: " + " ".join(argv).encode() + b"\n")
        return argv

    def judge(self, code: int) -> Verification:
        """What the command's exit status (negative: the signal that killed it) says of the partition."""
        if code != 0:
            return _judge([f"--verify-command exited {code} (output in the partition's log)"], [], self.mode)
        return Verification(VERIFIED, "--verify-command exited 0")

    def cannot_start(self, error: OSError) -> Verification:
        return _judge([f"--verify-command cannot start: {error.strerror or error}"], [], self.mode)
