"""The import floor of a first frame drawn before the backfill is saved (issue 28, item 5): how long a fresh
process takes to import what such a frame would need, beside Textual alone and the command's whole path. Each
row is the median of fresh processes (`python -c "import …"`), the first run of each discarded (it writes the
bytecode caches). Import time is a lower bound of the first frame: drawing it comes on top.

Usage: python benchmarks/import_floor.py [--runs N]
"""

from __future__ import annotations

import argparse
import sys

from _measure import median, timed_run

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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    for label, code in ROWS:
        argv = [sys.executable, "-c", code]
        timed_run(argv)  # writes the bytecode caches; not counted
        seconds = median([timed_run(argv)[0] for _ in range(args.runs)])
        print(f"{label:>50}: {seconds * 1000:6.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
