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
    return Path(_temporary_text(os.fspath(path)))


def _temporary_text(path: str) -> str:
    # Strings, not pathlib: this runs for every record written (several per partition).
    directory, name = os.path.split(path)
    return os.path.join(directory, f".{name}.{os.getpid()}.{threading.get_ident()}.tmp")


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
    temporary = _staged(path, data, mode, durable)
    _replace(temporary, path)
    if durable and sync_parent:
        sync_directory(path.parent)


def write_new(path: Path, data: bytes, *, mode: int = FILE_MODE) -> Path:
    """Write ``data`` durably under a name no other file has: ``path``, or when that is taken ``<stem>-2<suffix>``,
    ``-3``…; the path written. The name is taken atomically (a hard link of the synced file, or where links are not
    supported an exclusive create the file is then renamed over), so two writers of one name — two records of the
    same second — each keep their own file, whole."""
    temporary = _staged(path, data, mode, True)
    try:
        for number in range(1, 10_000):
            candidate = path if number == 1 else path.with_name(f"{path.stem}-{number}{path.suffix}")
            try:
                _take_name(temporary, candidate)
            except FileExistsError:
                continue
            sync_directory(path.parent)
            return candidate
        raise FileExistsError(f"{path} and 9,998 numbered names beside it are taken")
    finally:
        with contextlib.suppress(OSError):
            os.unlink(temporary)


def _take_name(temporary: str, path: Path) -> None:
    try:
        os.link(temporary, path)
    except OSError:  # taken (the exclusive create says so again), or a file system without hard links: reserve
        # the name, then rename the whole file over it
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE))
        os.replace(temporary, path)


def write_atomic_many(files: list[tuple[Path, bytes]], *, mode: int = FILE_MODE) -> None:
    """Replace each path (all distinct) with its data, durably, with one sync of each directory for the whole
    batch (a group commit): every file is written and synced before the first rename. On an error the files not
    yet renamed keep their old contents and no temporary file is left; those renamed may or may not be durable."""
    staged: list[tuple[str, Path]] = []
    try:
        for path, data in files:
            staged.append((_staged(path, data, mode, True), path))
        for temporary, path in staged:
            _replace(temporary, path)
    except BaseException:
        for temporary, _ in staged:  # those renamed already are gone: nothing to remove
            with contextlib.suppress(OSError):
                os.unlink(temporary)
        raise
    for directory in dict.fromkeys(path.parent for path, _ in files):
        sync_directory(directory)


def _staged(path: Path, data: bytes, mode: int, durable: bool) -> str:
    """``data`` written (and with ``durable`` synced) to ``path``'s temporary file, whose name is returned. The
    directory is created when missing (found so by the open itself: no check before each write)."""
    temporary = _temporary_text(os.fspath(path))
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
    try:
        descriptor = os.open(temporary, flags, mode)
    except FileNotFoundError:
        ensure_directory(path.parent)
        descriptor = os.open(temporary, flags, mode)
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
    except BaseException:
        # A full disk (ENOSPC), an I/O error or an interruption: the old file stays whole, and no
        # temporary file is left behind to litter the directory.
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    return temporary


def _replace(temporary: str, path: Path) -> None:
    try:
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
