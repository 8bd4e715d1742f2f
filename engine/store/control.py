"""``control.json``: what operators decided about the backfill as a whole — paused, or ended by a mark or a
cancel — as opposed to what its partitions did. Written atomically under the backfill's lock (by the live
executor, or by the command that holds the lock)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from engine.base.atomic import write_atomic
from engine.base.errors import StateUnreadable

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
class Control:
    paused: Decision | None = None
    ended: Decision | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "format": 1,
            "paused": self.paused.to_json() if self.paused else None,
            "ended": self.ended.to_json() if self.ended else None,
        }


def _decision(value: Any, path: Path) -> Decision | None:
    if value is None:
        return None
    try:
        return Decision(str(value["status"]), str(value["by"]), str(value["at"]), str(value["reason"]))
    except (KeyError, TypeError):
        raise StateUnreadable(f"{path} is damaged (a decision lacks a field): it was not written by backfill") from None


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
    return Control(_decision(data.get("paused"), path), _decision(data.get("ended"), path))


def write_control(directory: Path, control: Control) -> None:
    write_atomic(directory / CONTROL, orjson.dumps(control.to_json(), option=orjson.OPT_INDENT_2) + b"\n")
