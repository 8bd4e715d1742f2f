"""Zones and days for the planner's property tests, chosen by scanning the zone database, not by hand.

Every transition between 1970 and 2037 is read from the TZif files zoneinfo uses, classified (clocks
forward or back, a change whose local wall time crosses midnight, a skipped or repeated day, an offset
of 30 or 45 minutes), and a few zones and dates of each kind are picked deterministically.
"""

from __future__ import annotations

import struct
import zoneinfo
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from functools import cache
from pathlib import Path

FIRST, LAST = datetime(1970, 1, 1, tzinfo=UTC).timestamp(), datetime(2037, 12, 31, tzinfo=UTC).timestamp()


@dataclass(frozen=True)
class Transition:
    zone: str
    at: int  # Unix seconds
    before: int  # UTC offset in seconds
    after: int

    @property
    def kinds(self) -> set[str]:
        kinds = {"forward" if self.after > self.before else "backward"}
        wall_before = datetime.fromtimestamp(self.at + self.before, UTC)
        wall_after = datetime.fromtimestamp(self.at + self.after, UTC)
        # the skipped (forward) or repeated (backward) stretch of wall time contains a local midnight
        low, high = sorted((wall_before, wall_after))
        direction = next(iter(kinds))
        if low.date() != high.date() and high.time() != datetime.min.time():
            kinds.add(f"{direction}-across-midnight")
        elif datetime.min.time() in (wall_before.time(), wall_after.time()):
            kinds.add(f"{direction}-at-midnight")  # local midnight skipped, or met twice
        if abs(self.after - self.before) >= 86_400:
            kinds.add("skipped-or-repeated-day")
        if self.after % 3600 in (1800, 2700) or abs(self.after - self.before) % 3600:
            kinds.add("half-or-quarter-hour")
        return kinds

    @property
    def day(self) -> date:
        return datetime.fromtimestamp(self.at, UTC).date()


def _tzif_path(name: str) -> Path | None:
    for root in zoneinfo.TZPATH:
        path = Path(root) / name
        if path.is_file():
            return path
    try:
        import importlib.resources

        resource = importlib.resources.files("tzdata").joinpath("zoneinfo", *name.split("/"))
        return Path(str(resource)) if resource.is_file() else None
    except (ModuleNotFoundError, FileNotFoundError):
        return None


def _transitions(name: str) -> list[Transition]:
    """The version-2 (64-bit) transitions of a TZif file, with the offsets on either side."""
    path = _tzif_path(name)
    if path is None:
        return []
    data = path.read_bytes()
    if data[:4] != b"TZif":
        return []

    def header(at: int) -> tuple[int, ...]:
        return struct.unpack(">6l", data[at + 20 : at + 44])

    isutc, isstd, leap, count, types, chars = header(0)
    if data[4:5] in (b"2", b"3", b"4"):
        skip = 44 + count * 5 + types * 6 + chars + leap * 8 + isstd + isutc
        isutc, isstd, leap, count, types, chars = header(skip)
        base, width, fmt = skip + 44, 8, ">q"
    else:
        base, width, fmt = 44, 4, ">l"
    times = [struct.unpack(fmt, data[base + i * width : base + (i + 1) * width])[0] for i in range(count)]
    indices = list(data[base + count * width : base + count * width + count])
    type_base = base + count * width + count
    offsets = [struct.unpack(">l", data[type_base + i * 6 : type_base + i * 6 + 4])[0] for i in range(types)]
    found = []
    for i in range(1, count):
        before, after = offsets[indices[i - 1]], offsets[indices[i]]
        if before != after and FIRST <= times[i] <= LAST:
            found.append(Transition(name, times[i], before, after))
    return found


@cache
def catalogue() -> dict[str, list[Transition]]:
    """Every kind of transition → its transitions, ordered by zone and time."""
    kinds: dict[str, list[Transition]] = {}
    for name in sorted(zoneinfo.available_timezones()):
        if name.startswith(("posix/", "right/")) or "/" not in name:
            continue
        for transition in _transitions(name):
            for kind in transition.kinds:
                kinds.setdefault(kind, []).append(transition)
    return kinds


@cache
def chosen(per_kind: int = 3) -> list[Transition]:
    """A few transitions of each kind, spread over different zones (deterministic)."""
    picked: list[Transition] = []
    for kind in sorted(catalogue()):
        first_per_zone: dict[str, Transition] = {}
        for transition in catalogue()[kind]:
            first_per_zone.setdefault(transition.zone, transition)
        candidates = list(first_per_zone.values())
        # spread over the alphabet of zones rather than the first few of one continent
        step = max(1, len(candidates) // per_kind)
        picked += candidates[::step][:per_kind]
    return picked


def zones() -> list[str]:
    return sorted({"UTC", *(t.zone for t in chosen())})


def special_days() -> list[date]:
    """Two days before each chosen transition, so a range starting there crosses it."""
    return sorted({t.day - timedelta(days=2) for t in chosen()})
