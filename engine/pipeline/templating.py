"""Jinja templating of SQL (and interval modifiers) with Bruin's variables and date filters.

Undefined names are errors (strict), so a typo in ``{{ start_dat }}`` fails the
asset with the template's line instead of producing wrong SQL.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta, tzinfo
from typing import TYPE_CHECKING, Any

from engine.dates.formatting import InstantFormatter
from engine.dates.instants import to_datetime
from engine.pipeline.sql_helpers import BRUIN_HELPERS

if TYPE_CHECKING:
    import jinja2


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
            "start_date_nodash": start.strftime("%Y%m%d"),
            "end_date": end.date().isoformat(),
            "end_date_nodash": end.strftime("%Y%m%d"),
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
    """``moment`` in the shape (and separator, and fraction) the input had, as Bruin's filters keep it."""
    if shape == "date":
        return moment.date().isoformat()
    separator = " " if len(original) > 10 and original[10] == " " else "T"
    if shape == "datetime":
        fraction = f".{moment.microsecond:06d}" if "." in original else ""
        return moment.strftime(f"%Y-%m-%d{separator}%H:%M:%S") + fraction
    text = moment.isoformat(sep=separator, timespec="microseconds" if "." in original else "seconds")
    return text[:-6] + "Z" if original.endswith("Z") and text.endswith("+00:00") else text


def _shifter(**unit: int):
    def shift(value: Any, amount: int) -> str:
        moment, shape = _parse_any(value)
        return _render_shape(moment + timedelta(**{k: v * amount for k, v in unit.items()}), shape, str(value))

    return shift


def _calendar_shift(months_per_unit: int):
    """add_months / add_years as Go's ``AddDate``: the day is kept and overflows into the next month
    (January 31 plus a month is March 2 or 3; February 29 plus a year is March 1)."""

    def shift(value: Any, amount: int) -> str:
        moment, shape = _parse_any(value)
        months = moment.year * 12 + (moment.month - 1) + months_per_unit * int(amount)
        first = moment.replace(year=months // 12, month=months % 12 + 1, day=1)
        return _render_shape(first + timedelta(days=moment.day - 1), shape, str(value))

    return shift


def _truncator(unit: str):
    """truncate_year/month/day/hour: the start of that unit, in the input's shape."""

    def truncate(value: Any) -> str:
        moment, shape = _parse_any(value)
        keep = {"year": ("month", "day"), "month": ("day",), "day": (), "hour": ()}[unit]
        start = moment.replace(minute=0, second=0, microsecond=0)
        if unit != "hour":
            start = start.replace(hour=0)
        start = start.replace(**{field: 1 for field in keep})
        return _render_shape(start, shape, str(value))

    return truncate


def _date_format(value: Any, pattern: str) -> str:
    moment, _ = _parse_any(value)
    return moment.strftime(pattern)


@functools.cache
def environment() -> jinja2.Environment:  # a SandboxedEnvironment
    """The one Jinja environment, made at its first use: jinja2 is imported only by what renders templates
    (a command target's invocation never does; the warm runner calls this as it starts). Sandboxed: a template
    reaches variables, filters and macros, as Bruin's gonja does, never Python's internals
    (``cycler.__init__.__globals__.os`` ran any command during a dry run)."""
    import jinja2
    from jinja2.sandbox import SandboxedEnvironment

    environment = SandboxedEnvironment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True, autoescape=False)
    environment.filters.update(
        add_days=_shifter(days=1),
        date_add=_shifter(days=1),
        add_hours=_shifter(hours=1),
        add_minutes=_shifter(minutes=1),
        add_seconds=_shifter(seconds=1),
        add_milliseconds=_shifter(milliseconds=1),
        add_months=_calendar_shift(1),
        add_years=_calendar_shift(12),
        truncate_year=_truncator("year"),
        truncate_month=_truncator("month"),
        truncate_day=_truncator("day"),
        truncate_hour=_truncator("hour"),
        date_format=_date_format,
    )
    return environment


class TemplateProblem(Exception):
    """A template that cannot be rendered; the message names the line."""


def render(text: str, context: dict[str, Any], *, first_line: int = 1) -> str:
    """Render ``text``; errors name the line in the original file."""
    import jinja2
    from jinja2.exceptions import SecurityError

    try:
        return environment().from_string(text).render(context)
    except jinja2.TemplateSyntaxError as error:
        raise TemplateProblem(
            f"line {first_line + (error.lineno or 1) - 1}: template syntax: {error.message}"
        ) from None
    except (jinja2.UndefinedError, SecurityError) as error:
        raise TemplateProblem(f"template: {error.message}") from None
    except (ValueError, TypeError) as error:
        raise TemplateProblem(f"template: {error}") from None


def names_read(text: str) -> set[str]:
    """The context names a template reads (``var``, ``start_date`` …), whether or not it guards them with
    ``is defined`` or ``default``; a template that does not parse raises ``TemplateProblem``."""
    import jinja2
    from jinja2 import meta

    try:
        return set(meta.find_undeclared_variables(environment().parse(text)))
    except jinja2.TemplateSyntaxError as error:
        raise TemplateProblem(f"line {error.lineno or 1}: template syntax: {error.message}") from None


def syntax_problem(text: str) -> tuple[int, str] | None:
    """(line, message) when ``text`` is not a valid template."""
    import jinja2

    try:
        environment().parse(text)
    except jinja2.TemplateSyntaxError as error:
        return error.lineno or 1, f"template syntax: {error.message}"
    return None


@functools.lru_cache(maxsize=8)
def _macro_template(macros: str) -> jinja2.Template:
    """The pipeline's macros compiled once (a warm runner renders them for every asset of every partition)."""
    return environment().from_string(macros)


def with_macros(macros: str, context: dict[str, Any]) -> dict[str, Any]:
    """``context`` plus every macro of the pipeline's ``macros/`` folder, callable from any template."""
    import jinja2

    try:
        module = _macro_template(macros).make_module(context)
    except jinja2.TemplateSyntaxError as error:
        raise TemplateProblem(f"macros/: line {error.lineno}: template syntax: {error.message}") from None
    except (jinja2.UndefinedError, jinja2.exceptions.SecurityError) as error:
        raise TemplateProblem(f"macros/: {error.message}") from None
    exported = {name: getattr(module, name) for name in dir(module) if not name.startswith("_")}
    return {**context, **exported}


def execution_variables(moment: datetime) -> dict[str, str]:
    """Bruin's ``execution_*`` variables: when the run started, in UTC (its ``time.Now().UTC()``)."""
    moment = moment.astimezone(UTC)
    return {
        "execution_date": moment.date().isoformat(),
        "execution_date_nodash": moment.strftime("%Y%m%d"),
        "execution_datetime": moment.strftime("%Y-%m-%dT%H:%M:%S"),
        "execution_timestamp": moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
    }


def base_context(
    window: Window,
    *,
    run_id: str,
    pipeline: str,
    variables: dict[str, Any],
    full_refresh: bool,
    executed: datetime | None = None,
    commit_hash: str = "",
    schema_prefix: str = "",
) -> dict[str, Any]:
    """Everything a template may use except ``this`` (added per asset): Bruin's built-in variables."""
    return {
        **window.variables(),
        **execution_variables(executed or datetime.now(UTC)),
        "run_id": run_id,
        "pipeline": pipeline,
        "var": variables,
        "full_refresh": full_refresh,
        "commit_hash": commit_hash,
        "schema_prefix": schema_prefix,
        "bruin": BRUIN_HELPERS,
    }


def today_in(zone: tzinfo) -> date:
    """The local date now in ``zone`` (for the default window: yesterday)."""
    return datetime.now(zone).date()
