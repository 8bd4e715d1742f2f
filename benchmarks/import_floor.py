"""The import floor of a first frame drawn before the backfill is saved (issue 28, item 5): how long a fresh
process takes to import what such a frame would need, beside Textual alone, the command's whole path, the minimal
Textual app's first frame and the command's first partition row. Each is measured as `tui_bench.py` measures the
first frame: launch → a line on a real pseudo-terminal (here printed once the imports are done), the median of
fresh processes after an uncounted first round (it writes the bytecode caches). Import time is a lower bound of a
first frame: drawing it comes on top.

Until 2026-12-07 (eighth session) this script timed `python -c "import …"` to its exit, which adds the
interpreter's finalization (about 45 ms with Textual loaded) to every row: read its older figures as that.

Usage: python benchmarks/import_floor.py [--runs N]
"""

from __future__ import annotations

import argparse
import statistics
import sys

from _terminal import Terminal
from tui_bench import environment, first_row_seconds, minimal_app_seconds, workdir

ROWS = (
    ("nothing", "pass"),
    ("textual.app", "import textual.app"),
    ("textual.app and the planner", "import textual.app, engine.spec.planning"),
    (
        "textual.app, the planner and the partition table",
        "import textual.app, engine.spec.planning, tui.app.widgets.partition_table",
    ),
    ("textual.app and the whole app", "import textual.app, tui.app.backfill_app"),
    (
        "the command's whole path to its first frame",
        "import tui.cli.execute, tui.cli.backfill_command, tui.cli.dashboard_runner",
    ),
)
READY = "imports done"


def imports_seconds(code: str) -> float:
    """One fresh process in a pty: launch → the line it prints once ``code`` has run."""
    base = workdir()
    argv = [sys.executable, "-c", f"{code}\nprint({READY!r}, flush=True)"]
    terminal = Terminal(argv, cols=120, rows=40, cwd=base, env=environment(base))
    try:
        return terminal.wait_for(lambda lines: any(READY in line for line in lines), timeout=60) - terminal.launched
    finally:
        terminal.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9)
    args = parser.parse_args()
    measures = {label: (imports_seconds, code) for label, code in ROWS}
    measures["the minimal Textual app's first frame"] = (lambda _: minimal_app_seconds(), None)
    measures["the command's first partition row"] = (lambda _: first_row_seconds(), None)
    times: dict[str, list[float]] = {label: [] for label in measures}
    for round_number in range(args.runs + 1):  # rounds alternate the rows; the first is not counted
        for label, (measure, code) in measures.items():
            seconds = measure(code)
            if round_number:
                times[label].append(seconds)
    for label, values in times.items():
        print(f"{label:>50}: {statistics.median(values) * 1000:6.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
