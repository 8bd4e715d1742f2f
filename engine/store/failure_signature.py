"""A failure's signature: its reason — the failing asset and its error, or the child's last words — with what varies
from partition to partition written as placeholders: dates and times, UUIDs and long hexadecimal IDs, paths and
numbers. Partitions whose reasons share a signature failed the same way, whatever day they cover.
"""

from __future__ import annotations

import re

NO_REASON = "no reason recorded"

# In this order: a date's digits are not numbers of their own, nor a UUID's hex an ID of its own.
_PLACEHOLDERS = (
    (
        re.compile(
            r"\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?)?(?:Z|[+-]\d{2}(?::?\d{2})?)?"
            r"|\b\d{2}:\d{2}:\d{2}(?:\.\d+)?\b"
        ),
        "<time>",
    ),
    (re.compile(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"), "<id>"),
    (re.compile(r"(?<![\w/.])(?:~|\.{1,2})?/[^\s'\"():,;]+"), "<path>"),
    (re.compile(r"\b(?=[0-9a-fA-F]*\d)(?=[0-9a-fA-F]*[a-fA-F])[0-9a-fA-F]{8,}\b"), "<id>"),
    (re.compile(r"(?<![\w.])[-+]?\d+(?:[.,]\d+)*\b"), "<n>"),
)
_SPACES = re.compile(r"\s+")


def signature(reason: str | None) -> str:
    """``mid.orders failed: Conversion Error at line <n> in <path>``: the reason with what varies left out."""
    text = (reason or "").strip()
    if not text:
        return NO_REASON
    for pattern, placeholder in _PLACEHOLDERS:
        text = pattern.sub(placeholder, text)
    return _SPACES.sub(" ", text)
