"""A pipeline: ``pipeline.yml`` plus its assets, validated as a whole before anything runs."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.base.errors import BadInput
from engine.pipeline.assets import Asset, Problems, is_asset_file, read_asset
from engine.pipeline.repository import pipeline_file
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
}
VARIABLE_TYPES = {"string": str, "integer": int, "number": (int, float), "boolean": bool, "array": list, "object": dict}


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

    def upstream(self, name: str) -> list[str]:
        return [dependency for dependency, _ in self.assets[name].depends]

    def connection_of(self, asset: Asset) -> str | None:
        """The asset's connection; Python assets have one only when they name it (as in Bruin)."""
        if asset.kind == "python":
            return asset.connection
        return asset.connection or self.default_connection

    def resolve_variables(self, overrides: dict[str, Any]) -> dict[str, Any]:
        """Declared defaults overlaid by overrides, each override checked against its declared schema."""
        values = {name: schema.get("default") for name, schema in self.variables.items()}
        for name, value in overrides.items():
            if name not in self.variables:
                known = ", ".join(sorted(self.variables)) or "none"
                raise BadInput(f"--var {name!r} is not declared in {self.file} (declared variables: {known})")
            problem = schema_problem(value, self.variables[name])
            if problem:
                raise BadInput(f"--var {name}={_short(value)} {problem}")
            values[name] = value
        return values


def _short(value: Any) -> str:
    import orjson

    return orjson.dumps(value).decode()[:60]


def schema_problem(value: Any, schema: dict[str, Any]) -> str | None:
    """Why ``value`` does not fit a JSON-schema-style declaration, or None."""
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
    found = []
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
            problems.add(path, line_of(data, key), f"unknown field {key!r}")
    connections = data.get("default_connections") or {}
    if not isinstance(connections, dict):
        problems.add(path, line_of(data, "default_connections"), "default_connections must map a platform to a name")
        connections = {}
    variables = data.get("variables") or {}
    if not isinstance(variables, dict):
        problems.add(path, line_of(data, "variables"), "variables must map names to JSON-schema declarations")
        variables = {}
    for name, schema in variables.items():
        line = line_of(variables, name)
        if not isinstance(schema, dict) or "default" not in schema:
            problems.add(path, line, f"variable {name!r} needs a default")
            continue
        if schema.get("type") is not None and schema["type"] not in VARIABLE_TYPES:
            problems.add(path, line, f"variable {name!r} has unknown type {schema['type']!r}")
            continue
        problem = schema_problem(schema["default"], schema)
        if problem:
            problems.add(path, line, f"the default of variable {name!r} {problem}")
    default = data.get("default") or {}
    modifiers = default.get("interval_modifiers") if isinstance(default, dict) else None
    pipeline = Pipeline(
        name=str(data.get("name") or directory.name),
        directory=directory,
        file=path,
        default_connection=connections.get("duckdb") or "duckdb-default",
        tags=tuple(data.get("tags") or ()),
        variables=dict(variables),
        default_interval_modifiers={k: str(v) for k, v in modifiers.items()} if isinstance(modifiers, dict) else None,
    )
    _read_assets(pipeline, problems)
    _check_graph(pipeline, problems)
    problems.raise_if_any(f"pipeline {pipeline.name!r}")
    return pipeline


def _read_assets(pipeline: Pipeline, problems: Problems) -> None:
    root = pipeline.directory / "assets"
    candidates = sorted(p for p in root.rglob("*") if p.is_file() and is_asset_file(p)) if root.is_dir() else []
    first_seen: dict[str, Asset] = {}
    for path in candidates:
        asset = read_asset(path, pipeline.directory, problems)
        if asset is None:
            continue
        if asset.name in first_seen:
            problems.add(
                path, asset.line, f"duplicate asset name {asset.name!r} (also defined in {first_seen[asset.name].path})"
            )
            continue
        first_seen[asset.name] = asset
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
            if column.foreign_key and column.foreign_key[0] not in pipeline.assets:
                problems.add(
                    asset.path,
                    asset.line,
                    f"foreign_key of column {column.name!r} names {column.foreign_key[0]!r}, not an asset of this "
                    "pipeline",
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
