"""Instants as integer microseconds since the Unix epoch, and the zone arithmetic around them.

Integers are exact (no float rounding at microsecond precision), cheap to store
in arrays, and sort like the instants they stand for. Conversions to aware
datetimes happen only at the edges: parsing input and formatting output.
"""

from __future__ import annotations

import re
import zoneinfo
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta, tzinfo
from functools import lru_cache

from engine.base.errors import BadInput

UTC = UTC
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MICROS_PER_SECOND = 1_000_000
MICROS_PER_DAY = 86_400 * MICROS_PER_SECOND
MIN_INSTANT = -62_135_596_800 * MICROS_PER_SECOND + 2 * MICROS_PER_DAY  # 0001-01-03, leaves room for any offset
MAX_INSTANT = 253_402_300_799 * MICROS_PER_SECOND - 2 * MICROS_PER_DAY  # 9999-12-29


def to_micros(moment: datetime) -> int:
    """Exact microseconds since the epoch of an aware datetime."""
    delta = moment - EPOCH
    return (delta.days * 86_400 + delta.seconds) * MICROS_PER_SECOND + delta.microseconds


def to_datetime(instant: int, zone: tzinfo) -> datetime:
    """The aware datetime of an instant, shown in ``zone``."""
    return (EPOCH + timedelta(microseconds=instant)).astimezone(zone)


MACHINE_ZONES = ("localtime", "posixrules")  # files in the zone database that stand for a machine's setting


@lru_cache(maxsize=64)
def load_zone(name: str) -> tzinfo:
    """An IANA zone by name; ``UTC`` (any case) is the fixed UTC zone."""
    if name.upper() in ("UTC", "Z", "ETC/UTC"):
        return zoneinfo.ZoneInfo("UTC")
    if not name or name.startswith(("/", ".")) or ".." in name:
        raise BadInput(_unknown_zone(name))
    if name in MACHINE_ZONES:
        raise BadInput(
            f"time zone {name!r} is this machine's zone file, not a zone name: another host (or this one after a "
            "change) would read it differently; give the IANA name, such as America/New_York or Europe/London"
        )
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):  # OSError: a directory, unreadable, too long
        raise BadInput(_unknown_zone(name)) from None


def _unknown_zone(name: str) -> str:
    return (
        f"unknown time zone {name!r}: use UTC or an IANA name such as America/New_York or Europe/London "
        "(list them with: python3 -c 'import zoneinfo; print(*sorted(zoneinfo.available_timezones()))')"
    )


def zone_name(zone: tzinfo) -> str:
    """The name a zone was loaded by."""
    return getattr(zone, "key", None) or str(zone)


def offset_micros(instant: int, zone: tzinfo) -> int:
    """The zone's UTC offset at an instant, in microseconds."""
    offset = to_datetime(instant, zone).utcoffset()
    assert offset is not None
    return (offset.days * 86_400 + offset.seconds) * MICROS_PER_SECOND + offset.microseconds


@dataclass(frozen=True)
class LocalResolution:
    """How a local wall time maps to an instant."""

    instant: int
    exists: bool  # False: the wall time falls in a gap; ``instant`` is then the first instant after it
    ambiguous: bool  # True: the wall time occurs twice; ``instant`` is the earlier one


def resolve_local(wall: datetime, zone: tzinfo) -> LocalResolution:
    """Map a wall time (``wall``'s own tzinfo ignored) to an instant in ``zone``.

    Inside a fall-back overlap the earlier instant is taken. Inside a gap the
    first instant that exists after it (the transition) is returned with
    ``exists=False``; callers decide whether that is an error.
    """
    early = wall.replace(tzinfo=zone, fold=0)
    late = wall.replace(tzinfo=zone, fold=1)
    early_us = to_micros(early)
    late_us = to_micros(late)
    if early_us == late_us:
        return LocalResolution(early_us, True, False)
    if early_us < late_us:
        # Overlap: both readings exist and the wall time occurs twice.
        return LocalResolution(early_us, True, True)
    # Gap: fold=0 reads with the offset before the transition (lands after it),
    # fold=1 with the offset after (lands before it). The transition lies between.
    return LocalResolution(_first_instant_after_gap(late_us, early_us, zone), False, False)


def _first_instant_after_gap(before: int, after: int, zone: tzinfo) -> int:
    """The transition instant in (before, after]: where the offset changes.

    Transitions in the tz database fall on whole seconds, so bisect seconds. ``before`` lies a whole
    gap (at least a minute) before the transition, so only ``after`` can bound the result.
    """
    low_offset = offset_micros(before, zone)
    lo = before // MICROS_PER_SECOND
    hi = -(-after // MICROS_PER_SECOND)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if offset_micros(mid * MICROS_PER_SECOND, zone) == low_offset:
            lo = mid
        else:
            hi = mid
    return min(after, hi * MICROS_PER_SECOND)


@lru_cache(maxsize=4096)
def local_day_start(day: date, zone: tzinfo) -> int:
    """First instant of a local calendar day: local midnight, or the first instant after a gap at midnight.

    A day that does not exist at all (Pacific/Apia 2011-12-30) starts where the
    next day starts, so it has no length.
    """
    if zone is UTC or getattr(zone, "key", None) == "UTC":
        return (day.toordinal() - 719_163) * MICROS_PER_DAY
    wall = datetime(day.year, day.month, day.day, tzinfo=zone)
    return resolve_local(wall, zone).instant


def local_date(instant: int, zone: tzinfo) -> date:
    """The local calendar date of an instant."""
    return to_datetime(instant, zone).date()


# ---------------------------------------------------------------- parsing input

# ASCII digits only: Python's \d also matches ١٢٣٤ and １２３４, which are no one's dates here.
_DATE = re.compile(r"(\d{4})-(\d{2})-(\d{2})", re.ASCII)
_TIMESTAMP = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d+))?)?"
    r"(Z|z|[+-]\d{2}(?::?\d{2})?)?",
    re.ASCII,
)


BOUNDARY_FORMATS = (
    "use YYYY-MM-DD, YYYY-MM-DDTHH:MM[:SS[.ffffff]] "
    "or a timestamp with an offset such as 2024-01-01T06:00:00Z or 2024-01-01T06:00:00+02:00"
)


@dataclass(frozen=True)
class Boundary:
    """A parsed --start-date / --end-date value."""

    text: str
    kind: str  # "date", "local" (unzoned timestamp) or "instant" (timestamp with an offset)
    day: date | None = None
    wall: datetime | None = None  # for "local": wall time (tzinfo ignored)
    instant: int | None = None  # for "instant"


def parse_boundary(text: str, flag: str) -> Boundary:
    """Parse a date, an unzoned timestamp or a timestamp with an offset; whole microseconds only."""
    if text != text.strip():
        raise BadInput(f"{flag} {text!r} has spaces around it: give it without them ({BOUNDARY_FORMATS})")
    value = text
    if match := _DATE.fullmatch(value):
        year, month, day = (int(g) for g in match.groups())
        try:
            return Boundary(text, "date", day=date(year, month, day))
        except ValueError:
            raise BadInput(f"{flag} {text!r} is not a real calendar date: {BOUNDARY_FORMATS}") from None
    match = _TIMESTAMP.fullmatch(value)
    if not match:
        raise BadInput(f"{flag} {text!r} is not a date or timestamp: {BOUNDARY_FORMATS}")
    year, month, day, hour, minute, second, fraction, offset = match.groups()
    micros = 0
    if fraction:
        digits = fraction.rstrip("0")  # trailing zeros say nothing finer than a microsecond
        if len(digits) > 6:
            raise BadInput(f"{flag} {text!r} is finer than a microsecond: give at most 6 fractional digits of a second")
        micros = int(digits.ljust(6, "0"))
    try:
        wall = datetime(int(year), int(month), int(day), int(hour), int(minute), int(second or 0), micros, tzinfo=UTC)
    except ValueError:
        raise BadInput(f"{flag} {text!r} is not a real date and time: check the day, hour and minute") from None
    if offset is None:
        return Boundary(text, "local", wall=wall)
    if offset in ("Z", "z"):
        offset_us = 0
    else:
        sign = -1 if offset[0] == "-" else 1
        digits = offset[1:].replace(":", "")
        hours, minutes = int(digits[:2]), int(digits[2:4] or 0)
        if hours > 23 or minutes > 59:
            raise BadInput(f"{flag} {text!r} has an impossible UTC offset {offset!r}: use ±HH:MM up to ±23:59")
        offset_us = sign * (hours * 3600 + minutes * 60) * MICROS_PER_SECOND
    return Boundary(text, "instant", instant=to_micros(wall) - offset_us)


def boundary_instant(boundary: Boundary, zone: tzinfo, flag: str, *, inclusive_date: bool) -> int:
    """The instant a boundary stands for in ``zone``.

    A date is the start of that local day, or with ``inclusive_date`` the start
    of the next one (an inclusive end date). A local timestamp inside a DST gap
    is an error; inside an overlap the earlier instant is taken.
    """
    if boundary.kind == "instant":
        assert boundary.instant is not None
        return _in_range(boundary.instant, boundary.text, flag)
    if boundary.kind == "date":
        assert boundary.day is not None
        day = boundary.day
        if inclusive_date:
            try:
                day = day + timedelta(days=1)
            except OverflowError:
                raise BadInput(f"{flag} {boundary.text!r} is past the last supported date 9999-12-28") from None
        return _in_range(local_day_start(day, zone), boundary.text, flag)
    assert boundary.wall is not None
    resolution = resolve_local(boundary.wall, zone)
    if not resolution.exists:
        raise BadInput(
            f"{flag} {boundary.text!r} does not exist in {zone_name(zone)} (clocks skip it for daylight saving): "
            "give an explicit offset, e.g. "
            f"{format_instant(resolution.instant, zone)}"
        )
    return _in_range(resolution.instant, boundary.text, flag)


def _in_range(instant: int, text: str, flag: str) -> int:
    if not MIN_INSTANT <= instant <= MAX_INSTANT:
        raise BadInput(f"{flag} {text!r} is out of range: use a date between 0001-01-03 and 9999-12-28")
    return instant


# ---------------------------------------------------------------- formatting


def format_instant(instant: int, zone: tzinfo, *, micros: str = "auto") -> str:
    """RFC 3339 in ``zone``: ``Z`` for UTC, microseconds when non-zero (``micros="always"`` forces them)."""
    moment = to_datetime(instant, zone)
    text = moment.isoformat(timespec="microseconds" if micros == "always" or moment.microsecond else "seconds")
    if text.endswith("+00:00") and zone_name(zone) == "UTC":
        text = text[:-6] + "Z"
    return text
