"""Guardrails benchmark: what the pre-flight and per-partition verification cost.

A 10-asset pipeline (a chain of `time_interval` tables on one DuckDB file, sandbox guardrails so that
every variant runs) with 60 days of real data and 1,000 run records of history (one real run's record
copied with shifted intervals and IDs). In one run, medians of ``--runs``:

- pre-flight: `backfill PIPELINE` over 2 years of daily partitions as a dry run (what a user runs: the
  plan, the pre-flight, the report), and the pre-flight alone in-process (gather, checks, digest).
  Goal: pre-flight ≤ 1 s.
- verification: a backfill of ``--days`` partitions with `--verify on` and with `--verify off`, and the
  difference per partition; plus one partition's verification in-process. Goal: ≤ 20 ms per partition.
- snapshot: the rows per second a backfill's snapshot copied (one day of a 2-million-row table, read from
  `snapshot.json`), the rate the pre-flight's time estimate rests on.

Usage: python benchmarks/guard_bench.py [--runs N] [--days N]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import date, timedelta
from pathlib import Path

from _measure import ROOT, backfill_argv, installed_environment, median, sandbox_repository

ASSETS = 10
SQL = """/* @bruin
name: mid.t{n}
type: duckdb.sql
{depends}materialization:
  type: table
  strategy: time_interval
  incremental_key: day
  time_granularity: date
@bruin */

SELECT CAST(range AS DATE) AS day, n AS value
FROM range(DATE '{{{{ start_date }}}}', DATE '{{{{ end_date }}}}' + INTERVAL 1 DAY, INTERVAL 1 DAY), range(20) AS t(n)
"""


def make_repository(root: Path) -> Path:
    assets = sandbox_repository(root)
    for n in range(ASSETS):
        depends = f"depends:\n  - mid.t{n - 1}\n" if n else ""
        (assets / f"t{n}.sql").write_text(SQL.format(n=n, depends=depends))
    return root


# A partition's run as its backfill starts it: the IDs on the command line and in the environment.
AS_PARTITION = ("--backfill-id", "bench-fence", "--run-id", "bench-fence-p0-a1", "--partition-id", "bench-p0")
PARTITION_ENV = {
    "BACKFILL_ID": "bench-fence",
    "BACKFILL_RUN_ID": "bench-fence-p0-a1",
    "BACKFILL_PARTITION_ID": "bench-p0",
}


def run(argv: list[str], cwd: Path, extra_env: dict[str, str] | None = None) -> float:
    started = time.perf_counter()
    env = {**installed_environment(), **(extra_env or {})}
    result = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({result.returncode}): {result.stderr[-2000:]}")
    return time.perf_counter() - started


def seed_history(repository: Path, records: int) -> None:
    """60 real days in the tables; then the last run record copied into ``records`` records of earlier days."""
    run([*backfill_argv(), "run", "p", "--start-date", "2021-11-01", "--end-date", "2021-12-30"], repository)
    runs = repository / "logs" / "runs"
    template = json.loads(next(runs.glob("*.json")).read_text())
    first = date(2019, 1, 1)
    for n in range(records):
        day = (first + timedelta(days=n)).isoformat()
        record = json.loads(json.dumps(template))
        record["run_id"] = f"history-{n:05d}"
        record["interval"]["start"] = f"{day}T00:00:00.000000Z"
        record["interval"]["end"] = f"{day}T23:59:59.999999Z"
        for asset in record["assets"]:
            asset["interval"] = None
            asset["rows_in_interval"] = 20
        (runs / f"history-{n:05d}.json").write_text(json.dumps(record))


PREFLIGHT = """
import sys, time
from pathlib import Path
from engine.execute.backfill import state_root_for
from engine.execute.guarding import request_for_new
from engine.guardrails.preflight import run_preflight
from engine.guardrails.request import GuardOptions
from engine.pipeline.options import RunOptions
from engine.spec.backfill_spec import ExecutionOptions
from engine.spec.planning import plan_request
root = Path(sys.argv[1])
times = []
for _ in range(int(sys.argv[2])):
    planned = plan_request(target=str(root / "p"), command=None, name=None, start="2022-01-01", end="2023-12-31",
                           timezone="UTC", partition="daily", environment=None, config_file=None,
                           run_options=RunOptions(), options=ExecutionOptions(), force=False, cwd=root)
    started = time.perf_counter()
    state = state_root_for(planned.spec, None, root).path
    preflight = run_preflight(request_for_new(planned, GuardOptions(), reason="b", root=state, cwd=root))
    times.append(time.perf_counter() - started)
from engine.guardrails.preflight_checks import CHECKS
assert len(preflight.checks) >= len(CHECKS), [c.name for c in preflight.checks]  # every check ran
print(sorted(times)[len(times) // 2])
"""

VERIFY = """
import sys, time
from pathlib import Path
from engine.execute.backfill import state_root_for
from engine.execute.guarding import request_for_new
from engine.guardrails.preflight import run_preflight
from engine.guardrails.request import GuardOptions
from engine.guardrails.verification import PipelineVerifier
from engine.pipeline.options import RunOptions
from engine.spec.backfill_spec import ExecutionOptions
from engine.spec.planning import plan_request
root = Path(sys.argv[1])
planned = plan_request(target=str(root / "p"), command=None, name=None, start="2021-12-01", end="2021-12-30",
                       timezone="UTC", partition="daily", environment=None, config_file=None,
                       run_options=RunOptions(), options=ExecutionOptions(), force=False, cwd=root)
state = state_root_for(planned.spec, None, root).path
preflight = run_preflight(request_for_new(planned, GuardOptions(), reason="b", root=state, cwd=root))
verifier = PipelineVerifier(preflight.facts, root / "logs" / "runs", "on")
record = sorted((root / "logs" / "runs").glob("run-*.json"))[0].stem
interval = planned.spec.plan.interval(0)
times = []
for _ in range(200):
    started = time.perf_counter()
    verifier.verify(0, interval, record)
    times.append(time.perf_counter() - started)
print(sorted(times)[len(times) // 2])
"""


BIG = """/* @bruin
name: mid.big
type: duckdb.sql
materialization:
  type: table
  strategy: time_interval
  incremental_key: day
  time_granularity: date
@bruin */

SELECT DATE '{{ start_date }}' AS day, range AS n, CAST(range AS VARCHAR) AS label FROM range(2000000)
"""


def snapshot_rate(scratch: Path, runs: int) -> tuple[float, int]:
    """Rows per second the snapshot copied, read from ``snapshot.json`` of real backfills through the CLI: one
    day of a 2-million-row table, backfilled again (the snapshot copies that day's rows first)."""
    root = Path(scratch) / "big"
    make_repository(root)
    for asset in (root / "p" / "assets").iterdir():
        asset.unlink()
    (root / "p" / "assets" / "big.sql").write_text(BIG)
    run([*backfill_argv(), "run", "p", "--start-date", "2024-01-01", "--end-date", "2024-01-01"], root)
    rates, rows = [], 0
    for _ in range(runs):
        run([*backfill_argv(), "p", "--start-date", "2024-01-01", "--end-date", "2024-01-01", "--reason", "b",
             "--no-progress"], root)  # fmt: skip
        newest = sorted((root / "logs" / "backfills").iterdir())[-1]
        index = json.loads((newest / "snapshot.json").read_text())
        rows = sum(table["rows"] for entry in index["files"] for table in entry["tables"])
        rates.append(rows / max(index["seconds"], 1e-6))
    return median(rates), rows


def fence_cost(scratch: Path, runs: int) -> tuple[float, float]:
    """Median seconds of `backfill run` of one day of a 1M-row time_interval table (1,000 days of 1,000 rows),
    as a person runs it (unfenced) and as each partition's child runs it (`--backfill-id`: fenced to its
    window), alternating so both see the same machine."""
    import duckdb

    root = scratch / "fence"
    (root / ".git").mkdir(parents=True)
    (root / ".bruin.yml").write_text(
        "default_environment: dev\nenvironments:\n  dev:\n    guardrails: sandbox\n    connections:\n"
        "      duckdb:\n        - name: db\n          path: warehouse.duckdb\n"
    )
    (root / "p" / "assets").mkdir(parents=True)
    (root / "p" / "pipeline.yml").write_text("name: p\ndefault_connections:\n  duckdb: db\n")
    (root / "p" / "assets" / "t.sql").write_text(
        "/* @bruin\nname: mid.t\ntype: duckdb.sql\nmaterialization:\n  type: table\n  strategy: time_interval\n"
        "  incremental_key: day\n  time_granularity: date\n@bruin */\n\n"
        "SELECT DATE '{{ start_date }}' AS day, range AS value FROM range(1000)\n"
    )
    with duckdb.connect(str(root / "warehouse.duckdb")) as connection:
        connection.execute(
            "CREATE SCHEMA mid; CREATE TABLE mid.t AS SELECT (DATE '2020-01-01' + INTERVAL (i // 1000) DAY)::DATE "
            "AS day, i % 1000 AS value FROM range(1000000) t(i)"
        )
    day = [*backfill_argv(), "run", "p", "--start-date", "2021-06-01", "--end-date", "2021-06-01"]
    run(day, root)  # warm the file cache and the bytecode
    plain, fenced = [], []
    for _ in range(runs):
        plain.append(run(day, root))
        fenced.append(run([*day, *AS_PARTITION], root, PARTITION_ENV))
    return median(plain), median(fenced)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--days", type=int, default=30)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        repository = make_repository(Path(scratch) / "repo")
        seed_history(repository, 1000)
        dry = [*backfill_argv(), "p", "--start-date", "2022-01-01", "--end-date", "2023-12-31", "--dry-run"]
        dry_times = [run([*dry, "--limit", "1"], repository) for _ in range(args.runs)]
        check = subprocess.run(
            [sys.executable, "-c", PREFLIGHT, str(repository), str(args.runs)],
            cwd=ROOT, env=installed_environment(), capture_output=True, text=True,
        )  # fmt: skip
        if check.returncode:
            raise SystemExit(f"the in-process pre-flight failed: {check.stderr[-1500:]}")
        preflight_alone = float(check.stdout)
        print(f"pre-flight, 10 assets × {730} daily partitions, 1,000 run records of history:")
        print(f"  `backfill --dry-run` (plan + pre-flight + report)  median {median(dry_times):.3f} s")
        print(f"  pre-flight alone (in-process)                      median {preflight_alone:.3f} s  (goal ≤ 1 s)")
        end = (date(2021, 12, 1) + timedelta(days=args.days - 1)).isoformat()
        per_mode = {}
        for mode in ("on", "off"):
            seconds = []
            for n in range(args.runs):
                copy = Path(scratch) / f"repo-{mode}-{n}"
                shutil.copytree(repository, copy)
                backfill = [*backfill_argv(), "p", "--start-date", "2021-12-01", "--end-date", end]
                seconds.append(run([*backfill, "--verify", mode, "--reason", "b", "--no-progress"], copy))
                shutil.rmtree(copy)
            per_mode[mode] = median(seconds)
        overhead = (per_mode["on"] - per_mode["off"]) / args.days * 1000
        verify_alone = float(
            subprocess.run(
                [sys.executable, "-c", VERIFY, str(repository)],
                cwd=ROOT,
                env=installed_environment(),
                capture_output=True,
                text=True,
                check=True,
            ).stdout
        )
        print(f"verification, a backfill of {args.days} daily partitions of the 10 assets:")
        print(f"  --verify on   median {per_mode['on']:.3f} s")
        print(f"  --verify off  median {per_mode['off']:.3f} s")
        print(f"  difference per partition {overhead:+.1f} ms  (goal ≤ 20 ms)")
        print(f"  one partition's verification in-process: median {verify_alone * 1000:.2f} ms")
        plain, fenced = fence_cost(Path(scratch), max(args.runs, 9))
        print("blast radius, `backfill run` of one day of a 1,000,000-row time_interval table:")
        print(
            f"  by hand (unfenced) median {plain * 1000:.1f} ms, as a partition (fenced) median {fenced * 1000:.1f} ms"
        )
        print(f"  the fence's cost {(fenced - plain) * 1000:+.1f} ms per partition  (goal ≤ 25 ms)")
        rate, rows = snapshot_rate(Path(scratch), args.runs)
        print(f"snapshot: {rows:,} rows copied before the first partition, median {rate / 1e6:.2f} M rows/s")


if __name__ == "__main__":
    main()
