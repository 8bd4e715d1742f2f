"""What an asset does to its table, read from its definition: strategy, whether it uses the interval, layer."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from engine.dates.instants import to_micros
from engine.pipeline.assets import STRATEGIES, Asset
from engine.pipeline.database import schema_of, without_comments
from engine.pipeline.datavault import DATAVAULT_STRATEGIES
from engine.pipeline.loading import Pipeline
from engine.pipeline.scd2 import SCD2_STRATEGIES
from engine.pipeline.sql_writes import RAW_SCHEMAS, layer_tag
from engine.pipeline.templating import Window, base_context, render, with_macros

# What the runner runs: every table strategy it implements, a view, and SQL or a script run as written.
KNOWN_STRATEGIES = (*STRATEGIES, "view", "none")
REBUILDING = ("create+replace", "truncate+insert")  # the whole table from one run's query
HISTORY = SCD2_STRATEGIES  # the query is the whole source: keys it lacks are closed
INSERT_ONLY = DATAVAULT_STRATEGIES  # only new keys and changes are inserted; nothing is updated or deleted
NOT_DELETING = ("append", "view", "ddl", "none", *INSERT_ONLY)  # never delete rows that exist
FINAL_SCHEMAS = ("mart", "marts", "report", "reporting", "dashboards")

_SQL_INTERVAL = re.compile(r"\{[{%][^}]*\b(?:start|end)_(?:date|datetime|timestamp)\b")
_PYTHON_INTERVAL = re.compile(r"\bBRUIN_(?:START|END)_(?:DATE|DATETIME|TIMESTAMP)\b")


def strategy_of(asset: Asset) -> str:
    """``view``, ``none`` (SQL run as written), a seed's ``create+replace``, or the declared strategy."""
    if asset.kind == "seed":
        return "create+replace"
    m = asset.materialization
    if m.type == "view":
        return "view"
    if m.type is None:
        return "none"
    return m.strategy or "create+replace"


def refreshed_every_run(asset: Asset, strategy: str) -> bool:
    """``parameters.full_refresh: true`` (not restricted) on a table: every run rebuilds it whole."""
    return asset.always_full_refresh and not asset.full_refresh_restricted and strategy not in ("view", "none")


def rebuilds_table(asset: Asset, strategy: str) -> bool:
    """Whether a run replaces the whole table with its query's rows."""
    return strategy in REBUILDING or refreshed_every_run(asset, strategy)


def uses_interval(asset: Asset, pipeline: Pipeline, variables: dict[str, Any]) -> bool:
    """Whether a run of the asset depends on its interval: its strategy, modifiers, ``BRUIN_*_DATE`` in a
    script, or SQL that renders differently for two windows once comments are stripped (a comment that
    mentions ``{{ start_date }}`` does not count; a macro that reads the window does)."""
    if asset.kind == "seed":
        return False
    if asset.materialization.strategy == "time_interval":
        return True
    if asset.interval_modifiers or pipeline.default_interval_modifiers:
        return True
    if asset.kind == "python":
        return bool(_PYTHON_INTERVAL.search(asset.body))
    try:
        first, second = (_rendered(asset, pipeline, variables, window) for window in _TWO_WINDOWS)
    except Exception:  # it cannot be rendered here (the run will say why): judge by the text, as before
        return bool(_SQL_INTERVAL.search(asset.body))
    return without_comments(first).split() != without_comments(second).split()


# Two windows that share no date, time, length or weekday: anything rendered from the interval differs.
_TWO_WINDOWS = (
    Window(to_micros(datetime(2001, 2, 3, 4, 5, tzinfo=UTC)), to_micros(datetime(2001, 2, 4, 4, 5, tzinfo=UTC)), UTC),
    Window(to_micros(datetime(2012, 7, 9, tzinfo=UTC)), to_micros(datetime(2012, 7, 9, 12, tzinfo=UTC)), UTC),
)


def _rendered(asset: Asset, pipeline: Pipeline, variables: dict[str, Any], window: Window) -> str:
    context = base_context(window, run_id="preflight", pipeline=pipeline.name, variables=variables, full_refresh=False)
    context["this"] = asset.name
    if pipeline.macros:
        context = with_macros(pipeline.macros, context)
    return render(asset.body, context, first_line=asset.body_line)


def layer_of(asset: Asset) -> tuple[str, str]:
    """``raw``, ``mid`` or ``final``, and why: a ``layer:`` tag wins, else the schema of its name."""
    if (tagged := layer_tag(asset.tags)) is not None:
        return tagged, f"tag layer:{tagged}"
    schema = schema_of(asset.name).lower()  # catalog.schema.table too: the catalog does not move it out of raw
    if schema in RAW_SCHEMAS:
        return "raw", f"schema {schema}"
    if schema in FINAL_SCHEMAS:
        return "final", f"schema {schema}"
    return "mid", f"schema {schema}" if schema else "no schema"


def time_key(asset: Asset) -> str | None:
    """The column that places a row in an interval: the incremental key."""
    return asset.materialization.incremental_key if asset.materialization.type == "table" else None


def changes_data(asset: Asset) -> bool:
    """Whether running the asset writes rows (a view or DDL changes a definition, not data)."""
    return strategy_of(asset) not in ("view", "ddl")
