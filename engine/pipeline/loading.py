"""A pipeline: ``pipeline.yml`` plus its assets, validated as a whole before anything runs."""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from engine.base.errors import BadInput
from engine.pipeline import bruin_lint
from engine.pipeline.asset_files import is_asset_file, read_asset
from engine.pipeline.assets import ASSET_DIRECTORIES, NOT_USED_HERE, Asset
from engine.pipeline.datavault import datavault_roles
from engine.pipeline.defaults import DEFAULT_FIELDS
from engine.pipeline.glossary import GLOSSARY_FILES, Glossary, read_glossary
from engine.pipeline.header_fields import check_start_date, parse_hooks, parse_secrets, parse_timeout, string_list
from engine.pipeline.problems import Problems
from engine.pipeline.repository import pipeline_file, repository_root
from engine.pipeline.templating import syntax_problem
from engine.pipeline.yamlfile import Located, line_of, parse_yaml

PIPELINE_FIELDS = {
    "name",
    "schedule",
    "start_date",
    "default_connections",
    "tags",
    "domains",
    "meta",
    "variables",
    "default",
    "notifications",
    "catchup",
    "metadata_push",
    "retries",
    "concurrency",
    "owner",
    "description",
    "agent",
    "variants",
    "max_active_steps",
    # Bruin defines these too (pkg/pipeline/pipeline.go, Pipeline); they change nothing here.
    "id",
    "commit",
    "snapshot",
    "macros",
    "fixtures",
}
VARIANT_NAME = re.compile(r"[A-Za-z0-9_-]+", re.ASCII)
VARIABLE_TYPES = {
    "string": str,
    "integer": int,
    "number": (int, float),
    "boolean": bool,
    "array": list,
    "object": dict,
    "null": type(None),
}


@dataclass
class Pipeline:
    name: str
    directory: Path
    file: Path
    default_connection: str | None
    tags: tuple[str, ...]
    variables: dict[str, dict[str, Any]]  # declared schemas
    default_interval_modifiers: dict[str, str] | None
    assets: dict[str, Asset] = field(default_factory=dict)
    downstream: dict[str, list[str]] = field(default_factory=dict)
    variants: dict[str, dict[str, Any]] = field(default_factory=dict)
    name_template: str | None = None  # a templated name ("{{ var.client }}_pipe"), rendered per run
    default_timeout: int | None = None  # microseconds, for assets without their own
    macros: str = ""  # every macros/*.sql, in name order
    schema_prefix: str | None = None  # set by with_schema_prefix: asset names already carry it
    schedule: str | None = None  # pipeline.yml's schedule (hourly, daily, … or cron): what the guardrails compare
    warnings: tuple[str, ...] = ()  # fields read but not understood (Problems.warn): shown, never fatal

    def with_schema_prefix(self, prefix: str | None) -> Pipeline:
        """The pipeline as a schema-prefixed environment runs it: every asset (and every reference to one in
        depends and foreign keys) named with the prefix on its schema."""
        if not prefix:
            return self
        from engine.pipeline.schema_prefix import prefixed_name

        rename = {name: prefixed_name(name, prefix) for name in self.assets}
        assets = {}
        for name, asset in self.assets.items():
            columns = tuple(
                replace(c, foreign_key=(rename.get(c.foreign_key[0], c.foreign_key[0]), c.foreign_key[1]))
                if c.foreign_key
                else c
                for c in asset.columns
            )
            depends = [(rename.get(dependency, dependency), line) for dependency, line in asset.depends]
            assets[rename[name]] = replace(asset, name=rename[name], depends=depends, columns=columns)
        downstream = {rename[name]: [rename[c] for c in children] for name, children in self.downstream.items()}
        return replace(self, assets=assets, downstream=downstream, schema_prefix=prefix)

    def with_full_refresh_restricted(self) -> Pipeline:
        """The pipeline as an environment with ``config.full_refresh_restricted`` runs it: Bruin marks every
        asset restricted, so ``--full-refresh`` drops no table and each runs its own strategy."""
        assets = {name: replace(asset, full_refresh_restricted=True) for name, asset in self.assets.items()}
        return replace(self, assets=assets)

    def with_variables(self, values: dict[str, Any]) -> Pipeline:
        """The pipeline as one run sees it: templated identity fields rendered with the run's variables."""
        if self.name_template is None:
            return self
        from engine.pipeline.templating import TemplateProblem, render

        try:
            name = render(self.name_template, {"var": values}).strip()
        except TemplateProblem as error:
            raise BadInput(f"{self.file}: name: {error}") from None
        if name and (problem := bruin_lint.name_problem(name)):
            raise BadInput(f"{self.file}: {problem}")
        return replace(self, name=name or self.directory.name)

    def upstream(self, name: str) -> list[str]:
        return [dependency for dependency, _ in self.assets[name].depends]

    def downstream_of(self, selected: set[str]) -> set[str]:
        """Every asset downstream of ``selected`` that is not itself selected (what reads what they write)."""
        found: set[str] = set()
        frontier = list(selected)
        while frontier:
            for child in self.downstream.get(frontier.pop(), []):
                if child not in selected and child not in found:
                    found.add(child)
                    frontier.append(child)
        return found

    def connection_of(self, asset: Asset) -> str | None:
        """The asset's connection; Python assets have one only when they name it (as in Bruin)."""
        if asset.kind == "python":
            return asset.connection
        return asset.connection or self.default_connection

    def resolve_variables(self, overrides: dict[str, Any], variant: str | None = None) -> dict[str, Any]:
        """Declared defaults, overlaid by overrides (each checked against its declared schema: a rule of ours),
        overlaid by the variant's values: as in Bruin (variableOverridesMutator), a variant's value wins over a
        --var for the same variable (``overridden_by_variant`` names those, for a warning)."""
        values = {name: schema.get("default") for name, schema in self.variables.items()}
        if self.variants and variant is None:
            names = ", ".join(sorted(self.variants))
            raise BadInput(f"pipeline {self.name!r} declares variants ({names}): pick one with --variant")
        if variant is not None:
            if not self.variants:
                raise BadInput(f"--variant {variant!r} means nothing: pipeline {self.name!r} declares no variants")
            if variant not in self.variants:
                raise BadInput(
                    f"--variant {variant!r} is not a variant of pipeline {self.name!r} "
                    f"(variants: {', '.join(sorted(self.variants))})"
                )
        for name, value in overrides.items():
            if name not in self.variables:
                known = ", ".join(sorted(self.variables)) or "none"
                raise BadInput(f"--var {name!r} is not declared in {self.file} (declared variables: {known})")
            problem = schema_problem(value, self.variables[name])
            if problem:
                raise BadInput(
                    f"--var {name}={_short(value)} {problem} (a rule of backfill's, stricter than Bruin's: a value "
                    "outside its declaration would render SQL the pipeline's author did not write)"
                )
            values[name] = value
        if variant is not None:
            values.update(self.variants[variant])
        return values

    def overridden_by_variant(self, overrides: dict[str, Any], variant: str | None) -> list[str]:
        """The --var names the variant sets too: their --var value is ignored, as Bruin ignores it."""
        return sorted(set(overrides) & set(self.variants.get(variant, {}))) if variant else []


def _short(value: Any) -> str:
    import orjson

    return orjson.dumps(value).decode()[:60]


def declaration_problem(schema: dict[str, Any]) -> str | None:
    """Why a variable's JSON-schema-style declaration cannot be read (a keyword of the wrong kind), or None."""
    expected = schema.get("type")
    if expected is not None and (not isinstance(expected, str) or expected not in VARIABLE_TYPES):
        return f"has unknown type {expected!r}"
    if "enum" in schema and not isinstance(schema["enum"], list):
        return f"declares enum {_short(schema['enum'])}, which is not a list"
    for bound in ("minimum", "maximum"):
        if bound in schema and (not isinstance(schema[bound], int | float) or isinstance(schema[bound], bool)):
            return f"declares {bound} {_short(schema[bound])}, which is not a number"
    items = schema.get("items")
    if items is not None:
        if not isinstance(items, dict):
            return f"declares items {_short(items)}, which is not a mapping"
        problem = declaration_problem(items)
        if problem:
            return f"declares items whose declaration {problem}"
    return None


def schema_problem(value: Any, schema: dict[str, Any]) -> str | None:
    """Why ``value`` does not fit a JSON-schema-style declaration (read by :func:`declaration_problem` first), or
    None."""
    expected = schema.get("type")
    if expected in VARIABLE_TYPES:
        python_type = VARIABLE_TYPES[expected]
        wrong_bool = isinstance(value, bool) and expected in ("integer", "number")
        if wrong_bool or not isinstance(value, python_type):
            return f"is not of the declared type {expected}"
    if "enum" in schema and value not in schema["enum"]:
        return f"is not one of the declared values {schema['enum']}"
    if isinstance(value, int | float) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            return f"is below the declared minimum {schema['minimum']}"
        if "maximum" in schema and value > schema["maximum"]:
            return f"is above the declared maximum {schema['maximum']}"
    if expected == "array" and isinstance(schema.get("items"), dict):
        for item in value:
            problem = schema_problem(item, schema["items"])
            if problem:
                return f"has an item {_short(item)} that {problem}"
    return None


class PipelineCache:
    """Parsed pipelines kept by a long-lived process (the warm runner), read again as soon as any file under
    the pipeline changed (its path, inode, size, modification or change time)."""

    def __init__(self) -> None:
        self.enabled = False
        self._entries: dict[Path, tuple[tuple[tuple[str, int, int, int, int], ...], Pipeline]] = {}

    def load(self, directory: Path) -> Pipeline:
        if not self.enabled:
            return load_pipeline(directory)
        signature = _files_signature(directory)
        cached = self._entries.get(directory)
        if cached is not None and cached[0] == signature:
            return cached[1]
        pipeline = load_pipeline(directory)
        self._entries[directory] = (signature, pipeline)
        return pipeline


def _files_signature(directory: Path) -> tuple[tuple[str, int, int, int, int], ...]:
    """Every file under the pipeline, and the repository's glossary (outside it, and read with it)."""
    found = []
    repository = repository_root(directory)
    for path in [repository / name for name in GLOSSARY_FILES] if repository is not None else []:
        with contextlib.suppress(OSError):
            info = os.stat(path)
            found.append((str(path), info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns))
    for root, directories, files in os.walk(directory):
        directories[:] = sorted(d for d in directories if not d.startswith("."))
        for name in sorted(files):
            try:
                info = os.stat(os.path.join(root, name))
            except OSError:
                continue
            found.append((os.path.join(root, name), info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns))
    return tuple(found)


PIPELINES = PipelineCache()


def load_pipeline(directory: Path) -> Pipeline:
    """Read ``pipeline.yml`` and every asset under the pipeline; raise listing every problem found."""
    problems = Problems()
    path = pipeline_file(directory)
    if path is None:
        raise BadInput(f"{directory} has no pipeline.yml")
    try:
        data = parse_yaml(path.read_text(encoding="utf-8"), str(path))
    except BadInput as error:
        problems.items.append(str(error))
        data = Located()
        data.lines, data.line = {}, 1
    if data is None:
        data = Located()
        data.lines, data.line = {}, 1
    if not isinstance(data, dict):
        problems.add(path, 1, "pipeline.yml must be a mapping")
        data = Located()
        data.lines, data.line = {}, 1
    for key in data:
        if key not in PIPELINE_FIELDS:
            problems.warn(path, line_of(data, key), f"unknown field {key!r} (ignored)")
    if "retries" in data:
        problems.warn(path, line_of(data, "retries"), f"retries: {NOT_USED_HERE['retries']} (ignored)")
    connections = data.get("default_connections") or {}
    if not isinstance(connections, dict):
        problems.add(path, line_of(data, "default_connections"), "default_connections must map a platform to a name")
        connections = {}
    variables = data.get("variables") or {}
    if not isinstance(variables, dict):
        problems.add(path, line_of(data, "variables"), "variables must map names to JSON-schema declarations")
        variables = {}
    unreadable: set[str] = set()  # declarations refused: a variant's value is not judged against them
    for name, schema in variables.items():
        line = line_of(variables, name)
        if not isinstance(schema, dict) or "default" not in schema:
            problems.add(path, line, f"variable {name!r} needs a default")
            continue
        declared = declaration_problem(schema)
        if declared:
            problems.add(path, line, f"variable {name!r} {declared}")
            unreadable.add(name)
            continue
        problem = schema_problem(schema["default"], schema)
        if problem:
            problems.add(path, line, f"the default of variable {name!r} {problem}")
    default = data.get("default") or {}
    if not isinstance(default, dict):
        problems.add(path, line_of(data, "default"), "default must be a mapping")
        default = Located()
        default.lines, default.line = {}, line_of(data, "default")
    for key in default:
        if key not in DEFAULT_FIELDS:
            problems.warn(path, line_of(default, key), f"unknown field 'default.{key}' (ignored)")
    if "retries" in default:
        problems.warn(path, line_of(default, "retries"), f"default.retries: {NOT_USED_HERE['retries']} (ignored)")
    bruin_lint.check_pipeline(data, default, path, problems)
    modifiers = default.get("interval_modifiers")
    check_start_date(
        data, path, problems, f"pipeline {str(data.get('name') or directory.name)!r}"
    )  # validated; `bruin run` never reads it
    raw_name = str(data.get("name") or directory.name)
    if "{" not in raw_name and (problem := bruin_lint.name_problem(raw_name)):
        problems.add(path, line_of(data, "name"), problem)
    pipeline = Pipeline(
        name=raw_name,
        directory=directory,
        file=path,
        default_connection=connections.get("duckdb") or "duckdb-default",
        tags=tuple(string_list(data, "tags", path, problems)),
        variables=dict(variables),
        default_interval_modifiers={k: str(v) for k, v in modifiers.items()} if isinstance(modifiers, dict) else None,
        variants=_variants(data, variables, unreadable, path, problems),
        name_template=raw_name if "{" in raw_name else None,
        default_timeout=parse_timeout(default, path, problems),
        macros=_macros(directory, problems),
        schedule=str(data["schedule"]).strip().lower() if data.get("schedule") else None,
    )
    if pipeline.name_template is not None:
        defaults = {name: schema.get("default") for name, schema in variables.items() if isinstance(schema, dict)}
        try:
            pipeline.name = pipeline.with_variables(defaults).name
        except BadInput as error:
            problems.items.append(str(error))
    parse_secrets(default, path, problems)  # their shape is checked here, once; each asset gets them merged
    parse_hooks(default, path, problems)
    _read_assets(pipeline, problems, default, read_glossary(repository_root(directory), problems))
    _check_graph(pipeline, problems)
    problems.raise_if_any(f"pipeline {pipeline.name!r}")
    pipeline.warnings = tuple(problems.warnings)
    return pipeline


def _variants(
    data: dict[str, Any], variables: dict[str, Any], unreadable: set[str], path: Path, problems: Problems
) -> dict[str, dict[str, Any]]:
    raw = data.get("variants") or {}
    if not isinstance(raw, dict):
        problems.add(path, line_of(data, "variants"), "variants must map names to variable values")
        return {}
    found: dict[str, dict[str, Any]] = {}
    for name, values in raw.items():
        line = line_of(raw, name)
        if not isinstance(name, str) or not VARIANT_NAME.fullmatch(name):
            problems.add(path, line, f"variant name {name!r} must be letters, digits, '_' and '-'")
            continue
        if values is None:
            values = {}
        if not isinstance(values, dict):
            problems.add(path, line, f"variant {name!r} must map variable names to values")
            continue
        for variable, value in values.items():
            if variable not in variables or not isinstance(variables[variable], dict):
                problems.add(
                    path,
                    line_of(values, variable) or line,
                    f"variant {name!r} references unknown variable {variable!r}",
                )
                continue
            if variable in unreadable:  # its declaration is listed at the variable's own line
                continue
            problem = schema_problem(value, variables[variable])
            if problem:
                problems.add(path, line_of(values, variable) or line, f"variant {name!r}: {variable} {problem}")
        found[name] = dict(values)
    return found


def _macros(directory: Path, problems: Problems) -> str:
    """The pipeline's ``macros/*.sql`` (any depth), loaded in name order so that later files may use earlier ones."""
    folder = directory / "macros"
    if not folder.is_dir():
        return ""
    texts = []
    for path in sorted(folder.rglob("*.sql")):
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            problems.add(path, 0, f"cannot read the macro file: {error}")
            continue
        problem = syntax_problem(text)
        if problem:
            problems.add(path, *problem)
        texts.append(text)
    return "\n".join(texts)


def _read_assets(pipeline: Pipeline, problems: Problems, defaults: dict[str, Any], glossary: Glossary) -> None:
    """Every asset under ``tasks/`` and ``assets/``, as Bruin discovers them, their columns extended from the
    repository's glossary."""
    roots = [pipeline.directory / name for name in ASSET_DIRECTORIES if (pipeline.directory / name).is_dir()]
    candidates = [p for root in roots for p in sorted(root.rglob("*")) if p.is_file() and is_asset_file(p)]
    for path in sorted(p for root in roots for p in root.rglob("*.[rR]")):
        try:
            declares = "@bruin" in path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            declares = False
        if declares:
            problems.add(path, 1, "R assets are not supported: the embedded runner runs DuckDB SQL, seeds and Python")
    first_seen: dict[str, Asset] = {}
    for path in candidates:
        asset = read_asset(path, pipeline.directory, problems, defaults, glossary)
        if asset is None:
            continue
        if pipeline.macros:  # a macro an asset renders is part of its definition (an asset-level resume reads it)
            asset.digest = hashlib.sha256(f"{asset.digest}\0{pipeline.macros}".encode()).hexdigest()[:16]
        if asset.name in first_seen:
            problems.add(
                path, asset.line, f"duplicate asset name {asset.name!r} (also defined in {first_seen[asset.name].path})"
            )
            continue
        first_seen[asset.name] = asset
        if (asset.materialization.strategy or "").startswith("datavault_"):
            for problem in datavault_roles(asset)[1]:
                problems.add(asset.path, asset.line, problem)
    pipeline.assets = first_seen


def _check_graph(pipeline: Pipeline, problems: Problems) -> None:
    downstream: dict[str, list[str]] = {name: [] for name in pipeline.assets}
    for asset in pipeline.assets.values():
        for dependency, line in asset.depends:
            if dependency not in pipeline.assets:
                problems.add(asset.path, line, f"dependency {dependency!r} is not an asset of this pipeline")
            elif dependency == asset.name:
                problems.add(asset.path, line, f"asset {asset.name!r} depends on itself")
            else:
                downstream[dependency].append(asset.name)
    pipeline.downstream = downstream
    for asset in pipeline.assets.values():
        for column in asset.columns:
            if not column.foreign_key:
                continue
            table, target = column.foreign_key
            if table not in pipeline.assets:
                problems.add(
                    asset.path,
                    asset.line,
                    f"foreign_key of column {column.name!r} names {table!r}, not an asset of this pipeline",
                )
                continue
            declared = {c.name.lower() for c in pipeline.assets[table].columns}
            if declared and target.lower() not in declared:  # Bruin checks it when the asset declares columns
                problems.add(
                    asset.path,
                    asset.line,
                    f"foreign_key of column {column.name!r} names '{table}.{target}', a column {table} does not "
                    "declare (as Bruin checks it)",
                )
    for cycle in _cycles(pipeline):
        first = pipeline.assets[cycle[0]]
        line = next((line for dep, line in first.depends if dep == cycle[1 % len(cycle)]), first.line)
        problems.add(first.path, line, "dependency cycle: " + " -> ".join([*cycle, cycle[0]]))


def _cycles(pipeline: Pipeline) -> list[list[str]]:
    """One representative of each dependency cycle (asset depends on ... depends on asset)."""
    state: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []
    seen_members: set[frozenset[str]] = set()

    def visit(name: str) -> None:
        state[name] = 1
        stack.append(name)
        for dependency in pipeline.upstream(name):
            if dependency not in pipeline.assets or dependency == name:
                continue
            if state.get(dependency) == 1:
                cycle = stack[stack.index(dependency) :]
                key = frozenset(cycle)
                if key not in seen_members:
                    seen_members.add(key)
                    found.append(cycle)
            elif dependency not in state:
                visit(dependency)
        stack.pop()
        state[name] = 2

    for name in sorted(pipeline.assets):
        if name not in state:
            visit(name)
    return found
