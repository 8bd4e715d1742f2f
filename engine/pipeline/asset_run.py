"""Running one asset: its main step (SQL, seed or Python script) and then its checks.

An :class:`AssetRun` runs on a worker thread; the scheduler may call
:meth:`AssetRun.stop` from its own thread (timeout or cancellation), which
interrupts the DuckDB query or stops the Python process group.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

import orjson

from engine.base.settings import DEFAULT_STOP_GRACE
from engine.pipeline.asset_status import AssetStatus
from engine.pipeline.asset_types import AssetKind
from engine.pipeline.assets import Asset, enabled_value
from engine.pipeline.duckdb_pool import DuckDBPool
from engine.pipeline.interval_modifiers import apply_modifiers
from engine.pipeline.materialization import (
    Database,
    RunStopped,
    classified_run_sql,
    materialize,
    quote_name,
    refuse_unjudged,
    window_predicate,
)
from engine.pipeline.quality_checks import QualityCheckResult, run_checks
from engine.pipeline.schema_prefix import existing_tables, rewrite_references
from engine.pipeline.seeds import load_seed, seed_source
from engine.pipeline.source_rows import (
    ScriptChangedRawData,
    SourceRows,
    lost_source_rows,
    raw_tables,
    source_rows,
)
from engine.pipeline.sql_writes import POST, PRE
from engine.pipeline.templating import TemplateProblem, Window, render

if TYPE_CHECKING:
    from engine.pipeline.script_process import ScriptProcess

SUCCEEDED, FAILED, UPSTREAM_FAILED, SKIPPED = AssetStatus
DONE = (SUCCEEDED, SKIPPED)  # what lets the downstream run and the run succeed


@dataclass
class AssetResult:
    name: str
    kind: str
    status: str
    started_at: float | None = None  # Unix seconds
    finished_at: float | None = None
    rows: int | None = None
    checks: list[QualityCheckResult] = field(default_factory=list)
    error: str | None = None
    window: Window | None = None  # when interval modifiers moved it
    rows_in_interval: int | None = None  # rows whose incremental key falls in the window, after the run
    duration: float | None = None  # seconds, on the monotonic clock (a wall-clock step is not part of it)

    @property
    def failed_checks(self) -> list[QualityCheckResult]:
        return [c for c in self.checks if not c.passed]


# A stopped asset's script (its timeout) gets SIGTERM, then SIGKILL this many seconds later if still running.
TIMEOUT_KILL_AFTER = 5.0


@dataclass(frozen=True)
class RunSettings:
    """What every asset of one run shares."""

    window: Window
    run_id: str
    pipeline: str
    variables: dict[str, Any]
    full_refresh: bool
    apply_interval_modifiers: bool
    default_modifiers: dict[str, str] | None
    only: str | None
    annotations: dict[str, Any] | None
    connection_of: Callable[[Asset], str | None]
    environment_vars: dict[str, str]
    secret_of: Callable[[str], str] = lambda key: ""  # what a secrets: entry injects (see Connection.secret_text)
    macros: str = ""
    schema_prefix: str | None = None
    fence_window: bool = False  # a backfill's partition: its table outside the window must not change
    judged_sql: dict[str, frozenset[str]] | None = None  # a backfill's partition: see RunRequest.judged_sql
    unjudged: Callable[[Asset], str | None] | None = None  # a backfill's partition: see RunRequest.unjudged
    executed: datetime | None = None  # when the run started (Bruin's execution_date), UTC
    commit_hash: str = ""  # the repository's current commit, as Bruin's commit_hash
    variables_schema: dict[str, Any] = field(default_factory=dict)  # BRUIN_VARS_SCHEMA: declarations, no defaults
    connection_types: dict[str, str] = field(default_factory=dict)  # connection name → its type
    stop_grace: float = DEFAULT_STOP_GRACE  # BACKFILL_STOP_GRACE: what a script's leftovers get before SIGKILL
    raw_layer: frozenset[str] = (
        frozenset()
    )  # tables a layer:raw tag puts in the raw layer (source_rows.raw_layer_tables)


class AssetRun:
    def __init__(self, asset: Asset, settings: RunSettings, pool: DuckDBPool, emit: Callable[[str], None]) -> None:
        self.asset = asset
        self.settings = settings
        self.pool = pool
        self.emit = emit
        self.result = AssetResult(asset.name, asset.kind, FAILED)
        self._cursor: Any = None
        self._process: ScriptProcess | None = None
        self._stopped: str | None = None
        self._kill_at: float | None = None  # monotonic: when a stopped script is killed
        self._lock = threading.RLock()  # a signal handler may stop the run on the thread that holds it
        self._tables: set[tuple[str, str]] | None = None  # schema-prefixed environments: the database's tables

    # ------------------------------------------------------------ control

    def stop(self, reason: str, kill_after: float = TIMEOUT_KILL_AFTER) -> None:
        """Interrupt the asset from any thread; it finishes as failed with ``reason``. A Python asset's script gets
        SIGTERM with its process group, SIGKILL ``kill_after`` seconds later if still running (a later call may
        bring that closer, never put it off)."""
        deadline = time.monotonic() + kill_after
        with self._lock:
            first = self._stopped is None
            if first:
                self._stopped = reason
            self._kill_at = deadline if self._kill_at is None else min(self._kill_at, deadline)
            cursor, script = self._cursor, self._process
        if cursor is not None:
            with contextlib.suppress(Exception):
                cursor.interrupt()
        if script is not None:
            if first:
                script.signal(signal.SIGTERM)
            script.kill_by(deadline)

    # ------------------------------------------------------------ running

    def run(self) -> AssetResult:
        result = self.result
        result.started_at, started = time.time(), time.monotonic()
        try:
            context, window = self._context()
            if not self._enabled(context):
                result.status, result.error = SKIPPED, "disabled: its enabled field is false"
                result.finished_at, result.duration = time.time(), time.monotonic() - started
                return result
            if window is not self.settings.window:
                result.window = window
            if self.settings.unjudged is not None and (changed := self.settings.unjudged(self.asset)) is not None:
                result.status, result.error = FAILED, f"not run: {changed}"
                result.finished_at, result.duration = time.time(), time.monotonic() - started
                return result
            if self.settings.only != "checks":
                _render_parameters(self.asset, context)
                self._main(context, window)
                self._tables = None  # the checks read the tables again: this asset's own now exists
            if self._stopped is None and self.settings.only != "main" and self.asset.has_checks:
                db = self._database()
                try:
                    result.checks = run_checks(db, self.asset, context, rewrite=lambda sql: self._rewrite(db, sql))
                finally:
                    self._release(db)
            failed_blocking = [c for c in result.checks if not c.passed and c.blocking]
            if self._stopped is not None:
                result.status, result.error = FAILED, self._stopped
            elif failed_blocking:
                result.status = FAILED
                result.error = f"{len(failed_blocking)} blocking check(s) failed: " + ", ".join(
                    c.name for c in failed_blocking
                )
            else:
                result.status = SUCCEEDED
        except TemplateProblem as error:
            result.status, result.error = FAILED, f"{self.asset.path}: {error}"
        except Exception as error:
            result.status = FAILED
            result.error = self._stopped or _first_line(error)
        result.finished_at, result.duration = time.time(), time.monotonic() - started
        return result

    def _enabled(self, context: dict[str, Any]) -> bool:
        """``enabled``: a boolean, or a template rendered with the run's variables (true/false)."""
        value = self.asset.enabled
        if isinstance(value, bool):
            return value
        meaning = enabled_value(render(value, context))
        if meaning is None:
            raise TemplateProblem(f"enabled {value!r} rendered to {render(value, context)!r}: expected true or false")
        return meaning

    def _rewrite(self, db: Database, sql: str) -> str:
        """In a schema-prefixed environment, read prefixed copies of the tables that have one."""
        prefix = self.settings.schema_prefix
        if not prefix:
            return sql
        if self._tables is None:  # read once for the main step (its upstream assets have all run), once for checks
            self._tables = existing_tables(db)
        return rewrite_references(sql, prefix, self._tables)

    def _context(self) -> tuple[dict[str, Any], Window]:
        s = self.settings
        from engine.pipeline.templating import base_context, with_macros

        context = base_context(
            s.window,
            run_id=s.run_id,
            pipeline=s.pipeline,
            variables=s.variables,
            full_refresh=s.full_refresh,
            executed=s.executed,
            commit_hash=s.commit_hash,
            schema_prefix=s.schema_prefix or "",
        )
        context["this"] = self.asset.name
        context["full_refresh"] = self._refreshing()
        window = s.window
        # A full refresh keeps the run's window: Bruin moves it to start_date for ingestr assets only, and ignores
        # --apply-interval-modifiers with --full-refresh (setApplyIntervalModifiers in cmd/run.go).
        if s.apply_interval_modifiers and not s.full_refresh:
            window = apply_modifiers(window, self.asset.interval_modifiers or s.default_modifiers, context)
            if window is not s.window:
                context.update(window.variables())
        if s.macros:
            context = with_macros(s.macros, context)
        return context, window

    def _refreshing(self) -> bool:
        """--full-refresh, or the asset's parameters.full_refresh, unless full_refresh_restricted."""
        asset = self.asset
        return (self.settings.full_refresh or asset.always_full_refresh) and not asset.full_refresh_restricted

    def _database(self) -> Database:
        name = self.settings.connection_of(self.asset)
        assert name is not None
        cursor = self.pool.cursor(name)
        with self._lock:
            self._cursor = cursor
        return Database(cursor, self._annotate, lambda: self._stopped)

    def _on_file(self, read: Callable[..., Any]) -> Any:
        """``read(db, asset, schema_prefix)`` on the asset's DuckDB file, opened for it and closed again: a Python
        asset's script opens the file itself, and DuckDB lets one process write it."""
        db = self._database()
        try:
            return read(db, self.asset, self.settings.schema_prefix or "")
        finally:
            self._release(db)
            connection = self.settings.connection_of(self.asset)
            assert connection is not None
            self.pool.close(connection)

    def _raw_source_rows(self, db: Database, asset: Asset, schema_prefix: str) -> SourceRows:
        """What the raw tables hold as a script starts. The run opened the file as it started and closed it before
        the script, so a crashed writer's deletes in the write-ahead log are compacted already: the script's own
        checkpoint renumbers no row it did not touch."""
        return source_rows(db, raw_tables(db, asset, schema_prefix, self.settings.raw_layer))

    def _release(self, db: Database) -> None:
        with self._lock:
            self._cursor = None
        db.cursor.close()

    def _annotate(self, sql: str) -> str:
        annotations = self.settings.annotations
        if not annotations:
            return sql
        # DuckDB's comments nest: a "/*" in a value would leave the comment open over the statement after it.
        text = orjson.dumps(annotations).decode().replace("*/", "* /").replace("/*", "/ *")
        return "/* " + text + " */\n" + sql

    def _main(self, context: dict[str, Any], window: Window) -> None:
        asset = self.asset
        if asset.kind == AssetKind.NO_OP:
            return  # duckdb.source, empty: Bruin runs nothing for them
        if asset.kind == AssetKind.PYTHON:
            self._run_python(window, context)
            return
        db = self._database()
        try:
            if asset.kind == "seed":
                self.result.rows = load_seed(db, asset, seed_source(asset, context))
                return
            pre = [render(hook, context) for hook in asset.hooks.get(PRE, [])]
            post = [render(hook, context) for hook in asset.hooks.get(POST, [])]
            query = render(asset.body, context, first_line=asset.body_line)
            if (judged := self.settings.judged_sql) is not None:  # as its pre-flight saw them: before any rewrite
                as_written = query if asset.materialization.type is None else None
                refuse_unjudged(
                    asset, classified_run_sql(db, pre, post, as_written), judged.get(asset.name, frozenset())
                )
            self.result.rows = materialize(
                db,
                asset,
                self._rewrite(db, query),
                window,
                full_refresh=self.settings.full_refresh,
                pre_hooks=[self._rewrite(db, hook) for hook in pre],
                post_hooks=[self._rewrite(db, hook) for hook in post],
                fence_window=self.settings.fence_window,
                schema_prefix=self.settings.schema_prefix or "",
                raw_layer=self.settings.raw_layer,
            )
            self.result.rows_in_interval = _rows_in_window(db, asset, window)
        finally:
            self._release(db)

    def _run_python(self, window: Window, context: dict[str, Any]) -> None:
        s = self.settings
        variables = window.variables()
        environment = {
            **os.environ,
            **s.environment_vars,
            "BRUIN_START_DATE": variables["start_date"],
            "BRUIN_END_DATE": variables["end_date"],
            "BRUIN_START_DATETIME": variables["start_datetime"],
            "BRUIN_END_DATETIME": variables["end_datetime"],
            "BRUIN_START_TIMESTAMP": variables["start_timestamp"],
            "BRUIN_END_TIMESTAMP": variables["end_timestamp"],
            "BRUIN_EXECUTION_DATE": context["execution_date"],
            "BRUIN_EXECUTION_DATETIME": context["execution_datetime"],
            "BRUIN_EXECUTION_TIMESTAMP": context["execution_timestamp"],
            "BRUIN_RUN_ID": s.run_id,
            "BRUIN_PIPELINE": s.pipeline,
            "BRUIN_THIS": self.asset.name,
            "BRUIN_ASSET": self.asset.name,
            "BRUIN_VARS": orjson.dumps(s.variables).decode(),
            "BRUIN_VARS_SCHEMA": orjson.dumps(s.variables_schema).decode(),
            "BRUIN_FULL_REFRESH": "1" if self._refreshing() else "",
            "BRUIN_COMMIT_HASH": s.commit_hash,
            "BRUIN_SCHEMA_PREFIX": s.schema_prefix or "",
            "PYTHONUNBUFFERED": "1",
        }
        types = {}
        for key, variable in self.asset.secrets:
            environment[variable] = s.secret_of(key)
            if s.connection_types.get(key):
                types[variable] = s.connection_types[key]
        if types:  # Bruin's BRUIN_CONNECTION_TYPES: each injected name → its connection's type
            environment["BRUIN_CONNECTION_TYPES"] = orjson.dumps(types).decode()
        connection = s.connection_of(self.asset)
        if connection is not None:
            environment["BRUIN_CONNECTION"] = connection
            environment["BRUIN_DUCKDB_PATH"] = str(self.pool.path_of(connection))
        from engine.pipeline.script_process import ScriptProcess  # psutil and setpriv's lookup: Python assets only

        # A backfill's partition: the rows of the raw tables of the file the script opens, as it starts and as it ends.
        raw_before = self._on_file(self._raw_source_rows) if s.fence_window and connection is not None else None
        script = ScriptProcess(
            [sys.executable, str(self.asset.script)],
            str(self.asset.script.parent),
            environment,
            leftover_grace=s.stop_grace,
        )
        with self._lock:
            self._process = script
            kill_at = self._kill_at if self._stopped is not None else None
        if kill_at is not None:  # stopped while it started: it missed the signal
            script.signal(signal.SIGTERM)
            script.kill_by(kill_at)
        last_line = ""
        try:
            for line in script.lines():
                if line.strip():
                    last_line = line
                self.emit(f"[{self.asset.name}] {line}")
        except BaseException:
            script.kill_by(time.monotonic())  # whatever failed here, the script does not outlive its asset
            script.finish()
            raise
        code, left = script.finish()
        with self._lock:
            self._process = None
        if left:
            self.emit(
                f"[{self.asset.name}] stopped {len(left)} process{'es' if len(left) > 1 else ''} the script left "
                f"running when it ended (PID {', '.join(map(str, left))})"
            )
        if raw_before and (lost := self._on_file(lambda db, *_: lost_source_rows(db, raw_before))) is not None:
            raise ScriptChangedRawData(self.asset.name, *lost)
        if self._stopped is not None:
            raise RuntimeError(self._stopped)
        if code != 0:
            raise RuntimeError(f"python exited with code {code}" + (f": {last_line}" if last_line else ""))


def _render_parameters(asset: Asset, context: dict[str, Any]) -> dict[str, Any]:
    """Every string parameter rendered as Bruin renders it: a template that does not render fails the asset."""
    from engine.pipeline.templating import TemplateProblem, render

    rendered = {}
    for name, value in asset.parameters.items():
        if not isinstance(value, str) or ("{{" not in value and "{%" not in value):
            rendered[name] = value
            continue
        try:
            rendered[name] = render(value, context)
        except TemplateProblem as error:
            raise ValueError(f"parameters.{name} {value!r}: {error}") from None
    return rendered


def _rows_in_window(db: Database, asset: Asset, window: Window) -> int | None:
    """What verification compares with history: the table's rows in the run's window (by incremental key)."""
    m = asset.materialization
    if m.type != "table" or not m.incremental_key:
        return None
    try:
        predicate = window_predicate(db, asset, window)
        return db.count(f"SELECT count(*) FROM {quote_name(asset.name)} WHERE {predicate}")
    except RunStopped:
        raise
    except Exception:  # a count that cannot be taken leaves verification without a number
        return None


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
