"""Interventions benchmark: how fast an operator's request takes effect, and what marking and auditing
100,000 partitions cost. In one run, medians of ``--runs``, each a real `backfill` process:

- cancel and pause latency: a backfill runs 2 children (sleeping 60 s) in the background; the time from
  starting `backfill cancel` (or `pause`) to its return, which is when the executor has applied the request
  (polled from `requests/`), and, for cancel, to the executor's exit with every child stopped. Goal ≤ 2.5 s.
- mark: `backfill mark ID --status-filter queued --status skipped` over a backfill of 1 + ``--partitions``
  hourly partitions whose first failed (so ``--partitions`` are queued). Goal ≤ 5 s for 100,000. Beside it,
  the floor of the filesystem: creating and renaming as many files of that size in one directory, in
  plain Python, measured in the same run.
- audit: `backfill audit ID` over the 100,000 lines that mark wrote, in full (to /dev/null) and its first
  screen (40 lines, through `head`). Goal: first screen ≤ 0.5 s.
- cancel during a large mark: a live backfill of 1 + ``--partitions`` hourly partitions runs 2 sleeping
  children; `backfill mark ID --status-filter queued --status skipped` (every queued partition) is sent to it,
  and 0.2 s later `backfill cancel`. The time from the cancel to its return (applied), and whether the mark
  command got its answer. Goal: cancel ≤ 2.5 s, the mark answered.
- asset-level resume: a pipeline of 10 Python assets in a chain (a0 → … → a9), each standing in for 0.5 s of
  work, backfilled over one day with a7 failing; then `--continue` with a7 fixed, asset by asset (a7, a8, a9
  run again) against `--continue --rerun-whole-partition` (all ten), each from its own copy of the failed
  backfill: seconds of the `--continue` and the assets it ran (counted from what the assets logged).

Usage: python benchmarks/intervene_bench.py [--runs N] [--partitions N]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _measure import GUARD_FLAGS, backfill_argv, installed_environment, median, sandbox_repository, verdict

SLEEPER = f"{sys.executable} -c 'import time; time.sleep(60)'"


def state_dir(work: Path) -> Path:
    while True:
        found = [p for p in (work / "logs" / "backfills").glob("[!.]*") if (p / "manifest.json").exists()]
        if found:
            return found[0]
        time.sleep(0.02)


def running_children(backfill: Path, count: int) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        running = 0
        for path in (backfill / "partitions").glob("*.json"):
            with contextlib.suppress(OSError, ValueError):
                running += json.loads(path.read_bytes())["status"] == "running"
        if running >= count:
            return
        time.sleep(0.02)
    raise SystemExit("the children never started")


def latency(verb: str, root: Path, number: int) -> tuple[float, float]:
    """Seconds until `backfill VERB` returned (applied), and until the executor exited."""
    work = root / f"{verb}-{number}"
    (work / ".git").mkdir(parents=True)
    env = installed_environment()
    argv = [
        *backfill_argv(),
        *GUARD_FLAGS,
        "--command",
        SLEEPER,
        "--start-date",
        "2024-01-01",
        "--end-date",
        "2024-01-10",
        "--max-parallel",
        "2",
        "--no-progress",
    ]
    executor = subprocess.Popen(argv, cwd=work, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    backfill = state_dir(work)
    running_children(backfill, 2)
    started = time.perf_counter()
    subprocess.run(
        [*backfill_argv(), verb, backfill.name, "--reason", "benchmark"],
        cwd=work,
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    applied = time.perf_counter() - started
    if verb == "pause":  # the running children would finish in 60 s: stop them, the pause is measured
        executor.send_signal(2)
    executor.wait(timeout=120)
    return applied, time.perf_counter() - started


def cancel_during_mark(root: Path, partitions: int, number: int) -> tuple[float, int, float]:
    """Seconds from `backfill cancel` to its return while a mark of every queued partition is being applied by
    the live executor; the mark's exit code, and how long the mark took."""
    work = root / f"cancel-mark-{number}"
    (work / ".git").mkdir(parents=True)
    env = installed_environment()
    end = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(946684800 + (partitions + 1) * 3600))
    argv = [
        *backfill_argv(), *GUARD_FLAGS, "--command", SLEEPER, "--start-date", "2000-01-01T00:00:00",
        "--end-date", end, "--partition", "1h", "--max-parallel", "2", "--no-progress",
    ]  # fmt: skip
    executor = subprocess.Popen(argv, cwd=work, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    backfill = state_dir(work)
    running_children(backfill, 2)
    mark_started = time.perf_counter()
    mark = subprocess.Popen(
        [*backfill_argv(), "mark", backfill.name, "--status-filter", "queued", "--status", "skipped",
         "--reason", "benchmark"],
        cwd=work, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    time.sleep(0.2)  # the mark is on its way: the cancel comes while it is applied
    started = time.perf_counter()
    subprocess.run([*backfill_argv(), "cancel", backfill.name, "--reason", "benchmark"], cwd=work, env=env,
                   check=True, stdout=subprocess.DEVNULL)  # fmt: skip
    applied = time.perf_counter() - started
    code = mark.wait(timeout=300)
    marked = time.perf_counter() - mark_started
    executor.wait(timeout=120)
    return applied, code, marked


CHAIN = 10
FAILING = "a7"
ASSET = """\"\"\"@bruin
name: {name}
type: python
{depends}@bruin\"\"\"
import os, time
if "{name}" == "{failing}" and os.path.exists(os.environ["BENCH_FAIL"]):
    raise SystemExit("{name}: the source is not there yet")
time.sleep(0.5)  # stands in for the asset's work
with open(os.environ["BENCH_RUNS"], "a") as log:
    log.write("{name}\\n")
"""


def chain_repository(work: Path) -> None:
    """A repository with pipeline ``p``: a0 → a1 → … → a9, sandbox guardrails, one DuckDB connection."""
    assets = sandbox_repository(work)
    for n in range(CHAIN):
        depends = f"depends:\n  - a{n - 1}\n" if n else ""
        (assets / f"a{n}.py").write_text(ASSET.format(name=f"a{n}", depends=depends, failing=FAILING))


def asset_resume(root: Path, number: int, *, whole: bool) -> tuple[float, int]:
    """Seconds of a `--continue` of a one-day backfill that failed at a7, and how many assets it ran."""
    work = root / f"resume-{'whole' if whole else 'assets'}-{number}"
    chain_repository(work)
    env = {**installed_environment(), "BENCH_FAIL": str(work / "fail"), "BENCH_RUNS": str(work / "runs.log")}
    (work / "fail").write_text("")
    first = subprocess.run(
        [*backfill_argv(), "p", "--reason", "benchmark", "--start-date", "2024-01-01", "--end-date", "2024-01-01",
         "--no-progress"],
        cwd=work, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    if first.returncode != 1:
        raise SystemExit(f"the first run should fail at {FAILING} (exit 1), not exit {first.returncode}")
    (work / "fail").unlink()
    os.unlink(work / "runs.log")
    backfill = state_dir(work)
    argv = [*backfill_argv(), "--continue", backfill.name, "--no-progress"]
    started = time.perf_counter()
    subprocess.run([*argv, *(["--rerun-whole-partition"] if whole else [])], cwd=work, env=env, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    seconds = time.perf_counter() - started
    return seconds, len((work / "runs.log").read_text().splitlines())


def mark_and_audit(root: Path, partitions: int, number: int) -> tuple[float, float, float, int]:
    work = root / f"mark-{number}"
    (work / ".git").mkdir(parents=True)
    env = installed_environment()
    end = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(946684800 + (partitions + 1) * 3600))  # 1 + partitions
    first = subprocess.run(
        [
            *backfill_argv(),
            *GUARD_FLAGS,
            "--command",
            "false",
            "--start-date",
            "2000-01-01T00:00:00",
            "--end-date",
            end,
            "--partition",
            "hourly",
            "--no-progress",
            "--allow-long-range",
        ],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
    )
    if first.returncode != 1:
        raise SystemExit(f"the setup backfill should fail its first partition: {first.stderr}")
    backfill = state_dir(work)
    started = time.perf_counter()
    marked = subprocess.run(
        [
            *backfill_argv(),
            "mark",
            backfill.name,
            "--status-filter",
            "queued",
            "--status",
            "skipped",
            "--reason",
            "benchmark",
        ],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    mark_seconds = time.perf_counter() - started
    count = int(marked.stdout.split()[1])
    started = time.perf_counter()
    subprocess.run([*backfill_argv(), "audit", backfill.name], cwd=work, env=env, stdout=subprocess.DEVNULL, check=True)
    full = time.perf_counter() - started
    started = time.perf_counter()
    subprocess.run(
        f"{' '.join(backfill_argv())} audit {backfill.name} | head -n 40 > /dev/null",
        shell=True,
        cwd=work,
        env=env,
        check=True,
    )
    first_screen = time.perf_counter() - started
    return mark_seconds, full, first_screen, count


def filesystem_floor(root: Path, count: int) -> float:
    """Seconds to create ``count`` files of a record's size by temporary file and rename, nothing else."""
    directory = root / "floor"
    directory.mkdir()
    data = b"x" * 700
    started = time.perf_counter()
    for number in range(count):
        name = f"{number:064x}.json"
        temporary = directory / f".{name}.tmp"
        temporary.write_bytes(data)
        temporary.replace(directory / name)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--partitions", type=int, default=100_000)
    parser.add_argument("--only-resume", action="store_true", help="only the asset-level resume scenario")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        if not args.only_resume:
            requests(root, args)
        resumes(root, args)


def requests(root: Path, args: argparse.Namespace) -> None:
    """Cancel, pause, mark, audit and a cancel during a large mark."""
    for verb in ("cancel", "pause"):
        results = [latency(verb, root, n) for n in range(args.runs)]
        applied = median([r[0] for r in results])
        print(f"{verb:7} request → applied   median {applied:.3f} s  ({verdict(applied, 2.5)}, goal ≤ 2.5 s)")
        if verb == "cancel":
            ended = median([r[1] for r in results])
            print(f"{verb:7} request → all stopped median {ended:.3f} s")
    results = [mark_and_audit(root, args.partitions, n) for n in range(max(1, args.runs // 2))]
    count = results[0][3]
    mark = median([r[0] for r in results])
    print(f"mark    {count:,} partitions    median {mark:.3f} s  ({verdict(mark, 5.0)}, goal ≤ 5 s)")
    floor = filesystem_floor(root, count)
    print(f"floor   {count:,} files created and renamed    {floor:.3f} s  (mark / floor = {mark / floor:.2f})")
    print(f"audit   {count:,} lines, all    median {median([r[1] for r in results]):.3f} s")
    first = median([r[2] for r in results])
    print(f"audit   first screen (40 lines)  median {first:.3f} s  ({verdict(first, 0.5)}, goal ≤ 0.5 s)")
    during = [cancel_during_mark(root, args.partitions, n) for n in range(max(1, args.runs // 2))]
    applied = median([r[0] for r in during])
    codes = sorted({r[1] for r in during})
    print(
        f"cancel  during a mark of {args.partitions:,}  median {applied:.3f} s  ({verdict(applied, 2.5)}, "
        f"goal ≤ 2.5 s); the mark exited {codes} after {median([r[2] for r in during]):.3f} s"
    )


def resumes(root: Path, args: argparse.Namespace) -> None:
    """An asset-level resume against a whole-partition rerun, in one run."""
    resumed = {whole: [asset_resume(root, n, whole=whole) for n in range(args.runs)] for whole in (False, True)}
    for whole, label in ((False, "asset by asset"), (True, "--rerun-whole-partition")):
        seconds = median([r[0] for r in resumed[whole]])
        ran = sorted({r[1] for r in resumed[whole]})
        print(f"resume  a 10-asset partition failed at {FAILING}, {label}: median {seconds:.3f} s, assets run {ran}")
    ratio = median([r[0] for r in resumed[False]]) / median([r[0] for r in resumed[True]])
    print(f"resume  asset by asset / whole partition = {ratio:.2f}")


if __name__ == "__main__":
    main()
