"""Processes we started, identified by PID *and* start time, so that a reused PID is never signalled."""

from __future__ import annotations

import os
import signal
import time

import psutil

_BOOT_TIME: float | None = None


def process_started(pid: int) -> float | None:
    """The start time of a live process, as psutil computes it (boot time + start ticks), or None.

    On Linux the boot time is read once and ``/proc/<pid>/stat`` once per call: this runs for
    every child the executor starts.
    """
    global _BOOT_TIME
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            fields = handle.read().rsplit(b")", 1)[1].split()
        if _BOOT_TIME is None:
            _BOOT_TIME = psutil.boot_time()
        return _BOOT_TIME + int(fields[19]) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        pass
    try:
        return psutil.Process(pid).create_time()
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return None


def same_process(pid: int | None, started: float | None) -> bool:
    if pid is None or started is None:
        return False
    actual = process_started(pid)
    return actual is not None and abs(actual - started) < 0.01


def signal_process(pid: int, signum: int) -> None:
    try:
        if os.getpgid(pid) == pid:
            os.killpg(pid, signum)
        else:
            os.kill(pid, signum)
    except (ProcessLookupError, PermissionError):
        pass


def alive(pid: int) -> bool:
    """Running (or stopped), not a zombie: an exited child nobody reaped yet is dead for our purposes."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False


def stop_orphans(pids: set[int], grace: float) -> None:
    """SIGTERM to each orphan's group, SIGKILL to whatever still lives after ``grace``."""
    for pid in pids:
        signal_process(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(alive(pid) for pid in pids):
        time.sleep(0.05)
    for pid in pids:
        if alive(pid):
            signal_process(pid, signal.SIGKILL)
