"""Console benchmark (issue 26): the real ``backfill`` command in a real pseudo-terminal, read from what
reaches the terminal (pyte parses the escape stream).

(5) `backfill show ID` of a *live* backfill of 50,000 partitions (45,000 recorded succeeded, four children
    running under a real executor in another process): launch → first partition row on the terminal,
    median of fresh processes. Target ≤ 1 s. Baseline in the same run: the same command on the same
    store with the record index ignored (the watcher reads every record file once, as it did before it).
(5b) the same backfill opened from the browser: Enter on it in `backfill list` → its first partition row.
(6) the triage view over 100,000 failed partitions of 50 kinds (a saved backfill): from `t` sent to the
    view listing its kinds. Target ≤ 300 ms.
(7) Ctrl+F over the same 100,000 failures: from Enter in the dialog to the table showing only the rows of
    one kind (2,000 of them).

Option --only-failures measures (6) and (7) alone, --only-live (5) and (5b).

The stores are written through the engine's own record code (``PartitionRecord`` and ``StateStore``), as
an executor writes them.

Usage: python benchmarks/console_bench.py [--runs N]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _measure import GUARD_FLAGS, backfill_argv, installed_environment
from _terminal import Terminal

ROW = re.compile(r"^[▸ ][● ]\s*\d+\s+20\d\d-")


def write_records(store, spec, indices, status: str, reason_of=None) -> None:
    from engine.dates.formatting import InstantFormatter
    from engine.store.records import Attempt, PartitionRecord

    formatter = InstantFormatter(spec.zone)
    for index in indices:
        interval = spec.plan.interval(index)
        partition_id = spec.ids.of(interval.start, interval.end)
        record = PartitionRecord.fresh(partition_id, interval, formatter, status)
        record.attempts.append(
            Attempt(
                run_id=f"{store.id}-p{index}-a1",
                status=status,
                started_at="2026-12-03T00:00:00Z",
                finished_at="2026-12-03T00:00:01Z",
                duration=1.0,
                exit_code=0 if status == "succeeded" else 1,
                error=reason_of(index) if reason_of else None,
                log=f"children/{store.id}-p{index}-a1.log",
                generation=1,
                launcher="exec",
            )
        )
        store.write_record(record, durable=False)


def environment() -> dict[str, str]:
    return {k: v for k, v in installed_environment().items() if k not in ("NO_COLOR", "COLUMNS", "LINES")}


def live_50k(work: Path) -> tuple[str, subprocess.Popen]:
    """A backfill of 50,000 one-minute partitions run by a real executor (four `sleep 600` children), with
    45,000 more partitions recorded succeeded beside them."""
    from engine.store.manifest import spec_of
    from engine.store.state_store import StateStore

    argv = [*backfill_argv(), *GUARD_FLAGS, "--command", "sleep 600", "--start-date", "2020-01-01T00:00:00Z",
            "--end-date", "2020-02-04T17:20:00Z", "--partition", "1m", "--max-parallel", "4", "--no-progress",
            "--allow-long-range"]  # fmt: skip
    process = subprocess.Popen(argv, cwd=work, env=environment(), stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    root = work / "logs" / "backfills"
    deadline = time.time() + 60
    while time.time() < deadline:
        found = [p for p in root.iterdir() if (p / "partitions").is_dir()] if root.is_dir() else []
        if found and len(list((found[0] / "partitions").glob("*.json"))) >= 4:
            break
        time.sleep(0.1)
    store = StateStore(found[0])
    spec = spec_of(store.read_manifest())
    write_records(store, spec, range(10, 45_010), "succeeded")
    return store.id, process


def first_paint(work: Path, backfill_id: str, runs: int) -> float:
    values = []
    for run in range(runs + 1):
        terminal = Terminal([*backfill_argv(), "show", backfill_id], cwd=work, env=environment())
        try:
            shown = terminal.wait_for(lambda lines: any(ROW.match(line) for line in lines), timeout=120)
            if run:  # the first run writes bytecode: not counted
                values.append(shown - terminal.launched)
        finally:
            os.write(terminal.master, b"q")
            terminal.close()
    return statistics.median(values)


def opened_from_browser(work: Path, backfill_id: str, runs: int) -> float:
    """(5b) `backfill list` in the terminal (the browser), Enter on the live backfill → its first partition row."""
    values = []
    for run in range(runs + 1):
        terminal = Terminal([*backfill_argv(), "list"], cwd=work, env=environment())
        try:
            terminal.wait_for(lambda lines: any(backfill_id[:15] in line for line in lines), timeout=120)
            time.sleep(0.3)
            seconds = terminal.key_to("\r", lambda lines: any(ROW.match(line) for line in lines), timeout=120)
            if run:
                values.append(seconds)
        finally:
            os.write(terminal.master, b"q")
            terminal.close()
    return statistics.median(values)


def without_index():
    """The watcher as it opened before the record index: every record file read once."""
    from engine.store import index_watch

    index_watch.IndexWatch.first = classmethod(lambda cls, *args, **kwargs: None)


KINDS = [first + second for first in "abcdefghij" for second in "vwxyz"]  # 50 asset names


def reason(index: int) -> str:
    """One of 50 kinds of failure, with numbers that differ in every partition (the signature drops them)."""
    return f"asset {KINDS[index % 50]} failed: row {index} rejected (code {index % 7})"


def failures_100k(work: Path) -> str:
    """A saved backfill of 100,000 daily-ish partitions, every one failed, with 50 kinds of reason."""
    from engine.base.settings import Settings
    from engine.execute.backfill import create_backfill, state_root_for
    from engine.pipeline.options import RunOptions
    from engine.spec.backfill_spec import ExecutionOptions
    from engine.spec.planning import plan_request

    planned = plan_request(target=None, command="true", name=None, start="2020-01-01T00:00:00Z",
                           end="2020-03-10T10:40:00Z", timezone="UTC", partition="1m", environment=None,
                           config_file=None, run_options=RunOptions(), options=ExecutionOptions(),
                           force=False)  # fmt: skip
    prepared = create_backfill(planned, root=state_root_for(planned.spec, None, work), cwd=work, settings=Settings())
    spec, store = prepared.spec, prepared.store
    write_records(store, spec, range(len(spec.plan)), "failed", reason)
    prepared.release()
    return store.id


def without_reason_files():
    """Triage and the text filter as before the reason files: every failed record's reason read from its file."""
    from engine.store import indexed_reasons

    indexed_reasons.IndexedReasons.of = classmethod(lambda cls, store, size: None)


def patched_argv(patch: str) -> list[str]:
    """The `backfill` command in a process where ``console_bench.<patch>()`` ran first (a baseline)."""
    wrapper = (
        "import sys; sys.argv = ['backfill', *sys.argv[1:]]; "
        f"sys.path.insert(0, {str(Path(__file__).parent)!r}); "
        f"import console_bench; console_bench.{patch}(); "
        "from tui.cli.main import main; sys.exit(main())"
    )
    return [sys.executable, "-c", wrapper]


def triage_and_find(work: Path, backfill_id: str, runs: int, argv: list[str] | None = None) -> tuple[float, float]:
    triage, find = [], []
    for _ in range(runs):
        terminal = Terminal([*(argv or backfill_argv()), "show", backfill_id], cwd=work, env=environment())
        try:
            terminal.wait_for(lambda lines: any(ROW.match(line) for line in lines), timeout=180)
            time.sleep(0.3)
            triage.append(terminal.key_to("t", lambda lines: any("50 kinds" in line for line in lines), timeout=180))
            terminal.press("\x1b")
            terminal.wait_for(lambda lines: not any("50 kinds" in line for line in lines), timeout=30)
            terminal.press("\x06")  # Ctrl+F
            terminal.wait_for(lambda lines: any("Filter rows by text" in line for line in lines), timeout=30)
            for character in "asset av failed":
                terminal.press(character)
            time.sleep(0.3)
            # the screen's own word that the rows are filtered (the status line's label is under this toast)
            find.append(
                terminal.key_to(
                    "\r", lambda lines: any("2,000 rows hold 'asset av failed'" in line for line in lines), timeout=180
                )
            )
        finally:
            terminal.close()
    return statistics.median(triage), statistics.median(find)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--only-failures", action="store_true")
    parser.add_argument("--only-live", action="store_true")
    args = parser.parse_args()
    if args.only_failures:
        return failures_report(args.runs)
    live_report(args.runs)
    return 0 if args.only_live else failures_report(args.runs)


def live_report(runs: int) -> int:
    """(5) and (5b): a live 50,000-partition backfill shown, and opened from the browser."""
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        (work / ".git").mkdir()
        backfill_id, process = live_50k(work)
        try:
            now = first_paint(work, backfill_id, runs)
            before = first_paint_without_index(work, backfill_id, runs)
            browsed = opened_from_browser(work, backfill_id, runs)
        finally:
            process.terminate()
            process.wait(timeout=60)
        print(
            f"(5) show ID of a live 50,000-partition backfill (45,000 recorded) → first row: median {now:.3f} s "
            f"[{'ok' if now <= 1 else 'OVER TARGET'} ≤ 1 s]; "
            f"reading the record files instead of the index {before:.3f} s "
            f"(ratio {now / before:.2f})  ({runs} fresh processes each)"
        )
        print(
            f"(5b) the same opened from the browser (Enter on it in `backfill list`) → first row: median "
            f"{browsed:.3f} s [{'ok' if browsed <= 1 else 'OVER TARGET'} ≤ 1 s]"
        )
    return 0


def failures_report(runs: int) -> int:
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        (work / ".git").mkdir()
        backfill_id = failures_100k(work)
        triage, find = triage_and_find(work, backfill_id, runs)
        triage_before, find_before = triage_and_find(work, backfill_id, runs, patched_argv("without_reason_files"))
        print(
            f"(6) t over 100,000 failures of 50 kinds → the kinds on the terminal: median {triage * 1000:.0f} ms "
            f"[{'ok' if triage <= 0.3 else 'OVER TARGET'} ≤ 300 ms]; reading every failed record instead "
            f"{triage_before * 1000:.0f} ms (ratio {triage / triage_before:.2f})"
        )
        print(
            f"(7) Ctrl+F 'asset av failed' over the same → its 2,000 rows shown: median {find * 1000:.0f} ms; "
            f"reading every failed record instead {find_before * 1000:.0f} ms (ratio {find / find_before:.2f})"
        )
    return 0


def first_paint_without_index(work: Path, backfill_id: str, runs: int) -> float:
    """(5)'s baseline: the same command, in a process whose watcher reads the record files, not the index."""
    values = []
    for run in range(runs + 1):
        terminal = Terminal([*patched_argv("without_index"), "show", backfill_id], cwd=work, env=environment())
        try:
            shown = terminal.wait_for(lambda lines: any(ROW.match(line) for line in lines), timeout=120)
            if run:
                values.append(shown - terminal.launched)
        finally:
            os.write(terminal.master, b"q")
            terminal.close()
    return statistics.median(values)


if __name__ == "__main__":
    raise SystemExit(main())
