"""Runner benchmark: what every backfill partition pays for its child ``backfill run``.

(1) one ``backfill run`` of the example pipeline (seed, 2 SQL assets, merge mart, checks) for one day;
(2) the per-run overhead of a one-asset pipeline (``SELECT 1`` as a table), process start to exit.
Median of several runs, each a fresh process. Target for both: ≤ 0.4 s.

Usage: python benchmarks/run_bench.py [--runs N]
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path

from _measure import ROOT, backfill_argv, median, timed_run, verdict


def one_asset_repository(base: Path) -> Path:
    (base / ".git").mkdir(parents=True)
    (base / ".bruin.yml").write_text(
        "environments:\n  default:\n    connections:\n      duckdb:\n        - name: db\n          path: w.duckdb\n"
    )
    (base / "p" / "assets").mkdir(parents=True)
    (base / "p" / "pipeline.yml").write_text("name: one\ndefault_connections: {duckdb: db}\n")
    (base / "p" / "assets" / "one.sql").write_text(
        "/* @bruin\nname: s.one\ntype: duckdb.sql\nmaterialization: {type: table}\n@bruin */\nSELECT 1 AS x\n"
    )
    return base / "p"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    runs = parser.parse_args().runs
    with tempfile.TemporaryDirectory() as scratch:
        example = Path(scratch) / "shop"
        shutil.copytree(ROOT / "examples" / "shop", example, ignore=shutil.ignore_patterns("*.duckdb", "logs"))
        (example / ".git").mkdir()
        day = ["--start-date", "2024-01-01", "--end-date", "2024-01-01"]
        argv = [*backfill_argv(), "run", str(example / "pipeline"), *day]
        timed_run(argv)  # warm the file cache and create the tables once
        example_times = [timed_run(argv)[0] for _ in range(runs)]
        one = one_asset_repository(Path(scratch) / "one")
        argv = [*backfill_argv(), "run", str(one), *day]
        timed_run(argv)
        one_times = [timed_run(argv)[0] for _ in range(runs)]
    example_median, one_median = median(example_times), median(one_times)
    print(
        f"(1) example pipeline, one day (4 assets, 9 checks): median {example_median:.3f} s "
        f"[{verdict(example_median, 0.4)} ≤ 0.4 s]  ({runs} runs)"
    )
    print(
        f"(2) one-asset pipeline, process start to exit: median {one_median:.3f} s "
        f"[{verdict(one_median, 0.4)} ≤ 0.4 s]  ({runs} runs)"
    )
    print(f"    a year of hourly partitions (8 760 runs) spends {8760 * one_median / 60:.1f} min in this overhead")


if __name__ == "__main__":
    main()
