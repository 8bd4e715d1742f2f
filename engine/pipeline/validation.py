"""Everything that makes a pipeline run impossible, found before anything runs.

Used by `backfill run` before it executes, and by backfills before they save a
store or start a child: a broken asset, an undeclared variable, a selector that
selects nothing or an undefined connection fails once, up front, instead of once
per partition.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from engine.base.errors import BadInput, NothingToRun
from engine.pipeline.asset_types import SUPPORTED_TYPES, AssetKind
from engine.pipeline.config import Config, Environment
from engine.pipeline.loading import PIPELINES, Pipeline
from engine.pipeline.problems import Problems
from engine.pipeline.repository import Target
from engine.pipeline.selection import select_assets

if TYPE_CHECKING:
    from engine.pipeline.options import RunOptions


@dataclass(frozen=True)
class CheckedPipeline:
    pipeline: Pipeline
    variables: dict[str, Any]
    selected: set[str]
    notes: list[str]
    # What we read but do not understand (keys of .bruin.yml, fields of the pipeline): shown once per run,
    # listed by --dry-run, never a reason to stop.
    warnings: tuple[str, ...] = ()


def check_pipeline(target: Target, config: Config, environment: Environment, options: RunOptions) -> CheckedPipeline:
    """Load and validate the pipeline, the variable overrides, the selection and the connections it needs."""
    pipeline = PIPELINES.load(target.pipeline_dir)
    resolved = pipeline.resolve_variables(options.variables, options.variant)
    pipeline = pipeline.with_variables(resolved)
    if not pipeline.assets and not target.is_asset:
        given = options.selector or options.tags or options.exclude_tags
        if not given:
            raise NothingToRun(f"nothing to run: pipeline {pipeline.name!r} ({target.pipeline_dir}) has no assets")
    target_asset = None
    if target.is_asset:
        target_asset = next((n for n, a in pipeline.assets.items() if a.path == target.path), None)
        if target_asset is None:
            raise BadInput(f"{target.path} is not an asset (no @bruin header)")
    selection_warnings: list[str] = []
    selected = select_assets(
        pipeline,
        target_asset=target_asset,
        downstream=options.downstream,
        selectors=options.selector,
        tags=options.tags,
        exclude_tags=options.exclude_tags,
        warnings=selection_warnings,
    )
    problems = Problems()
    for name in sorted(selected):
        asset = pipeline.assets[name]
        if asset.kind == AssetKind.ELSEWHERE:
            problems.add(
                asset.path,
                asset.line,
                f"asset {name} is a {asset.type} asset, which this runner cannot run (it runs "
                f"{', '.join(SUPPORTED_TYPES)}): leave it out with --exclude-tag, a selector or a single-asset target",
            )
            continue
        if asset.type == "empty":
            continue  # Bruin runs nothing for it, on no connection
        for key, _variable in asset.secrets:
            if environment.connection(key) is None:
                problems.add(
                    asset.path,
                    asset.line,
                    f"secret {key!r} is not a connection of environment {environment.name!r} of {config.path}",
                )
        if asset.kind == "seed":
            from engine.pipeline.seeds import missing_extension  # DuckDB is imported only for such a seed

            missing = missing_extension(asset)
            if missing is not None:
                problems.add(asset.path, asset.line, f"seed {name}: {missing}")
        connection_name = pipeline.connection_of(asset)
        if asset.kind == "python" and connection_name is None:
            continue
        connection = environment.connection(connection_name or "")
        if connection is None:
            problems.add(
                asset.path,
                asset.line,
                f"connection {connection_name!r} is not defined in environment {environment.name!r} of {config.path}",
            )
        elif connection.kind == "duckdb" and dict(connection.details).get("lakehouse") is not None:
            problems.add(
                asset.path,
                asset.line,
                f"connection {connection_name!r} is a DuckDB lakehouse (Iceberg or DuckLake), which the embedded "
                "runner does not attach: its tables live in the catalog, not in the file (run it with Bruin)",
            )
        elif connection.kind != "duckdb":
            problems.add(
                asset.path,
                asset.line,
                f"connection {connection_name!r} is a {connection.kind} connection; the embedded runner "
                "runs DuckDB only",
            )
    problems.raise_if_any(f"pipeline {pipeline.name!r}")
    if environment.schema_prefix:
        from engine.pipeline.schema_prefix import prefixed_name

        pipeline = pipeline.with_schema_prefix(environment.schema_prefix)
        selected = {prefixed_name(name, environment.schema_prefix) for name in selected}
    if environment.full_refresh_restricted:
        pipeline = pipeline.with_full_refresh_restricted()
    notes = []
    if not options.apply_interval_modifiers and (
        pipeline.default_interval_modifiers or any(pipeline.assets[n].interval_modifiers for n in selected)
    ):
        notes.append("interval modifiers are ignored (pass --apply-interval-modifiers to apply them)")
    ignored = [
        f"--var {name} is ignored: variant {options.variant!r} sets it, and a variant's value wins (as in Bruin)"
        for name in pipeline.overridden_by_variant(options.variables, options.variant)
    ]
    warnings = (*config.warnings, *environment.warnings, *pipeline.warnings, *selection_warnings, *ignored)
    return CheckedPipeline(pipeline, resolved, selected, notes, warnings)


def check_asset_flag(pipeline: Pipeline, name: str) -> None:
    """``--asset NAME`` names an asset of ``pipeline`` (a rerun, a mark of one asset)."""
    names = sorted(pipeline.assets)
    if name not in names:
        raise BadInput(f"--asset {name!r} is not an asset of this pipeline: give one of {', '.join(names[:10])}")
