"""Every ``BACKFILL_*`` setting read from the environment, parsed and validated in one place, once.

An invocation reads :class:`Settings` when it starts and carries the object along: a bad value is refused
(``BadInput``, exit 2) before anything is saved or started, and no later step reads the environment again.
The variables are listed in ``docs/cli.md``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass

from engine.base.errors import BadInput

MAX_STOP_GRACE = 3600.0  # an hour: beyond, a "graceful" stop is a hang
DEFAULT_STOP_GRACE = 30.0
RUNNER_PARTITIONS = 100  # partitions a warm runner serves before it is replaced
MAX_RUNNER_PARTITIONS = 1_000_000
DEFAULT_LEASE_SECONDS, DEFAULT_RENEW_SECONDS = 60.0, 15.0
MAX_LEASE_SECONDS = 3600.0
DEFAULT_REQUEST_WAIT = 15.0
DEFAULT_OTHER_HOST_GRACE, MAX_OTHER_HOST_GRACE = 120.0, 86_400.0
MAX_REQUEST_WAIT = 600
DEFAULT_MAX_PARTITIONS = 10_000_000  # a plan larger than this is a typo (1us over days), not a backfill
MAX_PARTITIONS_CEILING = 50_000_000  # what the status arrays can hold (engine.store.status.MAX_PARTITIONS)
# Seconds as people write them: ASCII digits with a decimal point, spaces around ignored. Python's float() would
# also take 3_0 (30), 1e3, nan and infinity.
DECIMAL = re.compile(r"[0-9]+(?:\.[0-9]*)?|\.[0-9]+")


@dataclass(frozen=True, kw_only=True)
class Settings:
    """What the environment sets for this process (the defaults when a variable is unset or empty)."""

    stop_grace: float = DEFAULT_STOP_GRACE  # BACKFILL_STOP_GRACE: seconds a stopped child gets before SIGKILL
    runner_partitions: int = RUNNER_PARTITIONS  # BACKFILL_RUNNER_PARTITIONS: partitions per warm runner
    lease_seconds: float = DEFAULT_LEASE_SECONDS  # BACKFILL_LEASE_SECONDS: how long a lease holds unrenewed
    lease_renew_seconds: float = DEFAULT_RENEW_SECONDS  # BACKFILL_LEASE_RENEW_SECONDS: how often it is renewed
    request_wait: float = DEFAULT_REQUEST_WAIT  # BACKFILL_REQUEST_WAIT_SECONDS: wait for a live executor's answer
    max_partitions: int = DEFAULT_MAX_PARTITIONS  # BACKFILL_MAX_PARTITIONS: the largest plan accepted, dry runs too
    # BACKFILL_OTHER_HOST_GRACE: how long past its lease's expiry an executor here is still taken for alive by
    # other hosts (the clocks of hosts sharing a state directory may disagree); written into the lease
    other_host_grace: float = DEFAULT_OTHER_HOST_GRACE

    def check_plan_size(self, size: int) -> None:
        """A new plan over the limit is refused with its count, a dry run's too: nothing that large is meant."""
        if size > self.max_partitions:
            raise BadInput(
                f"the plan has {size:,} partitions, over the limit of {self.max_partitions:,} "
                f"(BACKFILL_MAX_PARTITIONS, at most {MAX_PARTITIONS_CEILING:,}): use a coarser --partition or a "
                "shorter range"
            )

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """Parse every variable (``os.environ`` unless ``environ`` is given); the first bad one is refused."""
        env = os.environ if environ is None else environ
        lease = _seconds(env, "BACKFILL_LEASE_SECONDS", DEFAULT_LEASE_SECONDS, low_open=True, high=MAX_LEASE_SECONDS)
        renew = _seconds(
            env, "BACKFILL_LEASE_RENEW_SECONDS", min(DEFAULT_RENEW_SECONDS, lease / 4), low_open=True,
            high=MAX_LEASE_SECONDS,
        )  # fmt: skip
        if renew >= lease:
            raise BadInput(
                f"BACKFILL_LEASE_RENEW_SECONDS {renew:g} must be below BACKFILL_LEASE_SECONDS {lease:g}: "
                "a lease must be renewed before it expires"
            )
        return cls(
            stop_grace=_seconds(env, "BACKFILL_STOP_GRACE", DEFAULT_STOP_GRACE, low_open=False, high=MAX_STOP_GRACE),
            runner_partitions=_whole(
                env, "BACKFILL_RUNNER_PARTITIONS", RUNNER_PARTITIONS, MAX_RUNNER_PARTITIONS, "partitions"
            ),
            lease_seconds=lease,
            lease_renew_seconds=renew,
            request_wait=float(
                _whole(env, "BACKFILL_REQUEST_WAIT_SECONDS", int(DEFAULT_REQUEST_WAIT), MAX_REQUEST_WAIT, "seconds")
            ),
            max_partitions=_whole(
                env, "BACKFILL_MAX_PARTITIONS", DEFAULT_MAX_PARTITIONS, MAX_PARTITIONS_CEILING, "partitions"
            ),
            other_host_grace=_seconds(
                env, "BACKFILL_OTHER_HOST_GRACE", DEFAULT_OTHER_HOST_GRACE, low_open=False, high=MAX_OTHER_HOST_GRACE
            ),
        )


def _seconds(env: Mapping[str, str], name: str, default: float, *, low_open: bool, high: float) -> float:
    """A number of seconds in ``[0, high]`` (``(0, high]`` when ``low_open``), in decimal ASCII digits."""
    raw = env.get(name)
    if not raw:
        return default
    value = float(raw) if DECIMAL.fullmatch(raw.strip()) else float("nan")
    inside = (value > 0 if low_open else value >= 0) and value <= high  # False for NaN
    if not inside:
        low = "above 0 and at most" if low_open else "from 0 to"
        raise BadInput(f"{name} {raw!r} is not a number of seconds {low} {high:g}")
    return value


def _whole(env: Mapping[str, str], name: str, default: int, high: int, what: str) -> int:
    """A whole number from 1 to ``high`` in ASCII digits."""
    raw = env.get(name)
    if not raw:
        return default
    value = int(raw) if raw.isascii() and raw.isdecimal() else 0
    if not 1 <= value <= high:
        raise BadInput(f"{name} {raw!r} is not a whole number of {what} from 1 to {high:,}")
    return value
