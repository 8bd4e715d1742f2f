"""Work running now on this machine's warehouses, whichever state root it keeps its records in.

Every executor of a backfill and every ``backfill run`` by hand joins a registry in the user's state directory
(``platformdirs.user_state_dir("backfill")/live/``) for as long as it runs: one small JSON file per registrant
naming its target, the assets it runs and what lies downstream of them, its DuckDB files (real paths), its
windows, PID and host. The registrant holds an exclusive ``flock`` on its file, and every child it starts
inherits that descriptor (as it inherits ``.children.lock``): the entry is live while the registrant or any of
its children lives — a frozen executor too, since it may wake and write — and the kernel lets it go when the
last of them dies, so a crash leaves no entry that blocks anyone. A file nobody holds is stale and is removed by
the next registrant.

Joining checks for conflicts and writes the entry under the registry's own lock, so two invocations cannot both
find the warehouse free and both start. The pre-flight reads the same entries (``downstream_awareness``), so a
dry run shows the conflict a run would meet.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import secrets
import socket
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

import orjson

from engine.base.atomic import FILE_MODE
from engine.base.errors import Refused
from engine.dates.instants import format_instant, load_zone
from engine.store.user_state import usable, user_state_dir


class WorkKind(StrEnum):
    BACKFILL = "backfill"
    RUN = "run"  # `backfill run` by hand


@dataclass(frozen=True, kw_only=True)
class LiveWork:
    """What one invocation runs, as the registry keeps it."""

    kind: WorkKind
    target: str  # the target's key: a pipeline directory's real path, or a digest of a command and its directory
    shown: str  # the target as a person reads it
    backfill_id: str | None = None
    state_dir: str | None = None
    assets: tuple[str, ...] = ()
    downstream: tuple[str, ...] = ()  # assets outside the selection that read what it writes
    files: tuple[str, ...] = ()  # the DuckDB files its assets open (real paths)
    windows: tuple[tuple[int, int], ...] = ()  # [start, end) in microseconds
    pid: int = 0
    host: str = ""

    def who(self) -> str:
        """``backfill 2024…-ab12cd, PID 4242 on host`` or ``a backfill run, PID 4242 on host``."""
        what = f"backfill {self.backfill_id}" if self.kind == WorkKind.BACKFILL else "a `backfill run`"
        return f"{what}, PID {self.pid} on {self.host}"

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> LiveWork:
        return cls(
            kind=WorkKind(data["kind"]),
            target=str(data["target"]),
            shown=str(data["shown"]),
            backfill_id=data.get("backfill_id"),
            state_dir=data.get("state_dir"),
            assets=tuple(str(a) for a in data.get("assets", ())),
            downstream=tuple(str(a) for a in data.get("downstream", ())),
            files=tuple(str(f) for f in data.get("files", ())),
            windows=tuple((int(s), int(e)) for s, e in data.get("windows", ())),
            pid=int(data["pid"]),
            host=str(data["host"]),
        )


def command_key(identity: dict[str, Any], working_directory: str) -> str:
    """A command target's key: the same template run from another directory is another target."""
    text = orjson.dumps({"identity": identity, "cwd": working_directory}, option=orjson.OPT_SORT_KEYS)
    return "command:" + hashlib.sha256(text).hexdigest()[:32]


def pipeline_key(pipeline_dir: Path) -> str:
    return "pipeline:" + str(pipeline_dir.resolve())


def real_files(paths: Iterable[Path]) -> tuple[str, ...]:
    """DuckDB files by real path, so a symlink or another spelling of a file is the same file."""
    return tuple(sorted({str(Path(p).resolve()) for p in paths}))


def conflicts(ours: LiveWork, running: Iterable[LiveWork]) -> list[str]:
    """Why ``ours`` must not start beside the work running now, one sentence per running invocation in its way
    (empty: nothing is). Work of our own backfill (a crashed executor's entry, before its takeover) is ours, unless
    it runs from another state root: a copy of the backfill (:func:`from_a_copy`) is always in our way.

    Work is in our way when it shares a DuckDB file with us or runs the same target:

    - it runs an asset we run, or one downstream of ours, or upstream of ours (an asset is its table: on one file,
      two pipelines' assets of one name are one table), or the same target over intervals that overlap ours: wait;
    - otherwise, on a shared DuckDB file: DuckDB allows one writer process per file, so each would fail the other's
      runs: wait;
    - otherwise (the same command, or the same pipeline on other files, over other intervals): both run, as the
      warehouse behind them allows concurrent writers or not, which we cannot tell.
    """
    found = []
    for theirs in running:
        if ours.backfill_id is not None and theirs.backfill_id == ours.backfill_id:
            if ours.state_dir is not None and from_a_copy(ours.backfill_id, Path(ours.state_dir), theirs):
                found.append(copy_sentence(ours.backfill_id, theirs))
            continue
        shared = sorted(set(ours.files) & set(theirs.files))
        same_target = ours.target == theirs.target
        if not shared and not same_target:
            continue
        clash = _asset_clash(ours, theirs)
        if clash or (same_target and _windows_overlap(ours.windows, theirs.windows)):
            what = ", ".join(clash) if clash else f"{theirs.shown} (the same target)"
            found.append(f"wait for {theirs.who()}: it runs {what} over {_windows_text(theirs.windows)}")
        elif shared:
            found.append(
                f"wait for {theirs.who()}: it writes {shared[0]}, and DuckDB allows one writer process per file"
            )
    return found


def from_a_copy(backfill_id: str, state_root: Path, theirs: LiveWork) -> bool:
    """Whether ``theirs`` is our backfill run from another state root: a copy of its directory (a repository
    copied with its ``logs/``, a store restored from a backup). Each copy would run the partitions again beside
    the other, and neither's locks or records know of the other's children."""
    if theirs.backfill_id != backfill_id or not theirs.state_dir:
        return False
    return Path(theirs.state_dir).resolve() != state_root.resolve()


def copy_sentence(backfill_id: str, theirs: LiveWork) -> str:
    """Why a copy of a running backfill does not start."""
    where = Path(theirs.state_dir or "") / backfill_id
    return (
        f"backfill {backfill_id} is running from another copy of its state, {where} (executor PID {theirs.pid} on "
        f"{theirs.host}): this copy would run its partitions again beside it; wait for it to end, or stop it there"
    )


def check_no_copy_running(backfill_id: str, state_root: Path, directory: Path | None = None) -> None:
    """Refuse (exit 3) while our backfill runs from another state root: our locks are in our directory, and a copy
    of it has locks of its own, so only the registry (``directory``), shared by every store of this user, sees the
    copy."""
    for work in read_live(directory):
        if from_a_copy(backfill_id, state_root, work):
            raise Refused(copy_sentence(backfill_id, work))


def _asset_clash(ours: LiveWork, theirs: LiveWork) -> list[str]:
    """Assets one side runs that the other runs or reads from (is downstream of)."""
    mine, their_runs = set(ours.assets), set(theirs.assets)
    return sorted((mine & (their_runs | set(theirs.downstream))) | (set(ours.downstream) & their_runs))


def _windows_overlap(first: Iterable[tuple[int, int]], second: Iterable[tuple[int, int]]) -> bool:
    second = list(second)
    return any(a < d and c < b for a, b in first for c, d in second)


def _windows_text(windows: tuple[tuple[int, int], ...]) -> str:
    utc = load_zone("UTC")
    return ", ".join(f"{format_instant(s, utc)} → {format_instant(e, utc)}" for s, e in windows) or "no interval"


def registry_dir() -> Path:
    return user_state_dir() / "live"


class Registration:
    """Our entry in the registry, held (flocked) until :meth:`release` or the death of its last holder."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path, self.fd = path, fd

    def release(self) -> None:
        """Leave the registry: the entry is removed, then the lock let go (children that still hold it keep
        nothing alive: the file is gone)."""
        if self.fd is None:
            return
        with contextlib.suppress(OSError):
            self.path.unlink()
        os.close(self.fd)
        self.fd = None


def read_live(directory: Path | None = None) -> list[LiveWork]:
    """Every live entry (one held by its registrant), under the registry's lock; stale ones are left for the next
    registrant to remove. Unreadable entries are passed over: a damaged file cannot name work to wait for."""
    directory = directory or registry_dir()
    if not directory.is_dir():
        return []
    with _registry_lock(directory, exclusive=False):
        return [work for work, _ in _entries(directory) if work is not None]


def join(work: LiveWork, directory: Path | None = None, *, check: Callable[[], None] | None = None) -> Registration:
    """Register ``work`` as running, unless it conflicts with work running now (``Refused``, exit 3: the
    sentence of :func:`conflicts`) or ``check`` raises (a paused target). Checks and entry are one step under the
    registry's lock, so whoever reads the registry after changing what ``check`` reads sees this work or stops it."""
    directory = usable(directory or registry_dir(), "the registry of running backfills")
    with _registry_lock(directory, exclusive=True):
        if check is not None:
            check()
        live = []
        for found, path in _entries(directory):
            if found is None:
                with contextlib.suppress(OSError):
                    path.unlink()  # nobody holds it: its registrant and children are gone
            else:
                live.append(found)
        blocking = conflicts(work, live)
        if blocking:
            raise Refused("never: " + "; ".join(blocking))
        name = f"{work.host}.{work.pid}.{secrets.token_hex(4)}.json"
        temporary = directory / f".{name}.tmp"
        fd = os.open(temporary, os.O_RDWR | os.O_CREAT | os.O_EXCL, FILE_MODE)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # held before the name appears: no reader ever sees it unheld
            os.write(fd, orjson.dumps(work.to_json()))
            os.rename(temporary, directory / name)
        except BaseException:
            os.close(fd)
            with contextlib.suppress(OSError):
                temporary.unlink()
            raise
        return Registration(directory / name, fd)


def _entries(directory: Path) -> list[tuple[LiveWork | None, Path]]:
    """Each entry file with what it says, or None when it is stale (no one holds it)."""
    found: list[tuple[LiveWork | None, Path]] = []
    for path in sorted(directory.glob("*.json")):
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            continue
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:  # held: live
                try:
                    found.append((LiveWork.from_json(orjson.loads(path.read_bytes())), path))
                except (OSError, ValueError, KeyError, TypeError):
                    continue
            else:
                found.append((None, path))
        finally:
            os.close(fd)
    return found


@contextlib.contextmanager
def _registry_lock(directory: Path, *, exclusive: bool):
    fd = os.open(directory / ".lock", os.O_RDWR | os.O_CREAT, FILE_MODE)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        yield
    finally:
        os.close(fd)


def this_process(**fields: Any) -> LiveWork:
    """``LiveWork`` of the calling process (its PID and host)."""
    return LiveWork(pid=os.getpid(), host=socket.gethostname(), **fields)
