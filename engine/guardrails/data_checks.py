"""The pre-flight checks of what a backfill does to data: each selected asset's strategy and hooks against the
partitions it runs over, the way back (the snapshot and what it costs), and the raw layer never deleted."""

from __future__ import annotations

from datetime import datetime

from engine.dates.instants import to_datetime
from engine.guardrails.facts import Facts
from engine.guardrails.tiers import (
    APPROVAL,
    AUTO,
    HUMAN_ONLY,
    NEVER,
    PreflightCheck,
    failed,
    highest,
    not_applicable,
    passed,
    warned,
)
from engine.pipeline.asset_status import AssetStatus
from engine.pipeline.database import relation_of

# The rules of a pipeline's strategies (asset_risk, materialization) and the snapshot's measured rate are imported
# where a pipeline's assets are judged: a command's three answers here need none of the SQL and warehouse modules
# behind them, whose import a command's start-up would pay (issue 28, item 5).

DAY = 86_400_000_000
# A little under what benchmarks/guard_bench.py measured for the snapshot on the reference machine (performance.md).
SNAPSHOT_ROWS_PER_SECOND = 2_000_000


def listed(items) -> str:
    """Names sorted, the first eight shown and the rest counted."""
    names = sorted(items)
    return ", ".join(names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "")


def size_text(value: float) -> str:
    """Bytes in the largest unit that keeps the number under 1024 (at most GiB)."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"


def materialization(facts: Facts) -> PreflightCheck:
    name = "materialization"
    if facts.is_command:
        return not_applicable(name, "a command's effect on data is not known to backfill")
    partitions = facts.request.selected_count
    findings: list[tuple[str, str]] = []  # (tier, text)
    rebuilt: list[str] = []
    strategies: dict[str, dict] = {}
    for asset_facts in facts.assets.values():
        entry = strategies[asset_facts.asset.name] = {
            "strategy": asset_facts.strategy,
            "selected": asset_facts.selected,
        }
        if asset_facts.selected:
            finding = _strategy_finding(asset_facts, partitions)
            if finding == "rebuilt":
                rebuilt.append(asset_facts.asset.name)
            elif finding is not None:
                findings.append(finding)
                if asset_facts.rows_in_range:
                    entry["rows_in_range"] = asset_facts.rows_in_range
            shrinking = _shrinking(asset_facts, facts)
            if shrinking is not None:  # the run deletes rows and puts back far fewer: the source lost them
                entry["rows_replaced"], entry["sample_rows"] = asset_facts.replaced_rows, asset_facts.sample_rows
                findings.append((APPROVAL, shrinking))
            if asset_facts.after_query:  # every run would refuse to materialize more than one query
                entry["statements_after_query"] = asset_facts.after_query
                findings.append((NEVER, _after_query(asset_facts)))
            if asset_facts.query_writes:  # every run would refuse a query that writes inside itself
                entry["query_writes"] = asset_facts.query_writes
                findings.append(
                    (
                        NEVER,
                        f"{asset_facts.asset.name} ({asset_facts.strategy}): the first partition's query runs "
                        f"{asset_facts.query_writes[0]} inside it (a WITH clause's statement); a materialized "
                        "asset's query only reads, so every run would fail",
                    )
                )
            if asset_facts.sample_missing:  # every run would fail rather than write NULL in these columns
                entry["sample_missing_columns"] = asset_facts.sample_missing
                findings.append((NEVER, _missing_columns(asset_facts)))
            if asset_facts.sample_repeated_keys:  # a merge would write one key twice, or update it with either row
                entry["sample_rows_repeating_a_key"] = asset_facts.sample_repeated_keys
                findings.append((APPROVAL, _repeated_keys(asset_facts)))
            if asset_facts.sample_outside:  # the query lies about its window: each partition adds these rows
                entry["sample_rows_outside_window"] = asset_facts.sample_outside
                findings.append(
                    (
                        NEVER,
                        f"{asset_facts.asset.name}: the query returns {asset_facts.sample_outside:,} rows outside "
                        f"the partition's window; {asset_facts.strategy} would duplicate them",
                    )
                )
    from engine.pipeline.source_rows import raw_layer_tables

    if facts.pipeline is not None:  # every asset of it, not only the judged ones: a source is rarely selected
        raw_layer = raw_layer_tables(facts.pipeline.assets.values(), facts.pipeline.schema_prefix or "")
    else:  # facts made without their pipeline (the checks' in-process tests): the assets they hold
        raw_layer = raw_layer_tables(a.asset for a in facts.assets.values())
    for asset_facts in facts.selected:
        findings += _run_sql_findings(asset_facts, raw_layer)
    coarse = [a.asset.name for a in facts.selected if _keyed_by_date(a)]
    if coarse and not _partitions_are_whole_days(facts):
        unit = facts.request.spec.unit.name
        findings.append(
            (
                NEVER,
                f"{listed(coarse)}: {unit} partitions over a date key (time_granularity: date): each partition "
                "would replace whole days, deleting the rows the other partitions of its day wrote",
            )
        )
    if rebuilt:
        text = f"{listed(rebuilt)} rebuilt {partitions} times (they ignore the interval): run once or select out"
        findings.append((AUTO, text))
    evidence = {"assets": strategies, "partitions": partitions, "findings": [text for _, text in findings]}
    blocking = [tier for tier, _ in findings if tier != AUTO]
    if blocking:
        tier = highest(blocking)
        return failed(name, tier, "; ".join(text for t, text in findings if t == tier), **evidence)
    if findings:
        return warned(name, findings[0][1], **evidence)
    shown = ", ".join(sorted({a.strategy for a in facts.selected}))
    return passed(name, f"strategies safe per partition: {shown}", **evidence)


def _shrinking(facts_of, facts: Facts) -> str | None:
    """Why the first partition's run would leave the table with far fewer rows than it deletes (fewer than
    ``verify_low``, verification's floor: a source that lost a day, a filter that went wrong), or None.
    Verification would stop the backfill after that partition, with its rows already gone."""
    replaced, sample = facts_of.replaced_rows, facts_of.sample_rows
    if not replaced or sample is None:
        return None
    low = facts.settings.limits.verify_low
    if sample >= low * replaced:
        return None
    from engine.guardrails.asset_risk import rebuilds_table, refreshed_every_run

    asset, label = facts_of.asset, facts_of.strategy
    if rebuilds_table(asset, facts_of.strategy):
        what = "the whole table"
        label += ", parameters.full_refresh" if refreshed_every_run(asset, facts_of.strategy) else ""
    elif facts_of.strategy == "time_interval":
        what = "the rows in its window"
    else:
        what = f"the rows of the {asset.materialization.incremental_key} values it returns"
    return (
        f"{asset.name} ({label}): "
        + ("its seed file holds" if asset.kind == "seed" else "the first partition's query returns")
        + f" {sample:,} rows where its run "
        f"deletes {replaced:,} ({what}) — fewer than {low:.0%} of them"
    )


def _missing_columns(facts_of) -> str:
    """The table's columns the first partition's query no longer returns: its run would write them NULL (``INSERT
    … BY NAME``), so it refuses, and so would every partition's."""
    missing = facts_of.sample_missing
    named = f"column {missing[0]}" if len(missing) == 1 else f"columns {', '.join(missing)}"
    return (
        f"{facts_of.asset.name} ({facts_of.strategy}): the first partition's query returns no {named} of the "
        "table; every run would fail rather than write NULL there (return it from the query, or drop it from "
        "the table)"
    )


def _after_query(facts_of) -> str:
    """A materialized asset's query followed by more statements: DuckDB would run them after the table or view,
    judged by nobody (a DELETE of the source behind a view's SELECT); the run refuses it, as Bruin does."""
    more = facts_of.after_query
    what = "1 more statement" if len(more) == 1 else f"{len(more)} more statements"
    return (
        f"{facts_of.asset.name} ({facts_of.strategy}): the first partition's query is followed by {what} "
        f"({more[0][:80]!r}); a materialized asset runs one query, so every run would fail (move them into a hook, "
        "or set materialization to none)"
    )


def _repeated_keys(facts_of) -> str:
    """The first partition's rows that share their primary key with another: a merge inserts a new key once per
    row (the key then repeats in the table) and updates a matched row from whichever of them comes last."""
    keys = ", ".join(facts_of.asset.primary_key)
    return (
        f"{facts_of.asset.name} (merge): the first partition's query returns {facts_of.sample_repeated_keys:,} rows "
        f"that share their primary key ({keys}) with another; the merge would insert each of a new key (repeating "
        "it in the table) and update a row from any one of them"
    )


def _run_sql_findings(asset_facts, raw_layer: frozenset[str]) -> list[tuple[str, str]]:
    """Hooks are part of the asset, and an SQL asset without materialization runs its query as written: each is
    judged from what it runs (rendered with the pipeline's macros and the first partition's variables). A statement
    that deletes or rewrites a raw table (in a raw schema, or of ``raw_layer``: an asset a ``layer:raw`` tag puts
    there) is never allowed, and neither is one that begins or ends a transaction
    (every run refuses it: the asset runs in one transaction of the run's own); one that cannot be classified is
    human-only (its effect on data is unknown)."""
    from engine.pipeline.sql_writes import QUERY, RUN_SQL_PHASES, phrase

    findings = []
    asset = asset_facts.asset
    unfenced = _unfenced(asset_facts)
    own = relation_of(asset.name).lower()
    for phase in RUN_SQL_PHASES:
        where = f"{asset.name}: {phrase(phase)}"
        for classified in asset_facts.classified.get(phase, []):
            for write in classified.writes:
                if write.deletes_source(raw_layer):
                    findings.append(
                        (
                            NEVER,
                            f"{where} runs {write.verb} on {write.table}, a raw table: source data is never deleted "
                            "or rebuilt",
                        )
                    )
                elif write.deletes and unfenced and phase != QUERY and write.relation.lower() == own:
                    findings.append(
                        (
                            HUMAN_ONLY,
                            f"{where} runs {write.verb} on {write.table}, its own table, which no window fences "
                            f"({unfenced}): what it removes is not bounded to the partition",
                        )
                    )
            for statement in classified.transactions:
                findings.append(
                    (
                        NEVER,
                        f"{where} runs {statement[:80]!r}: the run holds the asset in one transaction, and this would "
                        "end it or start another (what came before could no longer be rolled back)",
                    )
                )
            for statement in classified.unclassified:
                findings.append((HUMAN_ONLY, f"{where} runs SQL that cannot be classified: {statement[:80]!r}"))
    return findings


def _unfenced(facts_of) -> str | None:
    """Why a partition's run of this asset may change its own table anywhere (a hook deleting history would go
    unnoticed), or None: a window-fenced strategy rolls back any change outside the window, and a rebuild
    replaces the whole table anyway."""
    from engine.guardrails.asset_risk import rebuilds_table
    from engine.pipeline.materialization import WINDOW_FENCED, fences_its_window

    asset, strategy = facts_of.asset, facts_of.strategy
    if fences_its_window(asset) or rebuilds_table(asset, strategy) or asset.materialization.type != "table":
        return None
    return f"{strategy} without incremental_key" if strategy in WINDOW_FENCED else strategy


def _keyed_by_date(facts_of) -> bool:
    m = facts_of.asset.materialization
    return (
        facts_of.strategy in ("time_interval", "delete+insert")
        and bool(m.incremental_key)
        and (m.time_granularity == "date")
    )


def _partitions_are_whole_days(facts: Facts) -> bool:
    """Whether every partition covers whole local days: a calendar unit of a day or more, or a step of whole
    days whose first partition starts at local midnight (hourly or 6h partitions never do)."""
    spec = facts.request.spec
    unit = spec.unit
    if unit.is_calendar:
        return True
    if unit.step % DAY:
        return False
    first = facts.first
    return first is None or to_datetime(first.start, spec.zone).time() == datetime.min.time()


def _strategy_finding(facts_of, partitions: int) -> tuple[str, str] | str | None:
    """What one selected asset's strategy risks: (tier, why), ``"rebuilt"`` (safe, repeated) or None."""
    from engine.guardrails.asset_risk import HISTORY, INSERT_ONLY, KNOWN_STRATEGIES, REBUILDING, refreshed_every_run

    asset, strategy = facts_of.asset, facts_of.strategy
    label = f"{asset.name} ({strategy})"
    always_refreshed = refreshed_every_run(asset, strategy)
    if always_refreshed:
        label = f"{asset.name} ({strategy}, parameters.full_refresh)"
    if strategy in REBUILDING or always_refreshed:
        if partitions <= 1:
            return None
        if not facts_of.uses_interval:
            return "rebuilt"
        return NEVER, f"{label} rebuilds its table from one partition's slice: only the last partition would survive"
    if strategy == "append":
        if facts_of.rows_in_range:
            return APPROVAL, f"{label} would duplicate {facts_of.rows_in_range:,} rows already in the range"
        if facts_of.sample_existing:  # no key in the range, yet the rows are there (a load-date key, say)
            return APPROVAL, (
                f"{label}: the first partition's query returns {facts_of.sample_existing:,} rows the table already "
                "holds; appending would duplicate them"
            )
        if facts_of.table_rows and not asset.materialization.incremental_key:
            rows = f"{facts_of.table_rows:,}"
            return HUMAN_ONLY, f"{label} has {rows} rows and no incremental_key: cannot tell which are in the range"
        return None
    if strategy == "merge" and not asset.primary_key:
        return HUMAN_ONLY, f"{label} has no primary_key column: what it would overwrite is unclear"
    if strategy == "delete+insert" and not asset.materialization.incremental_key:
        return HUMAN_ONLY, f"{label} has no incremental_key: what it would delete is unclear"
    if strategy == "none":
        what = "script" if asset.kind == "python" else "SQL"
        return HUMAN_ONLY, f"{asset.name} runs its {what} as written: its effect on data cannot be judged"
    if strategy in HISTORY:
        if partitions <= 1:
            return None
        if not facts_of.uses_interval:
            return "rebuilt"
        return NEVER, (
            f"{label} treats each run's rows as the whole source: every partition would close the history of the "
            "keys outside its slice"
        )
    if strategy == "datavault_satellite" and partitions > 1 and facts_of.uses_interval:
        return AUTO, (
            f"{label} compares each row with the latest one loaded: run the partitions in time order "
            "(--max-parallel 1) or some unchanged rows are loaded again"
        )
    if strategy in INSERT_ONLY:
        return None
    if strategy not in KNOWN_STRATEGIES:
        return HUMAN_ONLY, f"{label}: a strategy the runner does not understand"
    return None


def reversibility(facts: Facts) -> PreflightCheck:
    name = "reversibility"
    guard = facts.request.guard
    # The seed: an uncertain restore path is human-only, whatever flag says otherwise.
    if facts.is_command:
        if not guard.reversible:
            return failed(
                name, HUMAN_ONLY, "no restore path known for a command: pass --reversible only if you can undo it"
            )
        if not any(run.status == AssetStatus.SUCCEEDED for run in facts.history.runs):
            return failed(
                name,
                HUMAN_ONLY,
                "--reversible, but this command has never succeeded here, so how to undo it is untried: run one "
                "partition first",
                stated_by="operator",
            )
        return passed(name, "stated reversible by the operator (--reversible)", stated_by="operator")
    changing = [a for a in facts.selected if a.changes_data]
    if not changing:
        return passed(name, "nothing selected changes data (views and DDL only)")
    if not guard.snapshot:
        return failed(name, HUMAN_ONLY, f"--no-snapshot: no restore path for {listed(a.asset.name for a in changing)}")
    cost = snapshot_cost(facts)
    return passed(
        name,
        f"a snapshot of {len(changing)} table{'s' if len(changing) != 1 else ''} is taken before the first "
        f"partition (~{cost['rows']:,} rows, ~{size_text(cost['bytes'])}, ~{_seconds(cost['seconds'])})",
        **cost,
    )


def snapshot_cost(facts: Facts) -> dict[str, int]:
    """Rows the snapshot copies (rows in range for time_interval and delete+insert, else whole tables), and
    their share of the database files' bytes."""
    from engine.guardrails.table_snapshot import measured_copy_rate

    rows = total_rows = 0
    for a in facts.selected:
        if not a.changes_data or a.table_rows is None:
            continue
        partial = a.strategy in ("time_interval", "delete+insert") and a.rows_in_range is not None
        rows += a.rows_in_range if partial else a.table_rows  # type: ignore[operator]
    for a in facts.assets.values():
        total_rows += a.table_rows or 0
    database = sum(facts.database_bytes.values())
    measured = measured_copy_rate([b.directory for b in facts.backfills])
    rate = measured or SNAPSHOT_ROWS_PER_SECOND
    seconds = round(rows / rate, 1)
    return {
        "rows": rows,
        "bytes": int(database * rows / total_rows) if total_rows else 0,
        "seconds": seconds,
        "rows_per_second": round(rate),
        "rate_from": "the latest snapshots in this state root" if measured else "the default (no snapshot timed yet)",
    }


def _seconds(value: float) -> str:
    return "under 1 s" if value < 1 else f"{value:.0f} s"


def layer_risk(facts: Facts) -> PreflightCheck:
    name = "layer_risk"
    if facts.is_command:
        return not_applicable(name, "a command's tables are not known to backfill")
    from engine.guardrails.asset_risk import NOT_DELETING

    layers = {a.asset.name: {"layer": a.layer, "from": a.layer_source} for a in facts.selected}
    deleting = [a.asset.name for a in facts.selected if a.layer == "raw" and a.strategy not in NOT_DELETING]
    appending = [a.asset.name for a in facts.selected if a.layer == "raw" and a.strategy == "append"]
    if deleting:
        return failed(
            name,
            NEVER,
            f"{listed(deleting)}: raw layer with a delete-style strategy (source data is never deleted or rebuilt)",
            layers=layers,
        )
    if appending:
        return failed(name, APPROVAL, f"{listed(appending)}: appends to the raw layer", layers=layers)
    return passed(name, "no raw asset is deleted or rebuilt", layers=layers)
