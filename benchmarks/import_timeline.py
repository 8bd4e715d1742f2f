"""Where the dashboard's first frame goes (issue 28, item 5): the real ``backfill`` command of
``tui_bench.py``'s first-paint measure (1,000,000 partitions, a real pseudo-terminal), started through an audit
hook that stamps the first import of every module. Instrumentation, not a benchmark: the hook costs time of its
own, so read the shares. Prints, in milliseconds from launch (medians of the runs): Python up (the first import
after the interpreter's own), our first module, Textual's first module, the app's first screen module, the last
import before the first row, the first partition row on the terminal; and the longest pauses between two imports
before that row (work that imports nothing: planning, the judge, the save, the executor's start, the app).

Usage: python benchmarks/import_timeline.py [--runs N]
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import tempfile
import time
from pathlib import Path

from _measure import GUARD_FLAGS
from _terminal import Terminal
from tui_bench import ONE_MILLION, environment, rows, workdir

WRAPPER = """import os, sys, time
stamps = []
seen = set()
def hook(event, args):
    if event == "import" and args[0] not in seen:
        seen.add(args[0])
        stamps.append((time.time(), args[0]))
sys.addaudithook(hook)
import atexit
def dump():
    with open(os.environ["IMPORT_STAMPS"], "w") as out:
        out.writelines(f"{when:.6f} {name}\\n" for when, name in stamps)
atexit.register(dump)
sys.argv = ["backfill", *sys.argv[1:]]
from tui.cli.main import main
sys.exit(main())
"""
MILESTONES = (
    ("our first module", "tui"),
    ("Textual's first module", "textual"),
    ("the app's screen", "tui.app.screens"),
)


def one_run(wrapper: Path) -> dict[str, float]:
    base = workdir()
    stamps = base / "stamps.txt"
    env = {**environment(base), "IMPORT_STAMPS": str(stamps)}
    argv = [sys.executable, str(wrapper), *GUARD_FLAGS, "--command", "true", *ONE_MILLION, "--max-parallel", "2"]
    launched = time.time()
    terminal = Terminal(argv, cols=120, rows=40, cwd=base, env=env)
    try:
        first_row = terminal.wait_for(lambda lines: bool(rows(lines)), timeout=60)
    finally:
        terminal.close()
    imports = [(float(when), name) for when, name in (line.split() for line in stamps.read_text().splitlines())]
    before = [(when, name) for when, name in imports if when < first_row]
    figures = {"Python up": imports[0][0] - launched}
    for label, prefix in MILESTONES:
        figures[label] = (
            next(when for when, name in before if name == prefix or name.startswith(prefix + ".")) - launched
        )
    figures["the last import before the first row"] = before[-1][0] - launched
    figures["the first partition row"] = first_row - launched
    pauses = sorted(
        ((later - earlier, name) for (earlier, name), (later, _) in itertools.pairwise(before)), reverse=True
    )
    figures.update({f"pause after {name}": gap for gap, name in pauses[:3]})
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        wrapper = Path(scratch) / "stamped_backfill.py"
        wrapper.write_text(WRAPPER)
        one_run(wrapper)  # writes the bytecode caches; not counted
        runs = [one_run(wrapper) for _ in range(args.runs)]
    for label in runs[0]:
        if label.startswith("pause"):
            continue
        values = [run[label] for run in runs]
        print(f"{label:>40}: {statistics.median(values) * 1000:7.1f} ms")
    print("longest pauses between two imports before the first row, in the last run:")
    for label, value in runs[-1].items():
        if label.startswith("pause"):
            print(f"{label:>60}: {value * 1000:6.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
