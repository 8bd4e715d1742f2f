"""Dask launcher benchmark: the `backfill` command with the local launcher against `--launcher dask-local:N`.

(a) 2000 partitions of ``true`` at parallel 4, local (exec) against dask-local:4: the per-partition dispatch
    overhead of each (wall time / partitions) and the ratio. Goal: Dask ≤ 2× local.
(b) 200 partitions of a child that sleeps 1 s at parallel 8, local against dask-local:8: the ratio. Goal: within
    10 %.

Each figure is one run (the issue asks for one); the cluster's start-up is part of the Dask time, as a user
pays it. Usage: python benchmarks/dask_bench.py [--runs N]
"""

from __future__ import annotations

import argparse
import subprocess
import tempfile
import time
from pathlib import Path

from _measure import GUARD_FLAGS, backfill_argv, installed_environment, median, verdict


def timed(argv: list[str], cwd: Path) -> float:
    """Wall seconds of one run; its progress lines go to a file (a pipe nobody reads would fill and block it)."""
    with open(cwd / "stderr.txt", "wb") as errors:
        started = time.perf_counter()
        code = subprocess.call(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=errors, env=installed_environment())
        elapsed = time.perf_counter() - started
    if code != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({code}): {(cwd / 'stderr.txt').read_text()[-2000:]}")
    return elapsed


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
        directory = work / f"{launcher[-1] if launcher else 'exec'}-{parallel}-{index}-{command[:4]}"
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
