"""The repository configuration (``.bruin.yml``): environments and their connections.

Only what planning and the embedded runner need is interpreted: every
connection's name and ``max_concurrent_assets``, and for DuckDB its file and
``read_only``; an environment's ``schema_prefix`` and ``config.full_refresh_restricted``.
Other connection types are kept (they still limit parallelism) but cannot be run
by the embedded runner. A key neither Bruin nor we define is a warning, never
silently ignored.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.base.errors import BadInput
from engine.base.printable import shortened
from engine.pipeline.repository import Target
from engine.pipeline.yamlfile import Located, line_of, read_yaml

CONFIG_NAMES = (".bruin.yml", ".bruin.yaml")
# What Bruin's .bruin.yml defines (pkg/config/manager.go) and the guardrail keys we add to an environment.
TOP_LEVEL_KEYS = ("default_environment", "environments")
ENVIRONMENT_KEYS = (
    "connections",
    "schema_prefix",
    "config",
    "guardrails",
    "guardrail_limits",
    "dependency_gates",
)
ENVIRONMENT_CONFIG_KEYS = ("full_refresh_restricted",)
CONTENT_VARIABLE = "BRUIN_CONFIG_FILE_CONTENT"  # Bruin's LoadFromFileOrEnv: the whole configuration, as text
_ENV_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


@dataclass(frozen=True)
class Connection:
    kind: str  # "duckdb", "postgres", ...
    name: str
    path: Path | None  # DuckDB: the database file, absolute
    read_only: bool
    max_concurrent_assets: int | None
    value: str | None = None  # a generic connection's secret value
    details: tuple[tuple[str, Any], ...] = ()  # every field as configured, for secrets

    def secret_text(self) -> str:
        """What an asset's ``secrets`` entry injects: a generic connection's value, else its details as JSON
        (a DuckDB file's path made absolute)."""
        if self.kind == "generic":
            return self.value or ""
        import orjson

        details = {key: _expand(value, Path(f"connection {self.name!r}"), 0) for key, value in self.details}
        if self.path is not None:
            details["path"] = str(self.path)
        return orjson.dumps(details).decode()


@dataclass(frozen=True)
class Environment:
    name: str
    connections: tuple[Connection, ...]
    schema_prefix: str | None = None
    # config.full_refresh_restricted: --full-refresh drops no table of this environment (Bruin's meaning).
    full_refresh_restricted: bool = False
    warnings: tuple[str, ...] = ()  # keys of this environment we do not understand

    def connection(self, name: str) -> Connection | None:
        return next((c for c in self.connections if c.name == name), None)


@dataclass(frozen=True)
class Config:
    path: Path
    default_environment: str
    raw_environments: dict[str, Any]
    warnings: tuple[str, ...] = ()  # top-level keys we do not understand

    @property
    def environment_names(self) -> list[str]:
        return sorted(self.raw_environments)

    def environment(self, name: str | None) -> Environment:
        """The named environment (default: ``default_environment``), with ``${VAR}`` expanded."""
        chosen = name or self.default_environment
        if chosen not in self.raw_environments:
            known = ", ".join(self.environment_names) or "none"
            raise BadInput(
                f"environment {chosen!r} is not in {self.path} (environments: {known}): "
                "pass --environment with one of them"
            )
        return _parse_environment(chosen, self.raw_environments[chosen], self.path)


def find_config_file(target: Target | None, explicit: str | None, *, cwd: Path | None = None) -> Path:
    """``--config-file`` (or ``BRUIN_CONFIG_FILE``), else ``.bruin.yml`` at the repository root,
    else in the nearest parent directory of the target that has one."""
    base = cwd or Path.cwd()
    chosen = explicit or os.environ.get("BRUIN_CONFIG_FILE") or None
    if chosen:
        source = "--config-file" if explicit else "BRUIN_CONFIG_FILE"
        shown = shortened(chosen)
        try:
            path = (base / chosen).resolve()
            found = path.is_file()
        except OSError as error:  # a name too long for a file, a loop of links
            why = f"{source} {shown!r} cannot be looked up ({error.strerror}): give the path of a .bruin.yml"
            raise BadInput(why) from None
        if not found:
            raise BadInput(f"{source} {shown!r} is not a file: give the path of a .bruin.yml")
        return path
    if target is None:
        raise BadInput("no target to find a configuration for: give a pipeline directory or --config-file")
    if target.repository is not None:
        for name in CONFIG_NAMES:
            if (target.repository / name).is_file():
                return target.repository / name
    for directory in (target.pipeline_dir, *target.pipeline_dir.parents):
        for name in CONFIG_NAMES:
            if (directory / name).is_file():
                return directory / name
    unread = f" ({CONTENT_VARIABLE} is not read: write it to that file)" if os.environ.get(CONTENT_VARIABLE) else ""
    raise BadInput(
        f"no .bruin.yml found for {target.path}: create one at the repository root or pass --config-file{unread}"
    )


def load_config(path: Path) -> Config:
    """Read ``.bruin.yml``; environments are checked when one is selected."""
    if os.environ.get(CONTENT_VARIABLE):  # Bruin reads that instead of the file: running on the file would differ
        raise BadInput(
            f"{CONTENT_VARIABLE} is set: Bruin reads its configuration from it instead of {path}, which backfill does "
            "not: write it to a file and pass --config-file FILE, or unset it"
        )
    data = read_yaml(path)
    if data is None:
        data = Located()
    if not isinstance(data, dict):
        raise BadInput(f"{path}:1: a configuration must be a mapping with 'environments'")
    environments = data.get("environments")
    if not isinstance(environments, dict) or not environments:
        raise BadInput(f"{path}:{line_of(data, 'environments') or 1}: 'environments' must map names to settings")
    default = data.get("default_environment", "default")
    if not isinstance(default, str):
        raise BadInput(f"{path}:{line_of(data, 'default_environment')}: default_environment must be a name")
    warnings = tuple(
        _unknown_key(path, data, key, "a top-level key of .bruin.yml", TOP_LEVEL_KEYS)
        for key in data
        if key not in TOP_LEVEL_KEYS
    )
    return Config(path, default, dict(environments), warnings)


def _unknown_key(path: Path, mapping: Any, key: Any, what: str, known: tuple[str, ...]) -> str:
    return f"{path}:{line_of(mapping, key) or 1}: {key!r} is not {what} ({', '.join(known)}): ignored"


def _expand(value: Any, path: Path, line: int) -> Any:
    if not isinstance(value, str):
        return value

    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in os.environ:
            raise BadInput(f"{path}:{line}: environment variable {name} is not set (referenced as ${{{name}}})")
        return os.environ[name]

    return _ENV_REFERENCE.sub(replace, value)


def _parse_environment(name: str, raw: Any, path: Path) -> Environment:
    if raw is None:
        return Environment(name, ())
    if not isinstance(raw, dict):
        raise BadInput(f"{path}:{line_of(raw)}: environment {name!r} must be a mapping with 'connections'")
    by_type = raw.get("connections") or {}
    if not isinstance(by_type, dict):
        raise BadInput(f"{path}:{line_of(raw, 'connections')}: connections must map a type to a list")
    connections: list[Connection] = []
    for kind, entries in by_type.items():
        if not isinstance(entries, list):
            raise BadInput(f"{path}:{line_of(by_type, kind)}: connections.{kind} must be a list")
        for entry in entries:
            connections.append(_parse_connection(str(kind), entry, path, line_of(by_type, kind)))
    names = [c.name for c in connections]
    for duplicate in sorted({n for n in names if names.count(n) > 1}):
        raise BadInput(f"{path}: connection name {duplicate!r} is defined twice in environment {name!r}")
    prefix = raw.get("schema_prefix")
    if prefix is not None and (not isinstance(prefix, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", prefix)):
        raise BadInput(
            f"{path}:{line_of(raw, 'schema_prefix')}: schema_prefix {prefix!r} of environment {name!r} must be "
            "letters, digits and '_' (it starts schema names)"
        )
    warnings = [
        _unknown_key(path, raw, key, f"a key of environment {name!r}", ENVIRONMENT_KEYS)
        for key in raw
        if key not in ENVIRONMENT_KEYS
    ]
    restricted, more = _environment_config(name, raw, path)
    return Environment(name, tuple(connections), prefix or None, restricted, tuple(warnings + more))


def _environment_config(name: str, raw: dict[str, Any], path: Path) -> tuple[bool, list[str]]:
    """An environment's ``config:`` block: ``full_refresh_restricted`` (a boolean), and warnings for the rest."""
    block = raw.get("config")
    if block is None:
        return False, []
    if not isinstance(block, dict):
        raise BadInput(f"{path}:{line_of(raw, 'config')}: config of environment {name!r} must be a mapping")
    restricted = block.get("full_refresh_restricted", False)
    if not isinstance(restricted, bool):
        raise BadInput(
            f"{path}:{line_of(block, 'full_refresh_restricted')}: config.full_refresh_restricted of environment "
            f"{name!r} is {restricted!r}: use true or false"
        )
    warnings = [
        _unknown_key(path, block, key, f"a config key of environment {name!r}", ENVIRONMENT_CONFIG_KEYS)
        for key in block
        if key not in ENVIRONMENT_CONFIG_KEYS
    ]
    return restricted, warnings


def _parse_connection(kind: str, entry: Any, path: Path, fallback_line: int) -> Connection:
    line = line_of(entry) or fallback_line
    if not isinstance(entry, dict) or not isinstance(entry.get("name"), str) or not entry["name"]:
        raise BadInput(f"{path}:{line}: every {kind} connection needs a 'name'")
    name = entry["name"]
    limit = entry.get("max_concurrent_assets")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise BadInput(
            f"{path}:{line_of(entry, 'max_concurrent_assets')}: max_concurrent_assets of {name!r} is "
            f"{limit!r}: use a positive integer"
        )
    read_only = entry.get("read_only", False)
    if not isinstance(read_only, bool):
        raise BadInput(f"{path}:{line_of(entry, 'read_only')}: read_only of {name!r} must be true or false")
    value = None
    if kind == "generic":
        value = _expand(entry.get("value"), path, line_of(entry, "value"))
        if not isinstance(value, str):
            raise BadInput(f"{path}:{line}: generic connection {name!r} needs a 'value'")
    database: Path | None = None
    if kind == "duckdb":
        raw_path = _expand(entry.get("path"), path, line_of(entry, "path"))
        if not isinstance(raw_path, str) or not raw_path:
            raise BadInput(f"{path}:{line}: duckdb connection {name!r} needs a 'path' to its database file")
        database = (path.parent / os.path.expanduser(raw_path)).resolve()
    details = tuple((str(k), v) for k, v in entry.items())  # ${VAR} expanded only when a secret injects them
    return Connection(kind, name, database, read_only, limit, value, details)
