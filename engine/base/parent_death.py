"""A process that must not outlive the one that started it: the warm runner, the local Dask cluster, a remote
child on its worker."""

from __future__ import annotations

import contextlib

PR_SET_PDEATHSIG = 1


def set_parent_death_signal(signum: int) -> None:
    """Linux: be sent ``signum`` when the parent (the thread that started this process) ends, however it ends,
    SIGKILL included. Elsewhere nothing happens: callers keep a second way to notice (end of stdin, a heartbeat).
    The parent may already be gone by the time this takes effect: callers compare ``os.getppid()`` after it."""
    import ctypes

    with contextlib.suppress(Exception):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signum, 0, 0, 0)
