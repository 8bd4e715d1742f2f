"""Options of one pipeline run: the selection, variables and annotations every child of a backfill receives.

Each option a person gives on the command line is declared once, in :data:`RUN_OPTIONS`: its flag, how the
command line reads it, what a child's argv carries, whether a saved backfill may change it, how the plan
prints it and what the run record keeps. The parser, the child factory, the resume's plan-input check, the
plan's text and the run record all read that table.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import orjson

from engine.base.errors import BadInput

ONLY = ("main", "checks")
SHOWN_VALUE = 80  # characters of a bad --var value an error line quotes
# Bruin's --only also takes push-metadata (its metadata push, a Bruin Cloud feature: nothing here).
ONLY_ACCEPTED = (*ONLY, "push-metadata")


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


class Kind(Enum):
    """How an option is given and passed on."""

    REPEATED = "repeated"  # --tag a --tag b: a tuple of texts
    FLAG = "flag"  # --downstream: present or not
    VALUE = "value"  # --only main: one text, or None
    VARIABLES = "variables"  # --var name=<json>, repeatable, overlaid on BRUIN_VARS
    STEPS = "steps"  # --only main --only checks: repeatable, kept as the one step chosen, or None for both


@dataclass(frozen=True, kw_only=True)
class RunOption:
    """One run option, declared once."""

    attribute: str  # the RunOptions field
    flag: str  # its command-line flag
    help: str
    kind: Kind
    label: str | None = None  # how the plan prints it (None: not printed)
    record_key: str | None = None  # the run record's options key (None: the record keeps it another way)
    selects: bool = False  # part of the asset selection, which an operator's asset rerun replaces
    choices: tuple[str, ...] | None = None
    metavar: str | None = None
    check: Callable[[str], str] | None = None  # validates a VALUE (raises BadInput)
    aliases: tuple[str, ...] = ()  # Bruin's short spellings (-t, -x), accepted wherever the flag is

    @property
    def dest(self) -> str:
        """The argparse attribute the flag fills."""
        return self.flag.lstrip("-").replace("-", "_")

    def child_argv(self, value: Any) -> list[str]:
        """The words that give ``value`` to a child ``backfill run``."""
        if self.kind is Kind.REPEATED:
            return [word for item in value for word in (self.flag, item)]
        if self.kind is Kind.FLAG:
            return [self.flag] if value else []
        if self.kind is Kind.VARIABLES:
            return [word for name, v in value.items() for word in (self.flag, f"{name}={orjson.dumps(v).decode()}")]
        return [self.flag, value] if value else []

    def shown(self, value: Any) -> str:
        """The plan's text for ``value`` ('' when unset)."""
        if self.kind is Kind.REPEATED:
            return (" " if self.attribute == "selector" else ", ").join(value)
        if self.kind is Kind.VARIABLES:
            return ", ".join(f"{k}={v!r}" for k, v in value.items())
        if self.kind is Kind.FLAG:
            return "yes" if value else ""
        return value or ""

    def recorded(self, value: Any) -> Any:
        return list(value) if self.kind is Kind.REPEATED else value

    def parsed(self, given: Any, environ_vars: str | None) -> Any:
        """The RunOptions value from what argparse read."""
        if self.kind is Kind.REPEATED:
            return tuple(given or ())
        if self.kind is Kind.FLAG:
            return bool(given)
        if self.kind is Kind.VARIABLES:
            return parse_variables(list(given or ()), environ_vars)
        if self.kind is Kind.STEPS:
            return steps_of(list(given or ()))
        return self.check(given) if (given is not None and self.check is not None) else given


def check_variant(text: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9_-]+", text, re.ASCII):
        raise BadInput(f"--variant {text!r} is not a variant name: use letters, digits, '_' and '-'")
    return text


RUN_OPTIONS: tuple[RunOption, ...] = (
    RunOption(
        attribute="selector", flag="--selector", kind=Kind.REPEATED, label="selector", record_key="selector",
        selects=True, metavar="EXPR", help="assets to run: tag:, path:, fqn:, names, +name, name+, @name (repeatable)",
    ),
    RunOption(
        attribute="tags", flag="--tag", kind=Kind.REPEATED, label="tags", record_key="tags", selects=True,
        help="only assets with this tag (repeatable)", aliases=("-t",),
    ),
    RunOption(
        attribute="exclude_tags", flag="--exclude-tag", kind=Kind.REPEATED, label="exclude tags",
        record_key="exclude_tags", selects=True, help="skip assets with this tag (repeatable)", aliases=("-x",),
    ),
    RunOption(
        attribute="downstream", flag="--downstream", kind=Kind.FLAG, record_key="downstream", selects=True,
        help="with an asset target: its downstream too",
    ),
    RunOption(
        attribute="only", flag="--only", kind=Kind.STEPS, label="only", record_key="only", selects=True,
        choices=ONLY_ACCEPTED, help="run only the assets' main step or their checks (repeatable, as in Bruin)",
    ),
    RunOption(
        attribute="variables", flag="--var", kind=Kind.VARIABLES, label="variables", metavar="NAME=JSON",
        help="override a pipeline variable (repeatable)",
    ),  # the run record keeps the variables as resolved, not as given
    RunOption(
        attribute="apply_interval_modifiers", flag="--apply-interval-modifiers", kind=Kind.FLAG,
        record_key="apply_interval_modifiers", help="shift each asset's window by its interval_modifiers",
    ),
    RunOption(
        attribute="variant", flag="--variant", kind=Kind.VALUE, label="variant", record_key="variant",
        check=check_variant, help="run this variant of the pipeline (pipeline.yml variants:)",
    ),
)  # fmt: skip


def steps_of(given: list[str]) -> str | None:
    """``--only`` as Bruin reads it (a list, each value adding a step): the one step chosen, or None when both
    main and checks run (the default; how saved backfills keep it)."""
    if "push-metadata" in given:
        raise BadInput(
            "--only push-metadata means nothing here: metadata push is a Bruin Cloud feature; use --only main "
            "or --only checks"
        )
    chosen = set(given)
    return None if not chosen or chosen >= set(ONLY) else chosen.pop()


def run_options_of(args: Any, environ_vars: str | None, annotations: str | None) -> RunOptions:
    """RunOptions from parsed arguments (every RUN_OPTIONS flag), ``BRUIN_VARS`` and ``BRUIN_QUERY_ANNOTATIONS``."""
    values = {option.attribute: option.parsed(getattr(args, option.dest), environ_vars) for option in RUN_OPTIONS}
    return RunOptions(**values, query_annotations=parse_annotations(annotations))


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
                raise BadInput(
                    f"--var {pair[:SHOWN_VALUE]!r}{'…' if len(pair) > SHOWN_VALUE else ''} is not a JSON object: use "
                    "name=<json> or '{\"name\": <json>}'"
                )
            variables.update(loaded)
            continue
        name, equals, raw = text.partition("=")
        if not equals or not name.strip():
            raise BadInput(f"--var {pair!r} is not name=<json>: use e.g. --var 'region=\"eu\"' or --var 'days=7'")
        try:
            variables[name.strip()] = orjson.loads(raw)
        except orjson.JSONDecodeError as error:
            if len(raw) > SHOWN_VALUE:  # a line on the terminal, not the value again three times
                raise BadInput(
                    f"--var {name.strip()[:SHOWN_VALUE]!r}: its value of {len(raw):,} characters, starting "
                    f"{raw[:SHOWN_VALUE]!r}, is not JSON ({str(error).split(':')[0]})"
                ) from None
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
