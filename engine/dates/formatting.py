"""Fast RFC 3339 formatting of many instants in one zone.

Listing hundreds of thousands of partitions formats each boundary; doing it
with a datetime per instant dominates the cost. Offsets change a few times a
year, so this formatter caches the offset of each UTC day (when it is the same
at both ends of the day) and the date text of each local day, and formats the
rest with integer arithmetic. Results equal :func:`engine.dates.instants.format_instant`.
"""

from __future__ import annotations

from datetime import date, tzinfo

from engine.dates.instants import MICROS_PER_DAY, format_instant, offset_micros, zone_name

_UNIX_ORDINAL = 719_163


class InstantFormatter:
    """Formats instants of one zone; ``micros="always"`` keeps ``.000000``."""

    def __init__(self, zone: tzinfo) -> None:
        self.zone = zone
        self._utc = zone_name(zone) == "UTC"
        self._day_offset: dict[int, int | None] = {}
        self._dates: dict[int, str] = {}
        self._suffixes: dict[int, str] = {}
        self._last_day: int | None = None  # UTC day whose single offset is cached below
        self._last_offset = 0
        self._last_suffix = ""

    def _offset_for(self, instant: int) -> int | None:
        day = instant // MICROS_PER_DAY
        cached = self._day_offset.get(day, False)
        if cached is False:
            first = offset_micros(day * MICROS_PER_DAY, self.zone)
            last = offset_micros((day + 1) * MICROS_PER_DAY - 1, self.zone)
            cached = first if first == last else None
            if len(self._day_offset) > 100_000:
                self._day_offset.clear()
            self._day_offset[day] = cached
        return cached

    def _suffix(self, offset: int) -> str:
        text = self._suffixes.get(offset)
        if text is None:
            if self._utc:
                text = "Z"
            else:
                sign = "-" if offset < 0 else "+"
                seconds = abs(offset) // 1_000_000
                hours, rest = divmod(seconds, 3600)
                minutes, secs = divmod(rest, 60)
                text = f"{sign}{hours:02d}:{minutes:02d}" + (f":{secs:02d}" if secs else "")
            self._suffixes[offset] = text
        return text

    def parts(self, instant: int) -> tuple[str, str, str] | None:
        """``("YYYY-MM-DDTHH:MM:SS", ".ffffff" or "", offset suffix)``, or None near a transition."""
        utc_day = instant // MICROS_PER_DAY
        if utc_day != self._last_day:
            offset = 0 if self._utc else self._offset_for(instant)
            if offset is None:
                return None
            self._last_day, self._last_offset, self._last_suffix = utc_day, offset, self._suffix(offset)
        seconds, fraction = divmod(instant + self._last_offset, 1_000_000)
        day, second_of_day = divmod(seconds, 86_400)
        date_text = self._dates.get(day)
        if date_text is None:
            date_text = date.fromordinal(day + _UNIX_ORDINAL).isoformat() + "T"
            if len(self._dates) > 100_000:
                self._dates.clear()
            self._dates[day] = date_text
        clock = _CLOCKS.get(second_of_day)
        if clock is None:
            clock = _CLOCKS[second_of_day] = (
                f"{second_of_day // 3600:02d}:{second_of_day // 60 % 60:02d}:{second_of_day % 60:02d}"
            )
        return date_text + clock, (f".{fraction:06d}" if fraction else ""), self._last_suffix

    def format(self, instant: int, micros: str = "auto") -> str:
        parts = self.parts(instant)
        if parts is None:  # a transition happens this UTC day: take the exact path
            return format_instant(instant, self.zone, micros=micros)
        base, fraction, suffix = parts
        if not fraction and micros == "always":
            fraction = ".000000"
        return base + fraction + suffix

    def format_both(self, instant: int) -> tuple[str, str]:
        """The instant without and with forced microseconds (``start`` and ``child_start_date``)."""
        parts = self.parts(instant)
        if parts is None:
            return format_instant(instant, self.zone), format_instant(instant, self.zone, micros="always")
        base, fraction, suffix = parts
        return base + fraction + suffix, base + (fraction or ".000000") + suffix


_CLOCKS: dict[int, str] = {}  # "HH:MM:SS" by second of the day, filled as used
