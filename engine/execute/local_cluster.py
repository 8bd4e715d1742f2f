"""``--launcher dask-local:N``: a local Dask cluster in a process of its own, for the life of one executor.

In the executor's own process the scheduler would share its interpreter lock with the executor's loop and take
its CPU. In a session of its own, the terminal's Ctrl+C reaches the executor alone, which stops the children as
it does locally (not by ignoring SIGINT here: an ignored signal stays ignored through exec, in every child).
The cluster dies with its executor: the parent-death signal, and the end of its standard input, stop it; its
workers exit when it does, and their children with them.

The process is ``backfill __local-cluster N EXECUTOR_PID`` (``tui/cli/local_cluster_process.py`` does its input
and output): it prints the scheduler's address on one line, then runs until its standard input closes or the
executor kills its process group. What it runs is :func:`serve_local_cluster`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import tempfile
from collections.abc import Callable

from engine.base.errors import BadInput
from engine.base.internal_verbs import LOCAL_CLUSTER_VERB
from engine.base.parent_death import set_parent_death_signal
from engine.execute.children import backfill_program

LOCAL_CLUSTER_CONFIG = {
    # We own retries and their records: the scheduler must never rerun an attempt on its own.
    "distributed.scheduler.allowed-failures": 0,
    # Workers forked from a server that imported Dask once: 8 are up in 1.2 s instead of 2.7 s on 2 cores
    # (benchmarks/dask_parts_bench.py).
    "distributed.worker.multiprocessing-method": "forkserver",
    # A worker's statistical profiler and GIL monitor take CPU from the children on a small machine; we submit
    # no more tasks than there are threads, so stealing has nothing to balance.
    "distributed.worker.profile.enabled": False,
    "distributed.admin.system-monitor.gil.enabled": False,
    "distributed.scheduler.work-stealing": False,
    # One task per worker thread: at the default 1.1 a one-thread worker takes a second task while the first
    # still runs, and the attempt waits for it (a second's stall behind a one-second child).
    "distributed.scheduler.worker-saturation": 1.0,
    # Event-loop health checks, memory and system monitors wake every worker 50+ times a second: with no
    # dashboard and tasks that hold no data, a slower pace leaves the cores to the children.
    "distributed.admin.tick.interval": "1s",
    "distributed.worker.memory.monitor-interval": "1s",
    "distributed.admin.system-monitor.interval": "2s",
}


class LocalCluster:
    """The helper process, as the launcher holds it."""

    def __init__(self, workers: int) -> None:
        # A pipe nobody reads after the start would fill and block it; the file lives as long as the cluster.
        self._errors = tempfile.TemporaryFile()  # noqa: SIM115
        self._process = subprocess.Popen(
            [*backfill_program(), LOCAL_CLUSTER_VERB, str(workers), str(os.getpid())],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._errors,
            start_new_session=True,
        )
        self._workers = workers

    def scheduler_address(self) -> str:
        """Once the cluster is up (started first, so that it imports Dask while the executor does)."""
        assert self._process.stdout is not None
        line = self._process.stdout.readline().decode().strip()
        if not line.startswith("tcp://"):
            error = self._error_text()
            self.close()
            raise BadInput(f"--launcher dask-local:{self._workers}: the local Dask cluster did not start: {error}")
        return line

    def _error_text(self) -> str:
        with contextlib.suppress(Exception):
            self._process.wait(timeout=10)
            self._errors.seek(0)
            lines = [line for line in self._errors.read().decode(errors="replace").splitlines() if line.strip()]
            if lines:
                return lines[-1].strip()
        return f"its process ended ({self._process.returncode})"

    def close(self) -> None:
        """Every child has been waited for by now: the scheduler, its fork server and its workers (one process
        group) may go at once; a graceful close would only make the user wait."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self._process.pid, signal.SIGKILL)
        self._process.wait()
        for stream in (self._process.stdin, self._process.stdout, self._errors):
            if stream is not None:
                stream.close()


def serve_local_cluster(
    workers: int, executor_pid: int, *, announce: Callable[[str], None], wait: Callable[[], None]
) -> bool:
    """Run the cluster for the executor ``executor_pid``: ``announce`` its scheduler's address, serve until
    ``wait`` returns, close. False (nothing started) when the executor died before this process could follow it."""
    if not _die_with_parent(executor_pid):
        return False
    _start_fork_server()
    import dask
    from distributed import LocalCluster as DaskLocalCluster

    dask.config.set(LOCAL_CLUSTER_CONFIG)
    cluster = DaskLocalCluster(
        n_workers=workers,
        threads_per_worker=1,
        processes=True,
        dashboard_address=None,
        silence_logs=logging.ERROR,
    )
    announce(cluster.scheduler_address)
    wait()  # until the executor ends (it kills the cluster's process group when it is done)
    cluster.close(timeout=10)
    return True


def _start_fork_server() -> None:
    """The workers' fork server imports Dask while this process does, not after (0.4 s sooner on 2 cores)."""
    import multiprocessing
    from multiprocessing import forkserver

    multiprocessing.get_context("forkserver").set_forkserver_preload(["distributed"])
    forkserver.ensure_running()


def _die_with_parent(executor_pid: int) -> bool:
    """SIGTERM when the executor dies, however it dies (Linux); elsewhere the end of stdin does. False when the
    executor died before the signal was set."""
    set_parent_death_signal(signal.SIGTERM)
    return os.getppid() == executor_pid
