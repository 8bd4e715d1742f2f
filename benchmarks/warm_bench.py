"""Warm launcher benchmark: a pipeline backfill's cost per partition with runners kept warm.

In one run, median of ``--runs``: the example pipeline over 365 daily partitions with ``--launcher exec``
and with ``--launcher warm`` (the ``backfill`` command as a user runs it, progress lines), and the same
365 runs called in-process, one after another, with no backfill around them (the floor: what the SQL and
the run itself cost in an already-warm interpreter). Goals: warm ≥ 5× faster than exec, and warm within
1.3× of the floor. Then the breakdown of one partition (start-up, parse, open, SQL, record), and the
runner's RSS after 100 partitions and the most any runner reaches over ``--rss-partitions`` (goal: within
10 %).

Usage: python benchmarks/warm_bench.py [--runs N] [--days N] [--rss-partitions N]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

from _measure import ROOT, backfill_argv, installed_environment, median

FLOOR = """
import sys, time
from datetime import date, timedelta
from engine.pipeline.options import RunOptions
from engine.pipeline.run_types import RunRequest
from engine.pipeline.runner import execute_run, prepare_run
target, days = sys.argv[1], int(sys.argv[2])
first = date(2023, 1, 1)
started = time.perf_counter()
for n in range(days):
    day = (first + timedelta(days=n)).isoformat()
    request = RunRequest(target=target, start=day, end=day, timezone="UTC", environment=None, config_file=None,
                         workers=16, options=RunOptions(), full_refresh=False, timeout=None, run_id=None,
                         backfill_id=None, backfill_total=None, partition_id=None)
    result = execute_run(prepare_run(request), lambda item: None)
    assert result.ok, result.error
print(time.perf_counter() - started)
"""

BREAKDOWN = """
import sys, time
t0 = time.perf_counter()
import duckdb
from engine.pipeline.options import RunOptions
from engine.pipeline.run_types import RunRequest
from engine.pipeline.runner import execute_run, prepare_run
from engine.pipeline.run_record import write_run_record
import tui.cli.run_command
t1 = time.perf_counter()
target, database = sys.argv[1], sys.argv[2]
parse, opening, total, record = [], [], [], []
for n in range(20):
    day = f"2023-02-{n + 1:02d}"
    request = RunRequest(target=target, start=day, end=day, timezone="UTC", environment=None, config_file=None,
                         workers=16, options=RunOptions(), full_refresh=False, timeout=None, run_id=None,
                         backfill_id=None, backfill_total=None, partition_id=None)
    a = time.perf_counter(); prepared = prepare_run(request); b = time.perf_counter()
    result = execute_run(prepared, lambda item: None); c = time.perf_counter()
    d = time.perf_counter(); write_run_record(result); e = time.perf_counter()
    f = time.perf_counter(); duckdb.connect(database).close(); g = time.perf_counter()
    parse.append(b - a); total.append(c - b); record.append(e - d); opening.append(g - f)
median = lambda v: sorted(v)[len(v) // 2]
print(t1 - t0, median(parse), median(opening), median(total), median(record))
"""


def fresh_example(scratch: Path, name: str) -> Path:
    repository = scratch / name
    if repository.exists():
        shutil.rmtree(repository)
    shutil.copytree(ROOT / "examples" / "shop", repository, ignore=shutil.ignore_patterns("*.duckdb", "*.wal", "logs"))
    (repository / ".git").mkdir()
    return repository


def backfill_seconds(scratch: Path, launcher: str, days: int) -> float:
    repository = fresh_example(scratch, f"shop-{launcher}")
    end = (date(2023, 1, 1) + timedelta(days=days - 1)).isoformat()
    argv = [*backfill_argv(), "pipeline", "--start-date", "2023-01-01", "--end-date", end]
    argv += ["--launcher", launcher, "--no-progress", "--reason", "benchmark"]
    started = time.perf_counter()
    subprocess.run(argv, cwd=repository, env=installed_environment(), check=True, capture_output=True)
    return time.perf_counter() - started


def floor_seconds(scratch: Path, days: int) -> float:
    repository = fresh_example(scratch, "shop-floor")
    output = subprocess.run(
        [sys.executable, "-c", FLOOR, "pipeline", str(days)],
        cwd=repository,
        env=installed_environment(),
        check=True,
        capture_output=True,
        text=True,
    )
    return float(output.stdout)


def breakdown(scratch: Path) -> list[float]:
    repository = fresh_example(scratch, "shop-breakdown")
    output = subprocess.run(
        [sys.executable, "-c", BREAKDOWN, "pipeline", str(repository / "warehouse.duckdb")],
        cwd=repository,
        env=installed_environment(),
        check=True,
        capture_output=True,
        text=True,
    )
    return [float(value) for value in output.stdout.split()]


def runner_rss(scratch: Path, partitions: int) -> tuple[float, float, float, int]:
    """RSS in MB of the warm runner over the first 100 and over the last 100 of ``partitions`` hourly
    partitions (the highest reading in each), the highest any runner reached meanwhile, and how many runners
    served them (each is recycled after RUNNER_PARTITIONS)."""
    import psutil

    repository = fresh_example(scratch, "shop-rss")
    end = (datetime(2020, 1, 1, tzinfo=UTC) + timedelta(hours=partitions)).strftime("%Y-%m-%dT%H:%M:%SZ")
    argv = [*backfill_argv(), "pipeline", "--start-date", "2020-01-01T00:00:00Z", "--end-date", end]
    argv += ["--partition", "1h", "--no-progress", "--reason", "benchmark"]
    process = subprocess.Popen(
        argv, cwd=repository, env=installed_environment(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    early = late = peak = 0.0
    seen: set[int] = set()
    while process.poll() is None:
        time.sleep(0.3)
        stores = list((repository / "logs" / "backfills").glob("*/partitions"))
        if not stores:
            continue
        done = sum(1 for _ in os.scandir(stores[0]))
        try:
            runners = [c for c in psutil.Process(process.pid).children() if "__warm-runner" in c.cmdline()]
            rss = max((r.memory_info().rss for r in runners), default=0) / 2**20
        except psutil.Error:
            continue
        seen.update(r.pid for r in runners)
        peak = max(peak, rss)
        # A runner's size while the first 100 partitions run, against the same while the last 100 run (by
        # then served by the latest runner): the highest reading in each window.
        if done <= 100:
            early = max(early, rss)
        if done >= partitions - 100:
            late = max(late, rss)
    if process.returncode != 0:
        raise SystemExit(f"the RSS backfill failed ({process.returncode})")
    return early, late, peak, len(seen)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--days", type=int, default=365)
    parser.add_argument("--rss-partitions", type=int, default=10_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        scratch = Path(directory)
        exec_times, warm_times, floor_times = [], [], []
        for _ in range(args.runs):
            exec_times.append(backfill_seconds(scratch, "exec", args.days))
            warm_times.append(backfill_seconds(scratch, "warm", args.days))
            floor_times.append(floor_seconds(scratch, args.days))
        exec_s, warm_s, floor_s = median(exec_times), median(warm_times), median(floor_times)
        print(f"{args.days} daily partitions of the example, median of {args.runs}:")
        print(f"  exec launcher   {exec_s:7.2f} s   {exec_s / args.days * 1000:6.1f} ms/partition")
        print(f"  warm launcher   {warm_s:7.2f} s   {warm_s / args.days * 1000:6.1f} ms/partition")
        print(f"  in-process      {floor_s:7.2f} s   {floor_s / args.days * 1000:6.1f} ms/partition (floor)")
        speedup, over_floor = exec_s / warm_s, warm_s / floor_s
        print(f"  exec / warm     {speedup:5.2f}×   goal ≥ 5×     {'ok' if speedup >= 5 else 'BELOW GOAL'}")
        print(f"  warm / floor    {over_floor:5.2f}×   goal ≤ 1.3×   {'ok' if over_floor <= 1.3 else 'OVER GOAL'}")
        start_up, parse, opening, total, record = breakdown(scratch)
        print("one partition, in-process medians of 20 (exec pays the start-up every time, warm once):")
        print(f"  start-up (interpreter excluded: imports)  {start_up * 1000:6.1f} ms")
        print(f"  parse and validate (prepare_run)          {parse * 1000:6.1f} ms")
        print(f"  DuckDB open + close                       {opening * 1000:6.1f} ms")
        print(f"  run: SQL, checks, run record (execute)    {total * 1000:6.1f} ms")
        print(f"  of which the run record                   {record * 1000:6.1f} ms")
        if args.rss_partitions:
            early, late, peak, runners = runner_rss(scratch, args.rss_partitions)
            growth = (late - early) / early * 100 if early else float("nan")
            print(
                f"warm runner RSS: {early:.1f} MB over the first 100 partitions, {late:.1f} MB over the last 100 "
                f"of {args.rss_partitions} "
                f"({runners} runners; the most any reached: {peak:.1f} MB)"
            )
            print(f"  growth {growth:+.1f} %   goal within 10 %   {'ok' if abs(growth) <= 10 else 'OVER GOAL'}")


if __name__ == "__main__":
    main()
