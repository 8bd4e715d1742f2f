"""The pre-flight checks. Each judges the gathered facts and returns a status, the tier it demands, one line
of detail and its evidence. All of them always run, so the operator sees every problem at once."""

from __future__ import annotations

import os
import shlex
import shutil
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from engine.dates.durations import format_duration
from engine.dates.instants import format_instant
from engine.dates.split import SplitUnit, halves
from engine.guardrails.data_checks import DAY, layer_risk, listed, materialization, reversibility, size_text
from engine.guardrails.digest import file_component
from engine.guardrails.facts import Facts
from engine.guardrails.history import missing_spans
from engine.guardrails.tiers import (
    APPROVAL,
    HUMAN_ONLY,
    NEVER,
    PRODUCTION,
    PreflightCheck,
    failed,
    not_applicable,
    passed,
    warned,
)
from engine.pipeline.asset_status import AssetStatus
from engine.store.live_work import conflicts

GIB = 1024**3


def _days(micros: int) -> float:
    return micros / DAY


def judged_code(facts: Facts) -> list[str]:
    """The code a command names besides its template, as an approval vouches for it: each file under the working
    directory, one not there yet said so (its appearing later is a change)."""
    directory = facts.request.working_directory
    return [
        file_component(path, directory).removeprefix("file ") + ("" if path.exists() else " (not there yet)")
        for path in facts.code
    ]


def target_valid(facts: Facts) -> PreflightCheck:
    name = "target_valid"
    spec = facts.request.spec
    if facts.is_command:
        template = spec.target.template or ""
        program = shlex.split(template)[0] if template.strip() else ""
        if "{" in program:
            return warned(name, f"the program {program!r} is chosen per partition: it cannot be checked now")
        found = shutil.which(program) if "/" not in program else None
        if "/" in program:
            path = Path(program) if Path(program).is_absolute() else facts.request.working_directory / program
            found = str(path) if path.is_file() and os.access(path, os.X_OK) else None
        if found is None:
            return failed(name, NEVER, f"the program {program!r} does not exist or is not executable", program=program)
        detail = f"the program {program} exists and is executable"
        code = judged_code(facts)
        if not code:
            return passed(name, detail, program=found)
        python = any(path.suffix.lower() == ".py" for path in facts.code)
        beside = " and the modules beside each Python script" if python else ""
        return passed(name, f"{detail}; judged with it: {listed(code)}{beside}", program=found, code=code)
    assert facts.pipeline is not None
    selected = len(facts.selected)
    return passed(
        name,
        f"pipeline {facts.pipeline.name!r} validates: {len(facts.pipeline.assets)} assets, {selected} selected",
        assets=len(facts.pipeline.assets),
        selected=sorted(a.asset.name for a in facts.selected),
    )


def history_exists(facts: Facts) -> PreflightCheck:
    name = "history_exists"
    if facts.is_command:
        succeeded = [run for run in facts.history.runs if run.status == AssetStatus.SUCCEEDED]
        if not succeeded:
            return not_applicable(name, "no earlier backfill of this command: nothing to compare with")
        backfills = sorted({run.backfill_id for run in succeeded if run.backfill_id})
        return passed(name, f"{len(succeeded)} succeeded partitions in earlier backfills", backfills=backfills)
    done = facts.history.succeeded_assets()
    never_run = [a.asset.name for a in facts.selected if a.asset.name not in done]
    runs = len(facts.history.runs)
    if never_run:
        return failed(
            name,
            HUMAN_ONLY,
            f"never succeeded: {listed(never_run)}; there is no back to fill: run it once with `backfill run` first",
            never_succeeded=sorted(never_run),
            run_records=runs,
        )
    plural = "s" if runs != 1 else ""
    return passed(name, f"every selected asset has succeeded before ({runs} run record{plural})", run_records=runs)


def range_size(facts: Facts) -> PreflightCheck:
    name = "range_size"
    limits = facts.settings.limits
    days = _days(facts.span[1] - facts.span[0])
    evidence = {
        "days": round(days, 3),
        "approval_days": limits.approval_days,
        "human_only_days": limits.human_only_days,
    }
    shown = f"{days:g} days" if days >= 1 else format_duration(facts.span[1] - facts.span[0])
    if days > limits.human_only_days:
        if facts.request.guard.allow_long_range:
            return failed(
                name, APPROVAL, f"{shown} > {limits.human_only_days:g} days (--allow-long-range given)", **evidence
            )
        return failed(
            name,
            HUMAN_ONLY,
            f"{shown} > {limits.human_only_days:g} days: split it, or pass --allow-long-range to make it approval",
            **evidence,
        )
    if days > limits.approval_days:
        return failed(name, APPROVAL, f"{shown} > {limits.approval_days:g} days", **evidence)
    return passed(name, f"{shown} ≤ {limits.approval_days:g} days", **evidence)


# pipeline.yml schedules with a fixed period, and the partitions that are that period or shorter.
SCHEDULE_PERIODS = {"hourly": 3_600_000_000, "daily": DAY, "weekly": 7 * DAY}


def interval_count(facts: Facts) -> PreflightCheck:
    """The seed's auto rule: a rerun touching more than one interval needs approval (an environment may
    raise the limit), and the whole range in one trigger, when the schedule gives smaller intervals, never."""
    name = "interval_count"
    count = facts.request.selected_count
    limit = max(1, int(facts.settings.limits.auto_max_intervals))
    evidence = {"intervals": count, "auto_max_intervals": limit}
    coarse = _coarser_than_schedule(facts)
    if coarse is not None:
        return failed(name, NEVER, coarse, **evidence)
    if count > limit:
        return failed(
            name,
            APPROVAL,
            f"{count:,} intervals > {limit:,} (auto_max_intervals): a rerun touching more than "
            f"{'one interval' if limit == 1 else f'{limit:,} intervals'} needs approval",
            **evidence,
        )
    return passed(name, f"{count:,} interval{'s' if count != 1 else ''} ≤ {limit:,} (auto_max_intervals)", **evidence)


def _coarser_than_schedule(facts: Facts) -> str | None:
    """Why the partitions are coarser than the pipeline's schedule (a weekly or 144h partition of a daily
    pipeline runs a week in one trigger), or None."""
    pipeline = facts.pipeline
    if facts.is_command or pipeline is None or pipeline.schedule not in SCHEDULE_PERIODS:
        return None
    period = SCHEDULE_PERIODS[pipeline.schedule]
    unit = facts.request.spec.unit
    first = facts.first
    length = (first.end - first.start) if first is not None else unit.step
    if length <= period * 25 // 24:  # a day of 25 hours (daylight saving) is still one day
        return None
    return (
        f"{unit.name} partitions of a {pipeline.schedule} pipeline: each runs "
        f"{_days(length):g} days in one trigger when smaller meaningful intervals exist; "
        f"use --partition {pipeline.schedule}"
    )


def range_in_past(facts: Facts) -> PreflightCheck:
    name = "range_in_past"
    spec = facts.request.spec
    end = facts.span[1]
    reaching = _modifiers_reaching_past(facts, end)
    if reaching and end <= facts.request.now:
        name_, moved = max(reaching, key=lambda item: item[1])
        if moved > facts.request.now:
            return failed(
                name,
                NEVER,
                f"{name_}'s interval modifier moves its last run's end to {format_instant(moved, spec.zone)}, "
                "after now: backfilling the future is always a mistake",
                end=format_instant(end, spec.zone),
                effective_end=format_instant(moved, spec.zone),
                asset=name_,
            )
    if end > facts.request.now:
        plan = spec.plan
        current = plan.index_containing(facts.request.now) if facts.request.now > spec.start else 0
        future = len(plan) - (current if current is not None else len(plan))
        return failed(
            name,
            NEVER,
            f"the range ends {format_instant(end, spec.zone)}, after now: backfilling the future is always a mistake",
            end=format_instant(end, spec.zone),
            future_partitions=future,
        )
    return passed(
        name, f"the range ends {format_instant(end, spec.zone)}, in the past", end=format_instant(end, spec.zone)
    )


def _modifiers_reaching_past(facts: Facts, end: int) -> list[tuple[str, int]]:
    """Selected assets whose interval modifiers move the last selected partition's end later: (name, the
    exclusive end their last run reads)."""
    if facts.is_command or facts.span[0] >= end:
        return []
    from engine.pipeline.templating import Window  # a pipeline's: a command's pre-flight loads no templating

    spec = facts.request.spec
    last = spec.plan.interval(spec.plan.index_containing(end - 1))
    window = Window(last.start, last.end - 1, spec.zone)
    moved = []
    for a in facts.selected:
        effective = facts.effective_window(a.asset, window)
        if effective.end + 1 > end:
            moved.append((a.asset.name, effective.end + 1))
    return moved


def interval_semantics(facts: Facts) -> PreflightCheck:
    name = "interval_semantics"
    if facts.is_command:
        template = facts.request.spec.target.template or ""
        if any("{" + p + "}" in template for p in ("start", "end", "end_exclusive", "start_date", "end_date")):
            return passed(name, "the command template receives the interval")
        return warned(
            name,
            "the command template has no interval placeholder: it must read BACKFILL_START/BACKFILL_END itself",
        )
    without = [a.asset.name for a in facts.selected if not a.uses_interval]
    if len(without) == len(facts.selected):
        return failed(
            name,
            HUMAN_ONLY,
            "no selected asset uses the interval: every partition would compute the same thing, slicing is meaningless",
            without_interval=sorted(without),
        )
    if without:
        return warned(
            name,
            f"{listed(without)} ignore{'s' if len(without) == 1 else ''} the interval: rerun once per partition "
            f"for nothing; select {'it' if len(without) == 1 else 'them'} out (--exclude-tag, --selector)",
            without_interval=sorted(without),
        )
    return passed(name, "every selected asset uses the interval")


def upstream_coverage(facts: Facts) -> PreflightCheck:
    name = "upstream_coverage"
    if facts.is_command:
        return not_applicable(name, "a command's inputs are not known to backfill")
    gates = facts.settings.dependency_gates
    assert facts.pipeline is not None
    selected = {a.asset.name for a in facts.selected}
    upstream = sorted({u for a in facts.selected for u in facts.pipeline.upstream(a.asset.name) if u not in selected})
    if not upstream:
        return passed(name, "every upstream asset is in the selection")
    spec = facts.request.spec
    missing: dict[str, list[str]] = {}
    for name_up in upstream:
        gaps = missing_spans(facts.span[0], facts.span[1], facts.history.coverage(name_up))
        if gaps:
            missing[name_up] = [_span_text(start, end, spec.zone) for start, end in gaps]
    # Stepping around the gate is the operator's call, but never a silent one: the intervals it lets through
    # are computed all the same, and any gap let through needs approval (they are in the digest's evidence).
    how = (
        "--ignore-dependencies"
        if facts.request.guard.ignore_dependencies
        else f"dependency_gates: {gates}"
        if gates in ("warn", "off")
        else None
    )
    if not missing:
        detail = f"{listed(upstream)} succeeded over the whole range"
        return passed(name, detail + (f" ({how} let nothing through)" if how else ""), upstream=upstream)
    summary = "; ".join(f"{n}: {', '.join(spans[:3])}{' …' if len(spans) > 3 else ''}" for n, spans in missing.items())
    if how is not None:
        return failed(
            name,
            APPROVAL,
            f"{how} lets missing upstream intervals through: {summary}",
            missing=missing,
            gate_bypass=missing,
        )
    return failed(name, NEVER, f"missing upstream intervals: {summary}", missing=missing)


def _span_text(start: int, end: int, zone) -> str:
    return f"{format_instant(start, zone)} → {format_instant(end, zone)}"


def downstream_awareness(facts: Facts) -> PreflightCheck:
    """Work running now that this invocation must not run beside, whichever state root either keeps its records
    in (the live-work registry, ``engine.store.live_work``), and a DuckDB file some process holds open."""
    name = "downstream_awareness"
    downstream = sorted(a.asset.name for a in facts.downstream)
    blockers = conflicts(facts.live_work(), facts.live)
    for held in facts.held:
        blockers.append(f"{held.path} is open for writing by {held.holder} (a `backfill run`?): wait for it to finish")
    evidence = {"downstream": downstream}
    if blockers:
        return failed(name, NEVER, "; ".join(blockers), **evidence, blockers=blockers)
    if facts.is_command:
        return passed(name, "no other backfill of this command is running over these intervals")
    shown = (
        f"downstream not selected: {listed(downstream)}" if downstream else "no downstream asset outside the selection"
    )
    return passed(name, f"nothing else is running on these assets or their warehouse; {shown}", **evidence)


def size_and_duration(facts: Facts) -> PreflightCheck:
    name = "size_and_duration"
    limits = facts.settings.limits
    median = facts.history.median_duration()
    partitions = facts.request.selected_count
    parallel = max(1, facts.request.effective_parallel)
    database = sum(facts.database_bytes.values())
    evidence: dict = {"partitions": partitions, "parallel": parallel, "database_bytes": database}
    if median is None:
        return not_applicable(name, f"no succeeded run to estimate from; tables now {size_text(database)}", **evidence)
    seconds = median * partitions / parallel
    evidence.update(median_seconds=round(median, 3), estimate_seconds=round(seconds, 1))
    total = format_duration(round(seconds) * 1_000_000) if seconds >= 60 else f"{seconds:.1f}s"
    estimate = f"~{total} ({partitions} × median {median:.2f}s ÷ {parallel}); tables {size_text(database)}"
    if seconds > limits.max_hours * 3600 or database > limits.max_gib * GIB:
        return failed(
            name, APPROVAL, f"large: {estimate} (limits {limits.max_hours:g} h, {limits.max_gib:g} GiB)", **evidence
        )
    return passed(name, estimate, **evidence)


def row_count_sanity(facts: Facts) -> PreflightCheck:
    name = "row_count_sanity"
    if facts.is_command:
        return not_applicable(name, "a command's output is not known to backfill")
    sql = [a for a in facts.selected if a.asset.kind == "sql" and a.asset.materialization.type == "table"]
    if not sql:
        return not_applicable(name, "no selected SQL table asset to sample")
    ratio = facts.settings.limits.row_ratio
    partitions = facts.request.selected_count
    undecided, too_many, fine = [], [], []
    evidence = {}
    for a in sql:
        asset_name = a.asset.name
        if a.sample_rows is None:
            undecided.append(f"{asset_name}: sample failed ({a.sample_error})")
            evidence[asset_name] = {"sample_error": a.sample_error}
            continue
        estimate = a.sample_rows * partitions
        entry = {"sample_rows": a.sample_rows, "estimated_rows": estimate}
        if not a.past_rows:
            undecided.append(f"{asset_name}: no history to compare its sample of {a.sample_rows:,} rows with")
        else:
            mean = sum(a.past_rows) / len(a.past_rows)
            entry["historical_mean"] = round(mean, 3)
            if a.sample_rows > ratio * max(mean, 1):
                too_many.append(
                    f"{asset_name}: {a.sample_rows:,} rows per partition vs {mean:,.0f} before (> {ratio:g}×)"
                )
            else:
                fine.append(asset_name)
        evidence[asset_name] = entry
    if too_many:
        return failed(name, APPROVAL, "; ".join(too_many), assets=evidence)
    if undecided:
        return failed(name, HUMAN_ONLY, "could not decide: " + "; ".join(undecided), assets=evidence)
    return passed(name, f"samples within {ratio:g}× of history for {listed(fine)}", assets=evidence)


def connector_quotas(facts: Facts) -> PreflightCheck:
    name = "connector_quotas"
    quotas = facts.settings.quotas
    if facts.is_command or not quotas:
        return not_applicable(name, "no connection declares a daily_run_quota")
    used_connections = {a.connection.name for a in facts.selected if a.connection is not None}
    zone = facts.request.spec.zone
    today = datetime.fromtimestamp(facts.request.now / 1_000_000, zone).date()
    environment = facts.request.environment.name if facts.request.environment else None
    runs_today = sum(
        1
        for run in facts.history.runs
        if run.environment == environment and datetime.fromtimestamp(run.started_at / 1e6, zone).date() == today
    )
    problems, evidence = [], {}
    for connection, quota in sorted(quotas.items()):
        if connection not in used_connections:
            continue
        planned = runs_today + facts.request.selected_count
        evidence[connection] = {"quota": quota, "runs_today": runs_today, "this_backfill": facts.request.selected_count}
        if planned > quota:
            problems.append(f"{connection}: {runs_today} runs today + {facts.request.selected_count} > quota {quota}")
    if problems:
        return failed(name, NEVER, "would exhaust the day's quota: " + "; ".join(problems), quotas=evidence)
    if not evidence:
        return not_applicable(name, "no selected asset uses a connection with a quota")
    return passed(name, "within the daily quotas", quotas=evidence)


def environment_level(facts: Facts) -> PreflightCheck:
    name = "environment"
    settings = facts.settings
    where = facts.request.environment.name if facts.request.environment else "command"
    evidence = {"level": settings.level, "from": settings.level_source}
    if settings.level == PRODUCTION:
        detail = f"{where}: production guardrails ({settings.level_source}): every run needs approval"
        return failed(name, APPROVAL, detail, **evidence)
    return passed(name, f"{where}: {settings.level} guardrails ({settings.level_source})", **evidence)


def verification_mode(facts: Facts) -> PreflightCheck:
    name = "verification"
    guard = facts.request.guard
    if guard.verify == "off":
        return failed(name, APPROVAL, "--verify off: partitions are not verified")
    if facts.is_command:
        if guard.verify_command:
            return passed(name, f"--verify-command runs after each partition ({guard.verify})")
        return warned(name, "no --verify-command: a command's partitions are verified by exit code only")
    return passed(name, f"each partition verified against its run record and history ({guard.verify})")


def splitting(facts: Facts) -> PreflightCheck:
    """``--split-on``: a split never cuts below what the assets' keys can tell apart. A ``time_interval`` or
    windowed asset keyed by a DATE column cannot run part of a day, so its halves stop at whole days; where no
    partition could split at all, the option means nothing and the plan is refused."""
    name = "splitting"
    options = facts.request.options
    policy = options.split_policy()
    if policy is None:
        return not_applicable(name, "no --split-on: a failed partition is retried whole")
    date_keyed = _date_keyed(facts)
    finest = SplitUnit.DAY if date_keyed else SplitUnit.SECOND
    first, zone = facts.first, facts.request.spec.zone
    evidence = {"finest": finest.name.lower(), "min_partition": format_duration(policy.min_length)}
    can_split = first is not None and (
        halves(first.start, first.end, zone, min_length=policy.min_length, finest=finest) is not None
    )
    unit = facts.request.spec.unit.name
    if date_keyed and not can_split:
        label, key = date_keyed[0]
        return failed(
            name,
            NEVER,
            f"--split-on: {label}'s incremental key {key} is a DATE, so a {unit} partition cannot split below a "
            "day: drop --split-on, or partition weekly or coarser",
            date_keyed=[label for label, _ in date_keyed],
            **evidence,
        )
    if not can_split:
        return failed(
            name,
            NEVER,
            f"--split-on: a {unit} partition cannot split into halves of at least --min-partition "
            f"{format_duration(policy.min_length)}: give a shorter --min-partition, or drop --split-on",
            **evidence,
        )
    if date_keyed:
        label, key = date_keyed[0]
        return warned(
            name,
            f"splits {policy.describe()}, never below a day: {label}'s incremental key {key} is a DATE",
            date_keyed=[label for label, _ in date_keyed],
            **evidence,
        )
    return passed(name, f"a failing partition splits {policy.describe()}", **evidence)


def _date_keyed(facts: Facts) -> list[tuple[str, str]]:
    """(asset, key) of each selected asset whose run keeps to its window by a DATE key (declared, or the table's
    column in the warehouse)."""
    found = []
    for asset_facts in facts.selected:
        asset = asset_facts.asset
        key = asset.materialization.incremental_key
        if not key or not asset_facts.uses_interval:
            continue
        declared = next((c.type for c in asset.columns if c.name == key and c.type), None)
        column_type = declared
        connection = asset_facts.connection
        if column_type is None and connection is not None and connection.kind == "duckdb" and connection.path:
            warehouse = facts.warehouses.open(connection.path)
            if warehouse.exists(asset.name):
                column_type = warehouse.database().column_type(asset.name, key)
        if (column_type or "").strip().upper() == "DATE":
            found.append((asset.name, key))
    return found


CHECK_NAMES = {"environment_level": "environment", "verification_mode": "verification"}
CHECKS: tuple[Callable[[Facts], PreflightCheck], ...] = (
    target_valid,
    history_exists,
    range_size,
    interval_count,
    range_in_past,
    interval_semantics,
    materialization,
    reversibility,
    layer_risk,
    upstream_coverage,
    downstream_awareness,
    size_and_duration,
    row_count_sanity,
    connector_quotas,
    environment_level,
    verification_mode,
    splitting,
)


def run_checks(facts: Facts) -> list[PreflightCheck]:
    """Every check, whatever the others found; one that errors or was left without facts is human-only."""
    results = []
    for check in CHECKS:
        name = CHECK_NAMES.get(check.__name__, check.__name__)
        try:
            result = check(facts)
        except Exception as error:  # an error while checking is uncertainty, never a pass
            text = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
            result = failed(name, HUMAN_ONLY, f"could not decide: {text}")
        missing = facts.errors.get(result.name)
        if missing and result.status not in ("fail",):
            result = failed(result.name, HUMAN_ONLY, f"could not decide: {missing}", **result.evidence)
        results.append(result)
    undecided = [r.name for r in results if r.tier == HUMAN_ONLY and r.detail.startswith("could not decide")]
    if undecided:
        results.append(
            failed(
                "certainty",
                HUMAN_ONLY,
                f"{len(undecided)} check(s) could not decide: {', '.join(undecided)}",
                undecided=undecided,
            )
        )
    else:
        results.append(passed("certainty", "every check could decide"))
    return results
