"""Text a child printed, made fit for a terminal: a reason or a log line is shown on the dashboard, in progress lines
and in ``show``, on other operators' terminals too (the state directory is shared), so what reaches them must be
text, not instructions to their terminal.

Every ECMA-48 sequence is dropped — CSI (colours, cursor moves, screen clears, in its 7- and 8-bit forms), OSC
(window titles, hyperlinks), DCS, SOS, PM and APC strings up to their terminator, other ESC sequences — and each
control character left (C0, DEL, C1) becomes a space.
"""

from __future__ import annotations

import re

ESCAPES = re.compile(
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]"
    r"|(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f]).*?(?:\x07|\x1b\\|\x9c|$)"
    r"|\x1b[ -/]*[0-~]?"
)
CONTROLS = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """``text`` without terminal escape sequences, each control character left a space (a tab too)."""
    return CONTROLS.sub(" ", ESCAPES.sub("", text))


def has_controls(text: str, allowed: str = "\t") -> bool:
    """Whether ``text`` holds a control character (C0, DEL, C1) other than those ``allowed``: what a value typed for
    others to read (a reason, a name, a command shown in ``list``) must not."""
    return CONTROLS.search(text.translate(dict.fromkeys(map(ord, allowed)))) is not None


def shortened(text: str, limit: int = 80) -> str:
    """``text`` as an error message quotes a value that may be very long (a path of 5,000 characters): at most
    ``limit`` characters, cut with ``...``."""
    return text if len(text) <= limit else text[: limit - 3] + "..."
