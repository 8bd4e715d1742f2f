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
_TERM = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")
ACCEPTED = "a positive Go duration such as 6h, 90m, 1h30m, 15m, 500ms, 1.5h or 1us"


def parse_duration(text: str, flag: str) -> int:
    """Microseconds of a positive Go duration; finer than 1 µs, zero or negative is an error."""
    value = text.strip()
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
    text = f"{_trim(rest, 1_000_000)}s"
    if hours or minutes:
        text = f"{minutes}m{text}"
    if hours:
        text = f"{hours}h{text}"
    return sign + text


def _trim(value: int, unit: int) -> str:
    whole, fraction = divmod(value, unit)
    if not fraction:
        return str(whole)
    digits = len(str(unit)) - 1
    return f"{whole}.{fraction:0{digits}d}".rstrip("0")


def format_elapsed(seconds: float) -> str:
    """A short human duration for progress displays: ``4s``, ``2m05s``, ``1h02m``, ``3d04h``."""
    if seconds < 10:
        return f"{max(0.0, seconds):.1f}s"
    seconds = int(seconds)
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours}h{minutes:02d}m"
    days, hours = divmod(hours, 24)
    return f"{days}d{hours:02d}h"
