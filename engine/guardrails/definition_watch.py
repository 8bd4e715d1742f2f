"""What a pipeline backfill's partitions run, as the pre-flight judged it, watched while the backfill runs.

Each partition's child reads the pipeline's files when it starts, so an asset's SQL, a macro, ``pipeline.yml``
or a seed edited after the pre-flight would run in the partitions that start later without having been judged
or approved. The executor asks the watch before every turn of launches: a change stops new partitions (those
running finish), and ``--continue`` judges the new version.
"""

from __future__ import annotations

import os
from pathlib import Path

from engine.guardrails.digest import file_component, file_hash
from engine.guardrails.preflight import Preflight

Signature = tuple[tuple[str, int, int, int, int] | tuple[str], ...]


class DefinitionWatch:
    """The files a pipeline backfill's partitions run (``pipeline.yml``, the selected assets, their seeds, every
    macro) with their contents as judged; hashed again only when a file's ``stat`` moved."""

    def __init__(self, directory: Path, judged: dict[Path, str]) -> None:
        self.directory = directory
        self.macros = directory / "macros"
        self.judged = judged
        self._seen: Signature | None = None  # the files' stat when they last matched what was judged

    @classmethod
    def of(cls, preflight: Preflight) -> DefinitionWatch | None:
        """The watch of a pipeline backfill, the hashes taken from the plan digest's components (what an approval
        vouched for); None for a command target."""
        facts = preflight.facts
        if facts.pipeline is None:
            return None
        directory = facts.pipeline.directory
        files = {facts.pipeline.file} | {a.asset.path for a in facts.selected}
        files |= {a.asset.seed_path for a in facts.selected if a.asset.seed_path is not None}
        files |= _macros(directory / "macros")
        judged = {path: preflight.components.get(file_component(path, directory)) or file_hash(path) for path in files}
        return cls(directory, judged)

    def changes(self) -> list[str]:
        """What differs from what was judged ("assets/x.sql changed", "macros/new.sql is new"), or nothing."""
        signature = self._signature()
        if signature == self._seen:
            return []
        changes = [
            f"{self._name(path)} {'is gone' if digest.startswith('unreadable') else 'changed'}"
            for path, judged in sorted(self.judged.items())
            if (digest := file_hash(path)) != judged
        ]
        changes += [f"{self._name(path)} is new" for path in sorted(_macros(self.macros) - set(self.judged))]
        if not changes:
            self._seen = signature
        return changes

    def _signature(self) -> Signature:
        stats: list[tuple[str, int, int, int, int] | tuple[str]] = []
        for path in sorted({*self.judged, *_macros(self.macros)}):
            try:
                info = os.stat(path)
            except OSError:
                stats.append((str(path),))
                continue
            stats.append((str(path), info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns))
        return tuple(stats)

    def _name(self, path: Path) -> str:
        return file_component(path, self.directory).removeprefix("file ")


def _macros(directory: Path) -> set[Path]:
    return set(directory.rglob("*.sql")) if directory.is_dir() else set()
