"""What kind of terminal we are talking to: dashboard or progress lines, colours or not."""

from __future__ import annotations

import contextlib
import os
import sys
from typing import IO, ClassVar


def colors_enabled(stream: IO[str], *, no_color_flag: bool = False) -> bool:
    """Colours on terminals that support them; --no-color, NO_COLOR and TERM=dumb turn them off."""
    if no_color_flag or os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    return hasattr(stream, "isatty") and stream.isatty()


def dashboard_possible(*, no_progress: bool, json_output: bool) -> bool:
    """A full-screen dashboard needs stdin and stdout to be terminals and TERM not dumb."""
    if no_progress or json_output or os.environ.get("TERM") == "dumb":
        return False
    return sys.stdin.isatty() and sys.stdout.isatty()


class Paint:
    """ANSI colours, or nothing."""

    CODES: ClassVar[dict[str, str]] = {
        "green": "32",
        "red": "31",
        "yellow": "33",
        "blue": "34",
        "dim": "2",
        "bold": "1",
        "magenta": "35",
    }

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled

    def __call__(self, text: str, style: str) -> str:
        if not self.enabled or not text:
            return text
        return f"\033[{self.CODES[style]}m{text}\033[0m"


STATUS_STYLE = {
    "succeeded": "green",
    "failed": "red",
    "cancelled": "yellow",
    "skipped": "dim",
    "running": "blue",
    "queued": "dim",
    "retrying": "magenta",
    "split": "magenta",
    "started": "blue",
}


def detach_from_terminal() -> None:
    """The terminal is gone: from now on reads see end of file and writes go nowhere, without error."""
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        with contextlib.suppress(OSError):
            os.dup2(null, fd)
    os.close(null)
