"""The values one ``backfill run`` passes along: what was asked, what was prepared, what happened.

They live apart from :mod:`engine.pipeline.runner` so the run record can describe a result
without importing the runner that produces it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.base.settings import DEFAULT_STOP_GRACE
from engine.pipeline.asset_run import DONE, AssetResult
from engine.pipeline.assets import Asset
from engine.pipeline.config import Environment
from engine.pipeline.loading import Pipeline
from engine.pipeline.options import RunOptions
from engine.pipeline.repository import Target
from engine.pipeline.templating import Window


@dataclass(frozen=True)
class RunRequest:
    target: str
    start: str | None = None
    end: str | None = None
    timezone: str = "UTC"
    environment: str | None = None
    config_file: str | None = None
    workers: int = 16
    options: RunOptions = field(default_factory=RunOptions)  # selection, variables, annotations: as backfills save them
    full_refresh: bool = False
    timeout: int | None = None  # microseconds per asset
    run_id: str | None = None
    backfill_id: str | None = None
    backfill_total: int | None = None
    partition_id: str | None = None
    reason: str | None = None  # a run by hand that rebuilds tables (--full-refresh) says why; recorded
    row_changes_from: str | None = None  # a backfill's snapshot.json: measure what this run changed against it
    # a backfill's partition: by asset, the shapes of SQL that cannot be classified its pre-flight judged (any other
    # is refused; engine/pipeline/judged_sql.py); None for a run by hand
    judged_sql: dict[str, frozenset[str]] | None = None
    # a backfill's partition: what an asset reads only when it runs that changed since the pre-flight judged it,
    # asked before each asset (None: nothing changed); None for a run by hand
    unjudged: Callable[[Asset], str | None] | None = None
    stop_grace: float = DEFAULT_STOP_GRACE  # BACKFILL_STOP_GRACE, as the executor that started this run reads it


@dataclass
class PreparedRun:
    request: RunRequest
    run_id: str
    target: Target
    pipeline: Pipeline
    environment: Environment
    window: Window
    variables: dict[str, Any]
    selected: set[str]
    notes: list[str]
    warnings: tuple[str, ...] = ()  # what the run reads but does not understand (CheckedPipeline.warnings)


@dataclass
class RunResult:
    prepared: PreparedRun
    results: list[AssetResult]
    started_at: float
    finished_at: float
    error: str | None = None
    record_path: Path | None = None
    seconds: float = 0.0  # how long it ran, on the monotonic clock
    peak_concurrency: int = 0
    row_changes: dict[str, Any] | None = None  # table → what changed in its window (engine/pipeline/row_changes.py)

    @property
    def ok(self) -> bool:
        return self.error is None and all(r.status in DONE for r in self.results)
