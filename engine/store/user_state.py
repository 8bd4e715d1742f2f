"""The user's state directory, which every store on this machine shares: the registry of running work
(``live/``) and the pipelines an operator paused (``paused-targets/``) live there, under XDG_STATE_HOME."""

from __future__ import annotations

import os
from pathlib import Path

from engine.base.atomic import FILE_MODE
from engine.base.errors import BadInput


def user_state_dir() -> Path:
    import platformdirs

    return Path(platformdirs.user_state_dir("backfill"))


def usable(directory: Path, what: str) -> Path:
    """``directory``, made if needed, with its lock file creatable. One that cannot be (XDG_STATE_HOME naming a file
    or a read-only place) was a bare "No such file or directory (…)" naming neither ``what`` nor the fix."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        os.close(os.open(directory / ".lock", os.O_RDWR | os.O_CREAT, FILE_MODE))
    except OSError as error:
        raise BadInput(
            f"{what}, {directory}, cannot be used ({error.strerror or error}): it is under XDG_STATE_HOME (else "
            "~/.local/state); point XDG_STATE_HOME at a writable directory"
        ) from None
    return directory
