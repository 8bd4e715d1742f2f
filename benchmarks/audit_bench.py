"""`backfill audit` over long histories (issue 28, item 3): the first screen whatever the length.

Audit logs of 10,000, 200,000 and 2,000,000 lines are written through the real `audit.append` (batches of
10,000, as bulk marks write them) into a state root's own log, then timed through the real `backfill audit`
command, medians of several runs:

- first screen: from the command's start to its 40th line read from its stdout (the process is then stopped);
- `--since` the last 100 lines, in full;
- `--action CANCEL` (one line in 100), first screen;
- the floor, measured in the same run: `python -c "import tui.cli.main"` (the interpreter and our CLI's imports).

Goal: first screen ≤ 0.3 s at every length, and flat (2M / 10k ≤ 1.5).

    python benchmarks/audit_bench.py [--runs 5] [--sizes 10000,200000,2000000]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._measure import backfill_argv, installed_environment, median
from engine.store import audit

START = datetime(2026, 1, 1, tzinfo=UTC)
SCREEN = 40


def build(root: Path, lines: int) -> datetime:
    """``lines`` interventions, one second apart; returns the time of the 100th from the end."""
    for begin in range(0, lines, 10_000):
        batch = []
        for number in range(begin, min(lines, begin + 10_000)):
            moment = (START + timedelta(seconds=number)).isoformat(timespec="microseconds").replace("+00:00", "Z")
            action = "CANCEL" if number % 100 == 0 else "MARK"
            batch.append(audit.entry(action=action, reason=f"line {number}", applied_at=moment, requested_by="bench"))
        audit.append(root, batch)
    return START + timedelta(seconds=lines - 100)


def first_screen(argv: list[str]) -> float:
    """Seconds from start to the 40th line on stdout."""
    started = time.perf_counter()
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=installed_environment())
    assert process.stdout is not None
    for _ in range(SCREEN):
        if not process.stdout.readline():
            break
    elapsed = time.perf_counter() - started
    process.kill()
    process.wait()
    return elapsed


def full(argv: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, check=True, env=installed_environment())
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--sizes", default="10000,200000,2000000")
    args = parser.parse_args()
    floor = median([full([sys.executable, "-c", "import tui.cli.main"]) for _ in range(args.runs)])
    print(f"floor (python + the CLI's imports)            median {floor:.3f} s")
    screens = {}
    with tempfile.TemporaryDirectory() as scratch:
        for size in (int(text) for text in args.sizes.split(",")):
            root = Path(scratch) / f"root{size}"
            root.mkdir()
            started = time.perf_counter()
            last_hundred = build(root, size)
            built = time.perf_counter() - started
            command = [*backfill_argv(), "audit", "--state-dir", str(root)]
            since = last_hundred.isoformat().replace("+00:00", "Z")
            screen = median([first_screen(command) for _ in range(args.runs)])
            cancels = median([first_screen([*command, "--action", "CANCEL"]) for _ in range(args.runs)])
            tail = median([full([*command, "--since", since]) for _ in range(args.runs)])
            screens[size] = screen
            print(f"{size:>9,} lines (written in {built:.1f} s)")
            print(f"  first screen ({SCREEN} lines)                  median {screen:.3f} s  (goal ≤ 0.3 s)")
            print(f"  --action CANCEL, first screen              median {cancels:.3f} s")
            print(f"  --since (the last 100 lines), in full      median {tail:.3f} s")
    sizes = sorted(screens)
    print(f"first screen {sizes[-1]:,} / {sizes[0]:,}: {screens[sizes[-1]] / screens[sizes[0]]:.2f} (goal ≤ 1.5)")


if __name__ == "__main__":
    main()
