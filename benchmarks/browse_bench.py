"""Browsing benchmark: 200 saved backfills, one of them of 1 000 000 partitions.

Setup (real executors, real children): 199 backfills of 5 partitions of `true`, and one of 1 000 000
one-second partitions stopped with a cancel after 3 seconds (a few thousand partition files).

(1) `backfill list --output json`, a fresh process each time (median). Target ≤ 1 s.
(2) `backfill show ID` of the million-partition backfill, the real command in a pseudo-terminal: from
    launching it to the first partition row on the terminal (median; the first, bytecode-writing run is
    not counted). Target ≤ 1 s.
(3) for reference, `backfill show ID --output json` (default page) of the same backfill.

Usage: python benchmarks/browse_bench.py [--runs N]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
from pathlib import Path

from _measure import backfill_argv, timed_run, verdict


def make_backfill(work: Path, end: str, partition: str, *, stop_after: float | None) -> str:
    from engine.base.settings import Settings
    from engine.execute.backfill import create_backfill, state_root_for
    from engine.pipeline.options import RunOptions
    from engine.spec.backfill_spec import ExecutionOptions
    from engine.spec.planning import plan_request

    planned = plan_request(
        target=None,
        command="true",
        name=None,
        start="2024-01-01T00:00:00Z",
        end=end,
        timezone="UTC",
        partition=partition,
        environment=None,
        config_file=None,
        run_options=RunOptions(),
        options=ExecutionOptions(max_parallel=4),
        force=False,
    )
    prepared = create_backfill(planned, root=state_root_for(planned.spec, None, work), cwd=work, settings=Settings())
    executor = prepared.executor(grace=2)
    if stop_after is None:
        executor.run()
    else:
        thread = threading.Thread(target=executor.run)
        thread.start()
        time.sleep(stop_after)
        executor.request_stop("benchmark setup")
        thread.join()
    return prepared.store.id


def show_in_terminal(work: Path, backfill_id: str, runs: int) -> float:
    """Median seconds from launching `backfill show ID` in a pty to its first partition row on screen."""
    import os
    import re

    from _measure import installed_environment
    from _terminal import Terminal

    row = re.compile(r"^[▸ ][● ]\s*\d+\s+2024-01-01 ")
    values = []
    for run in range(runs + 1):
        env = {k: v for k, v in installed_environment().items() if k not in ("NO_COLOR", "COLUMNS", "LINES")}
        terminal = Terminal([*backfill_argv(), "show", backfill_id], cwd=work, env=env)
        try:
            shown = terminal.wait_for(lambda lines: any(row.match(line) for line in lines), timeout=60)
            if run:
                values.append(shown - terminal.launched)
        finally:
            os.write(terminal.master, b"q")
            terminal.close()
    return statistics.median(values)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        (work / ".git").mkdir()
        started = time.perf_counter()
        big = make_backfill(work, "2024-01-12T13:46:40Z", "1s", stop_after=3.0)
        for _ in range(199):
            make_backfill(work, "2024-01-05T00:00:00Z", "daily", stop_after=None)
        files = sum(1 for _ in (work / "logs" / "backfills" / big / "partitions").iterdir())
        print(
            f"setup: 200 backfills in {time.perf_counter() - started:.0f} s; the big one has 1 000 000 partitions, "
            f"{files} of them attempted"
        )
        list_times = [timed_run([*backfill_argv(), "list", "--output", "json"], cwd=work)[0] for _ in range(args.runs)]
        value = statistics.median(list_times)
        print(
            f"(1) list --output json over 200 backfills: median {value:.3f} s [{verdict(value, 1)} ≤ 1 s]  "
            f"({args.runs} runs)"
        )
        value = show_in_terminal(work, big, args.runs)
        print(
            f"(2) show ID (1 000 000 partitions) to the TUI's first paint: median {value:.3f} s "
            f"[{verdict(value, 1)} ≤ 1 s]  ({args.runs} fresh processes)"
        )
        json_times = [
            timed_run([*backfill_argv(), "show", big, "--output", "json"], cwd=work)[0] for _ in range(args.runs)
        ]
        print(
            f"(3) show ID --output json, default page: median {statistics.median(json_times):.3f} s  ({args.runs} runs)"
        )


if __name__ == "__main__":
    main()
