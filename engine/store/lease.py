"""``lease.json``: who owns a backfill across hosts sharing its state directory, and until when.

The executor writes it when it takes the backfill over and renews it every 15 s with an expiry 60 s ahead
(``BACKFILL_LEASE_RENEW_SECONDS``, ``BACKFILL_LEASE_SECONDS``). It lists the attempts it supervises, each
with the PID and start time of its child, so that a reconcile on the same host can stop exactly those
processes. ``epoch`` grows with every owner; a reconcile raises it and clears the owner, which fences the
old owner out: it may no longer write an outcome.

The expiry is written twice: as Unix seconds (``expires_at``) for other hosts, whose clocks may be off by up
to the owner's grace for other hosts (``host_grace``: 120 s unless ``BACKFILL_OTHER_HOST_GRACE`` set it where
the owner runs; every reader takes the owner's value, so all hosts agree), and on this boot's own clock
(``expires_boot``, seconds since boot, with the boot's ID) for readers on the same host, so that a wall-clock
step of an hour or a day neither expires a live lease nor prolongs a dead one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from engine.base.atomic import write_atomic
from engine.base.boot_clock import boot_id, since_boot
from engine.base.errors import StateUnreadable
from engine.base.settings import DEFAULT_OTHER_HOST_GRACE, MAX_OTHER_HOST_GRACE

LEASE = "lease.json"
# An owner on another host may only be slow to renew: wait this long past expiry (leases written before
# ``host_grace`` existed).
OTHER_HOST_GRACE = DEFAULT_OTHER_HOST_GRACE


@dataclass(frozen=True)
class LeasedAttempt:
    run_id: str
    index: int
    pid: int | None
    pid_started: float | None
    pid_birth: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "index": self.index,
            "pid": self.pid,
            "pid_started": self.pid_started,
            "pid_birth": self.pid_birth,
        }


@dataclass(frozen=True)
class Lease:
    epoch: int
    host: str | None  # None: unowned (ended, or reconciled)
    pid: int | None
    pid_started: float | None
    expires_at: float  # Unix seconds
    attempts: tuple[LeasedAttempt, ...] = field(default_factory=tuple)
    note: str | None = None  # why it is unowned: "ended", or what a reconcile found
    fenced: tuple[int, float] | None = None  # a reconcile: the (PID, start time) of the owner it fenced out
    boot: str | None = None  # the ID of the boot whose clock ``expires_boot`` is on
    expires_boot: float | None = None  # seconds since that boot
    host_grace: float = OTHER_HOST_GRACE  # how long past ``expires_at`` another host still waits for this owner

    def held_elsewhere_until(self) -> float:
        """Until when (Unix seconds) a reader on another host takes the owner for alive: its expiry and grace."""
        return self.expires_at + self.host_grace

    def expired(self, now: float) -> bool:
        """Whether the lease has run out: on this boot's clock when it was written on this boot (no wall-clock
        step moves that clock), else by the wall clock ``now`` (Unix seconds)."""
        if self.boot and self.expires_boot is not None and self.boot == boot_id():
            return since_boot() >= self.expires_boot
        return now >= self.expires_at

    def to_json(self) -> dict[str, Any]:
        return {
            "format": 1,
            "epoch": self.epoch,
            "host": self.host,
            "pid": self.pid,
            "pid_started": self.pid_started,
            "expires_at": self.expires_at,
            "attempts": [attempt.to_json() for attempt in self.attempts],
            "note": self.note,
            "fenced": list(self.fenced) if self.fenced is not None else None,
            "boot": self.boot,
            "expires_boot": self.expires_boot,
            "host_grace": self.host_grace,
        }


def _text(value: Any, name: str, what: str) -> str | None:
    if value is not None and not isinstance(value, str):
        raise TypeError(f"{name} is {value!r}, not {what}")
    return value


def _grace(value: Any) -> float:
    grace = float(value)
    if not 0 <= grace <= MAX_OTHER_HOST_GRACE:  # False for NaN
        raise ValueError(f"host_grace {value!r} is not a number of seconds from 0 to {MAX_OTHER_HOST_GRACE:g}")
    return grace


def read_lease(directory: Path) -> Lease | None:
    path = directory / LEASE
    try:
        data = orjson.loads(path.read_bytes())
        if not isinstance(data, dict):
            raise TypeError(f"a JSON {type(data).__name__}, not an object")
        attempts = tuple(
            LeasedAttempt(
                str(a["run_id"]),
                int(a["index"]),
                a.get("pid"),
                a.get("pid_started"),
                _text(a.get("pid_birth"), "pid_birth", "a process birth (boot ID:start ticks)"),
            )
            for a in data.get("attempts") or ()
        )
        return Lease(
            int(data["epoch"]),
            data.get("host"),
            data.get("pid"),
            data.get("pid_started"),
            float(data["expires_at"]),
            attempts,
            data.get("note"),
            (int(data["fenced"][0]), float(data["fenced"][1])) if data.get("fenced") else None,
            _text(data.get("boot"), "boot", "a boot ID"),
            float(data["expires_boot"]) if data.get("expires_boot") is not None else None,
            _grace(data.get("host_grace", OTHER_HOST_GRACE)),
        )
    except FileNotFoundError:
        return None
    except (OSError, orjson.JSONDecodeError, KeyError, TypeError, ValueError) as error:
        raise StateUnreadable(f"{path} is damaged ({error}): move it away if no executor runs this backfill") from None


def write_lease(directory: Path, lease: Lease) -> None:
    write_atomic(directory / LEASE, orjson.dumps(lease.to_json()), durable=False)
