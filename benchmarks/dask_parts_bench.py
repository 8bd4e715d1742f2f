"""The parts of a Dask attempt's cost that docs/performance.md and docs/decisions.md name, each against what it
replaced, measured in the same run (medians):

(1) starting a child on a worker: ``dask_task._spawn`` through setpriv, against the same function with a
    pre-exec function (``setpriv`` hidden), in a process that has imported Dask as a worker has;
(2) dask-local's cluster of 8 workers: ``local_cluster.LocalCluster`` (fork server, quiet monitors) from start to
    its address and its close, against a plain ``distributed.LocalCluster`` of spawned workers;
(3) the end of a process that has imported Dask: with ``gc.freeze()`` (what ``backfill`` does) and without.

Usage: python benchmarks/dask_parts_bench.py
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time

PLAIN_CLUSTER = """
import logging, sys, time
from distributed import LocalCluster
if __name__ == "__main__":
    started = time.perf_counter()
    cluster = LocalCluster(n_workers=8, threads_per_worker=1, dashboard_address=None, silence_logs=logging.ERROR)
    up = time.perf_counter()
    cluster.close()
    print(up - started, time.perf_counter() - up)
"""

EXIT = "import distributed, gc, sys, time{freeze}; sys.stderr.write(repr(time.time()))"


def spawn_ms(runs: int = 200) -> tuple[float, float]:
    import distributed  # noqa: F401  (a worker has it loaded: the fork copies it)

    from engine.base import parent_death
    from engine.execute import dask_task

    def each() -> float:
        times = []
        for _ in range(runs):
            started = time.perf_counter()
            process = dask_task._spawn(["true"], "/", {"PATH": "/usr/bin:/bin"})
            process.stdout.read()
            process.wait()
            times.append(time.perf_counter() - started)
        return statistics.median(times) * 1000

    setpriv = each()
    parent_death.SETPRIV, saved = None, parent_death.SETPRIV
    try:
        preexec = each()
    finally:
        parent_death.SETPRIV = saved
    return setpriv, preexec


def cluster_seconds(runs: int = 3) -> tuple[tuple[float, float], tuple[float, float]]:
    from engine.execute.local_cluster import LocalCluster

    ours_up, ours_close = [], []
    for _ in range(runs):
        started = time.perf_counter()
        cluster = LocalCluster(8)
        cluster.scheduler_address()
        up = time.perf_counter()
        cluster.close()
        ours_up.append(up - started)
        ours_close.append(time.perf_counter() - up)
    plain_up, plain_close = [], []
    for _ in range(runs):
        out = subprocess.run([sys.executable, "-c", PLAIN_CLUSTER], capture_output=True, text=True, check=True)
        up, close = map(float, out.stdout.split())
        plain_up.append(up)
        plain_close.append(close)
    median = statistics.median
    return (median(ours_up), median(ours_close)), (median(plain_up), median(plain_close))


def exit_seconds(freeze: bool, runs: int = 5) -> float:
    code = EXIT.format(freeze="; gc.freeze()" if freeze else "")
    times = []
    for _ in range(runs):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        times.append(time.time() - float(out.stderr))
    return statistics.median(times)


def main() -> None:
    setpriv, preexec = spawn_ms()
    print(f"(1) a child started on a worker: setpriv {setpriv:.1f} ms, pre-exec function {preexec:.1f} ms")
    (ours_up, ours_close), (plain_up, plain_close) = cluster_seconds()
    print(
        f"(2) 8 local workers: dask-local's cluster up in {ours_up:.2f} s, closed in {ours_close:.2f} s; "
        f"plain LocalCluster (spawn) up in {plain_up:.2f} s, closed in {plain_close:.2f} s"
    )
    print(
        f"(3) process end after importing Dask: {exit_seconds(False):.3f} s, with gc.freeze() "
        f"{exit_seconds(True):.3f} s"
    )


if __name__ == "__main__":
    main()
