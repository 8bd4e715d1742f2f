"""Requests to a live executor: files in the backfill's ``requests/`` folder.

The sender writes ``<id>.json`` atomically and waits for ``<id>.result.json``. The executor claims a request by
renaming it to ``<id>.claimed`` before applying it; a sender that gives up (or finds the executor gone) withdraws
it by renaming it to ``<id>.withdrawn``. Renames are atomic, so a request is applied by exactly one side, once.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from engine.base.atomic import ensure_directory, write_atomic

REQUESTS = "requests"


@dataclass
class Request:
    action: str
    reason: str
    requested_by: str
    requested_at: str
    params: dict[str, Any] = field(default_factory=dict)
    id: str = field(default_factory=lambda: f"{time.time_ns()}-{secrets.token_hex(4)}")

    def to_json(self) -> dict[str, Any]:
        return {
            "format": 1,
            "id": self.id,
            "action": self.action,
            "reason": self.reason,
            "requested_by": self.requested_by,
            "requested_at": self.requested_at,
            "params": self.params,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Request:
        return cls(
            str(data["action"]),
            str(data["reason"]),
            str(data["requested_by"]),
            str(data["requested_at"]),
            dict(data.get("params") or {}),
            str(data["id"]),
        )


@dataclass
class Result:
    """What applying a request did: ``exit_code`` 0 when it was applied, else why not (``message``)."""

    exit_code: int
    message: str
    changed: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"exit_code": self.exit_code, "message": self.message, "changed": self.changed}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Result:
        return cls(int(data["exit_code"]), str(data["message"]), int(data.get("changed", 0)))


def folder(directory: Path) -> Path:
    return directory / REQUESTS


def submit(directory: Path, request: Request) -> Path:
    path = folder(directory) / f"{request.id}.json"
    ensure_directory(path.parent)
    write_atomic(path, orjson.dumps(request.to_json()))
    return path


def withdraw(directory: Path, request: Request) -> bool:
    """Take back a request nobody claimed; False when the executor claimed it first."""
    base = folder(directory) / request.id
    try:
        os.rename(f"{base}.json", f"{base}.withdrawn")
    except FileNotFoundError:
        return False
    with contextlib.suppress(OSError):
        os.unlink(f"{base}.withdrawn")
    return True


def take_result(directory: Path, request: Request) -> Result | None:
    path = folder(directory) / f"{request.id}.result.json"
    try:
        data = orjson.loads(path.read_bytes())
    except (FileNotFoundError, orjson.JSONDecodeError):
        return None
    with contextlib.suppress(OSError):
        os.unlink(path)
    return Result.from_json(data)


def pending(directory: Path) -> list[str]:
    """IDs of requests waiting, oldest first (IDs start with the time they were made)."""
    try:
        names = [entry.name for entry in os.scandir(folder(directory))]
    except FileNotFoundError:
        return []
    return sorted(name[: -len(".json")] for name in names if name.endswith(".json") and ".result" not in name)


def claim(directory: Path, request_id: str) -> Request | None:
    """Rename the request to ``.claimed`` and read it; None when it was withdrawn first or cannot be read."""
    base = folder(directory) / request_id
    try:
        os.rename(f"{base}.json", f"{base}.claimed")
    except FileNotFoundError:
        return None
    try:
        return Request.from_json(orjson.loads(Path(f"{base}.claimed").read_bytes()))
    except (OSError, orjson.JSONDecodeError, KeyError, TypeError, ValueError):
        answer(directory, request_id, Result(2, f"request {request_id} is not a request of this version"))
        return None


def unclaim(directory: Path, request_id: str) -> None:
    """Give a claimed request back, unapplied (its claimer found itself fenced before writing anything): the
    owner of the backfill, or the sender, takes it from there."""
    base = folder(directory) / request_id
    os.rename(f"{base}.claimed", f"{base}.json")


def answer(directory: Path, request_id: str, result: Result) -> None:
    base = folder(directory) / request_id
    write_atomic(Path(f"{base}.result.json"), orjson.dumps(result.to_json()))
    with contextlib.suppress(OSError):
        os.unlink(f"{base}.claimed")
