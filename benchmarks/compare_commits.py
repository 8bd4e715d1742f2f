"""Two commits, one command, alternately: the real ``backfill`` command run from a worktree of each revision
(``PYTHONPATH`` puts that checkout's packages first), fresh processes, one scratch repository, medians.

Used for the figures in docs/performance.md that compare a change with the commit before it on a noisy machine
(alternating runs share its load): the executor's 2000 × ``true`` against ``xargs -P 4`` (``--scenario exec``),
``backfill list`` over a state root of saved backfills (``--scenario list``, made here by small real runs), and the
dashboard's first partition row in a pseudo-terminal over 1,000,000 partitions against a minimal Textual app's one
line (``--scenario paint``, the first-frame figure of ``tui_bench.py``), and a new backfill of the bundled example
pipeline over January 2024 (``--scenario pipeline``: 31 partitions, warm runners, its pre-flight, snapshot, the
look at the pipeline's files before each turn of launches and the fingerprints of what the run left), its dry run
(``--scenario dryrun``: the pre-flight alone, ``--dry-run --output json``) and one day of it by hand
(``--scenario run``: ``backfill run``, what each partition's child does).

Usage: python benchmarks/compare_commits.py OLD_REV [NEW_REV] [--scenario exec|list|paint|pipeline|dryrun|run]
       [--runs N]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _measure import GUARD_FLAGS, ROOT, installed_environment

EXEC = [*GUARD_FLAGS, "--command", "true", "--start-date", "2024-01-01T00:00:00Z", "--end-date",
        "2024-01-02T09:20:00Z", "--partition", "1m", "--max-parallel", "4", "--no-progress"]  # fmt: skip


PIPELINE = ["pipeline", "--start-date", "2024-01-01", "--end-date", "2024-01-31", "--reason", "benchmark",
            "--no-progress"]  # fmt: skip
SCENARIOS = {
    "list": ["list"],
    "pipeline": PIPELINE,
    "dryrun": [*PIPELINE, "--dry-run", "--output", "json"],
    "run": ["run", "pipeline", "--start-date", "2024-01-03", "--end-date", "2024-01-03"],
}


def checkout(revision: str, into: Path) -> Path:
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "-q", "-f", "--detach", str(into), revision], check=True)
    return into


def run(checkout_dir: Path | None, argv: list[str], cwd: Path) -> float:
    env = installed_environment()  # bytecode cached, as installed (each worktree's on the uncounted first round)
    if checkout_dir is not None:
        env["PYTHONPATH"] = str(checkout_dir)
    started = time.perf_counter()
    subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old")
    parser.add_argument("new", nargs="?", default=None, help="a revision; the working tree when left out")
    parser.add_argument("--scenario", choices=("exec", "paint", *SCENARIOS), default="exec")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="compare-"))
    trees = {"old": checkout(args.old, scratch / "old")}
    trees["new"] = checkout(args.new, scratch / "new") if args.new else None
    work = scratch / "work"
    (work / ".git").mkdir(parents=True)
    command = [sys.executable, "-m", "tui"]
    try:
        if args.scenario == "list":
            for _ in range(25):  # a state root of small saved backfills
                run(trees["new"], [*command, *GUARD_FLAGS, "--command", "true", "--start-date", "2024-01-01",
                                   "--end-date", "2024-01-02", "--no-progress"], work)  # fmt: skip
        if args.scenario in ("pipeline", "dryrun", "run"):  # the example; its warehouse kept from run to run
            shutil.copytree(ROOT / "examples" / "shop" / "pipeline", work / "pipeline")
            shutil.copy(ROOT / "examples" / "shop" / ".bruin.yml", work / ".bruin.yml")
        if args.scenario == "paint":
            return compare_first_paint(trees, args)
        times: dict[str, list[float]] = {"old": [], "new": [], "xargs": []}
        for round_number in range(args.runs + 1):  # the first round writes the bytecode caches and is not counted
            for which in ("old", "new"):
                argv = [*command, *SCENARIOS.get(args.scenario, EXEC)]
                seconds = run(trees[which], argv, work)
                if round_number:
                    times[which].append(seconds)
            if args.scenario == "exec" and round_number:
                times["xargs"].append(run(None, ["sh", "-c", "seq 2000 | xargs -P 4 -I{} true"], work))
        old, new = statistics.median(times["old"]), statistics.median(times["new"])
        line = f"{args.scenario}: {args.old} {old:.3f} s, {args.new or 'working tree'} {new:.3f} s"
        if times["xargs"]:
            xargs = statistics.median(times["xargs"])
            line += f"; xargs -P 4 {xargs:.3f} s: ratios {old / xargs:.2f} → {new / xargs:.2f}"
        print(f"{line}  (medians of {args.runs}, alternating)")
    finally:
        for tree in trees.values():
            if tree is not None:
                subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], check=False)
    return 0


def compare_first_paint(trees: dict[str, Path | None], args: argparse.Namespace) -> int:
    """Launch → the first partition row on the terminal, each commit's command and the minimal app in turn."""
    from tui_bench import first_row_seconds, minimal_app_seconds

    times: dict[str, list[float]] = {"old": [], "new": [], "minimal": []}
    for run_number in range(args.runs + 1):  # the first round writes the bytecode caches and is not counted
        for which in ("old", "new"):
            seconds = first_row_seconds(pythonpath=trees[which])
            if run_number:
                times[which].append(seconds)
        seconds = minimal_app_seconds()
        if run_number:
            times["minimal"].append(seconds)
    old, new, floor = (statistics.median(times[key]) for key in ("old", "new", "minimal"))
    print(
        f"paint: {args.old} {old:.3f} s, {args.new or 'working tree'} {new:.3f} s; a minimal Textual app {floor:.3f} "
        f"s: ratios {old / floor:.2f} → {new / floor:.2f}  (medians of {args.runs}, alternating)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
