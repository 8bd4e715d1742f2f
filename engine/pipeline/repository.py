"""Where things live: the git repository around a path, and the target a user named."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from engine.base.errors import BadInput
from engine.base.printable import shortened

PIPELINE_FILES = ("pipeline.yml", "pipeline.yaml")
ASSET_SUFFIXES = (".sql", ".py", ".asset.yml", ".asset.yaml", ".task.yml", ".task.yaml")


def repository_root(path: Path) -> Path | None:
    """The nearest directory at or above ``path`` holding ``.git`` (a directory or a worktree file)."""
    current = path if path.is_dir() else path.parent
    for candidate in (current, *current.parents):
        if (candidate / ".git").exists():
            return candidate
    return None


def current_commit(repository: Path | None) -> str:
    """The commit checked out in ``repository`` (Bruin's ``commit_hash``), read from ``.git`` without running
    git; "" when there is none (no repository, no commit yet, a worktree file)."""
    if repository is None:
        return ""
    git = repository / ".git"
    try:
        head = (git / "HEAD").read_text().strip()
        if not head.startswith("ref: "):
            return head if len(head) in (40, 64) else ""
        ref = head[5:].strip()
        if (git / ref).is_file():
            return (git / ref).read_text().strip()
        for line in (git / "packed-refs").read_text().splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[1] == ref:
                return parts[0]
    except (OSError, UnicodeDecodeError):
        return ""
    return ""


def pipeline_file(directory: Path) -> Path | None:
    """The ``pipeline.yml`` of a directory, if it has one."""
    for name in PIPELINE_FILES:
        if (directory / name).is_file():
            return directory / name
    return None


@dataclass(frozen=True)
class Target:
    """A pipeline directory, or one asset file inside a pipeline."""

    path: Path  # absolute: the directory or the asset file
    pipeline_dir: Path  # absolute: the directory holding pipeline.yml
    repository: Path | None  # git root around the target, if any

    @property
    def is_asset(self) -> bool:
        return self.path != self.pipeline_dir

    @property
    def anchor(self) -> Path:
        """Where relative identities are measured from: the repository, else the pipeline's parent."""
        return self.repository or self.pipeline_dir.parent

    def identity(self) -> dict[str, str]:
        """What identifies the target across machines: its path relative to the anchor."""
        relative = os.path.relpath(self.path, self.anchor)
        return {"kind": "asset" if self.is_asset else "pipeline", "path": Path(relative).as_posix()}


def resolve_target(text: str, *, cwd: Path | None = None) -> Target:
    """Resolve TARGET: a directory with ``pipeline.yml``, or an asset file inside such a directory."""
    accepted = "give a pipeline directory (holding pipeline.yml) or an asset file (.sql, .py, .asset.yml)"
    shown = shortened(text)
    try:
        path = ((cwd or Path.cwd()) / text).resolve() if text else Path()
        exists = bool(text) and path.exists()
    except (OSError, ValueError) as error:  # a name too long, a NUL byte
        raise BadInput(
            f"target {shown!r} is not a usable path ({getattr(error, 'strerror', None) or error}): {accepted}"
        ) from None
    if not exists:
        raise BadInput(f"target {shown!r} does not exist: {accepted}")
    if path.is_dir():
        if pipeline_file(path) is None:
            raise BadInput(f"target {text!r} is a directory without pipeline.yml: {accepted}")
        return Target(path, path, repository_root(path))
    if not path.name.endswith(ASSET_SUFFIXES):
        raise BadInput(f"target {text!r} is not an asset file: {accepted}")
    for parent in path.parents:
        if pipeline_file(parent) is not None:
            return Target(path, parent, repository_root(parent))
    raise BadInput(f"asset {text!r} is not inside a pipeline (no pipeline.yml above it): {accepted}")


def logs_root(repository: Path | None) -> Path:
    """``<repository>/logs``, or the user state directory outside a repository."""
    if repository is not None:
        return repository / "logs"
    import platformdirs

    return Path(platformdirs.user_state_dir("backfill"))
