"""Go-style durations (``6h``, ``90m``, ``1h30m``, ``500ms``, ``1.5h``, ``1µs``) in whole microseconds."""

from __future__ import annotations

import re
from fractions import Fraction

from engine.base.errors import BadInput

_NANOS = {
    "ns": 1,
    "us": 1_000,
    "µs": 1_000,  # U+00B5 micro sign
    "μs": 1_000,  # U+03BC Greek mu
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60_000_000_000,
    "h": 3_600_000_000_000,
}
_TERM = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)", re.ASCII)
ACCEPTED = "a positive Go duration such as 6h, 90m, 1h30m, 15m, 500ms, 1.5h or 1us"


def parse_duration(text: str, flag: str) -> int:
    """Microseconds of a positive Go duration; finer than 1 µs, zero or negative is an error."""
    if text != text.strip():
        raise BadInput(f"{flag} {text!r} has spaces around it: use {ACCEPTED}")
    value = text
    if value.startswith("-"):
        raise BadInput(f"{flag} {text!r} is negative: use {ACCEPTED}")
    body = value[1:] if value.startswith("+") else value
    position, total = 0, Fraction(0)
    while position < len(body):
        match = _TERM.match(body, position)
        if not match:
            raise BadInput(f"{flag} {text!r} is not a duration: use {ACCEPTED}")
        total += Fraction(match.group(1)) * _NANOS[match.group(2)]
        position = match.end()
    if not body:
        raise BadInput(f"{flag} {text!r} is not a duration: use {ACCEPTED}")
    if total <= 0:
        raise BadInput(f"{flag} {text!r} is zero: use {ACCEPTED}")
    micros = total / 1000
    if micros.denominator != 1:
        raise BadInput(f"{flag} {text!r} is not a whole number of microseconds: use {ACCEPTED}")
    return int(micros)


def format_duration(micros: int) -> str:
    """Go's canonical spelling: ``1h30m0s``, ``15m0s``, ``500ms``, ``1.5ms``, ``1µs``."""
    if micros == 0:
        return "0s"
    sign = "-" if micros < 0 else ""
    micros = abs(micros)
    if micros < 1_000:
        return f"{sign}{micros}µs"
    if micros < 1_000_000:
        return f"{sign}{_trim(micros, 1_000)}ms"
    hours, rest = divmod(micros, 3_600_000_000)
    minutes, rest = divmod(rest, 60_000_000)
    text = (f"{hours}h" if hours else "") + (f"{minutes}m" if minutes else "")
    if rest or not text:
        text += f"{_trim(rest, 1_000_000)}s"
    return sign + text


def _trim(value: int, unit: int) -> str:
    whole, fraction = divmod(value, unit)
    if not fraction:
        return str(whole)
    digits = len(str(unit)) - 1
    return f"{whole}.{fraction:0{digits}d}".rstrip("0")
