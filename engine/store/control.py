"""``control.json``: what operators decided about the backfill as a whole — paused, ended by a mark or a
cancel, its parallelism changed while it ran — as opposed to what its partitions did. Written atomically
under the backfill's lock (by the live executor, or by the command that holds the lock)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import orjson

from engine.base.atomic import write_atomic
from engine.base.errors import StateUnreadable
from engine.spec.backfill_spec import ExecutionOptions
from engine.store.manifest import initial_options

CONTROL = "control.json"


@dataclass(frozen=True)
class Decision:
    """Who decided what, when and why: ``status`` is ``paused``, or how the backfill was ended
    (``succeeded``, ``failed``, ``cancelled``)."""

    status: str
    by: str
    at: str
    reason: str

    def to_json(self) -> dict[str, str]:
        return {"status": self.status, "by": self.by, "at": self.at, "reason": self.reason}

    def sentence(self) -> str:
        verb = "paused" if self.status == "paused" else "cancelled" if self.status == "cancelled" else "marked"
        told = "" if verb != "marked" else f" {self.status}"
        return f"{verb}{told} by {self.by} at {self.at}: {self.reason}"


@dataclass(frozen=True)
class Setting:
    """An execution control an operator changed (``backfill set``, ``+``/``-`` on the dashboard): the live
    executor takes it at once, and every later ``--continue`` starts from it unless its command line says
    otherwise."""

    value: int
    by: str
    at: str
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {"value": self.value, "by": self.by, "at": self.at, "reason": self.reason}


@dataclass(frozen=True)
class Control:
    paused: Decision | None = None
    ended: Decision | None = None
    max_parallel: Setting | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "format": 1,
            "paused": self.paused.to_json() if self.paused else None,
            "ended": self.ended.to_json() if self.ended else None,
            "max_parallel": self.max_parallel.to_json() if self.max_parallel else None,
        }


def _decision(value: Any, path: Path) -> Decision | None:
    if value is None:
        return None
    try:
        return Decision(str(value["status"]), str(value["by"]), str(value["at"]), str(value["reason"]))
    except (KeyError, TypeError):
        raise StateUnreadable(f"{path} is damaged (a decision lacks a field): it was not written by backfill") from None


def _setting(value: Any, path: Path) -> Setting | None:
    if value is None:
        return None
    try:
        number = value["value"]
        setting = Setting(number, str(value["by"]), str(value["at"]), str(value["reason"]))
    except (KeyError, TypeError):
        raise StateUnreadable(f"{path} is damaged (a setting lacks a field): it was not written by backfill") from None
    if isinstance(number, bool) or not isinstance(number, int) or number < 1:
        raise StateUnreadable(
            f"{path} is damaged (max_parallel {number!r} is not a count): it was not written by backfill"
        )
    return setting


def read_control(directory: Path) -> Control:
    path = directory / CONTROL
    try:
        data = orjson.loads(path.read_bytes())
    except FileNotFoundError:
        return Control()
    except OSError as error:
        raise StateUnreadable(f"{path} cannot be read ({error.strerror})") from None
    except orjson.JSONDecodeError as error:
        raise StateUnreadable(f"{path} is not valid JSON ({error}): it holds the backfill's pause") from None
    if not isinstance(data, dict) or data.get("format") != 1:
        raise StateUnreadable(f"{path} has an unknown format: it was not written by this backfill")
    return Control(
        _decision(data.get("paused"), path),
        _decision(data.get("ended"), path),
        _setting(data.get("max_parallel"), path),
    )


def write_control(directory: Path, control: Control) -> None:
    write_atomic(directory / CONTROL, orjson.dumps(control.to_json(), option=orjson.OPT_INDENT_2) + b"\n")


def resume_options(manifest: dict[str, Any], directory: Path) -> ExecutionOptions:
    """The controls a resume starts from: the first invocation's, with what operators set since (a
    ``backfill set`` while it ran); a command line's own flags override both."""
    options = initial_options(manifest)
    setting = read_control(directory).max_parallel
    return replace(options, max_parallel=setting.value) if setting is not None else options
