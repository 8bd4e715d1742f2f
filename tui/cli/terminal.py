"""What kind of terminal we are talking to: dashboard or progress lines, colours or not."""

from __future__ import annotations

import contextlib
import errno
import os
import sys
from collections.abc import Collection
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
    _point_at_null((0, 1, 2))


def _point_at_null(descriptors: Collection[int]) -> None:
    """Each of ``descriptors`` (open or closed) reads and writes /dev/null from now on."""
    null = os.open(os.devnull, os.O_RDWR)  # the lowest free descriptor: a closed one of ``descriptors`` first
    for fd in descriptors:
        if fd != null:
            with contextlib.suppress(OSError):
                os.dup2(null, fd)
    if null not in descriptors:
        os.close(null)


def terminal_descriptors() -> frozenset[int]:
    """Which of stdin, stdout and stderr are terminals, asked before any write fails: once it has hung up, a
    terminal says it is none."""
    return frozenset(fd for fd in (0, 1, 2) if _isatty(fd))


def nobody_reads(error: OSError, stream: IO[str], terminals: frozenset[int]) -> bool:
    """Whether a failed write to ``stream`` means nobody can read it any more: the pipe's reader went away, or
    the terminal hung up (EIO on what was a terminal). Any other failure (a full disk, EIO on a file) is an error
    to tell."""
    if isinstance(error, BrokenPipeError):
        return True
    return error.errno == errno.EIO and stream.fileno() in terminals


def silence(stream: IO[str], terminals: frozenset[int]) -> None:
    """``stream`` has nobody left to read it: from now on its writes go nowhere, without error, and so do those of
    every descriptor on the same lost terminal. What it had buffered, which cannot be delivered, goes with it."""
    fd = stream.fileno()
    _point_at_null(terminals if fd in terminals else (fd,))
    with contextlib.suppress(OSError):
        stream.flush()  # into /dev/null now: the text the failed write left buffered goes, the next write succeeds


def _isatty(fd: int) -> bool:
    try:
        return os.isatty(fd)
    except OSError:
        return False


def open_standard_streams() -> None:
    """A stdin, stdout or stderr closed by whoever started us (``backfill … >&-``) becomes /dev/null: Python leaves
    its stream ``None``, so every write to it was a traceback, and the next file we opened took its descriptor —
    a store's file that anything written to "stdout" would have gone into."""
    for fd, name in ((0, "stdin"), (1, "stdout"), (2, "stderr")):
        try:
            os.fstat(fd)
        except OSError:
            _point_at_null((fd,))
        if getattr(sys, name) is None:
            stream = open(fd, "r" if fd == 0 else "w", buffering=1, encoding="utf-8", closefd=False)  # noqa: SIM115
            setattr(sys, name, stream)
            setattr(sys, f"__{name}__", stream)
