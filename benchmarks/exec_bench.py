"""Executor benchmark, with real child processes.

(a) 2000 partitions of ``true`` at --max-parallel 4 against ``xargs -P 4`` and GNU ``parallel -j 4`` (when
    installed: ``apt install parallel``) running the same 2000 commands, measured in the same run (median of
    several). Target ratio to xargs ≤ 1.5 (issue 28). Then the floor under it: Python's own launch of ``true``
    (``subprocess.Popen``, and ``os.posix_spawn``), 4 in flight, in milliseconds a child.
(a') The CPU of (a): our process's own and its children's, against the budget the goal leaves our process on
    this machine's cores.
(b) Peak RSS of the parent during a 1 000 000-partition backfill of ``true``, stopped with SIGINT
    after a few seconds. Target ≤ 150 MB.
(d) Peak RSS of the executor after 20 000, 200 000 and 1 000 000 partitions of ``true`` *processed*
    (each run to its end; --sizes picks them). Flat: ≤ 100 MB at 1 000 000.
(c) ``--continue ID --dry-run --output json`` on a backfill with 100 000 partition files (made by a
    real run of 100 000 children first). Target ≤ 3 s.

Usage: python benchmarks/exec_bench.py [--runs N] [--skip-c] [--sizes 20000,200000,1000000] [--only-d]
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from _measure import GUARD_FLAGS, backfill_argv, installed_environment, median, timed_run, verdict


def scratch_repository(base: Path) -> Path:
    (base / ".git").mkdir(parents=True)
    return base


PARTITIONS = 2000
# (a): 2,000 partitions of one minute, 4 at a time; and xargs running the same 2,000 commands.
RATIO_ARGS = ("--command", "true", "--start-date", "2024-01-01T00:00:00Z", "--end-date", "2024-01-02T09:20:00Z",
              "--partition", "1m", "--max-parallel", "4", "--no-progress")  # fmt: skip
XARGS = ["sh", "-c", "seq 2000 | xargs -P 4 -I{} true"]


def bench_ratio(work: Path, runs: int) -> None:
    backfill = [*backfill_argv(), *GUARD_FLAGS, *RATIO_ARGS]
    xargs = XARGS
    parallel = ["sh", "-c", "seq 2000 | parallel -j 4 true"] if shutil.which("parallel") else None
    ours, theirs, gnu = [], [], []
    for _ in range(runs):
        ours.append(timed_run(backfill, cwd=work)[0])
        theirs.append(timed_run(xargs, cwd=work)[0])
        if parallel is not None:
            gnu.append(timed_run(parallel, cwd=work)[0])
    ratio = median(ours) / median(theirs)
    print(
        f"(a) 2000 × true at parallel 4: backfill {median(ours):.3f} s, xargs -P 4 {median(theirs):.3f} s, "
        f"ratio {ratio:.2f} [{verdict(ratio, 1.5)} ≤ 1.5]  ({runs} runs each)"
    )
    if parallel is None:
        print("    GNU parallel: not installed (apt install parallel), not compared")
    else:
        print(f"    GNU parallel -j 4 {median(gnu):.3f} s: backfill's ratio to it {median(ours) / median(gnu):.2f}")


def bench_launch_floor(children: int = 1000, runs: int = 5) -> None:
    """What Python's own launch costs, the floor under (a): ``subprocess.Popen`` of ``true`` as a child is started
    (its environment, stdin closed, output to a log, its own session), 4 in flight, each reaped; and the same with
    ``os.posix_spawn`` (which encodes the environment in C). Milliseconds a child, medians of ``runs`` loops."""
    environment = {**os.environ, **{f"BACKFILL_{name}": "x" * 24 for name in ("ID", "PARTITION_ID", "RUN_ID")}}
    true = shutil.which("true") or "/bin/true"
    with tempfile.TemporaryDirectory() as scratch:
        log = os.open(Path(scratch) / "child.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        actions = [(os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0), (os.POSIX_SPAWN_DUP2, log, 1),
                   (os.POSIX_SPAWN_DUP2, log, 2)]  # fmt: skip

        def with_popen():  # each start returns what waits for that child
            process = subprocess.Popen([true], cwd=scratch, env=environment, stdin=subprocess.DEVNULL, stdout=log,
                                       stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
            return process.wait

        def with_spawn():
            pid = os.posix_spawn(true, [true], environment, file_actions=actions, setsid=True,
                                 setsigdef=(signal.SIGPIPE, signal.SIGXFSZ))  # fmt: skip
            return lambda: os.waitpid(pid, 0)

        results, cpu = {}, {}
        for name, start in (("Popen", with_popen), ("posix_spawn", with_spawn)):
            loops, own = [], []
            for _ in range(runs):
                started, in_flight, used = time.perf_counter(), [], time.process_time()
                for _ in range(children):
                    in_flight.append(start())
                    if len(in_flight) >= 4:
                        in_flight.pop(0)()
                for wait in in_flight:
                    wait()
                loops.append((time.perf_counter() - started) / children * 1000)
                own.append((time.process_time() - used) / children * 1000)
            results[name], cpu[name] = median(loops), median(own)
        os.close(log)
    print(
        f"    launch floor in Python, 4 in flight: Popen {results['Popen']:.3f} ms a child ({cpu['Popen']:.3f} ms of "
        f"the launching process's own CPU), posix_spawn {results['posix_spawn']:.3f} ms ({cpu['posix_spawn']:.3f} "
        f"ms) ({children} children, median of {runs} loops)"
    )


# Runs the backfill command in this process and, as it ends, writes the CPU seconds of the process itself and of
# the children it reaped (the 2,000 ``true``).
CPU_WRAPPER = """import atexit, os, resource, sys
def report():
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(os.environ["CPU_REPORT"], "w") as out:
        out.write(f"{own.ru_utime + own.ru_stime} {children.ru_utime + children.ru_stime}")
atexit.register(report)
from tui.cli.main import main
sys.argv = ["backfill", *sys.argv[1:]]
sys.exit(main())
"""


def bench_cpu_budget(work: Path, runs: int) -> None:
    """The CPU our process spends a partition in (a), beside the budget (a)'s goal leaves it. Our process and the
    children (the same 2,000 ``true`` xargs runs) share the cores, so the run cannot end before (ours + the
    children's) / cores, and a ratio of 1.5 leaves our process 1.5 × xargs' wall × cores − the children's CPU.
    Medians of ``runs``; our process is the command itself, run by a wrapper that reads its own and its reaped
    children's CPU as it exits."""
    argv = [sys.executable, "-c", CPU_WRAPPER, *GUARD_FLAGS, *RATIO_ARGS]
    report = work / "cpu.txt"
    env = {**installed_environment(), "CPU_REPORT": str(report)}
    ours, children, walls, xargs_walls, xargs_cpu = [], [], [], [], []
    for _ in range(runs):
        walls.append(timed_run(argv, cwd=work, env=env)[0])
        own, reaped = (float(value) for value in report.read_text().split())
        ours.append(own)
        children.append(reaped)
        started = time.perf_counter()
        process = subprocess.Popen(XARGS, cwd=work)
        _, _, usage = os.wait4(process.pid, 0)
        xargs_walls.append(time.perf_counter() - started)
        xargs_cpu.append(usage.ru_utime + usage.ru_stime)
    own, reaped, xargs_wall = median(ours), median(children), median(xargs_walls)
    cores = len(os.sched_getaffinity(0))
    floor = (own + reaped) / cores
    budget = 1.5 * xargs_wall * cores - reaped
    per_partition = 1000 / PARTITIONS  # seconds in all → milliseconds a partition
    print(
        f"(a') CPU of (a), {cores} cores: our process {own:.3f} s ({own * per_partition:.3f} ms a partition), its "
        f"{PARTITIONS:,} children {reaped:.3f} s; xargs -P 4 with its children {median(xargs_cpu):.3f} s in "
        f"{xargs_wall:.3f} s"
    )
    print(
        f"    so (a) cannot end before {floor:.3f} s ({floor / xargs_wall:.2f} × xargs; measured {median(walls):.3f} "
        "s): "
        f"the goal of 1.5 × leaves our process {max(budget, 0) * per_partition:.3f} ms of CPU a partition, where it "
        f"spends {own * per_partition:.3f} ms  ({runs} runs each)"
    )


def bench_million(work: Path, seconds: float) -> None:
    argv = [
        *backfill_argv(),
        *GUARD_FLAGS,
        "--command",
        "true",
        "--start-date",
        "2024-01-01T00:00:00Z",
        "--end-date",
        "2024-01-12T13:46:40Z",
        "--partition",
        "1s",
        "--max-parallel",
        "4",
        "--no-progress",
    ]
    process = subprocess.Popen(argv, cwd=work, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(seconds)
    os.kill(process.pid, signal.SIGINT)
    _, status, usage = os.wait4(process.pid, 0)
    rss = usage.ru_maxrss / 1024
    code = os.waitstatus_to_exitcode(status)
    print(
        f"(b) 1 000 000 partitions, stopped after {seconds:.0f} s (exit {code}): parent peak RSS {rss:.1f} MB "
        f"[{verdict(rss, 150)} ≤ 150 MB]"
    )


def bench_resume_dry_run(work: Path, runs: int) -> None:
    setup = [
        *backfill_argv(),
        *GUARD_FLAGS,
        "--command",
        "true",
        "--start-date",
        "2024-01-01T00:00:00Z",
        "--end-date",
        "2024-03-10T10:40:00Z",
        "--partition",
        "1m",
        "--max-parallel",
        "8",
        "--no-progress",
    ]
    started = time.perf_counter()
    subprocess.run(setup, cwd=work, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    made = time.perf_counter() - started
    [backfill] = [p for p in (work / "logs" / "backfills").iterdir() if p.name.startswith("2")]
    files = sum(1 for _ in (backfill / "partitions").iterdir())
    argv = [*backfill_argv(), "--continue", backfill.name, "--dry-run", "--output", "json"]
    times = [timed_run(argv, cwd=work)[0] for _ in range(runs)]
    print(
        f"(c) --continue --dry-run --output json over {files} partition files: median {median(times):.3f} s "
        f"[{verdict(median(times), 3)} ≤ 3 s]  ({runs} runs; making them took {made:.0f} s)"
    )


def bench_processed(work: Path, sizes: list[int]) -> None:
    """Peak RSS of whole runs of ``true``: what the executor keeps per partition processed shows as growth."""
    for size in sizes:
        end = datetime(2024, 1, 1, tzinfo=UTC) + timedelta(seconds=size)
        argv = [
            *backfill_argv(), *GUARD_FLAGS, "--command", "true", "--start-date", "2024-01-01T00:00:00Z",
            "--end-date", end.strftime("%Y-%m-%dT%H:%M:%SZ"), "--partition", "1s", "--max-parallel", "4",
            "--no-progress", "--state-dir", str(work / f"states-{size}"),
        ]  # fmt: skip
        started = time.perf_counter()
        process = subprocess.Popen(argv, cwd=work, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _, status, usage = os.wait4(process.pid, 0)
        seconds = time.perf_counter() - started
        rss = usage.ru_maxrss / 1024
        print(
            f"(d) {size:>9,} partitions processed in {seconds:.0f} s (exit {os.waitstatus_to_exitcode(status)}): "
            f"executor peak RSS {rss:.1f} MB" + (f" [{verdict(rss, 100)} ≤ 100 MB]" if size >= 1_000_000 else "")
        )
        shutil.rmtree(work / f"states-{size}", ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--skip-c", action="store_true", help="skip (c), which first runs 100 000 children")
    parser.add_argument("--sizes", default="20000,200000,1000000", help="(d): partitions processed per run")
    parser.add_argument("--only-d", action="store_true", help="run (d) alone")
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",") if size]
    with tempfile.TemporaryDirectory() as scratch:
        base = Path(scratch)
        if not args.only_d:
            bench_ratio(scratch_repository(base / "a"), args.runs)
            bench_cpu_budget(scratch_repository(base / "a2"), args.runs)
            bench_launch_floor()
            bench_million(scratch_repository(base / "b"), 5.0)
            if not args.skip_c:
                bench_resume_dry_run(scratch_repository(base / "c"), args.runs)
        bench_processed(scratch_repository(base / "d"), sizes)


if __name__ == "__main__":
    main()
