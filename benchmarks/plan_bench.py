"""Planner benchmark: dry runs of a ~4 million and a ~266 000 partition plan, as real processes.

(a) ``--dry-run --output json`` (default page of 1000) for 2019-01-01 .. 2026-08-01
    in 1-minute partitions: wall time and peak RSS. Targets: ≤ 0.5 s, ≤ 80 MB.
(b) ``--limit 0 --output json`` for the same range in 15-minute partitions into
    /dev/null: wall time. Target: ≤ 1.5 s.

Usage: python benchmarks/plan_bench.py [--runs N]
"""

from __future__ import annotations

import argparse

from _measure import EXAMPLE_PIPELINE, backfill_argv, median, timed_run, verdict

RANGE = ["--start-date", "2019-01-01", "--end-date", "2026-08-01"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    runs = parser.parse_args().runs
    base = [*backfill_argv(), str(EXAMPLE_PIPELINE), *RANGE, "--dry-run", "--output", "json"]

    a = [timed_run([*base, "--partition", "1m"]) for _ in range(runs)]
    a_time, a_rss = median([r[0] for r in a]), median([r[1] for r in a])
    print(
        f"(a) 1m partitions (3 988 800), default page: median {a_time:.3f} s [{verdict(a_time, 0.5)} ≤ 0.5 s], "
        f"peak RSS {a_rss:.1f} MB [{verdict(a_rss, 80)} ≤ 80 MB]  ({runs} runs)"
    )

    b = [timed_run([*base, "--partition", "15m", "--limit", "0"]) for _ in range(runs)]
    b_time = median([r[0] for r in b])
    print(
        f"(b) 15m partitions (265 920), --limit 0 to /dev/null: median {b_time:.3f} s "
        f"[{verdict(b_time, 1.5)} ≤ 1.5 s], peak RSS {median([r[1] for r in b]):.1f} MB  ({runs} runs)"
    )


if __name__ == "__main__":
    main()
