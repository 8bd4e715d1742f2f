"""Atomic, durable file writes: temp file in the same directory, fsync, rename, fsync the directory.

A reader (or a crash) sees either the old file or the new one, never a torn mix.
"""

from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path

FILE_MODE = 0o600
DIRECTORY_MODE = 0o700


def ensure_directory(path: Path, mode: int = DIRECTORY_MODE) -> None:
    """Create ``path`` (and parents) with ``mode`` for the directories this call creates."""
    if path.is_dir():
        return
    ensure_directory(path.parent, mode) if not path.parent.exists() else None
    try:
        os.mkdir(path, mode)
    except FileExistsError:
        return
    os.chmod(path, mode)  # not subject to the umask


def sync_directory(path: Path) -> None:
    """Make renames inside ``path`` durable."""
    directory = os.open(path, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def temporary_name(path: Path) -> Path:
    """Where ``path`` is written before its rename: hidden, and naming the writer's PID."""
    return path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")


def remove_stale_temporaries(directory: Path) -> list[Path]:
    """Remove the temporary files of writers that died between creating and renaming them (SIGKILL, power
    loss): only those whose PID is gone, so a live writer in another process keeps its file."""
    removed = []
    try:
        names = [entry.name for entry in os.scandir(directory) if entry.name.endswith(".tmp")]
    except OSError:
        return removed
    for name in names:
        parts = name.split(".")
        if len(parts) < 5 or not parts[-3].isdecimal() or not parts[-3].isascii():
            continue
        try:
            os.kill(int(parts[-3]), 0)
            continue  # its writer lives (or belongs to another user)
        except ProcessLookupError:
            pass
        except OSError:
            continue
        with contextlib.suppress(OSError):
            os.unlink(directory / name)
            removed.append(directory / name)
    return removed


def write_atomic(
    path: Path, data: bytes, *, mode: int = FILE_MODE, durable: bool = True, sync_parent: bool = True
) -> None:
    """Replace ``path`` with ``data``; with ``durable`` the data is fsynced, and the directory too unless
    ``sync_parent`` is False (the caller then syncs it once for a batch)."""
    ensure_directory(path.parent)
    temporary = temporary_name(path)
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        try:
            view = memoryview(data)
            while view:
                written = os.write(descriptor, view)
                view = view[written:]
            if durable:
                os.fsync(descriptor)
        finally:
            os.close(descriptor)
        os.replace(temporary, path)
    except BaseException:
        # A full disk (ENOSPC), an I/O error or an interruption: the old file stays whole, and no
        # temporary file is left behind to litter the directory.
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    if durable and sync_parent:
        sync_directory(path.parent)
