"""A process that must not outlive the one that started it: the warm runner, the local Dask cluster, a remote
child on its worker, a Python asset's script."""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import signal
import subprocess
import sys
from typing import Any

PR_SET_PDEATHSIG = 1

# setpriv (util-linux) sets the parent-death signal without a preexec function, which would force a full fork of
# the parent: 8.6 ms a child instead of 1.8 ms in a Dask worker (benchmarks/dask_parts_bench.py), and a preexec
# function is not safe in a process with threads.
SETPRIV = shutil.which("setpriv")


def set_parent_death_signal(signum: int) -> None:
    """Linux: be sent ``signum`` when the parent (the thread that started this process) ends, however it ends,
    SIGKILL included. Elsewhere nothing happens: callers keep a second way to notice (end of stdin, a heartbeat).
    The parent may already be gone by the time this takes effect: callers compare ``os.getppid()`` after it."""
    import ctypes

    with contextlib.suppress(Exception):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signum, 0, 0, 0)


def start_bound_to_thread(argv: list[str], cwd: str, env: dict[str, str]) -> subprocess.Popen[bytes]:
    """``argv`` in a session of its own, its stdout and stderr on one pipe, stdin empty, and killed (SIGKILL) when
    the thread that started it ends, however it ends: the thread must wait for it. Where setpriv is missing, a
    preexec function sets the signal (Linux; elsewhere whoever started it must stop it)."""
    options: dict[str, Any] = {}
    if SETPRIV is not None:
        _check_executable(argv[0], cwd, env)  # setpriv would report a missing program as its own exit 127
        argv = [SETPRIV, "--pdeathsig", "KILL", "--", *argv]
    elif sys.platform == "linux":
        options["preexec_fn"] = _die_with_parent
    return subprocess.Popen(
        argv,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        **options,
    )


def _check_executable(program: str, cwd: str, env: dict[str, str]) -> None:
    if os.sep in program:
        found = os.path.join(cwd, program)
        if not os.access(found, os.X_OK) or os.path.isdir(found):
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), program)
    elif shutil.which(program, path=env.get("PATH", os.defpath)) is None:
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), program)


def _die_with_parent() -> None:
    """In the child, before exec, where setpriv is missing: the parent-death signal."""
    set_parent_death_signal(signal.SIGKILL)
