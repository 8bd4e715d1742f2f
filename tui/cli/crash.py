"""When the screen fails: the full traceback goes to a file, the user gets one line saying where."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path


def report_crash(crash: BaseException, text: str, directory: Path | None, *, going_on: str) -> Path | None:
    """Write ``text`` (the traceback) under ``directory`` (or the user state directory) and print one line
    naming the cause, the file and what happens next. Returns the file, or None if it could not be written."""
    if directory is None:
        import platformdirs

        directory = Path(platformdirs.user_state_dir("backfill"))
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    path: Path | None = directory / f"dashboard-crash-{stamp}.txt"
    try:
        directory.mkdir(parents=True, exist_ok=True)
        path.write_text(text)  # type: ignore[union-attr]
    except OSError:
        path = None
    cause = f"{type(crash).__name__}: {crash}".splitlines()[0][:200]
    where = f"full traceback in {path}" if path else "the traceback could not be written"
    sys.stderr.write(f"backfill: the dashboard failed ({cause}); {where}. {going_on}\n")
    sys.stderr.flush()
    return path
