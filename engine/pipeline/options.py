"""Options of one pipeline run: the selection, variables and annotations every child of a backfill receives."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import orjson

from engine.base.errors import BadInput

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
    variant: str | None = None  # one of pipeline.yml's variants: a plan input like the variables

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
            "variant": self.variant,
        }

    def identity(self) -> dict[str, Any]:
        """What changes the data a partition produces: everything but where the config file lies
        and the comment annotations added to queries."""
        data = self.to_json()
        del data["config_file"], data["query_annotations"]
        if data["variant"] is None:
            del data["variant"]  # backfills saved before variants existed keep their identity
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
            variant=data.get("variant"),
        )


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


def environ_run_inputs() -> tuple[str | None, str | None]:
    """``BRUIN_VARS`` and ``BRUIN_QUERY_ANNOTATIONS`` from the environment."""
    return os.environ.get("BRUIN_VARS"), os.environ.get("BRUIN_QUERY_ANNOTATIONS")
