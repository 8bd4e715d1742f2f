"""This boot's own clock: seconds since boot, suspend included, which no wall-clock step moves; and the boot's ID,
so that a reading is only ever compared with another from the same boot (the same host, never rebooted since)."""

from __future__ import annotations

import time

_BOOT_ID: str | None = None


def boot_id() -> str:
    """This boot's ID (``/proc/sys/kernel/random/boot_id``), read once; empty where there is none."""
    global _BOOT_ID
    if _BOOT_ID is None:
        try:
            with open("/proc/sys/kernel/random/boot_id") as handle:
                _BOOT_ID = handle.read().strip()
        except OSError:
            _BOOT_ID = ""
    return _BOOT_ID


def since_boot() -> float:
    """Seconds since boot, counting time suspended (a frozen VM's lease must run out on it as for everyone)."""
    try:
        return time.clock_gettime(time.CLOCK_BOOTTIME)
    except (AttributeError, OSError):  # not Linux: the monotonic clock, which no step moves either
        return time.monotonic()
