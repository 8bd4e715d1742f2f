"""A backfill's normalized inputs (what it computes) and execution controls (how it runs).

The spec is immutable: it is what the manifest saves and what resume re-plans
from. Execution controls may change between invocations of the same backfill.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from datetime import tzinfo
from functools import cached_property
from pathlib import Path
from typing import Any

import orjson

from engine.config import Config, Environment, find_config_file, load_config
from engine.errors import BadInput, Refused
from engine.identity import PartitionIds
from engine.instants import boundary_instant, format_instant, load_zone, parse_boundary, zone_name
from engine.parallelism import Parallelism, effective_parallelism
from engine.plan import PartitionUnit, Plan, parse_unit
from engine.repository import Target, pipeline_file, resolve_target

ON_FAILURE = ("stop", "continue", "fail-fast")
ONLY = ("main", "checks")


@dataclass(frozen=True)
class RunOptions:
    """Options passed to every child run; part of each partition's identity (but the config file)."""

    selector: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    exclude_tags: tuple[str, ...] = ()
    downstream: bool = False
    only: str | None = None
    variables: dict[str, Any] = field(default_factory=dict)
    apply_interval_modifiers: bool = False
    config_file: str | None = None
    query_annotations: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "selector": list(self.selector),
            "tags": list(self.tags),
            "exclude_tags": list(self.exclude_tags),
            "downstream": self.downstream,
            "only": self.only,
            "variables": self.variables,
            "apply_interval_modifiers": self.apply_interval_modifiers,
            "config_file": self.config_file,
            "query_annotations": self.query_annotations,
        }

    def identity(self) -> dict[str, Any]:
        """What changes the data a partition produces: everything but where the config file lies
        and the comment annotations added to queries."""
        data = self.to_json()
        del data["config_file"], data["query_annotations"]
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunOptions:
        return cls(
            selector=tuple(data.get("selector", ())),
            tags=tuple(data.get("tags", ())),
            exclude_tags=tuple(data.get("exclude_tags", ())),
            downstream=bool(data.get("downstream", False)),
            only=data.get("only"),
            variables=dict(data.get("variables") or {}),
            apply_interval_modifiers=bool(data.get("apply_interval_modifiers", False)),
            config_file=data.get("config_file"),
            query_annotations=data.get("query_annotations"),
        )


@dataclass(frozen=True)
class TargetSpec:
    """What each partition runs: a pipeline (or asset) path, or a command template."""

    kind: str  # "pipeline", "asset" or "command"
    name: str
    path: str | None = None  # absolute, for pipeline and asset targets
    template: str | None = None  # for command targets
    identity: dict[str, Any] = field(default_factory=dict)

    @property
    def is_command(self) -> bool:
        return self.kind == "command"

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "name": self.name,
            "path": self.path,
            "template": self.template,
            "identity": self.identity,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TargetSpec:
        return cls(data["kind"], data["name"], data.get("path"), data.get("template"), dict(data["identity"]))


@dataclass(frozen=True)
class ExecutionOptions:
    """How to run; may change when resuming."""

    max_parallel: int = 1
    workers: int = 16
    retries: int = 0
    on_failure: str = "stop"
    reverse: bool = False
    timeout: int | None = None  # microseconds per child

    def to_json(self) -> dict[str, Any]:
        return {
            "max_parallel": self.max_parallel,
            "workers": self.workers,
            "retries": self.retries,
            "on_failure": self.on_failure,
            "reverse": self.reverse,
            "timeout": self.timeout,
        }

    def with_changes(self, **changes: Any) -> ExecutionOptions:
        return replace(self, **{k: v for k, v in changes.items() if v is not None})


def check_execution_options(options: ExecutionOptions) -> ExecutionOptions:
    """Reject impossible controls with the accepted range."""
    if options.max_parallel < 1:
        raise BadInput(f"--max-parallel {options.max_parallel} is not allowed: use 1 or more")
    if options.workers < 1:
        raise BadInput(f"--workers {options.workers} is not allowed: use 1 or more")
    if options.retries < 0:
        raise BadInput(f"--retries {options.retries} is not allowed: use 0 or more")
    if options.on_failure not in ON_FAILURE:
        raise BadInput(f"--on-failure {options.on_failure!r} is not a policy: use stop, continue or fail-fast")
    return options


@dataclass(frozen=True)
class BackfillSpec:
    target: TargetSpec
    environment: str | None
    start: int
    end: int
    zone: tzinfo
    unit: PartitionUnit
    run_options: RunOptions

    @cached_property
    def plan(self) -> Plan:
        return Plan(self.start, self.end, self.zone, self.unit)

    @cached_property
    def ids(self) -> PartitionIds:
        return PartitionIds(self.target.identity, self.environment, self.run_options.identity())

    def to_json(self) -> dict[str, Any]:
        """The normalized inputs, as shown in JSON output."""
        return {
            "target": self.target.template if self.target.is_command else self.target.path,
            "target_kind": self.target.kind,
            "name": self.target.name,
            "environment": self.environment,
            "start": format_instant(self.start, self.zone),
            "end": format_instant(self.end, self.zone),
            "timezone": zone_name(self.zone),
            "partition": self.unit.name,
            "run_options": self.run_options.to_json(),
        }


@dataclass(frozen=True)
class Planned:
    """A spec with what planning learnt about its environment."""

    spec: BackfillSpec
    options: ExecutionOptions
    parallelism: Parallelism
    config: Config | None = None
    environment: Environment | None = None


def parse_variables(pairs: list[str], environ_vars: str | None) -> dict[str, Any]:
    """``BRUIN_VARS`` (a JSON object) overlaid by each ``--var name=<json>`` (or ``--var '{json object}'``)."""
    variables: dict[str, Any] = {}
    if environ_vars:
        try:
            loaded = orjson.loads(environ_vars)
        except orjson.JSONDecodeError:
            loaded = None
        if not isinstance(loaded, dict):
            raise BadInput(f'BRUIN_VARS {environ_vars!r} is not a JSON object: use e.g. \'{{"region": "eu"}}\'')
        variables.update(loaded)
    for pair in pairs:
        text = pair.strip()
        if text.startswith("{"):
            try:
                loaded = orjson.loads(text)
            except orjson.JSONDecodeError:
                loaded = None
            if not isinstance(loaded, dict):
                raise BadInput(f"--var {pair!r} is not a JSON object: use name=<json> or '{{\"name\": <json>}}'")
            variables.update(loaded)
            continue
        name, equals, raw = text.partition("=")
        if not equals or not name.strip():
            raise BadInput(f"--var {pair!r} is not name=<json>: use e.g. --var 'region=\"eu\"' or --var 'days=7'")
        try:
            variables[name.strip()] = orjson.loads(raw)
        except orjson.JSONDecodeError:
            raise BadInput(
                f"--var {pair!r}: the value {raw!r} is not JSON: quote strings, e.g. --var '{name.strip()}=\"{raw}\"'"
            ) from None
    return variables


def parse_annotations(text: str | None) -> dict[str, Any] | None:
    """``BRUIN_QUERY_ANNOTATIONS``: a JSON object, or nothing."""
    if not text:
        return None
    try:
        loaded = orjson.loads(text)
    except orjson.JSONDecodeError:
        loaded = None
    if not isinstance(loaded, dict):
        raise BadInput(f'BRUIN_QUERY_ANNOTATIONS {text!r} is not a JSON object: use e.g. \'{{"team": "data"}}\'')
    return loaded


def pipeline_display_name(target: Target) -> str:
    """The pipeline's ``name`` (or its directory name), plus the asset file for asset targets."""
    from engine.yamlfile import read_yaml

    data = read_yaml(pipeline_file(target.pipeline_dir))  # type: ignore[arg-type]
    name = data.get("name") if isinstance(data, dict) else None
    name = name if isinstance(name, str) and name else target.pipeline_dir.name
    return f"{name}/{target.path.name}" if target.is_asset else name


def check_environment_allowed(environment: str | None, force: bool) -> None:
    """Environments named like production need ``--force``."""
    if environment and "prod" in environment.lower() and not force:
        raise Refused(f"environment {environment!r} looks like production: pass --force to backfill it")


def plan_request(
    *,
    target: str | None,
    command: str | None,
    name: str | None,
    start: str | None,
    end: str | None,
    timezone: str,
    partition: str,
    environment: str | None,
    config_file: str | None,
    run_options: RunOptions,
    options: ExecutionOptions,
    force: bool,
    cwd: Path | None = None,
) -> Planned:
    """Validate raw inputs into a spec, resolve the environment and the effective parallelism."""
    if bool(target) == bool(command):
        raise BadInput(
            "give either a TARGET (pipeline directory or asset file) or --command 'TEMPLATE', not "
            + ("both" if target else "neither")
        )
    if start is None or end is None:
        missing = "--start-date" if start is None else "--end-date"
        raise BadInput(f"{missing} is required: give a date such as 2024-01-01 or a timestamp")
    zone = load_zone(timezone)
    unit = parse_unit(partition)
    start_boundary = parse_boundary(start, "--start-date")
    end_boundary = parse_boundary(end, "--end-date")
    start_at = boundary_instant(start_boundary, zone, "--start-date", inclusive_date=False)
    end_at = boundary_instant(end_boundary, zone, "--end-date", inclusive_date=True)
    check_execution_options(options)
    base = cwd or Path.cwd()
    if command is not None:
        if not command.strip():
            raise BadInput("--command '' is empty: give a program and its arguments, e.g. --command 'echo {start}'")
        target_spec = TargetSpec(
            "command", name or command, template=command, identity={"kind": "command", "template": command}
        )
        spec = BackfillSpec(target_spec, environment, start_at, end_at, zone, unit, run_options)
        _ = spec.plan
        return Planned(spec, options, Parallelism(options.max_parallel, options.max_parallel, None))
    assert target is not None
    resolved = resolve_target(target, cwd=base)
    config_path = find_config_file(resolved, config_file, cwd=base)
    config = load_config(config_path)
    env = config.environment(environment)
    check_environment_allowed(env.name, force)
    run_options = replace(run_options, config_file=str(config_path))
    from engine.pipeline_check import check_pipeline

    check_pipeline(resolved, config, env, run_options)  # once, before anything is saved or started
    target_spec = TargetSpec(
        "asset" if resolved.is_asset else "pipeline",
        name or pipeline_display_name(resolved),
        path=str(resolved.path),
        identity=resolved.identity(),
    )
    spec = BackfillSpec(target_spec, env.name, start_at, end_at, zone, unit, run_options)
    _ = spec.plan
    parallelism = effective_parallelism(options.max_parallel, options.workers, env)
    return Planned(spec, options, parallelism, config, env)


def environ_run_inputs() -> tuple[str | None, str | None]:
    """``BRUIN_VARS`` and ``BRUIN_QUERY_ANNOTATIONS`` from the environment."""
    return os.environ.get("BRUIN_VARS"), os.environ.get("BRUIN_QUERY_ANNOTATIONS")
