"""``backfill run`` by hand, judged like a backfill where it can lose data: the raw layer (source data that
cannot be loaded again) is never deleted from or rebuilt, by a delete-style strategy or by a full refresh, and a
full refresh, which drops and rebuilds tables, needs a reason (docs/guardrails.md, "backfill run by hand")."""

from __future__ import annotations

from engine.base.errors import BadInput, Refused
from engine.guardrails.asset_risk import NOT_DELETING, layer_of, strategy_of
from engine.pipeline.assets import Asset
from engine.pipeline.run_types import PreparedRun
from engine.store.live_work import LiveWork, WorkKind, pipeline_key, read_live, real_files, this_process

NOT_SOURCE = "select it out (--exclude-tag, a selector), or tag it layer:mid if it is not source data"


def check_run_by_hand(prepared: PreparedRun, *, reason: str | None) -> None:
    """The layer-risk rule of a backfill (``layer_risk``) for a run by hand: a raw table with a strategy that
    deletes rows (everything but append, insert-only loads, views, DDL and SQL run as written) or a full refresh
    of a raw table is refused (exit 3); a full refresh otherwise needs ``--reason`` (exit 2). Runs of a
    backfill's partitions are not judged here: their backfill's pre-flight did."""
    selected = [prepared.pipeline.assets[name] for name in sorted(prepared.selected)]
    raw = [a for a in selected if layer_of(a)[0] == "raw" and a.kind != "seed"]
    deleting = [f"{a.name} ({strategy_of(a)})" for a in raw if strategy_of(a) not in NOT_DELETING]
    if deleting:
        raise Refused(
            f"never: {', '.join(deleting)} {'is' if len(deleting) == 1 else 'are'} in the raw layer with a "
            f"delete-style strategy: source data is never deleted or rebuilt, by hand or in a backfill; {NOT_SOURCE}"
        )
    if not prepared.request.full_refresh:
        return
    rebuilt = [a.name for a in raw if _rebuilt(a)]
    if rebuilt:
        raise Refused(
            f"never: {', '.join(rebuilt)} {'is' if len(rebuilt) == 1 else 'are'} in the raw layer and --full-refresh "
            f"rebuilds it: source data is never deleted or rebuilt; {NOT_SOURCE}"
        )
    if reason is None:
        raise BadInput("--full-refresh drops and rebuilds the selected tables: give --reason TEXT (it is recorded)")


def _rebuilt(asset: Asset) -> bool:
    """Whether a full refresh drops the asset's table (seeds are left out by the caller: one is rebuilt from its
    file in the repository, and no source is lost). Views and SQL run as written are not tables, and a DDL table
    is not rebuilt by a refresh; a ``full_refresh_restricted`` table is kept."""
    table = asset.materialization.type == "table"
    return table and strategy_of(asset) != "ddl" and not asset.full_refresh_restricted


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
