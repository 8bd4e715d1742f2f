"""Diff benchmark (issue 27, items 5–7): what measuring each partition's row changes costs, through the real command.

A repository with one keyed ``time_interval`` table (``--rows`` rows a day, 14 days) loaded once; its source
then changes on every day (a tenth of the rows: amounts, deletions, new rows). Then, median of ``--runs``:

- the 14-day backfill with its snapshot (children measure their windows against it) against the same backfill
  with ``--no-snapshot`` (nothing to measure against), each on a fresh copy of the loaded repository: the ratio
  is the cost of the measure (and of the snapshot itself);
- ``backfill diff ID --ids P`` of one day (read-only), against ``backfill show ID --output json`` (a reader that
  opens no warehouse) in the same run;
- ``--dry-run --preview`` against ``--dry-run`` alone (the preview copies the files and runs one partition).

Usage: python benchmarks/diff_bench.py [--runs N] [--rows N]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import tempfile
from pathlib import Path

import duckdb
import yaml
from _measure import backfill_argv, installed_environment, median, timed_run

ORDERS = "SELECT id, day, customer, amount FROM raw.src WHERE day BETWEEN '{{ start_date }}' AND '{{ end_date }}'"
DAYS = ("--start-date", "2024-01-01", "--end-date", "2024-01-14")


def build(root: Path, rows: int) -> None:
    (root / ".git").mkdir(parents=True)
    (root / "p" / "assets").mkdir(parents=True)
    connection = {"name": "db", "path": "warehouse.duckdb"}
    environment = {"guardrails": "sandbox", "guardrail_limits": {"auto_max_intervals": 31},
                   "connections": {"duckdb": [connection]}}  # fmt: skip
    (root / ".bruin.yml").write_text(
        yaml.safe_dump({"default_environment": "dev", "environments": {"dev": environment}})
    )
    (root / "p" / "pipeline.yml").write_text(yaml.safe_dump({"name": "p", "default_connections": {"duckdb": "db"}}))
    header = {"name": "mid.orders", "type": "duckdb.sql",
              "materialization": {"type": "table", "strategy": "time_interval", "incremental_key": "day",
                                  "time_granularity": "date"},
              "columns": [{"name": "id", "type": "bigint", "primary_key": True}, {"name": "day", "type": "date"},
                          {"name": "customer", "type": "varchar"}, {"name": "amount", "type": "bigint"}]}  # fmt: skip
    (root / "p" / "assets" / "orders.sql").write_text(
        "/* @bruin\n" + yaml.safe_dump(header, sort_keys=False) + "@bruin */\n" + ORDERS + "\n"
    )
    with duckdb.connect(str(root / "warehouse.duckdb")) as db:
        db.execute("CREATE SCHEMA raw")
        db.execute(
            "CREATE TABLE raw.src AS SELECT i AS id, DATE '2024-01-01' + (i % 14)::INTEGER AS day, "
            f"'customer ' || i AS customer, i AS amount FROM range({rows * 14}) t(i)"
        )
    env = installed_environment()
    subprocess.run([*backfill_argv(), "run", "p", *DAYS], cwd=root, env=env, check=True, capture_output=True)
    with duckdb.connect(str(root / "warehouse.duckdb")) as db:
        db.execute("UPDATE raw.src SET amount = amount + 1 WHERE id % 30 = 0")
        db.execute("DELETE FROM raw.src WHERE id % 30 = 2")
        db.execute(f"INSERT INTO raw.src SELECT {rows * 14} + i, DATE '2024-01-01' + (i % 14)::INTEGER, 'new', i "
                   f"FROM range({rows * 14 // 30}) t(i)")  # fmt: skip


def backfill_once(template: Path, scratch: Path, extra: tuple[str, ...]) -> tuple[float, Path]:
    shutil.rmtree(scratch, ignore_errors=True)
    shutil.copytree(template, scratch)
    seconds, _, _ = timed_run([*backfill_argv(), "--reason", "bench", "p", *DAYS, "--no-progress", *extra], cwd=scratch)
    return seconds, scratch


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--rows", type=int, default=100_000, help="rows a day")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as base_text:
        base = Path(base_text)
        template = base / "template"
        build(template, args.rows)
        measured, bare = [], []
        for run in range(args.runs):
            measured.append(backfill_once(template, base / f"m{run}", ())[0])
            bare.append(backfill_once(template, base / f"b{run}", ("--no-snapshot",))[0])
        work = base / "m0"
        [backfill] = [p for p in (work / "logs" / "backfills").iterdir() if not p.name.startswith(".")]
        shown = subprocess.run([*backfill_argv(), "show", backfill.name, "--output", "json"], cwd=work,
                               env=installed_environment(), capture_output=True, check=True)  # fmt: skip
        first = json.loads(shown.stdout)["partitions"][0]
        diff = [timed_run([*backfill_argv(), "diff", backfill.name, "--ids", first["id"][:12]], cwd=work)[0]
                for _ in range(args.runs)]  # fmt: skip
        show = [timed_run([*backfill_argv(), "show", backfill.name, "--output", "json"], cwd=work)[0]
                for _ in range(args.runs)]  # fmt: skip
        plan = ("--reason", "bench", "p", *DAYS, "--dry-run")
        preview = [timed_run([*backfill_argv(), *plan, "--preview"], cwd=template)[0] for _ in range(args.runs)]
        dry = [timed_run([*backfill_argv(), *plan], cwd=template)[0] for _ in range(args.runs)]
    print(f"{args.rows:,} rows a day × 14 days, a tenth changed; medians of {args.runs}")
    print(f"  backfill with snapshot + row changes  {median(measured):7.2f} s")
    print(
        f"  backfill --no-snapshot                {median(bare):7.2f} s   ratio {median(measured) / median(bare):.2f}"
    )
    print(f"  diff --ids P (one day)                {median(diff):7.2f} s")
    print(f"  show --output json                    {median(show):7.2f} s   ratio {median(diff) / median(show):.2f}")
    print(f"  --dry-run --preview                   {median(preview):7.2f} s")
    print(f"  --dry-run                             {median(dry):7.2f} s   ratio {median(preview) / median(dry):.2f}")
    print(f"  row changes recorded for day 1: {first['row_changes']}")


if __name__ == "__main__":
    main()
