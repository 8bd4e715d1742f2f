"""Finding a saved backfill by ID or unique prefix across the state stores a command searches.

Kept apart from the executor so that commands that only read a backfill (``audit``) start fast.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from engine.base.errors import BackfillError, BadInput
from engine.pipeline.repository import repository_root
from engine.store.state_store import MANIFEST, StateStore, default_state_root, saved_backfill_dirs


def searched_roots(state_dir: str | None, cwd: Path) -> list[Path]:
    """Where a backfill ID is looked for: --state-dir alone, else this repository's store and then the user
    state directory."""
    if state_dir:
        return [(cwd / state_dir).resolve()]
    repository = repository_root(cwd)
    roots = [default_state_root(repository)]
    if repository is not None:
        roots.append(default_state_root(None))
    return roots


def locate_backfill(backfill_id: str, state_dir: str | None, cwd: Path) -> tuple[StateStore, Path]:
    """Find a saved backfill by ID or unique prefix across every searched store. Not found or ambiguous: the
    error names the stores searched and lists the candidates (ID, target, created, state)."""
    if not backfill_id or "/" in backfill_id or backfill_id.startswith("."):
        raise BadInput(f"{backfill_id!r} is not a backfill ID: use the ID printed when it started (backfill list)")
    roots = searched_roots(state_dir, cwd)
    for root in roots:  # an exact ID wins wherever it is
        if (root / backfill_id / MANIFEST).exists():
            return StateStore(root / backfill_id), root
    matches = [(root, d) for root in roots for d in _backfill_dirs(root) if d.name.startswith(backfill_id)]
    if len(matches) == 1:
        root, directory = matches[0]
        return StateStore(directory), root
    searched = ", ".join(str(root) for root in roots)
    if matches:
        lines = [f"backfill ID {backfill_id!r} is ambiguous: give more characters. Searched {searched}; candidates:"]
        lines += [_candidate_line(directory) for _, directory in matches[:10]]
    else:
        recent = sorted((d for root in roots for d in _backfill_dirs(root)), key=lambda d: d.name, reverse=True)
        how = "run from the repository it was started in, or pass the same --state-dir"
        if not recent:  # nothing to list: one line
            raise BadInput(f"no backfill {backfill_id!r} in {searched}: {how}")
        lines = [f"no backfill {backfill_id!r}. Searched {searched}; the most recent:"]
        lines += [_candidate_line(directory) for directory in recent[:5]]
        lines.append(how)
    raise BadInput("\n".join(lines))


def _backfill_dirs(root: Path) -> list[Path]:
    return saved_backfill_dirs(root)


def _candidate_line(directory: Path) -> str:
    from engine.store.catalog import summarize

    try:
        summary = summarize(StateStore(directory))
    except BackfillError:
        return f"  {directory.name}  (unreadable)  {directory}"
    return f"  {summary.id}  {summary.name}  created {summary.created_at[:16].replace('T', ' ')}  {summary.state}"


def state_root_of_cwd(state_dir: str | None, cwd: Path) -> Path:
    """The state root `list` browses: --state-dir, else this repository's, else the user state directory."""
    if state_dir:
        return (cwd / state_dir).resolve()
    return default_state_root(repository_root(cwd))


def resume_command(backfill_id: str, state_root: Path, cwd: Path) -> str:
    """``backfill --continue ID``, exact from ``cwd``: with ``--state-dir`` (absolute) whenever ``--continue``
    run from there would not search ``state_root`` (the summary prints it, the dashboard copies it)."""
    command = f"backfill --continue {backfill_id}"
    searched = [root.resolve() for root in searched_roots(None, cwd)]
    if state_root.resolve() not in searched:
        command += f" --state-dir {shlex.quote(str(state_root.resolve()))}"
    return command
