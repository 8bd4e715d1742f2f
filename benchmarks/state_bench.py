"""State benchmark (issue 28, items 1 and 2): readers of a backfill with N recorded partitions, through the real
``backfill`` command, with the record index (``partitions.idx``) and, in the same run, without it (the file
moved away: readers then read every record, as before the index).

For each N (10,000 and 100,000 by default; ``--million`` adds 1,000,000) a saved backfill of N + 1 one-minute
partitions is built through the engine's own code (``create_backfill``, ``StateStore.write_record``: the index is
written as an executor writes it), N of them recorded succeeded. Then, median of fresh processes:

- ``show ID`` in a real pseudo-terminal (the browser on that backfill): launch → its first partition row, with
  the screen's peak RSS by then (``VmHWM``);
- ``show ID --output json --limit 1000``;
- ``--continue ID --dry-run --output json``;
- ``list`` with its counts cache deleted before each run (so it counts through the board);
- ``--continue ID --ids P`` running the one partition left (``true``): launch to exit, resume included.

Without the index the first three are exactly what they cost before it existed (readers never rebuild it);
the resume, a writer, then also rebuilds it from every file: what the first resume after a crash costs.

Peak RSS is the command's own (``wait4``). The floor: ``python -c pass`` started the same way.

Usage: python benchmarks/state_bench.py [--runs N] [--million] [--sizes N ...] [--index-only]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from _measure import backfill_argv, installed_environment, median, timed_run
from _terminal import Terminal
from console_bench import ROW, environment, write_records


def build(work: Path, recorded: int) -> tuple[str, Path, str]:
    """A saved backfill of ``recorded`` + 1 one-minute partitions, all but the last recorded succeeded."""
    from engine.base.settings import Settings
    from engine.dates.instants import format_instant, load_zone
    from engine.execute.backfill import create_backfill, state_root_for
    from engine.guardrails.request import GuardOptions
    from engine.guardrails.settings import settings_for_command
    from engine.pipeline.options import RunOptions
    from engine.spec.backfill_spec import ExecutionOptions
    from engine.spec.planning import plan_request

    start = 1_577_836_800_000_000  # 2020-01-01T00:00:00Z
    end = start + (recorded + 1) * 60_000_000
    planned = plan_request(target=None, command="true", name=None, start="2020-01-01T00:00:00Z",
                           end=format_instant(end, load_zone("UTC")), timezone="UTC", partition="1m", environment=None,
                           config_file=None, run_options=RunOptions(), options=ExecutionOptions(),
                           force=False)  # fmt: skip
    # saved as `--guardrails sandbox --reversible` saves them: the one-partition resume needs no person
    guardrails = {
        "options": GuardOptions(level="sandbox", reversible=True).to_json(),
        "settings": settings_for_command("sandbox").to_json(),
    }
    prepared = create_backfill(
        planned,
        root=state_root_for(planned.spec, None, work),
        cwd=work,
        settings=Settings(),
        extra={"reason": "benchmark", "guardrails": guardrails},
    )
    spec, store = prepared.spec, prepared.store
    write_records(store, spec, range(recorded), "succeeded")
    store.close_index()
    prepared.release()
    last = spec.plan.interval(recorded)
    return store.id, store.directory, spec.ids.of(last.start, last.end)


def measure(argv: list[str], work: Path, runs: int, before=None) -> tuple[float, float]:
    seconds, rss = [], []
    for run in range(runs + 1):
        if before is not None:
            before()
        elapsed, peak, _ = timed_run(argv, cwd=work, env=installed_environment())
        if run:  # the first run writes bytecode caches: not counted
            seconds.append(elapsed)
            rss.append(peak)
    return median(seconds), max(rss)


def browser_first_frame(work: Path, backfill_id: str, runs: int, before=None) -> tuple[float, float]:
    """`backfill show ID` in a real pseudo-terminal (the browser on that backfill): launch → first partition row,
    and the screen's peak RSS by then (its VmHWM, in MB)."""
    values, peaks = [], []
    for run in range(runs + 1):
        if before is not None:
            before()
        terminal = Terminal([*backfill_argv(), "show", backfill_id], cwd=work, env=environment())
        try:
            shown = terminal.wait_for(lambda lines: any(ROW.match(line) for line in lines), timeout=600)
            status = Path(f"/proc/{terminal.process.pid}/status").read_text()
            if run:  # the first run writes bytecode caches: not counted
                values.append(shown - terminal.launched)
                peaks.append(int(status.split("VmHWM:")[1].split()[0]) / 1024)
        finally:
            os.write(terminal.master, b"q")
            terminal.close()
    return median(values), max(peaks)


def readers(
    work: Path, backfill_id: str, directory: Path, last_id: str, runs: int, *, index: bool
) -> dict[str, tuple[float, float]]:
    """Each reader's median and peak RSS; ``index=False``: with ``partitions.idx`` removed before every run."""
    command = backfill_argv()
    summary = directory / ".summary.json"

    def before() -> None:
        if not index:
            (directory / "partitions.idx").unlink(missing_ok=True)

    def stale() -> None:
        before()
        summary.unlink(missing_ok=True)

    return {
        "show in the terminal: first row": browser_first_frame(work, backfill_id, runs, before),
        "show --output json --limit 1000": measure(
            [*command, "show", backfill_id, "--output", "json", "--limit", "1000"], work, runs, before
        ),
        "--continue --dry-run --output json": measure(
            [*command, "--continue", backfill_id, "--dry-run", "--output", "json"], work, runs, before
        ),
        "list (counts cache stale)": measure([*command, "list"], work, runs, stale),
        "--continue --ids LAST (one child)": measure(
            [*command, "--continue", backfill_id, "--ids", last_id, "--reason", "bench", "--no-progress"],
            work,
            runs,
            before,
        ),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--million", action="store_true", help="also 1,000,000 recorded partitions (slow to build)")
    parser.add_argument("--sizes", type=int, nargs="*", help="other numbers of recorded partitions instead")
    parser.add_argument(
        "--index-only", action="store_true", help="skip the readers without the index (minutes each at 1,000,000)"
    )
    args = parser.parse_args()
    sizes = args.sizes or [10_000, 100_000] + ([1_000_000] if args.million else [])
    floor, floor_rss = measure([sys.executable, "-c", "pass"], Path.cwd(), args.runs)
    print(f"floor: python -c pass {floor:.3f} s, {floor_rss:.0f} MB")
    for size in sizes:
        with tempfile.TemporaryDirectory() as scratch:
            work = Path(scratch)
            (work / ".git").mkdir()
            backfill_id, directory, last_id = build(work, size)
            with_index = readers(work, backfill_id, directory, last_id, args.runs, index=True)
            without = {} if args.index_only else readers(work, backfill_id, directory, last_id, args.runs, index=False)
            for name, (seconds, rss) in with_index.items():
                line = f"{size:>9,} recorded  {name:<36} index {seconds:6.3f} s {rss:5.0f} MB"
                if name in without:
                    old, old_rss = without[name]
                    line += f"   files {old:7.3f} s {old_rss:5.0f} MB   ratio {seconds / old:.2f}"
                print(line, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
