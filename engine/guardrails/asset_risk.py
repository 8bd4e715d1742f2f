"""What an asset does to its table, read from its definition: strategy, whether it uses the interval, layer."""

from __future__ import annotations

import re

from engine.pipeline.assets import STRATEGIES, Asset
from engine.pipeline.datavault import DATAVAULT_STRATEGIES
from engine.pipeline.loading import Pipeline
from engine.pipeline.scd2 import SCD2_STRATEGIES

# What the runner runs: every table strategy it implements, a view, and SQL or a script run as written.
KNOWN_STRATEGIES = (*STRATEGIES, "view", "none")
REBUILDING = ("create+replace", "truncate+insert")  # the whole table from one run's query
HISTORY = SCD2_STRATEGIES  # the query is the whole source: keys it lacks are closed
INSERT_ONLY = DATAVAULT_STRATEGIES  # only new keys and changes are inserted; nothing is updated or deleted
NOT_DELETING = ("append", "view", "ddl", "none", *INSERT_ONLY)  # never delete rows that exist
RAW_SCHEMAS = ("raw", "source", "src", "landing")
FINAL_SCHEMAS = ("mart", "marts", "report", "reporting", "dashboards")
LAYERS = ("raw", "mid", "final")

_SQL_INTERVAL = re.compile(r"\{[{%][^}]*\b(?:start|end)_(?:date|datetime|timestamp)\b")
_PYTHON_INTERVAL = re.compile(r"\bBRUIN_(?:START|END)_(?:DATE|DATETIME|TIMESTAMP)\b")


def strategy_of(asset: Asset) -> str:
    """``view``, ``none`` (SQL run as written), a seed's ``create+replace``, or the declared strategy."""
    if asset.kind == "seed":
        return "create+replace"
    if asset.kind == "python" and asset.materialization.type is None:
        return "none"
    m = asset.materialization
    if m.type == "view":
        return "view"
    if m.type is None:
        return "none"
    return m.strategy or "create+replace"


def uses_interval(asset: Asset, pipeline: Pipeline) -> bool:
    """Whether a run of the asset depends on its interval: templates, BRUIN_*_DATE, strategy, modifiers."""
    if asset.kind == "seed":
        return False
    if asset.materialization.strategy == "time_interval":
        return True
    if asset.interval_modifiers or pipeline.default_interval_modifiers:
        return True
    pattern = _PYTHON_INTERVAL if asset.kind == "python" else _SQL_INTERVAL
    return bool(pattern.search(asset.body))


def layer_of(asset: Asset) -> tuple[str, str]:
    """``raw``, ``mid`` or ``final``, and why: a ``layer:`` tag wins, else the schema of its name."""
    for tag in asset.tags:
        if tag.startswith("layer:") and tag[len("layer:") :] in LAYERS:
            return tag[len("layer:") :], f"tag {tag}"
    schema = asset.name.split(".")[0].lower() if "." in asset.name else ""
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
