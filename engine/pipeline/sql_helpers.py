"""Bruin's built-in SQL helpers (``{{ bruin.safe_divide('a', 'b') }}``), as DuckDB SQL.

Each helper renders an SQL expression or query from the column names and literals it is given, with the
behaviour Bruin documents for it (``docs/assets/templating/macros.md``) and the results its DuckDB variant
gives: the same surrogate keys (MD5 over ``-``-joined text, NULL spelled ``_bruin_surrogate_key_null_``), the
same buckets, spines and URL parts. The text of the SQL is ours.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

SURROGATE_NULL = "_bruin_surrogate_key_null_"
_TIME_PARTS = ("hour", "minute", "second", "millisecond", "microsecond")
_SPACES_AND_DASHES = re.compile(r"[ -]+")
_NOT_IDENTIFIER = re.compile(r"[^a-z0-9_]+")


def _fields(arguments: tuple[Any, ...]) -> list[str]:
    """A list as the first argument, or every argument: the expressions a helper combines."""
    if len(arguments) == 1 and isinstance(arguments[0], list | tuple):
        return [str(f) for f in arguments[0]]
    return [str(f) for f in arguments]


def _text(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def group_by(n: int) -> str:
    return "group by " + ", ".join(str(i) for i in range(1, int(n) + 1))


def safe_divide(numerator: str, denominator: str) -> str:
    return f"({numerator}) / nullif(({denominator}), 0)"


def _null_as_zero(fields: Iterable[str], operator: str) -> str:
    return f" {operator} ".join(f"coalesce({f}, 0)" for f in fields)


def safe_add(*fields: Any) -> str:
    return _null_as_zero(_fields(fields), "+")


def safe_subtract(*fields: Any) -> str:
    return _null_as_zero(_fields(fields), "-")


def generate_surrogate_key(*fields: Any) -> str:
    parts = [f"coalesce(cast({f} as varchar), {_text(SURROGATE_NULL)})" for f in _fields(fields)]
    if not parts:
        return ""
    joined = parts[0] if len(parts) == 1 else "concat(" + ", '-', ".join(parts) + ")"
    return f"md5({joined})"


def slugify(value: str) -> str:
    text = _NOT_IDENTIFIER.sub("", _SPACES_AND_DASHES.sub("_", str(value).lower()))
    return "_" + text if text[:1].isdigit() else text


def pivot(
    column: str,
    values: Iterable[Any],
    *,
    alias: bool = True,
    agg: str = "sum",
    cmp: str = "=",
    prefix: str = "",
    suffix: str = "",
    then_value: Any = 1,
    else_value: Any = 0,
    quote_identifiers: bool = True,
    distinct: bool = False,
) -> str:
    expressions = []
    for value in values:
        inner = "distinct " if distinct else ""
        expression = (
            f"{agg}({inner}case when {column} {cmp} {_text(str(value))} then {then_value} else {else_value} end)"
        )
        if alias:
            name = f"{prefix}{value}{suffix}"
            shown = '"' + name.replace('"', '""') + '"' if quote_identifiers else slugify(name)
            expression += f" as {shown}"
        expressions.append(expression)
    return ",\n    ".join(expressions)


def degrees_to_radians(degrees: str) -> str:
    return f"acos(-1) * {degrees} / 180"


def haversine_distance(lat1: str, lon1: str, lat2: str, lon2: str, unit: str = "mi") -> str:
    """Great-circle distance on a sphere of 3,961 miles, in miles or kilometres."""
    rates = {"mi": "1", "km": "1.60934"}
    if unit not in rates:
        raise ValueError(f"haversine_distance unit must be 'mi' or 'km', got {unit!r}")
    half_lat, half_lon = f"radians(({lat2} - {lat1}) / 2)", f"radians(({lon2} - {lon1}) / 2)"
    return (
        f"2 * 3961 * asin(sqrt(power(sin({half_lat}), 2) + cos(radians({lat1})) * cos(radians({lat2})) * "
        f"power(sin({half_lon}), 2))) * {rates[unit]}"
    )


def width_bucket(expression: str, low: Any, high: Any, buckets: Any) -> str:
    """The bucket (1..n) ``expression`` falls in over [low, high); 0 below, n + 1 at or above ``high``. Values
    are compared as NUMERIC, as Bruin's DuckDB variant compares them."""

    def number(x: Any) -> str:
        return f"cast({x} as numeric)"

    width = f"(({number(high)} - {number(low)}) / {number(buckets)})"
    return (
        f"case when {number(expression)} < {number(low)} then 0 "
        f"when {number(expression)} >= {number(high)} then {number(buckets)} + 1 "
        f"else floor(({number(expression)} - {number(low)}) / {width}) + 1 end"
    )


def deduplicate(relation: str, partition_by: str, order_by: str) -> str:
    return (
        f"select * from {relation} as _bruin_source "
        f"qualify row_number() over (partition by {partition_by} order by {order_by}) = 1"
    )


def generate_series(upper_bound: int) -> str:
    return (
        f"select generated_number from generate_series(1, {int(upper_bound)}) as t(generated_number) "
        "order by generated_number"
    )


def date_spine(datepart: str, start: str, end: str) -> str:
    """One row per ``datepart`` from ``start`` up to (not including) ``end``, in column ``date_<datepart>``."""
    part = str(datepart).lower()
    column = f"date_{part}"
    kind = "timestamp" if part in _TIME_PARTS else "date"
    step = {"quarter": "3 month", "week": "7 day"}.get(part, f"1 {part}")
    shown = column if kind == "timestamp" else f"cast({column} as date)"
    return (
        f"select {shown} as {column} from generate_series(cast({start} as {kind}), cast({end} as {kind}), "
        f"interval '{step}') as t({column}) where {column} < cast({end} as {kind})"
    )


def _without_scheme(field: str) -> str:
    return f"replace(replace(replace({field}, 'android-app://', ''), 'http://', ''), 'https://', '')"


def get_url_host(field: str) -> str:
    return f"cast(split_part(split_part({_without_scheme(field)}, '/', 1), '?', 1) as varchar)"


def get_url_path(field: str) -> str:
    url = _without_scheme(field)
    return (
        f"cast(case when position('/' in {url}) > 0 then split_part(right({url}, length({url}) - "
        f"position('/' in {url})), '?', 1) else '' end as varchar)"
    )


def get_url_parameter(field: str, parameter: str) -> str:
    query = f"case when position('?' in {field}) > 0 then split_part({field}, '?', 2) else {field} end"
    needle = _text(f"&{parameter}=")
    return f"nullif(split_part(split_part(concat('&', {query}), {needle}, 2), '&', 1), '')"


BRUIN_HELPERS = {
    "group_by": group_by,
    "safe_divide": safe_divide,
    "safe_add": safe_add,
    "safe_subtract": safe_subtract,
    "generate_surrogate_key": generate_surrogate_key,
    "pivot": pivot,
    "haversine_distance": haversine_distance,
    "degrees_to_radians": degrees_to_radians,
    "width_bucket": width_bucket,
    "deduplicate": deduplicate,
    "generate_series": generate_series,
    "date_spine": date_spine,
    "slugify": slugify,
    "get_url_host": get_url_host,
    "get_url_parameter": get_url_parameter,
    "get_url_path": get_url_path,
}
