"""Paused targets: an operator's hold on a whole pipeline, whichever state root its backfills keep their records in.

The seed's pipeline-level pause (``interventions.txt``): while a pipeline is paused, no new backfill of it starts,
no ``--continue`` of one goes on and no ``backfill run`` of it runs by hand — each says who paused it and why and
exits 0, so a scheduler raises no alarm. One JSON file per pipeline (keyed by the real path of its directory) in
the user's state directory (``paused-targets/``), beside the live-work registry; it keeps the pause in force and
every pause and resume before it, with who, when and why. Written atomically under the directory's lock.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from engine.base.atomic import FILE_MODE, write_atomic
from engine.base.errors import NothingToRun, Refused, StateUnreadable
from engine.store.control import Decision
from engine.store.user_state import usable, user_state_dir

PAUSE, RESUME = "pause", "resume"


class TargetPaused(NothingToRun):
    """A paused pipeline: valid, and nothing runs (stdout, exit 0)."""


@dataclass
class TargetPause:
    """One pipeline's pause record: the pause in force (None: not paused), the backfills it paused, and every
    pause and resume so far."""

    target: str  # the pipeline directory's real path
    name: str = ""
    paused: Decision | None = None
    paused_backfills: list[dict[str, str]] = field(default_factory=list)  # {"id", "state_dir"} the pause held
    history: list[dict[str, str]] = field(default_factory=list)  # {"action", "by", "at", "reason"}

    def to_json(self) -> dict[str, Any]:
        return {
            "format": 1,
            "target": self.target,
            "name": self.name,
            "paused": self.paused.to_json() if self.paused else None,
            "paused_backfills": self.paused_backfills,
            "history": self.history,
        }

    def sentence(self) -> str:
        """``pipeline p (/repo/p) is paused by … at …: reason``."""
        assert self.paused is not None
        return f"pipeline {self.name} ({self.target}) is {self.paused.sentence()}"


def pauses_dir() -> Path:
    return user_state_dir() / "paused-targets"


def _path(target: Path, directory: Path) -> Path:
    key = hashlib.sha256(str(target.resolve()).encode()).hexdigest()[:24]
    return directory / f"{key}.json"


def read_pause(target: Path, directory: Path | None = None) -> TargetPause:
    """The pause record of the pipeline directory ``target`` (an empty one when it was never paused)."""
    path = _path(target, directory or pauses_dir())
    try:
        data = orjson.loads(path.read_bytes())
    except FileNotFoundError:
        return TargetPause(str(target.resolve()))
    except (OSError, orjson.JSONDecodeError) as error:
        raise StateUnreadable(f"{path} cannot be read ({error}): it holds the pause of {target}") from None
    return _from_json(data, path)


def _from_json(data: Any, path: Path) -> TargetPause:
    try:
        if not isinstance(data, dict) or data.get("format") != 1:
            raise TypeError
        paused = data.get("paused")
        decision = None if paused is None else Decision(**{k: str(paused[k]) for k in ("status", "by", "at", "reason")})
        return TargetPause(
            str(data["target"]),
            str(data.get("name", "")),
            decision,
            [{"id": str(b["id"]), "state_dir": str(b["state_dir"])} for b in data.get("paused_backfills", [])],
            [{k: str(v) for k, v in entry.items()} for entry in data.get("history", [])],
        )
    except (KeyError, TypeError, AttributeError):
        raise StateUnreadable(f"{path} is damaged: it was not written by backfill (a paused target)") from None


def paused_targets(directory: Path | None = None) -> list[TargetPause]:
    """Every pipeline paused now, by name; an unreadable file is passed over (it cannot say who paused what)."""
    directory = directory or pauses_dir()
    found = []
    for path in sorted(directory.glob("*.json")) if directory.is_dir() else []:
        with contextlib.suppress(StateUnreadable, OSError, orjson.JSONDecodeError):
            record = _from_json(orjson.loads(path.read_bytes()), path)
            if record.paused is not None:
                found.append(record)
    return sorted(found, key=lambda record: (record.name, record.target))


def check_not_paused(target: Path, directory: Path | None = None) -> None:
    """``TargetPaused`` (exit 0, on stdout) when an operator paused the pipeline ``target``."""
    record = read_pause(target, directory)
    if record.paused is not None:
        raise TargetPaused(
            f"{record.sentence()}; nothing ran (backfill resume --target {record.target} --reason TEXT lets it go on)"
        )


def pause_target(target: Path, name: str, decision: Decision, directory: Path | None = None) -> TargetPause:
    """Pause the pipeline ``target``; refused (exit 3) when it is paused already (nothing written)."""

    def change(record: TargetPause) -> TargetPause:
        if record.paused is not None:
            raise Refused(f"{record.sentence()}: it is paused already")
        entry = {"action": PAUSE, "by": decision.by, "at": decision.at, "reason": decision.reason}
        return TargetPause(record.target, name, decision, [], [*record.history, entry])

    return _update(target, change, directory)


def note_paused_backfills(target: Path, backfills: list[dict[str, str]], directory: Path | None = None) -> None:
    """Keep which running backfills the pause in force paused, for the resume to let go on."""

    def change(record: TargetPause) -> TargetPause:
        record.paused_backfills = [*record.paused_backfills, *backfills]
        return record

    _update(target, change, directory)


def resume_target(target: Path, name: str, by: str, at: str, reason: str, directory: Path | None = None) -> TargetPause:
    """Lift the pause of the pipeline ``target``; returns the record as it was (with the backfills it paused).
    Refused (exit 3) when it is not paused."""
    before: list[TargetPause] = []

    def change(record: TargetPause) -> TargetPause:
        if record.paused is None:
            raise Refused(f"pipeline {name} ({record.target}) is not paused: nothing to resume")
        before.append(TargetPause(record.target, record.name, record.paused, record.paused_backfills, record.history))
        entry = {"action": RESUME, "by": by, "at": at, "reason": reason}
        return TargetPause(record.target, name, None, [], [*record.history, entry])

    _update(target, change, directory)
    return before[0]


def _update(target: Path, change, directory: Path | None) -> TargetPause:
    directory = usable(directory or pauses_dir(), "the list of paused pipelines")
    fd = os.open(directory / ".lock", os.O_RDWR | os.O_CREAT, FILE_MODE)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        after = change(read_pause(target, directory))
        write_atomic(_path(target, directory), orjson.dumps(after.to_json(), option=orjson.OPT_INDENT_2) + b"\n")
        return after
    finally:
        os.close(fd)
