"""The plan digest: a SHA-256 over everything an approval vouches for.

It is built from named components (the plan inputs, the partition IDs, each
asset file and ``pipeline.yml``, the environment's connection settings without
secrets, each check's evidence), each hashed on its own, so that an approval
that no longer holds can say which of them changed.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from engine.guardrails.facts import Facts
from engine.guardrails.tiers import PreflightCheck
from engine.pipeline.asset_types import AssetKind

if TYPE_CHECKING:
    from engine.pipeline.assets import Asset
    from engine.pipeline.config import Config

MIN_PREFIX = 8
MAX_HASHED_IDS = 200_000  # beyond, the selection (not each ID) is hashed: a million hashes cost seconds
SHOWN = 12


def _hash(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _canonical(value: Any) -> bytes:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS)


def components_of(facts: Facts, results: list[PreflightCheck]) -> dict[str, str]:
    request = facts.request
    spec = request.spec
    parts: dict[str, str] = {}
    parts["plan inputs"] = _hash(
        _canonical(
            {
                "spec": spec.to_json(),
                "mode": request.mode,
                "execution": request.options.to_json(),
                "guardrails": request.guard.to_json(),
                "selected": request.selected_count,
            }
        )
    )
    ids = hashlib.sha256()
    plan = spec.plan
    if request.selected_count <= MAX_HASHED_IDS:
        for index in request.selected():
            interval = plan.interval(index)
            ids.update(spec.ids.of(interval.start, interval.end).encode() + b"\n")
    else:  # the IDs are a function of the plan inputs and of which partitions are selected
        ids.update(f"{request.selection_key}\n{request.selected_count}".encode())
    parts["partition IDs"] = ids.hexdigest()
    if facts.pipeline is not None:
        files = {facts.pipeline.file} | {path for a in facts.assets.values() for path in a.asset.own_files}
        base = facts.pipeline.directory
        for directory, pattern in read_trees(base, [a.asset for a in facts.assets.values()]):
            files |= tree_files(directory, pattern)
        for path in sorted(files):
            parts[file_component(path, base)] = file_hash(path)
    named = facts.code  # the scripts a command runs, as an asset's files are
    for path in sorted({*named, *(path for tree in python_trees(named) for path in tree_files(*tree))}):
        parts[file_component(path, request.working_directory)] = file_hash(path)
    if request.config is not None and (environment_name := environment_name_of(request)) is not None:
        name, value = config_component(request.config, environment_name)
        parts[name] = value
    environment = request.environment
    parts["environment"] = _hash(
        _canonical(
            {
                "name": environment.name if environment else None,
                "connections": [
                    {
                        "kind": c.kind,
                        "name": c.name,
                        "path": str(c.path) if c.path else None,
                        "read_only": c.read_only,
                        "max_concurrent_assets": c.max_concurrent_assets,
                    }
                    for c in (environment.connections if environment else ())
                ],
                "guardrails": facts.settings.to_json(),
            }
        )
    )
    for result in results:
        parts[f"evidence of {result.name}"] = _hash(_canonical(result.to_json()))
    return parts


def read_trees(base: Path, assets: list[Asset]) -> list[tuple[Path, str]]:
    """The directories whose files a run may read without naming them: every macro under ``macros/`` (an asset
    may render any), and every module beside a Python asset (its directory is first on its ``sys.path``, so a
    helper it imports, or a new ``json.py`` shadowing one, runs as part of it)."""
    trees = [(base / "macros", "**/*.sql")]
    trees += [(d, "**/*.py") for d in sorted({a.script.parent for a in assets if a.kind == AssetKind.PYTHON})]
    return trees


def python_trees(named: list[Path]) -> list[tuple[Path, str]]:
    """Where a command's Python scripts import from without naming it: the directory of each ``.py`` it names
    (Python puts it first on ``sys.path``, so ``import helpers``, or a new ``json.py``, runs as part of the
    script). Its modules only, not its subdirectories: a script at a repository's root sits beside a virtualenv."""
    scripts = {path.parent for path in named if path.suffix.lower() == ".py"}
    return [(directory, "*.py") for directory in sorted(scripts)]


def tree_files(directory: Path, pattern: str) -> set[Path]:
    """The files of one read tree (``pattern`` a glob under ``directory``; ``**/`` reaches into subdirectories)."""
    return set(directory.glob(pattern)) if directory.is_dir() else set()


SECRET_WORDS = ("password", "secret", "token", "key", "credential", "private", "auth", "pass")


def config_component(config: Config, environment: str) -> tuple[str, str]:
    """The digest's component of ``.bruin.yml``: its default environment and the chosen environment's settings,
    secrets left out (a rotated password keeps an approval; a connection pointed elsewhere does not)."""
    settings = _without_secrets(config.raw_environments.get(environment))
    value = {"default_environment": config.default_environment, environment: settings}
    return f"file {config.path.name} (environment {environment}, secrets left out)", _hash(_canonical(value))


def environment_name_of(request) -> str | None:
    return request.environment.name if request.environment is not None else None


def _without_secrets(value: Any) -> Any:
    """The configuration with every value whose key names a secret replaced, so the digest can be shown and
    compared without depending on (or revealing) passwords and tokens, and a rotated secret keeps approvals."""
    if isinstance(value, dict):
        return {
            k: "<secret>" if any(word in str(k).lower() for word in SECRET_WORDS) else _without_secrets(v)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_without_secrets(v) for v in value]
    return value


def digest_of(components: dict[str, str]) -> str:
    return _hash("".join(f"{name}={value}\n" for name, value in sorted(components.items())).encode())


def changed_components(before: dict[str, str], now: dict[str, str]) -> list[str]:
    """What differs between two component sets, as phrases ("file assets/x.sql changed")."""
    changes = []
    for name in sorted(set(before) | set(now)):
        if name not in now:
            changes.append(f"{name} is gone")
        elif name not in before:
            changes.append(f"{name} is new")
        elif before[name] != now[name]:
            changes.append(f"{name} {'is new' if before[name].startswith(UNREADABLE) else 'changed'}")
    return changes


def _relative(path: Path, base: Path) -> str:
    try:
        return path.relative_to(base).as_posix()
    except ValueError:
        return str(path)


UNREADABLE = "unreadable: "  # a file's hash when it is not there or cannot be read: "unreadable: why"


def file_component(path: Path, base: Path) -> str:
    """The name of a file's component: ``file`` and its path under the pipeline's (or the command's) directory."""
    return f"file {_relative(path, base)}"


def file_hash(path: Path) -> str:
    try:
        return _hash(path.read_bytes())
    except OSError as error:
        return f"{UNREADABLE}{error.strerror}"
