"""Make the README's screenshots from the real app over a real backfill of the bundled example.

Copies examples/shop to a scratch repository, starts a backfill of its pipeline
(real `backfill run` children on a real DuckDB file), lets it run a few seconds
under the dashboard, and saves:

  screenshots/dashboard.svg   the dashboard mid-run
  screenshots/details.svg     the details pane of a finished partition with its child's log
  screenshots/preflight.svg   the pre-flight screen of a human-only backfill of examples/guarded
  screenshots/mark-form.svg   the mark form over the failed partitions of a real command backfill
  screenshots/diff-view.svg   the diff view (d) of a real pipeline backfill over a keyed table whose source moved
  screenshots/split-tree.svg  a real command backfill whose days split on their timeout, one opened, its tree
                              in the details

Usage: python screenshots/make.py
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import threading
import time
from pathlib import Path

from engine.execute.backfill import create_backfill
from engine.pipeline.options import RunOptions
from engine.spec.backfill_spec import ExecutionOptions
from engine.spec.planning import plan_request
from tui.app.backfill_app import BackfillApp
from tui.app.sources import ExecutorSource

HERE = Path(__file__).resolve().parent
EXAMPLE = HERE.parent / "examples" / "shop"
SIZE = (120, 36)


async def shoot(app: BackfillApp, executor) -> None:
    async with app.run_test(size=SIZE) as pilot:
        deadline = time.monotonic() + 60
        while executor.snapshot().finished < 14 and time.monotonic() < deadline:
            await pilot.pause(0.2)
        await pilot.pause(0.3)
        app.save_screenshot("dashboard.svg", path=str(HERE))
        await pilot.press("home", "down", "down", "down", "enter")
        await pilot.pause(1.0)
        app.save_screenshot("details.svg", path=str(HERE))
        await pilot.press("q")
        await pilot.pause(0.5)


def main() -> None:
    with tempfile.TemporaryDirectory() as scratch:
        repository = Path(scratch) / "shop"
        shutil.copytree(EXAMPLE, repository, ignore=shutil.ignore_patterns("*.duckdb", "*.wal", "logs"))
        (repository / ".git").mkdir()
        planned = plan_request(
            target=str(repository / "pipeline"),
            command=None,
            name=None,
            start="2024-01-01",
            end="2024-03-31",
            timezone="UTC",
            partition="daily",
            environment=None,
            config_file=None,
            run_options=RunOptions(),
            options=ExecutionOptions(max_parallel=4),
            force=False,
        )
        prepared = create_backfill(planned, state_dir=None, cwd=repository)
        executor = prepared.executor()
        thread = threading.Thread(target=executor.run, name="executor")
        thread.start()
        app = BackfillApp(ExecutorSource(executor, options=prepared.options, parallelism=prepared.parallelism))
        try:
            asyncio.run(shoot(app, executor))
        finally:
            executor.request_stop("screenshots taken")
            thread.join()
    print(f"wrote {HERE / 'dashboard.svg'} and {HERE / 'details.svg'}")
    preflight_screenshot()
    mark_form_screenshot()
    split_tree_screenshot()
    diff_view_screenshot()


def preflight_screenshot() -> None:
    """The pre-flight screen of examples/guarded after one run of January: safe assets plus one that runs its
    SQL as written (human-only), a reason typed, waiting for the digest."""
    import subprocess
    import sys

    from engine.execute.guarding import request_for_new
    from engine.guardrails.preflight import run_preflight
    from engine.guardrails.request import GuardOptions
    from tui.app.preflight_app import PreflightApp

    with tempfile.TemporaryDirectory() as scratch:
        repository = Path(scratch) / "guarded"
        shutil.copytree(HERE.parent / "examples" / "guarded", repository, ignore=shutil.ignore_patterns("*.duckdb"))
        (repository / ".git").mkdir()
        pipeline = str(repository / "pipeline")
        first = [sys.executable, "-m", "tui", "run", pipeline, "--start-date", "2024-01-01", "--end-date", "2024-01-31"]
        subprocess.run(first, cwd=repository, check=True, capture_output=True)
        planned = plan_request(
            target=pipeline, command=None, name=None, start="2024-02-01", end="2024-02-05", timezone="UTC",
            partition="daily", environment=None, config_file=None,
            run_options=RunOptions(tags=("safe", "adhoc")), options=ExecutionOptions(), force=False, cwd=repository,
        )  # fmt: skip
        preflight = run_preflight(request_for_new(planned, GuardOptions(), reason=None, state_dir=None, cwd=repository))
        app = PreflightApp(preflight, "guarded · 2024-02-01 → 2024-02-06", None)

        async def shoot_preflight() -> None:
            async with app.run_test(size=(120, 34)) as pilot:
                await pilot.pause(0.3)
                await pilot.press(*"cleanup rule fixed", "enter")
                await pilot.pause(0.3)
                app.save_screenshot("preflight.svg", path=str(HERE))

        asyncio.run(shoot_preflight())
    print(f"wrote {HERE / 'preflight.svg'}")


def mark_form_screenshot() -> None:
    """A command backfill whose partitions fail on two dates, browsed, filtered on failed, the mark form open
    with status, reason and rows filled and its preview."""
    import os
    import subprocess
    import sys

    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch) / "orders"
        (work / ".git").mkdir(parents=True)
        failing = "import sys; sys.exit(1 if sys.argv[1] in ('2024-01-03', '2024-01-06') else 0)"
        command = f'{sys.executable} -c "{failing}" {{start_date}}'
        subprocess.run(
            [sys.executable, "-m", "tui", "--reason", "orders resent", "--guardrails", "sandbox", "--command", command,
             "--name", "orders etl", "--start-date", "2024-01-01", "--end-date", "2024-01-10", "--on-failure",
             "continue", "--no-progress"],
            cwd=work, capture_output=True, env={**os.environ, "HOME": scratch},
        )  # fmt: skip
        app = BackfillApp(root=work / "logs" / "backfills")

        async def shoot_mark_form() -> None:
            async with app.run_test(size=(120, 34)) as pilot:
                await pilot.press("enter")
                await pilot.pause(0.3)
                await pilot.press("s")
                await pilot.pause(0.3)
                await pilot.press("down", "down", "down", "down", "enter")
                await pilot.pause(0.3)
                await pilot.press("m")
                await pilot.pause(0.3)
                await pilot.click("#filter")
                await pilot.click("#mark-reason")
                await pilot.press(*"loaded by hand from the 06:00 file")
                await pilot.click("#mark-rows")
                await pilot.press(*"1200")
                await pilot.click("#mark-reason")
                await pilot.pause(0.3)
                app.save_screenshot("mark-form.svg", path=str(HERE))

        asyncio.run(shoot_mark_form())
    print(f"wrote {HERE / 'mark-form.svg'}")


def split_tree_screenshot() -> None:
    """Three days in Europe/Berlin (a 25-hour one among them) of a command that hangs on windows over 12 hours
    and runs out of memory on the evening of the 27th: each day times out and splits; the long half of the
    25-hour day splits again, and its last leaf fails. Browsed: that day opened (→), its details below."""
    import os
    import subprocess
    import sys

    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch) / "events"
        (work / ".git").mkdir(parents=True)
        child = (
            "import sys, time\n"
            "from datetime import datetime\n"
            "start, end = (datetime.fromisoformat(a) for a in sys.argv[1:3])\n"
            "hours = (end - start).total_seconds() / 3600\n"
            "print(f'loading events {start} .. {end} ({hours:g} h)', flush=True)\n"
            "if hours > 12: time.sleep(60)\n"
            "if start.hour == 17 and start.day == 27: raise MemoryError\n"
        )
        (work / "load.py").write_text(child)
        command = f"{sys.executable} load.py {{start}} {{end_exclusive}}"
        subprocess.run(
            [sys.executable, "-m", "tui", "--reason", "events re-sent", "--guardrails", "sandbox", "--command", command,
             "--name", "events", "--start-date", "2024-10-26", "--end-date", "2024-10-28", "--tz", "Europe/Berlin",
             "--timeout", "2s", "--split-on", "timeout", "--min-partition", "1h", "--max-parallel", "4",
             "--on-failure", "continue", "--no-progress"],
            cwd=work, capture_output=True, env={**os.environ, "HOME": scratch},
        )  # fmt: skip
        app = BackfillApp(root=work / "logs" / "backfills")

        async def shoot_split_tree() -> None:
            async with app.run_test(size=(120, 36)) as pilot:
                await pilot.press("enter")
                await pilot.pause(0.5)
                await pilot.press("home", "down", "right")
                await pilot.pause(0.3)
                await pilot.press("enter")
                await pilot.pause(0.5)
                app.save_screenshot("split-tree.svg", path=str(HERE))

        asyncio.run(shoot_split_tree())
    print(f"wrote {HERE / 'split-tree.svg'}")


def diff_view_screenshot() -> None:
    """mid.orders (time_interval on day, keyed by id) loaded for two days; its source then changes one day (an
    amount, a row gone, a row new); the backfill of both days, browsed, the first day's diff view open."""
    import os
    import subprocess
    import sys

    import duckdb
    import yaml

    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch) / "orders"
        (root / ".git").mkdir(parents=True)
        (root / "p" / "assets").mkdir(parents=True)
        environment = {"guardrails": "sandbox", "connections": {"duckdb": [{"name": "db", "path": "warehouse.duckdb"}]}}
        (root / ".bruin.yml").write_text(
            yaml.safe_dump({"default_environment": "dev", "environments": {"dev": environment}})
        )
        (root / "p" / "pipeline.yml").write_text(
            yaml.safe_dump({"name": "orders", "default_connections": {"duckdb": "db"}})
        )
        header = {
            "name": "mid.orders", "type": "duckdb.sql",
            "materialization": {"type": "table", "strategy": "time_interval", "incremental_key": "day",
                                "time_granularity": "date"},
            "columns": [{"name": "id", "type": "integer", "primary_key": True}, {"name": "day", "type": "date"},
                        {"name": "customer", "type": "varchar"}, {"name": "amount", "type": "integer"}],
        }  # fmt: skip
        body = "SELECT id, day, customer, amount FROM raw.src WHERE day BETWEEN '{{ start_date }}' AND '{{ end_date }}'"
        (root / "p" / "assets" / "orders.sql").write_text(
            f"/* @bruin\n{yaml.safe_dump(header, sort_keys=False)}@bruin */\n{body}\n"
        )
        with duckdb.connect(str(root / "warehouse.duckdb")) as db:
            db.execute("CREATE SCHEMA raw")
            db.execute("CREATE TABLE raw.src (id INTEGER, day DATE, customer VARCHAR, amount INTEGER)")
            db.execute(
                "INSERT INTO raw.src SELECT i, DATE '2024-01-01' + (i % 2)::INTEGER, 'customer ' || i, 10 * i "
                "FROM range(1, 41) t(i)"
            )
        env = {**os.environ, "HOME": scratch}
        run = [sys.executable, "-m", "tui"]
        subprocess.run([*run, "run", "p", "--start-date", "2024-01-01", "--end-date", "2024-01-02"], cwd=root, env=env,
                       check=True, capture_output=True)  # fmt: skip
        with duckdb.connect(str(root / "warehouse.duckdb")) as db:
            db.execute("UPDATE raw.src SET amount = amount + 5 WHERE id IN (4, 12)")
            db.execute("UPDATE raw.src SET customer = 'customer 16 (merged)' WHERE id = 16")
            db.execute("DELETE FROM raw.src WHERE id IN (8, 30)")
            db.execute(
                "INSERT INTO raw.src VALUES (41, '2024-01-02', 'customer 41', 410), "
                "(42, '2024-01-01', 'customer 42', 420)"
            )
        again = [*run, "--reason", "source re-sent", "p", "--start-date", "2024-01-01", "--end-date", "2024-01-02"]
        subprocess.run([*again, "--no-progress"], cwd=root, env=env, check=True, capture_output=True)
        app = BackfillApp(root=root / "logs" / "backfills")

        async def shoot_diff_view() -> None:
            async with app.run_test(size=(120, 30)) as pilot:
                await pilot.press("enter")
                await pilot.pause(0.5)
                await pilot.press("home", "d")
                await pilot.pause(0.5)
                app.save_screenshot("diff-view.svg", path=str(HERE))

        asyncio.run(shoot_diff_view())
    print(f"wrote {HERE / 'diff-view.svg'}")


if __name__ == "__main__":
    main()
