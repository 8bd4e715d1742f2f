"""What a backfill's partitions run, as the pre-flight judged it, watched while the backfill runs.

Each partition's child reads the pipeline's files when it starts, so an asset's SQL, a macro, ``pipeline.yml``,
a seed or the environment in ``.bruin.yml`` (a connection pointed at another database) edited after the pre-flight
would run in the partitions that start later without having been judged, approved or snapshotted; so would a
script a command names (``./load.sh {start}``, ``python load.py {start}``, a module beside that script) edited
after its approval. The executor asks the watch before every turn of launches: a change stops new partitions
(those running finish), and ``--continue`` judges the new version.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import orjson

from engine.base.errors import EXIT_FAILED, BackfillError
from engine.guardrails.digest import (
    UNREADABLE,
    config_component,
    file_component,
    file_hash,
    python_trees,
    read_trees,
    tree_files,
)
from engine.guardrails.preflight import Preflight
from engine.pipeline.asset_types import AssetKind

if TYPE_CHECKING:
    from engine.pipeline.assets import Asset

Signature = tuple[tuple[str, int, int, int, int] | tuple[str], ...]
Read = TypeVar("Read")
READS = 3  # reads of a pipeline its files kept changing under before a partition gives up
# A file changed this recently may change again with its stat unmoved: a file clock ticks coarsely (4–10 ms on
# kernels before 6.13), and two writes of one size in one tick leave the same stat. A look seeing such a file
# is not kept as clean, so the next one reads it again.
SETTLED_NS = 50_000_000


class Unjudged(BackfillError):
    """A partition's files differ from what its backfill judged: it runs nothing."""

    exit_code = EXIT_FAILED


class DefinitionWatch:
    """The files a pipeline backfill's partitions run (``pipeline.yml``, the selected assets, their seeds, every
    macro, every module beside a Python asset) with their contents as judged; hashed again only when a file's
    ``stat`` moved."""

    def __init__(
        self,
        directory: Path,
        judged: dict[Path, str],
        trees: list[tuple[Path, str]],
        config: JudgedConfig | None,
        *,
        what: str = "the pipeline",
    ) -> None:
        self.what = what  # what changed, as the stop says it: "the pipeline", "the files the command names"
        self.directory = directory
        self.trees = trees  # where a new file would be read unnamed (digest.read_trees)
        self.judged = judged
        self.config = config
        self._seen: Signature | None = None  # the files' stat when they last matched what was judged

    @classmethod
    def of(cls, preflight: Preflight) -> DefinitionWatch | None:
        """The watch of a backfill, the hashes taken from the plan digest's components (what an approval vouched
        for): a pipeline's files, or those a command's template names (None when it names none)."""
        facts = preflight.facts
        if facts.pipeline is None:
            return cls._of_command(preflight)
        directory = facts.pipeline.directory
        files = {facts.pipeline.file} | {path for a in facts.selected for path in a.asset.own_files}
        trees = read_trees(directory, [a.asset for a in facts.selected])
        files |= {path for tree in trees for path in tree_files(*tree)}
        judged = _as_judged(preflight, files, directory)
        request = facts.request
        config = None
        if request.config is not None and request.environment is not None:
            judged_config = config_component(request.config, request.environment.name)[1]  # as the digest has it
            config = JudgedConfig(request.config.path, request.environment.name, judged_config)
        return cls(directory, judged, trees, config)

    @classmethod
    def _of_command(cls, preflight: Preflight) -> DefinitionWatch | None:
        directory = preflight.facts.request.working_directory
        named = preflight.facts.code  # as the pre-flight judged it
        if not named:
            return None
        trees = python_trees(named)
        files = {*named, *(path for tree in trees for path in tree_files(*tree))}
        judged = _as_judged(preflight, files, directory)
        return cls(directory, judged, trees, None, what="the files the command names")

    def changes(self) -> list[str]:
        """What differs from what was judged ("assets/x.sql changed", "macros/new.sql is new"), or nothing."""
        return self._changes(None)

    def _changes(self, within: Callable[[Path], bool] | None) -> list[str]:
        """The changes among the files ``within`` takes (None: every file, and ``.bruin.yml``'s environment)."""
        now = _clock()
        signature = self._signature()
        if signature == self._seen:
            return []
        taken = within or (lambda path: True)
        changes = [
            f"{self._name(path)} {_change(judged, digest)}"
            for path, judged in sorted(self.judged.items())
            if taken(path) and (digest := file_hash(path)) != judged
        ]
        new = sorted(path for path in self._tree_files() - set(self.judged) if taken(path))
        changes += [f"{self._name(path)} is new" for path in new]
        if within is None and self.config is not None and (change := self.config.change()):
            changes.append(change)
        if not changes and within is None:  # a clean look at every file: until a stat moves, nothing is read
            self._seen = signature if _settled(signature, now) else None
        return changes

    def read_as_judged(self, read: Callable[[], Read]) -> Read:
        """``read()`` — a partition's parse of its pipeline — of the files as judged. The executor looked before
        the partition started, but an edit can land before the parse: the files are asked before the read, and
        their ``stat`` must not move from that look to the read's end (any write moves a file's change time), so
        what was read is what was looked at; a write during the read reads again. Unjudged when they differ."""
        for _ in range(READS):
            self._refuse_changes()
            if self._seen is None:  # a file written a moment ago could be written again with its stat unmoved
                time.sleep(SETTLED_NS / 1e9)
                self._refuse_changes()
            look = self._seen  # a clean look: the files' stat when they matched what was judged
            value = read()
            if self._signature() == look:  # None (not settled) never equals a signature
                return value
        raise Unjudged(f"not run: {self.what} kept changing while this partition read it ({READS} reads)")

    def _refuse_changes(self) -> None:
        if changes := self.changes():
            raise Unjudged(f"not run: {self.changed(changes)}")

    def changed(self, changes: list[str]) -> str:
        """How every refusal says them: "the pipeline changed since this backfill was judged (x.sql changed)"."""
        return f"{self.what} changed since this backfill was judged ({', '.join(changes)})"

    def changes_for(self, asset: Asset) -> list[str]:
        """What differs from what was judged among the files ``asset`` reads from disk only when it runs — a Python
        asset's script and every module under its directory (it imports them then), a seed's file — or nothing.
        The rest of a partition's pipeline was read when its run began: an edit since is the executor's to see."""
        if asset.kind == AssetKind.PYTHON:
            directory = asset.script.parent
            own = set(asset.own_files)
            return self._changes(lambda path: path in own or path.is_relative_to(directory))
        if asset.seed_path is not None:
            return self._changes(lambda path: path == asset.seed_path)
        return []

    def argument(self) -> str:
        """The watch as a partition's run is given it (``--judged-files``): that run asks it again before each
        asset, since a partition reads some files only when an asset runs (a Python asset's modules when it
        imports them), possibly long after the executor last looked."""
        config = None if self.config is None else [str(self.config.path), self.config.environment, self.config.judged]
        self.changes()  # a clean look now gives the files' stat: a run that sees the same reads no file again
        return orjson.dumps(
            {
                "directory": str(self.directory),
                "judged": {str(path): judged for path, judged in self.judged.items()},
                "trees": [[str(directory), pattern] for directory, pattern in self.trees],
                "config": config,
                "what": self.what,
                "seen": self._seen,
            }
        ).decode()

    @classmethod
    def from_argument(cls, text: str) -> DefinitionWatch:
        """The watch a partition's run was given; ValueError when the text is not one."""
        try:
            data = orjson.loads(text)
            config, seen = data["config"], data["seen"]
            watch = cls(
                Path(data["directory"]),
                {Path(path): str(judged) for path, judged in data["judged"].items()},
                [(Path(directory), str(pattern)) for directory, pattern in data["trees"]],
                None if config is None else JudgedConfig(Path(config[0]), str(config[1]), str(config[2])),
                what=str(data["what"]),
            )
            watch._seen = None if seen is None else tuple(tuple(stat) for stat in seen)
            return watch
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError, IndexError) as error:
            raise ValueError(f"not a judged watch ({type(error).__name__}: {error})") from None

    def on_worker(self) -> tuple[list[str], tuple[str, str] | None]:
        """What each worker of a cluster is asked to read before the first launch (:func:`read_definition`): the
        watched files, and ``.bruin.yml`` with the backfill's environment."""
        config = (str(self.config.path), self.config.environment) if self.config is not None else None
        return sorted(str(path) for path in self.judged), config

    def differences(self, seen: dict[str, str]) -> list[str]:
        """What a worker read that differs from what was judged, named as :meth:`changes` names them."""
        differ = [self._name(path) for path in sorted(self.judged) if seen.get(str(path)) != self.judged[path]]
        if self.config is not None and seen.get(CONFIG) != self.config.judged:
            differ.append(f"{self.config.path.name}'s environment {self.config.environment}")
        return differ

    def _signature(self) -> Signature:
        stats: list[tuple[str, int, int, int, int] | tuple[str]] = []
        watched = {*self.judged, *self._tree_files(), *([self.config.path] if self.config is not None else [])}
        for path in sorted(watched):
            try:
                info = os.stat(path)
            except OSError:
                stats.append((str(path),))
                continue
            stats.append((str(path), info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns))
        return tuple(stats)

    def _tree_files(self) -> set[Path]:
        return {path for tree in self.trees for path in tree_files(*tree)}

    def _name(self, path: Path) -> str:
        return file_component(path, self.directory).removeprefix("file ")


def _clock() -> int:
    return time.time_ns()


def _settled(signature: Signature, look_ns: int) -> bool:
    """Whether every file's last change is older than the look by more than a file clock's tick."""
    return all(len(stat) == 1 or stat[-1] < look_ns - SETTLED_NS for stat in signature)


def _change(judged: str, now: str) -> str:
    """How a file's hash moved: a file judged absent (or unreadable) that reads now is new."""
    if now.startswith(UNREADABLE):
        return "is gone"
    return "is new" if judged.startswith(UNREADABLE) else "changed"


def _as_judged(preflight: Preflight, files, directory: Path) -> dict[Path, str]:
    """Each file's hash as the plan digest took it (what an approval vouched for), else as it reads now."""
    return {path: preflight.components.get(file_component(path, directory)) or file_hash(path) for path in files}


CONFIG = ".bruin.yml"  # the key of the environment's hash in what a worker read


def read_definition(paths: list[str], config: tuple[str, str] | None) -> dict[str, str]:
    """Run on every worker of a cluster: each file's hash as this worker reads it, and (under CONFIG) its
    ``.bruin.yml`` environment's, secrets left out — a worker with its own checkout may read other files."""
    seen = {path: file_hash(Path(path)) for path in paths}
    if config is not None:
        seen[CONFIG] = environment_hash(Path(config[0]), config[1])
    return seen


def environment_hash(path: Path, environment: str) -> str:
    """The digest's hash of ``.bruin.yml``'s environment as the file reads now, or ``unreadable: why`` (gone,
    unreadable, or no longer a configuration)."""
    from engine.pipeline.config import load_config  # a pipeline's: a command's run never loads it

    try:
        return config_component(load_config(path), environment)[1]
    except (OSError, BackfillError) as error:
        return f"unreadable: {error}"


class JudgedConfig:
    """``.bruin.yml`` as the backfill's environment was judged: its settings without secrets (a rotated password
    changes nothing judged)."""

    def __init__(self, path: Path, environment: str, judged: str) -> None:
        self.path = path
        self.environment = environment
        self.judged = judged

    def change(self) -> str | None:
        """What differs from what was judged (".bruin.yml's environment dev changed"), or None."""
        now = environment_hash(self.path, self.environment)
        if now == self.judged:
            return None
        if now.startswith("unreadable: "):
            return f"{self.path.name} is unreadable"
        return f"{self.path.name}'s environment {self.environment} changed"
