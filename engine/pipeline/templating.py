"""Jinja templating of SQL (and interval modifiers) with Bruin's variables and date filters.

Undefined names are errors (strict), so a typo in ``{{ start_dat }}`` fails the
asset with the template's line instead of producing wrong SQL.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta, tzinfo
from typing import Any

import jinja2

from engine.dates.formatting import InstantFormatter
from engine.dates.instants import to_datetime


@dataclass(frozen=True)
class Window:
    """The run's interval: ``[start, end]`` with an inclusive end, shown in ``zone``."""

    start: int
    end: int  # inclusive
    zone: tzinfo

    def variables(self) -> dict[str, str]:
        formatter = InstantFormatter(self.zone)
        start, end = to_datetime(self.start, self.zone), to_datetime(self.end, self.zone)
        return {
            "start_date": start.date().isoformat(),
            "end_date": end.date().isoformat(),
            "start_datetime": start.strftime("%Y-%m-%dT%H:%M:%S"),
            "end_datetime": end.strftime("%Y-%m-%dT%H:%M:%S"),
            "start_timestamp": formatter.format(self.start, "always"),
            "end_timestamp": formatter.format(self.end, "always"),
        }


def _parse_any(value: Any) -> tuple[datetime, str]:
    """A date/datetime/timestamp string and which of the three shapes it had."""
    text = str(value)
    if re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
        return datetime.fromisoformat(text), "date"
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if moment.tzinfo is None:
        return moment, "datetime"
    return moment, "timestamp"


def _render_shape(moment: datetime, shape: str, original: str) -> str:
    if shape == "date":
        return moment.date().isoformat()
    if shape == "datetime":
        return moment.strftime("%Y-%m-%dT%H:%M:%S") + (f".{moment.microsecond:06d}" if "." in original else "")
    text = moment.isoformat(timespec="microseconds")
    return text[:-6] + "Z" if original.endswith("Z") and text.endswith("+00:00") else text


def _shifter(**unit: int):
    def shift(value: Any, amount: int) -> str:
        moment, shape = _parse_any(value)
        return _render_shape(moment + timedelta(**{k: v * amount for k, v in unit.items()}), shape, str(value))

    return shift


def _date_format(value: Any, pattern: str) -> str:
    moment, _ = _parse_any(value)
    return moment.strftime(pattern)


def _environment() -> jinja2.Environment:
    environment = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True, autoescape=False)
    environment.filters.update(
        add_days=_shifter(days=1),
        date_add=_shifter(days=1),
        add_hours=_shifter(hours=1),
        add_minutes=_shifter(minutes=1),
        add_seconds=_shifter(seconds=1),
        add_milliseconds=_shifter(milliseconds=1),
        date_format=_date_format,
    )
    return environment


_ENVIRONMENT = _environment()


class TemplateProblem(Exception):
    """A template that cannot be rendered; the message names the line."""


def render(text: str, context: dict[str, Any], *, first_line: int = 1) -> str:
    """Render ``text``; errors name the line in the original file."""
    try:
        return _ENVIRONMENT.from_string(text).render(context)
    except jinja2.TemplateSyntaxError as error:
        raise TemplateProblem(
            f"line {first_line + (error.lineno or 1) - 1}: template syntax: {error.message}"
        ) from None
    except jinja2.UndefinedError as error:
        raise TemplateProblem(f"template: {error.message}") from None
    except (ValueError, TypeError) as error:
        raise TemplateProblem(f"template: {error}") from None


def syntax_problem(text: str) -> tuple[int, str] | None:
    """(line, message) when ``text`` is not a valid template."""
    try:
        _ENVIRONMENT.parse(text)
    except jinja2.TemplateSyntaxError as error:
        return error.lineno or 1, f"template syntax: {error.message}"
    return None


@functools.lru_cache(maxsize=8)
def _macro_template(macros: str) -> jinja2.Template:
    """The pipeline's macros compiled once (a warm runner renders them for every asset of every partition)."""
    return _ENVIRONMENT.from_string(macros)


def with_macros(macros: str, context: dict[str, Any]) -> dict[str, Any]:
    """``context`` plus every macro of the pipeline's ``macros/`` folder, callable from any template."""
    try:
        module = _macro_template(macros).make_module(context)
    except jinja2.TemplateSyntaxError as error:
        raise TemplateProblem(f"macros/: line {error.lineno}: template syntax: {error.message}") from None
    except jinja2.UndefinedError as error:
        raise TemplateProblem(f"macros/: {error.message}") from None
    exported = {name: getattr(module, name) for name in dir(module) if not name.startswith("_")}
    return {**context, **exported}


def base_context(
    window: Window, *, run_id: str, pipeline: str, variables: dict[str, Any], full_refresh: bool
) -> dict[str, Any]:
    """Everything a template may use except ``this`` (added per asset)."""
    return {
        **window.variables(),
        "run_id": run_id,
        "pipeline": pipeline,
        "var": variables,
        "full_refresh": full_refresh,
    }


def today_in(zone: tzinfo) -> date:
    """The local date now in ``zone`` (for the default window: yesterday)."""
    return datetime.now(zone).date()
