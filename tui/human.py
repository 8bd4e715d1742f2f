"""How a person reads numbers, durations and times: one place, so every screen and line agrees.

The engine keeps exact microseconds and RFC 3339 text; this module is presentation only
(pendulum for words and relative times, in the operator's local zone). See docs/decisions.md.
pendulum is imported by the functions that use it, not with this module: it costs tens of milliseconds at
start-up, and the counts and durations most lines need do without it.
"""

from __future__ import annotations


def count(number: int) -> str:
    """``1,006,560``: thousands separated by commas, everywhere (headers, counts, summaries, lines)."""
    return f"{number:,}"


def duration(seconds: float) -> str:
    """Compact human duration: ``0.4s``, ``12s``, ``1m``, ``1m 5s``, ``2h 5m``, ``3d``, ``3d 4h``."""
    if seconds < 9.95:
        return f"{max(0.0, seconds):.1f}s"
    whole = round(seconds) if seconds < 60 else int(seconds)
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        major, minor, units = whole // 60, whole % 60, ("m", "s")
    elif whole < 86_400:
        major, minor, units = whole // 3600, whole % 3600 // 60, ("h", "m")
    else:
        major, minor, units = whole // 86_400, whole % 86_400 // 3600, ("d", "h")
    return f"{major}{units[0]}" + (f" {minor}{units[1]}" if minor else "")


def duration_words(seconds: float, *, units: int = 2) -> str:
    """``2 hours 5 minutes``: the largest ``units`` units in words (pendulum), for places with room."""
    import pendulum

    if seconds < 1:
        return "less than a second"
    words = pendulum.duration(seconds=int(seconds)).in_words(locale="en").split(" ")
    pairs = [" ".join(words[i : i + 2]) for i in range(0, len(words), 2)]
    return " ".join(pairs[:units])


def local_zone() -> str:
    """The operator's zone name (``Europe/Paris``), as shown beside local times."""
    import pendulum

    return pendulum.local_timezone().name


def local_time(text: str | None) -> str:
    """An RFC 3339 instant as ``2026-11-29 14:02`` in the operator's zone; ``—`` when missing."""
    import pendulum

    if not text:
        return "—"
    moment = pendulum.parse(text).in_timezone(pendulum.local_timezone())
    return moment.format("YYYY-MM-DD HH:mm")


def relative_time(text: str | None, now: float | None = None) -> str:
    """``3 hours ago``, ``yesterday 14:02``, ``Nov 27 14:02``, ``2025-11-27``: in the operator's zone."""
    import pendulum

    if not text:
        return "—"
    zone = pendulum.local_timezone()
    moment = pendulum.parse(text).in_timezone(zone)
    current = pendulum.from_timestamp(now, tz=zone) if now is not None else pendulum.now(zone)
    seconds = (current - moment).total_seconds()
    if -60 < seconds < 60:
        return "just now"
    if 0 < seconds < 12 * 3600 or (seconds > 0 and moment.date() == current.date()):
        return moment.diff_for_humans(current, absolute=True) + " ago"
    if moment.date() == current.subtract(days=1).date():
        return moment.format("[yesterday] HH:mm")
    if moment.year == current.year:
        return moment.format("MMM D HH:mm")
    return moment.format("YYYY-MM-DD")


def shorten_middle(text: str, width: int) -> str:
    """``/home/ana/repo/.context/backfill-…-20240101.yml`` rather than a cut end: the start and the end (the
    file's name) of a path that does not fit in ``width``, the middle replaced by an ellipsis."""
    if len(text) <= width:
        return text
    if width < 3:
        return text[-width:] if width > 0 else ""
    tail = (width - 1) * 2 // 3  # the end says most: the file's name
    head = width - 1 - tail
    return text[:head] + "…" + text[len(text) - tail :]
