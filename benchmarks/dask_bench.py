"""Dask launcher benchmark: the `backfill` command with the local launcher against `--launcher dask-local:N`.

(a) 2000 partitions of ``true`` at parallel 4, local (exec) against dask-local:4: the per-partition dispatch
    overhead of each (wall time / partitions) and the ratio. Goal: Dask ≤ 2× local.
(b) 200 partitions of a child that sleeps 1 s at parallel 8, local against dask-local:8: the ratio. Goal: within
    10 %.

Each figure is one run (the issue asks for one); the cluster's start-up is part of the Dask time, as a user
pays it. Two more figures explain (a) and feed the scaling estimate in docs/distributed.md:

- Dask's own floor: a no-op task (``int(0)``) kept 4 at a time on the same kind of local cluster, with no
  backfill at all — what any launcher on Dask pays per task on this machine;
- the CPU per partition in (a) of the executor process (executor and Dask client) and of dask-local's scheduler
  process (its workers not counted): how many partitions a second one core of each can drive.

Usage: python benchmarks/dask_bench.py [--runs N]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from _measure import GUARD_FLAGS, backfill_argv, installed_environment, median, verdict

CPU_SECONDS: dict[str, float] = {}  # run directory → the executor process's own CPU seconds, last seen
SCHEDULER_CPU_SECONDS: dict[str, float] = {}  # the same for dask-local's scheduler process (not its workers)


def timed(argv: list[str], cwd: Path) -> float:
    """Wall seconds of one run; its progress lines go to a file (a pipe nobody reads would fill and block it).
    The process's own CPU time is sampled until it ends (its children's is not counted)."""
    import psutil

    with open(cwd / "stderr.txt", "wb") as errors:
        started = time.perf_counter()
        process = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=errors, env=installed_environment())
        watched = psutil.Process(process.pid)
        while process.poll() is None:
            try:
                times = watched.cpu_times()
                CPU_SECONDS[str(cwd)] = times.user + times.system
                for helper in watched.children():
                    if "__local-cluster" in helper.cmdline():  # dask-local's scheduler (`backfill __local-cluster`)
                        times = helper.cpu_times()
                        SCHEDULER_CPU_SECONDS[str(cwd)] = times.user + times.system
            except psutil.Error:
                pass
            time.sleep(0.05)
        elapsed = time.perf_counter() - started
    if process.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({process.returncode}): {(cwd / 'stderr.txt').read_text()[-2000:]}")
    return elapsed


def dask_floor(tasks: int = 1000, at_once: int = 4) -> float:
    """Milliseconds per no-op task kept ``at_once`` in flight on a local cluster configured as dask-local's."""
    import logging
    import queue

    import dask
    from distributed import Client, LocalCluster

    from engine.execute.local_cluster import LOCAL_CLUSTER_CONFIG

    dask.config.set(LOCAL_CLUSTER_CONFIG)
    cluster = LocalCluster(
        n_workers=at_once, threads_per_worker=1, processes=True, dashboard_address=None, silence_logs=logging.ERROR
    )
    client = Client(cluster, set_as_default=False)
    done: queue.Queue = queue.Queue()
    try:
        client.submit(int, 0, pure=False).result()
        started = time.perf_counter()
        submitted = 0
        for _ in range(at_once):
            client.submit(int, 0, pure=False).add_done_callback(done.put)
            submitted += 1
        for _ in range(tasks):
            done.get()
            if submitted < tasks:
                client.submit(int, 0, pure=False).add_done_callback(done.put)
                submitted += 1
        return (time.perf_counter() - started) / tasks * 1000
    finally:
        client.close()
        cluster.close()


def run(work: Path, command: str, end: str, parallel: int, launcher: list[str], runs: int) -> float:
    argv = [
        *backfill_argv(),
        *GUARD_FLAGS,
        "--command",
        command,
        "--start-date",
        "2024-01-01T00:00:00Z",
        "--end-date",
        end,
        "--partition",
        "1m",
        "--max-parallel",
        str(parallel),
        "--no-progress",
        *launcher,
    ]
    times = []
    for index in range(runs):
        directory = work / f"{launcher[-1] if launcher else 'exec'}-{parallel}-{index}-{command[:4]}-{end[:13]}"
        (directory / ".git").mkdir(parents=True)
        times.append(timed(argv, directory))
    return median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        end_2000 = "2024-01-02T09:20:00Z"  # 2000 one-minute partitions
        local = run(work, "true", end_2000, 4, [], args.runs)
        dask = run(work, "true", end_2000, 4, ["--launcher", "dask-local:4"], args.runs)
        ratio = dask / local
        print(
            f"(a) 2000 × true at parallel 4: local {local:.2f} s ({local / 2000 * 1000:.1f} ms/partition), "
            f"dask-local:4 {dask:.2f} s ({dask / 2000 * 1000:.1f} ms/partition), ratio {ratio:.2f} "
            f"[{verdict(ratio, 2)} ≤ 2]"
        )
        parent_cpu = statistics.median(v for k, v in CPU_SECONDS.items() if "dask-local:4" in k) / 2000 * 1000
        scheduler_cpu = statistics.median(v for k, v in SCHEDULER_CPU_SECONDS.items() if "dask-local:4" in k)
        scheduler_cpu = scheduler_cpu / 2000 * 1000
        floor = dask_floor()
        local_each = local / 2000 * 1000
        # Each attempt's own cost: the 2000-partition run less a 200-partition one (the cluster's start-up and
        # the command's fixed costs cancel out), per partition of the difference.
        dask_200 = run(work, "true", "2024-01-01T03:20:00Z", 4, ["--launcher", "dask-local:4"], args.runs)
        attempt = (dask - dask_200) / 1800 * 1000
        print(
            f"    Dask's own floor: a no-op task 4 at a time {floor:.1f} ms/task ({floor / local_each:.1f}× "
            f"local's whole partition); one more partition on dask-local:4 ({dask:.2f} s for 2000 less "
            f"{dask_200:.2f} s for 200) costs {attempt:.1f} ms, {attempt / floor:.2f}× it "
            f"[{verdict(attempt / floor, 1.5)} ≤ 1.5]\n"
            f"    CPU per partition: executor process {parent_cpu:.1f} ms (one core drives "
            f"{1000 / parent_cpu:.0f} partitions/s), scheduler process {scheduler_cpu:.1f} ms (one core schedules "
            f"{1000 / scheduler_cpu:.0f}/s)"
        )
        end_200 = "2024-01-01T03:20:00Z"  # 200 one-minute partitions
        sleeper = "sleep 1"
        local = run(work, sleeper, end_200, 8, [], args.runs)
        dask = run(work, sleeper, end_200, 8, ["--launcher", "dask-local:8"], args.runs)
        ratio = dask / local
        print(
            f"(b) 200 × sleep 1 at parallel 8: local {local:.2f} s, dask-local:8 {dask:.2f} s, ratio {ratio:.3f} "
            f"[{verdict(ratio, 1.10)} ≤ 1.10]"
        )


if __name__ == "__main__":
    main()
