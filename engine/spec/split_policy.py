"""``--split-on`` and ``--min-partition``: which failures split a partition, and how small its halves may get."""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from engine.base.errors import BadInput
from engine.dates.durations import format_duration, parse_duration
from engine.dates.split import SplitUnit

DEFAULT_MIN_PARTITION = 3_600_000_000  # 1h
ACCEPTED = "timeout, oom, and at most one regular expression, comma-separated (e.g. timeout,oom,deadlock)"


class SplitTrigger(StrEnum):
    """What made a failed attempt split its partition."""

    TIMEOUT = "timeout"  # our --timeout stopped it
    OOM = "oom"  # the kernel's OOM killer (a SIGKILL we did not send), or the child said it ran out of memory
    PATTERN = "pattern"  # its failure reason matched the expression


@dataclass(frozen=True)
class SplitPolicy:
    triggers: frozenset[SplitTrigger]
    pattern: str | None
    min_length: int  # µs: neither half may be shorter
    finest: SplitUnit = SplitUnit.SECOND  # the finest boundary a cut may fall on (a date key: DAY)

    def describe(self) -> str:
        on = [t.value for t in SplitTrigger if t in self.triggers and t is not SplitTrigger.PATTERN]
        if self.pattern is not None:
            on.append(f"/{self.pattern}/")
        return f"on {', '.join(on)}, down to {format_duration(self.min_length)}"


def parse_split_on(text: str) -> tuple[tuple[str, ...], str | None]:
    """(``timeout``/``oom`` as given, the expression or None). Words first; everything from the first other
    word on, commas included, is the expression (``{1,3}`` stays whole). ``none`` drops a saved policy: ((), None)."""
    if text == "none":
        return (), None
    if not text.strip():
        raise BadInput(f"--split-on {text!r} is empty: use {ACCEPTED}, or none")
    words: list[str] = []
    parts = text.split(",")
    for number, part in enumerate(parts):
        word = part.strip()  # `timeout, oom` names two words, not a word and the expression " oom"
        if word in ("timeout", "oom"):
            if word in words:
                raise BadInput(f"--split-on {text!r} names {word} twice: use {ACCEPTED}")
            words.append(word)
            continue
        pattern = ",".join(parts[number:])
        if not part.strip() or not parts[-1].strip():  # `timeout,,oom`, `deadlock,`: a slip, not an expression
            raise BadInput(
                f"--split-on {text!r} has an empty item: use {ACCEPTED} (a comma at an expression's edge: [,])"
            )
        try:
            re.compile(pattern)
        except re.error as error:
            raise BadInput(
                f"--split-on {text!r}: {pattern!r} is not a regular expression ({error}): use {ACCEPTED}"
            ) from None
        return tuple(words), pattern
    return tuple(words), None


def parse_min_partition(text: str) -> int:
    """``--min-partition``: a positive Go duration of at least one second."""
    value = parse_duration(text, "--min-partition")
    if value < 1_000_000:
        raise BadInput(f"--min-partition {text!r} is shorter than a second: give 1s or more, such as 1h or 15m")
    return value
