"""``backfill run``: one run of a pipeline (or one asset) over one interval, on DuckDB.

:func:`prepare_run` validates everything (configuration, pipeline files,
variables, selection, connections) before anything executes; :func:`execute_run`
runs the assets and writes the run record.
"""

from __future__ import annotations

import re
import secrets
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from engine.base.errors import BadInput
from engine.dates.instants import boundary_instant, format_instant, load_zone, local_day_start, parse_boundary
from engine.pipeline.asset_run import DONE, AssetResult, AssetRun, RunSettings
from engine.pipeline.asset_scheduler import AssetScheduler
from engine.pipeline.asset_status import AssetStatus
from engine.pipeline.config import find_config_file, load_config
from engine.pipeline.duckdb_pool import DatabaseUnavailable, DuckDBPool
from engine.pipeline.materialization import Database
from engine.pipeline.repository import current_commit, resolve_target
from engine.pipeline.row_changes import attach_snapshot, detach_snapshot, measure, snapshot_tables, windowed
from engine.pipeline.run_record import write_run_record
from engine.pipeline.run_types import PreparedRun, RunRequest, RunResult
from engine.pipeline.source_rows import raw_layer_tables
from engine.pipeline.templating import Window, today_in
from engine.pipeline.validation import check_pipeline

RUN_ID = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,199}", re.ASCII)


def new_run_id() -> str:
    return time.strftime("run-%Y%m%dT%H%M%SZ-", time.gmtime()) + secrets.token_hex(4)


def run_window(start: str | None, end: str | None, timezone: str) -> Window:
    """``[start, end]`` with an inclusive end; without dates, yesterday as a whole day."""
    zone = load_zone(timezone)
    if start is None and end is None:
        today = today_in(zone)
        return Window(local_day_start(today - timedelta(days=1), zone), local_day_start(today, zone) - 1, zone)
    if start is None or end is None:
        raise BadInput("give both --start-date and --end-date, or neither (yesterday, the whole day)")
    first = boundary_instant(parse_boundary(start, "--start-date"), zone, "--start-date", inclusive_date=False)
    end_boundary = parse_boundary(end, "--end-date")
    last = boundary_instant(end_boundary, zone, "--end-date", inclusive_date=True)
    if end_boundary.kind == "date":
        last -= 1  # the end of that day, inclusive
    if last < first:
        raise BadInput(
            f"--end-date {end!r} is before --start-date {start!r}: the end is inclusive and must not precede the start"
        )
    return Window(first, last, zone)


def prepare_run(request: RunRequest, *, cwd: Path | None = None) -> PreparedRun:
    """Validate the run completely; nothing executes before this succeeds."""
    if request.workers < 1:
        raise BadInput(f"--workers {request.workers} is not allowed: use 1 or more")
    if request.run_id is not None and not RUN_ID.fullmatch(request.run_id):
        raise BadInput(
            f"--run-id {request.run_id!r} is not a plain name: use letters, digits, '.', '_' and '-' "
            "(at most 200, not starting with '.'): it names the run's record file"
        )
    window = run_window(request.start, request.end, request.timezone)
    target = resolve_target(request.target, cwd=cwd)
    config = load_config(find_config_file(target, request.config_file, cwd=cwd))
    environment = config.environment(request.environment)
    checked = check_pipeline(target, config, environment, request.options)
    pipeline, variables, selected, notes = checked.pipeline, checked.variables, checked.selected, checked.notes
    return PreparedRun(
        request,
        request.run_id or new_run_id(),
        target,
        pipeline,
        environment,
        window,
        variables,
        selected,
        notes,
        (*checked.warnings, *_ignored_modifiers(request)),
    )


def _ignored_modifiers(request: RunRequest) -> tuple[str, ...]:
    """Bruin's setApplyIntervalModifiers: a full refresh keeps the whole window, modifiers or not."""
    if request.full_refresh and request.options.apply_interval_modifiers:
        return ("--apply-interval-modifiers is ignored when --full-refresh is given (as in Bruin)",)
    return ()


class Cancellation:
    """Stops the run in progress from a signal handler: the warm runner's, which must come out of the run whole,
    ready for the next one, and ``backfill run``'s own, which must stop its Python assets' scripts (each in a session
    of its own) and wait for them. A KeyboardInterrupt raised wherever the main thread was would do neither."""

    def __init__(self) -> None:
        self.reason: str | None = None
        self._schedulers: list[AssetScheduler] = []

    def reset(self) -> None:
        self.reason = None

    def cancel(self, reason: str) -> None:
        """Interrupt every running query and Python asset; a run that has not started its assets yet starts
        none."""
        self.reason = self.reason or reason
        for scheduler in list(self._schedulers):
            scheduler.cancel(self.reason)

    def attach(self, scheduler: AssetScheduler) -> None:
        self._schedulers.append(scheduler)
        if self.reason is not None:
            scheduler.cancel(self.reason)

    def detach(self, scheduler: AssetScheduler) -> None:
        self._schedulers.remove(scheduler)


CANCELLATION = Cancellation()


def execute_run(prepared: PreparedRun, emit) -> RunResult:
    """Run the selected assets; write ``logs/runs/<run-id>.json``; never raises for asset failures."""
    request, pipeline = prepared.request, prepared.pipeline
    used = {pipeline.connection_of(pipeline.assets[n]) for n in prepared.selected} - {None}
    connections = {c.name: c for c in prepared.environment.connections if c.name in used}
    started, began = time.time(), time.monotonic()
    pool = DuckDBPool(connections)
    result = RunResult(prepared, [], started, started)
    try:
        pool.open_all()
        settings = RunSettings(
            window=prepared.window,
            run_id=prepared.run_id,
            pipeline=pipeline.name,
            variables=prepared.variables,
            full_refresh=request.full_refresh,
            apply_interval_modifiers=request.options.apply_interval_modifiers,
            default_modifiers=pipeline.default_interval_modifiers,
            only=request.options.only,
            annotations=request.options.query_annotations,
            connection_of=pipeline.connection_of,
            environment_vars=_backfill_environment(request),
            secret_of=lambda key: _secret(prepared, key),
            macros=pipeline.macros,
            schema_prefix=pipeline.schema_prefix,
            fence_window=request.backfill_id is not None,
            judged_sql=request.judged_sql,
            unjudged=request.unjudged,
            executed=datetime.fromtimestamp(started, UTC),
            commit_hash=current_commit(prepared.target.repository),
            variables_schema={
                name: {k: v for k, v in schema.items() if k != "default"} for name, schema in pipeline.variables.items()
            },
            connection_types={c.name: c.kind for c in prepared.environment.connections},
            stop_grace=request.stop_grace,
            raw_layer=raw_layer_tables(pipeline.assets.values(), pipeline.schema_prefix or ""),
        )
        order: list[AssetResult] = []

        def finished(asset_result: AssetResult) -> None:
            order.append(asset_result)
            emit(asset_result)

        scheduler = AssetScheduler(
            pipeline,
            prepared.selected,
            lambda name: AssetRun(pipeline.assets[name], settings, pool, lambda line: emit(line)),
            workers=request.workers,
            limits={name: c.max_concurrent_assets for name, c in connections.items()},
            pool=pool,
            timeout=request.timeout,
            on_finish=finished,
            stop_grace=request.stop_grace,
        )
        CANCELLATION.attach(scheduler)
        try:
            scheduler.run()
        finally:
            CANCELLATION.detach(scheduler)
        result.results = order
        result.peak_concurrency = scheduler.peak_concurrency
        if request.row_changes_from:
            result.row_changes = _row_changes(prepared, pool, order, Path(request.row_changes_from))
    except DatabaseUnavailable as error:
        result.error = str(error)
    finally:
        whole = not result.error and bool(result.results) and all(r.status in DONE for r in result.results)
        pool.close_all(park=whole)
        result.finished_at, result.seconds = time.time(), time.monotonic() - began
    result.record_path = write_run_record(result)
    return result


def _row_changes(prepared: PreparedRun, pool: DuckDBPool, results: list, index: Path) -> dict[str, Any] | None:
    """What each succeeded windowed table of the run changed in its window, against the backfill's snapshot; None
    without one. A table that could not be measured says why (the run itself is not failed for it)."""
    tables = snapshot_tables(index)
    if not tables:
        return None
    pipeline, changes = prepared.pipeline, {}
    attached: dict[str, Database] = {}
    try:
        for asset_result in results:
            asset = pipeline.assets[asset_result.name]
            connection = pipeline.connection_of(asset)
            if asset_result.status != AssetStatus.SUCCEEDED or not windowed(asset) or connection is None:
                continue
            table = tables.get((str(pool.path_of(connection).resolve()), asset.name.lower()))
            if table is None:
                continue
            try:
                db = attached.get(table["file"])
                if db is None:
                    db = attached[table["file"]] = Database(pool.cursor(connection), lambda sql: sql)
                    if Path(table["file"]).exists():  # no file: every table was new (measured against nothing)
                        attach_snapshot(db, table["file"])
                changes[asset.name] = measure(db, asset, asset_result.window or prepared.window, table)
            except Exception as error:
                changes[asset.name] = {"error": str(error).strip().splitlines()[0] if str(error).strip() else "?"}
    finally:
        for db in attached.values():
            detach_snapshot(db)
    return changes


def _secret(prepared: PreparedRun, key: str) -> str:
    connection = prepared.environment.connection(key)
    return connection.secret_text() if connection is not None else ""


def _backfill_environment(request: RunRequest) -> dict[str, str]:
    values = {}
    if request.backfill_id:
        values["BACKFILL_ID"] = request.backfill_id
    return values


def describe_window(window: Window) -> str:
    return f"{format_instant(window.start, window.zone, micros='always')} .. " + format_instant(
        window.end, window.zone, micros="always"
    )
