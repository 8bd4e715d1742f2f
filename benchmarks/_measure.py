"""Helpers shared by the benchmarks: run a real process, time it, and read its own peak RSS."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE_PIPELINE = ROOT / "examples" / "shop" / "pipeline"
# A command backfill in a benchmark runs as a user's scratch run would: a reason, sandbox guardrails.
GUARD_FLAGS = ("--reason", "benchmark", "--guardrails", "sandbox")


def backfill_argv() -> list[str]:
    script = Path(sys.executable).with_name("backfill")
    return [str(script)] if script.exists() else [sys.executable, "-m", "tui"]


def timed_run(argv: list[str], *, stdout=subprocess.DEVNULL, cwd: Path = ROOT, env=None) -> tuple[float, float, int]:
    """Wall seconds, peak RSS in MB (of that process alone) and exit code of one run."""
    started = time.perf_counter()
    process = subprocess.Popen(
        argv, stdout=stdout, stderr=subprocess.PIPE, cwd=cwd, env=env if env is not None else installed_environment()
    )
    _, status, usage = os.wait4(process.pid, 0)
    elapsed = time.perf_counter() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({process.returncode}): {process.stderr.read().decode()}")
    return elapsed, usage.ru_maxrss / 1024, process.returncode


def median(values: list[float]) -> float:
    return statistics.median(values)


def verdict(value: float, target: float) -> str:
    return "ok" if value <= target else "OVER TARGET"


def first_paint_seconds(app, table_class) -> float:
    """Seconds from this process's start to the first row ``table_class`` draws, running ``app`` headless."""
    import asyncio

    import psutil

    started = psutil.Process().create_time()
    painted: list[float] = []
    original = table_class.render_line

    def render_line(self, y):
        if not painted:
            painted.append(time.time())
        return original(self, y)

    table_class.render_line = render_line

    async def scenario():
        async with app.run_test(size=(120, 40)) as pilot:
            while not painted:
                await pilot.pause(0.01)

    try:
        asyncio.run(scenario())
    finally:
        table_class.render_line = original
    return painted[0] - started


def median_of_fresh_processes(script: str, args: list[str], runs: int) -> float:
    """Run ``script ARGS`` ``runs`` times, each printing one number last; the median of those numbers."""
    values = []
    env = installed_environment()
    for run in range(runs + 1):  # the first run writes the bytecode caches and is not counted
        output = subprocess.run(
            [sys.executable, script, *args],
            capture_output=True,
            text=True,
            check=True,
            cwd=Path(script).parent,
            env=env,
        )
        if run:
            values.append(float(output.stdout.strip().splitlines()[-1]))
    return statistics.median(values)


def installed_environment() -> dict[str, str]:
    """This environment as an installed user has it: bytecode cached. PYTHONDONTWRITEBYTECODE (set on some
    machines, this one included) would make every process compile every module and time the compiler."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def sandbox_repository(root: Path) -> Path:
    """A repository with pipeline ``p`` on one DuckDB connection, sandbox guardrails; its assets directory."""
    (root / ".git").mkdir(parents=True)
    (root / ".bruin.yml").write_text(
        "default_environment: dev\nenvironments:\n  dev:\n    guardrails: sandbox\n    connections:\n"
        "      duckdb:\n        - name: db\n          path: warehouse.duckdb\n"
    )
    assets = root / "p" / "assets"
    assets.mkdir(parents=True)
    (root / "p" / "pipeline.yml").write_text("name: p\ndefault_connections:\n  duckdb: db\n")
    return assets
