"""An asset as Bruin's format defines it: its header's fields, validated and built into an :class:`Asset`
(:func:`build_asset`). Reading the files they come from is ``engine/pipeline/asset_files.py``.

Parsing never stops at the first problem: every problem found is collected as
``file:line: message`` so that a user fixes them all in one go.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from engine.base.printable import shortened
from engine.pipeline import bruin_lint
from engine.pipeline.asset_types import BRUIN_TYPES, SUPPORTED_TYPES, AssetKind, kind_of
from engine.pipeline.columns import Column, CustomCheck, parse_columns, parse_custom_checks, repeated_name
from engine.pipeline.header_fields import (
    check_start_date,
    optional_str,
    parse_hooks,
    parse_secrets,
    parse_timeout,
    string_list,
)
from engine.pipeline.problems import Problems
from engine.pipeline.yamlfile import line_of

# Bruin's seed formats (pkg/ingestr/operator.go, seedFileSchemes): a file_type or an extension → the format read.
SEED_FORMATS = {
    "csv": "csv",
    "parquet": "parquet",
    "pq": "parquet",
    "json": "json",
    "jsonl": "jsonl",
    "ndjson": "jsonl",
    "avro": "avro",
}
STRATEGIES = (
    "create+replace",
    "append",
    "merge",
    "delete+insert",
    "time_interval",
    "truncate+insert",
    "ddl",
    "scd2_by_time",
    "scd2_by_column",
    "datavault_hub",
    "datavault_link",
    "datavault_satellite",
)
# Fields Bruin defines for an asset. Those we do not act on are accepted and ignored (see docs/pipelines.md).
ASSET_FIELDS = {
    "name",
    "uri",
    "type",
    "description",
    "connection",
    "owner",
    "tags",
    "domains",
    "meta",
    "depends",
    "start_date",
    "interval_modifiers",
    "rerun_cooldown",
    "materialization",
    "hooks",
    "columns",
    "custom_checks",
    "parameters",
    "secrets",
    "image",
    "instance",
    "extends",
    "full_refresh_restricted",
    "refresh_restricted",
    "enabled",
    "timeout",
    # Bruin defines these too (pkg/pipeline/yaml.go, taskDefinition); they change nothing on DuckDB here.
    "retries",
    "tier",
    "metadata",
    "notifications",
    "unit_tests",
    "routing",
    "run",
    "connections",
    "snowflake",
    "athena",
    "bigquery",
    "doris",
    "starrocks",
}
# Fields Bruin acts on when it runs an asset that we do not: accepted with a warning saying what differs.
NOT_USED_HERE = {
    "retries": "an asset is not retried on its own here; a backfill retries whole partitions (--retries)",
}
MATERIALIZATION_FIELDS = {
    "type",
    "strategy",
    "incremental_key",
    "time_granularity",
    "partition_by",
    "cluster_by",
    "incremental_predicate",
}


# Bruin's SupportedFileSuffixes (pkg/pipeline/pipeline.go), R files aside (reported as unsupported).
YAML_ASSET_SUFFIXES = (".asset.yml", ".asset.yaml", ".task.yml", ".task.yaml")
# The directories of a pipeline Bruin reads assets from (cmd/const.go, assetsDirectoryNames), in its order.
ASSET_DIRECTORIES = ("tasks", "assets")


@dataclass(frozen=True)
class Materialization:
    type: str | None  # "table", "view" or None (run the SQL as written)
    strategy: str | None
    incremental_key: str | None
    time_granularity: str | None
    incremental_predicate: str | None = None  # merge: an extra condition on the match (aliases source, target)


@dataclass
class Asset:
    name: str
    type: str
    path: Path
    relative_path: str  # POSIX path relative to the pipeline directory
    line: int  # where the header starts
    connection: str | None = None
    depends: list[tuple[str, int]] = field(default_factory=list)  # (name, line)
    tags: tuple[str, ...] = ()
    owner: str | None = None
    description: str | None = None
    materialization: Materialization = Materialization(None, None, None, None)
    columns: tuple[Column, ...] = ()
    custom_checks: tuple[CustomCheck, ...] = ()
    interval_modifiers: dict[str, str] | None = None
    hooks: dict[str, list[str]] = field(default_factory=dict)
    body: str = ""
    body_line: int = 1
    seed_path: Path | None = None  # a seed's local file
    run_file: Path | None = None  # a YAML asset's `run:`: its SQL, or the script a Python asset runs
    glossary_files: tuple[Path, ...] = ()  # the repository's glossary, when a column or the asset extends it
    seed_url: str | None = None  # or its http(s) URL
    seed_template: str | None = None  # or a path that is a template ("{{ var.region }}.csv"), rendered per run
    parameters: dict[str, Any] = field(default_factory=dict)  # as written; Bruin renders each string as a template
    seed_format: str = "csv"  # one of SEED_FORMATS' values
    seed_types: bool = True  # parameters.enforce_schema: declared column types are applied
    enabled: Any = True  # a boolean, or a template rendered per run ("{{ var.with_snapshot }}")
    timeout: int | None = None  # microseconds; the pipeline's default.timeout applies when None
    secrets: tuple[tuple[str, str], ...] = ()  # (connection name, environment variable)
    full_refresh_restricted: bool = False
    always_full_refresh: bool = False  # parameters.full_refresh: true
    digest: str = ""  # of the file's text: an asset-level resume carries a success only over the same file

    @property
    def kind(self) -> AssetKind:
        return kind_of(self.type)

    @property
    def script(self) -> Path:
        """The file that runs: a YAML asset's ``run:`` file, else the asset's own."""
        return self.run_file or self.path

    @property
    def own_files(self) -> tuple[Path, ...]:
        """The files of this asset a run reads: its definition, its ``run:`` file, its seed's local file, the
        glossary its columns extend."""
        files = (self.path, self.run_file, self.seed_path, *self.glossary_files)
        return tuple(path for path in files if path is not None)

    @property
    def has_checks(self) -> bool:
        """Whether a run checks it: Bruin runs no check of a no-op asset (``duckdb.source``, ``empty``)."""
        if self.kind == AssetKind.NO_OP:
            return False
        return bool(self.custom_checks) or any(column.checks for column in self.columns)

    @property
    def primary_key(self) -> list[str]:
        return [column.name for column in self.columns if column.primary_key]


def _default_name(relative: str) -> str:
    parts = relative.split("/")
    if parts and parts[0] in ASSET_DIRECTORIES:
        parts = parts[1:]
    stem = parts[-1]
    for suffix in (*YAML_ASSET_SUFFIXES, ".sql", ".py"):
        if stem.endswith(suffix):
            stem = stem[: -len(suffix)]
            break
    return ".".join([*parts[:-1], stem])


def build_asset(
    data: dict[str, Any],
    path: Path,
    relative: str,
    header_line: int,
    body: str,
    body_line: int,
    problems: Problems,
    run_file: Path | None = None,
) -> Asset:
    for key in data:
        if key not in ASSET_FIELDS:
            problems.warn(path, line_of(data, key), f"unknown field {key!r} (ignored)")
    for key, why in NOT_USED_HERE.items():
        if key in data:
            problems.warn(path, line_of(data, key), f"{key}: {why} (ignored)")
    default_type = "python" if path.suffix == ".py" else "duckdb.sql"
    asset_type = data.get("type", default_type)
    if not isinstance(asset_type, str) or (asset_type not in SUPPORTED_TYPES and asset_type not in BRUIN_TYPES):
        problems.add(
            path,
            line_of(data, "type"),
            f"unknown asset type {asset_type!r}: Bruin defines no such type (this runner runs "
            f"{', '.join(SUPPORTED_TYPES)})",
        )
    name = data.get("name") or _default_name(relative)
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.\-]*", name):
        problems.add(path, line_of(data, "name"), f"asset name {name!r} must be letters, digits, _ and dots")
        name = str(name)
    elif str(asset_type).startswith("duckdb.") and ("" in name.split(".") or name.count(".") > 2):
        # Bruin's lint rule asset-name-component-count (critical), DuckDB's capability: 1 to 3 parts, none empty
        problems.add(
            path,
            line_of(data, "name"),
            f"asset name {name!r} must be table, schema.table or catalog.schema.table (as Bruin checks a DuckDB name)",
        )
    asset = Asset(
        name=name,
        type=str(asset_type),
        path=path,
        relative_path=relative,
        line=header_line,
        body=body,
        body_line=body_line,
    )
    if asset.kind in (AssetKind.SQL, AssetKind.PYTHON):
        asset.run_file = run_file
    if asset.kind == AssetKind.ELSEWHERE:
        # Another platform's asset: its header is Bruin's to judge, its body another engine's SQL. Only what
        # places it in the graph is read; selecting it is refused at validation (check_pipeline).
        problems = Problems()
    asset.connection = optional_str(data, "connection", path, problems)
    asset.owner = optional_str(data, "owner", path, problems)
    asset.description = optional_str(data, "description", path, problems)
    asset.tags = tuple(string_list(data, "tags", path, problems))
    if repeated := repeated_name(asset.tags):  # Bruin's lint rule duplicate-tags (critical), without case
        problems.add(
            path, line_of(data, "tags"), f"tag {repeated!r} is given twice (as Bruin reads tags, without case)"
        )
    tier = data.get("tier")
    if tier is not None and (not isinstance(tier, int) or isinstance(tier, bool) or not 0 <= tier <= 5):
        problems.add(path, line_of(data, "tier"), f"tier {tier!r} must be between 1 and 5 (as in Bruin)")
    asset.depends = _depends(data, path, problems)
    asset.materialization = _materialization(data, path, problems)
    asset.columns = parse_columns(data, path, problems)
    asset.custom_checks = parse_custom_checks(data, path, problems)
    asset.interval_modifiers = _interval_modifiers(data, path, problems)
    asset.hooks = parse_hooks(data, path, problems)
    asset.enabled = _enabled(data, path, problems)
    asset.timeout = parse_timeout(data, path, problems)
    asset.secrets = parse_secrets(data, path, problems)
    bruin_lint.check_asset_notifications(data, path, problems)
    restricted = data.get("full_refresh_restricted", data.get("refresh_restricted", False))
    if not isinstance(restricted, bool):
        problems.add(path, line_of(data, "full_refresh_restricted"), "full_refresh_restricted must be true or false")
    asset.full_refresh_restricted = restricted is True
    check_start_date(data, path, problems, f"asset {name!r}")  # validated; a DuckDB run never reads it (as Bruin)
    parameters = data.get("parameters")
    if isinstance(parameters, dict):
        asset.parameters = dict(parameters)
    if isinstance(parameters, dict) and "full_refresh" in parameters:
        flag = parameters["full_refresh"]
        if not isinstance(flag, bool) and str(flag).lower() not in ("true", "false"):
            problems.add(path, line_of(parameters, "full_refresh"), "parameters.full_refresh must be true or false")
        asset.always_full_refresh = flag is True or str(flag).lower() == "true"
    _check_strategy_needs(asset, data, problems)
    if asset.kind == "seed":
        _read_seed_parameters(asset, data, path, problems)
    if asset.kind == "python" and any(asset.hooks.values()):  # Bruin's lint rule script-hooks-unsupported: critical
        problems.add(
            path,
            line_of(data, "hooks"),
            "hooks are supported only for SQL assets (as in Bruin): a Python asset's hooks would never run",
        )
    if asset.kind == "python" and asset.materialization.type is not None:
        problems.add(
            path,
            line_of(data, "materialization"),
            "materialization of Python assets (materialize() returning a DataFrame) is not supported: "
            "write to DuckDB from the script using BRUIN_DUCKDB_PATH",
        )
    return asset


def _enabled(data: dict[str, Any], path: Path, problems: Problems) -> Any:
    value = data.get("enabled", True)
    if isinstance(value, bool) or (isinstance(value, str) and "{" in value):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    problems.add(path, line_of(data, "enabled"), f"enabled {value!r} must be true, false or a template")
    return True


def enabled_value(rendered: str) -> bool | None:
    """What a rendered ``enabled`` template means: True, False, or None when it is neither."""
    text = rendered.strip().lower()
    return {"true": True, "false": False, "1": True, "0": False, "yes": True, "no": False}.get(text)


def enabled_by(asset: Asset, variables: dict[str, Any]) -> bool:
    """Whether the asset runs with these variables, judged before any run (a template that reads more than the
    variables counts as enabled: the run decides — even when it guards the window with ``is defined`` or
    ``default``, which would read false here and true in a later partition)."""
    if isinstance(asset.enabled, bool):
        return asset.enabled
    from engine.pipeline.templating import TemplateProblem, names_read, render

    try:
        if names_read(asset.enabled) - {"var"}:
            return True
        meaning = enabled_value(render(asset.enabled, {"var": variables}))
    except TemplateProblem:
        return True
    return True if meaning is None else meaning


def _depends(data: dict[str, Any], path: Path, problems: Problems) -> list[tuple[str, int]]:
    raw = data.get("depends") or []
    if not isinstance(raw, list):
        problems.add(path, line_of(data, "depends"), "depends must be a list")
        return []
    result = []
    for position, entry in enumerate(raw):
        line = line_of(raw, position) or line_of(data, "depends")
        if isinstance(entry, str):
            result.append((entry, line))
        elif isinstance(entry, dict) and isinstance(entry.get("asset"), str):
            if entry.get("mode", "full") == "symbolic":
                continue
            result.append((entry["asset"], line))
        elif isinstance(entry, dict) and "uri" in entry:
            problems.add(path, line, "dependencies on another pipeline (uri) are not supported")
        else:
            problems.add(path, line, "each dependency must be an asset name or {asset: name}")
    return result


def _materialization(data: dict[str, Any], path: Path, problems: Problems) -> Materialization:
    raw = data.get("materialization")
    if raw is None:
        return Materialization(None, None, None, None)
    if not isinstance(raw, dict):
        problems.add(path, line_of(data, "materialization"), "materialization must be a mapping")
        return Materialization(None, None, None, None)
    for key in raw:
        if key not in MATERIALIZATION_FIELDS:
            problems.warn(path, line_of(raw, key), f"unknown field 'materialization.{key}' (ignored)")
    kind = raw.get("type")
    if kind not in ("table", "view", None):
        problems.add(path, line_of(raw, "type"), f"materialization type {kind!r} must be table or view")
    strategy = raw.get("strategy")
    if strategy is not None:
        strategy = str(strategy).lower()
        if strategy not in STRATEGIES:
            problems.add(
                path,
                line_of(raw, "strategy"),
                f"unknown strategy {raw['strategy']!r} (supported: {', '.join(STRATEGIES)})",
            )
        if kind == "view":
            problems.add(path, line_of(raw, "strategy"), "a view has no strategy")
    for name, message, fatal in bruin_lint.materialization_problems(raw, kind, strategy):
        (problems.add if fatal else problems.warn)(path, line_of(raw, name), message)
    if kind == "table" and strategy is None:
        strategy = "create+replace"
    granularity = raw.get("time_granularity")
    if granularity is not None and granularity not in ("date", "timestamp"):
        problems.add(
            path, line_of(raw, "time_granularity"), f"time_granularity {granularity!r} must be date or timestamp"
        )
    predicate = raw.get("incremental_predicate")
    if predicate is not None and (not isinstance(predicate, str) or not predicate.strip()):
        problems.add(path, line_of(raw, "incremental_predicate"), "incremental_predicate must be an SQL expression")
        predicate = None
    if predicate and strategy != "merge":
        problems.add(
            path, line_of(raw, "incremental_predicate"), "incremental_predicate applies only to strategy merge"
        )
    return Materialization(kind, strategy, raw.get("incremental_key"), granularity, predicate)


def _check_strategy_needs(asset: Asset, data: dict[str, Any], problems: Problems) -> None:
    m = asset.materialization
    raw = data.get("materialization") if isinstance(data.get("materialization"), dict) else {}
    line = line_of(raw, "strategy") or line_of(data, "materialization")
    if m.strategy in ("delete+insert", "time_interval") and not m.incremental_key:
        problems.add(asset.path, line, f"strategy {m.strategy} needs materialization.incremental_key")
    if m.strategy == "time_interval" and not m.time_granularity:
        problems.add(asset.path, line, "strategy time_interval needs time_granularity: date or timestamp")
    if m.strategy == "merge" and not asset.primary_key:
        problems.add(asset.path, line, "strategy merge needs columns marked primary_key: true")
    if m.strategy == "ddl":
        if not asset.columns:
            problems.add(asset.path, line, "strategy ddl creates the table from columns: declare them")
        if asset.body.strip():
            problems.add(asset.script, asset.body_line, "strategy ddl takes no query: remove the SQL after the header")
    if m.strategy in ("scd2_by_time", "scd2_by_column"):
        if not asset.primary_key:
            problems.add(asset.path, line, f"strategy {m.strategy} needs columns marked primary_key: true")
        if m.strategy == "scd2_by_time" and not m.incremental_key:
            problems.add(asset.path, line, "strategy scd2_by_time needs materialization.incremental_key")
        for column in asset.columns:
            if column.name in ("_valid_from", "_valid_until", "_is_current"):
                problems.add(asset.path, line, f"column name {column.name} is reserved by {m.strategy}")
            if column.name == m.incremental_key and column.type and column.type.lower() not in ("timestamp", "date"):
                problems.add(
                    asset.path,
                    line,
                    f"incremental_key {column.name} is {column.type}: {m.strategy} needs TIMESTAMP or DATE",
                )
    if asset.kind == "sql" and m.strategy != "ddl" and not asset.body.strip():
        yaml_asset = asset.path.name.endswith(YAML_ASSET_SUFFIXES)
        problems.add(
            asset.path,
            asset.body_line,
            "the asset has no SQL: name its file with run:"
            if yaml_asset
            else "the asset has no SQL after its @bruin header",
        )
    _check_templates(asset, problems)


def _check_templates(asset: Asset, problems: Problems) -> None:
    """A template that cannot be parsed (an unclosed ``{{``, a stray ``{% endif %}``) is a validation problem at
    planning, with its file and line — never the failure of a partition after the snapshot was taken."""
    from engine.pipeline.templating import syntax_problem

    if asset.kind == "sql":
        problem = syntax_problem(asset.body)
        if problem is not None:
            problems.add(asset.script, asset.body_line + problem[0] - 1, problem[1])
    for phase, hooks in asset.hooks.items():
        for hook in hooks:
            problem = syntax_problem(hook)
            if problem is not None:
                problems.add(asset.path, 0, f"{phase} hook: {problem[1]}")


def _interval_modifiers(data: dict[str, Any], path: Path, problems: Problems) -> dict[str, str] | None:
    raw = data.get("interval_modifiers")
    if raw is None:
        return None
    if not isinstance(raw, dict) or any(key not in ("start", "end") for key in raw):
        problems.add(path, line_of(data, "interval_modifiers"), "interval_modifiers takes only start and end")
        return None
    return {key: str(value) for key, value in raw.items()}


def _read_seed_parameters(asset: Asset, data: Any, path: Path, problems: Problems) -> None:
    """A seed's ``path`` (a file beside the asset, or an http(s) URL), its format (``file_type``, else the
    extension, else CSV as in Bruin) and ``enforce_schema``."""
    parameters = data.get("parameters")
    parameters = parameters if isinstance(parameters, dict) else {}
    seed = parameters.get("path")
    if not isinstance(seed, str) or not seed.strip():
        problems.add(path, line_of(data, "parameters"), "a seed asset needs parameters.path (a file or an http(s) URL)")
        return
    file_type = parameters.get("file_type")
    if file_type is not None:
        token = str(file_type).strip().lower()
        if token not in SEED_FORMATS:
            problems.add(
                path,
                line_of(parameters, "file_type"),
                f"unsupported seed file_type {file_type!r}: use one of {', '.join(SEED_FORMATS)}",
            )
            return
        asset.seed_format = SEED_FORMATS[token]
    else:
        extension = PurePosixPath(seed.split("?", 1)[0]).suffix.lstrip(".").lower()
        asset.seed_format = SEED_FORMATS.get(extension, "csv")  # Bruin reads any other extension as CSV
    enforce = parameters.get("enforce_schema", True)
    if not isinstance(enforce, bool) and str(enforce).lower() not in ("true", "false"):
        problems.add(path, line_of(parameters, "enforce_schema"), "parameters.enforce_schema must be true or false")
    asset.seed_types = enforce is True or str(enforce).lower() == "true"
    if "{{" in seed or "{%" in seed:  # Bruin renders parameters as templates: found (or not) when it runs
        asset.seed_template = seed
        return
    if seed.lower().startswith(("http://", "https://")):
        asset.seed_url = seed
        return
    asset.seed_path = (path.parent / seed).resolve()
    try:
        found = asset.seed_path.is_file()
    except OSError as error:  # a name too long for a file, a loop of links
        shown = shortened(seed)
        problems.add(path, line_of(parameters, "path"), f"seed file {shown!r} cannot be looked up ({error.strerror})")
        return
    if not found:
        problems.add(path, line_of(parameters, "path"), f"seed file {seed!r} does not exist")
