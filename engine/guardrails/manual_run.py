"""``backfill run`` by hand, judged like a backfill where it can lose data: a full refresh rebuilds tables, so it
needs a reason, and it never rebuilds the raw layer (source data that cannot be loaded again).

A raw asset's everyday strategy is how it ingests, and runs as Bruin runs it: only the rebuild that a person
asks for by hand is judged (docs/guardrails.md, "backfill run by hand")."""

from __future__ import annotations

from engine.base.errors import BadInput, Refused
from engine.guardrails.asset_risk import layer_of, strategy_of
from engine.pipeline.assets import Asset
from engine.pipeline.run_types import PreparedRun
from engine.store.live_work import LiveWork, WorkKind, pipeline_key, read_live, real_files, this_process


def check_run_by_hand(prepared: PreparedRun, *, reason: str | None) -> None:
    """A full refresh: refused (exit 3) when it would rebuild a raw table, else it needs ``--reason`` (exit 2).
    Runs of a backfill's partitions are not judged here: their backfill's pre-flight did."""
    full_refresh = prepared.request.full_refresh
    if not full_refresh:
        return
    selected = [prepared.pipeline.assets[name] for name in sorted(prepared.selected)]
    raw = [a.name for a in selected if layer_of(a)[0] == "raw" and _rebuilt(a)]
    if raw:
        raise Refused(
            f"never: {', '.join(raw)} {'is' if len(raw) == 1 else 'are'} in the raw layer and --full-refresh "
            "rebuilds it: source data is never deleted or rebuilt (select it out with --exclude-tag or a "
            "selector, or change its layer if it is not raw)"
        )
    if reason is None:
        raise BadInput("--full-refresh drops and rebuilds the selected tables: give --reason TEXT (it is recorded)")


def _rebuilt(asset: Asset) -> bool:
    """Whether a full refresh drops the asset's table. A seed is rebuilt from its CSV in the repository (no
    source is lost); views, DDL and SQL run as written are not tables a refresh drops."""
    if asset.kind == "seed" or strategy_of(asset) in ("view", "ddl", "none"):
        return False
    return asset.materialization.type == "table" and not asset.full_refresh_restricted


def live_work_of_run(prepared: PreparedRun) -> LiveWork:
    """What a run by hand runs, as the live-work registry keeps it (``engine.store.live_work``): a backfill of the
    same assets or on the same DuckDB file then waits for it, and it for them."""
    pipeline = prepared.pipeline
    downstream = pipeline.downstream_of(prepared.selected)
    files = []
    for name in prepared.selected:
        connection_name = pipeline.connection_of(pipeline.assets[name])
        connection = prepared.environment.connection(connection_name) if connection_name else None
        if connection is not None and connection.kind == "duckdb" and connection.path is not None:
            files.append(connection.path)
    return this_process(
        kind=WorkKind.RUN,
        target=pipeline_key(pipeline.directory),
        shown=pipeline.name,
        assets=tuple(sorted(prepared.selected)),
        downstream=tuple(sorted(downstream)),
        files=real_files(files),
        windows=((prepared.window.start, prepared.window.end + 1),),
    )


def check_stand_in(prepared: PreparedRun) -> None:
    """A stand-in run says a run happened: refused (exit 3) while a backfill of the same pipeline runs, since the
    backfill may be about to run (or be running) those very intervals (seed interventions.txt: a pipeline with a
    run in progress is refused)."""
    key = pipeline_key(prepared.pipeline.directory)
    busy = [work.who() for work in read_live() if work.target == key and work.kind == WorkKind.BACKFILL]
    if busy:
        raise Refused(
            f"never: {'; '.join(busy)} is running this pipeline: a stand-in run is refused while it runs; wait for it"
        )
