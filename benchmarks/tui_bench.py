"""Dashboard benchmark with 1 000 000 partitions and a real executor running real children.

(1) time to first paint, from process start to the partition table's first drawn row, in a fresh
    process each run (median). Target ≤ 0.5 s.
(2) PageDown, End and Home: from the key press to every visible row drawn at the new position, median of
    several (Pilot's press() itself returns only once the app is idle, which a busy dashboard never is).
    Target ≤ 50 ms each.
(3) the app's peak RSS (app and executor in one process). Target ≤ 150 MB.
(4) with about 1000 status changes per second (5 children at a time, each `sleep 0.006`), the lag from a
    status change to its row being repainted, for rows inside the viewport of the first frame drawn after
    the change (follow mode moves the view as the run advances). Target ≤ 250 ms.

The app runs headless (Textual's test driver), which draws exactly what a terminal would get.
Usage: python benchmarks/tui_bench.py [--runs N]
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import resource
import statistics
import tempfile
import threading
import time
from pathlib import Path

from _measure import first_paint_seconds, median_of_fresh_processes

ONE_MILLION = ("--start-date", "2024-01-01T00:00:00Z", "--end-date", "2024-01-12T13:46:40Z", "--partition", "1s")


def make_live(work: Path, command: str, parallel: int):
    from engine.execute.backfill import create_backfill
    from engine.pipeline.options import RunOptions
    from engine.spec.backfill_spec import ExecutionOptions
    from engine.spec.planning import plan_request
    from tui.app.sources import ExecutorSource

    planned = plan_request(
        target=None,
        command=command,
        name=None,
        start=ONE_MILLION[1],
        end=ONE_MILLION[3],
        timezone="UTC",
        partition="1s",
        environment=None,
        config_file=None,
        run_options=RunOptions(),
        options=ExecutionOptions(max_parallel=parallel),
        force=False,
    )
    prepared = create_backfill(planned, state_dir=str(work / "states"), cwd=work)
    assert len(prepared.spec.plan) == 1_000_000
    executor = prepared.executor(grace=2)
    thread = threading.Thread(target=executor.run, name="executor")
    thread.start()
    return executor, thread, ExecutorSource(executor, options=prepared.options, parallelism=prepared.parallelism)


def first_paint_child(work: str) -> None:
    """Runs in a fresh process: print seconds from process start to the first drawn table row."""
    from tui.app.backfill_app import BackfillApp
    from tui.app.widgets.partition_table import PartitionTable

    executor, thread, source = make_live(Path(work), "true", 2)
    try:
        print(f"{first_paint_seconds(BackfillApp(source), PartitionTable):.4f}")
    finally:
        executor.request_stop("benchmark")
        thread.join()


def in_process(runs: int) -> None:
    from tui.app.backfill_app import BackfillApp
    from tui.app.widgets.partition_table import PartitionTable

    renders: list[tuple[float, int, int, int]] = []  # (time, partition, status code, scroll offset)
    frames: list[tuple[float, int, int]] = []  # (perf_counter, scroll offset, y) of every drawn row
    original = PartitionTable.render_line

    def render_line(self, y):
        strip = original(self, y)
        row = int(self.scroll_offset.y) + y
        frames.append((time.perf_counter(), int(self.scroll_offset.y), y))
        if row < len(self.rows):
            index = self.rows.index_at(row)
            renders.append((time.time(), index, self.board.raw()[index], int(self.scroll_offset.y)))
        return strip

    PartitionTable.render_line = render_line
    with tempfile.TemporaryDirectory() as scratch:
        executor, thread, source = make_live(Path(scratch), "sleep 0.006", 5)
        app = BackfillApp(source, closes_when_done=False)
        timings: dict[str, list[float]] = {"pagedown": [], "end": [], "home": []}
        in_window: list[tuple[float, int, int, int]] = []
        height_seen: list[int] = []

        async def scenario():
            async with app.run_test(size=(120, 40)) as pilot:
                await pilot.pause(0.5)
                # (4) lag under load, with follow on: measure for 6 seconds
                renders.clear()
                first_event = executor.snapshot().events[-1].sequence if executor.snapshot().events else 0
                measured_from = time.time()
                events = []
                table = app.screen.query_one(PartitionTable)
                height_seen.append(table.size.height)
                while time.time() - measured_from < 6:
                    await pilot.pause(0.05)
                    snap = executor.snapshot()
                    events.extend(e for e in snap.events if e.sequence > first_event)
                    if snap.events:
                        first_event = snap.events[-1].sequence
                window = time.time() - measured_from
                in_window.extend(renders)  # navigation below draws other rows: not part of the lag measure
                # (2) navigation, follow off from now on
                table = app.screen.query_one(PartitionTable)
                for _ in range(runs):
                    for key in ("pagedown", "end", "home"):
                        frames.clear()
                        started = time.perf_counter()
                        await pilot.press(key)
                        offset, height = int(table.scroll_offset.y), table.size.height
                        drawn = {}
                        for at, frame_offset, y in frames:
                            if frame_offset == offset and y not in drawn:
                                drawn[y] = at
                        assert len(drawn) == height, f"{key}: only {len(drawn)} of {height} rows drawn"
                        timings[key].append(max(drawn.values()) - started)
                return events, window

        try:
            events, window = asyncio.run(scenario())
        finally:
            executor.request_stop("benchmark")
            thread.join()
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    codes = {"started": 1, "succeeded": 2}
    lags = []
    rendered: dict[tuple[int, int], list[float]] = {}
    for at, index, code, _ in in_window:
        rendered.setdefault((index, code), []).append(at)
    frames = sorted((at, offset) for at, _, _, offset in in_window)
    frame_times = [at for at, _ in frames]
    height = height_seen[0]

    def on_screen(index: int, at: float) -> bool:
        """Whether the row is inside the viewport of the first frame drawn after ``at``: follow mode moves the
        view as the run advances, and a row scrolled away before it could be drawn is (rightly) not drawn."""
        position = bisect.bisect_right(frame_times, at)
        if position >= len(frames):
            return False
        top = frames[position][1]
        return top <= index < top + height

    for event in events:
        code = codes.get(event.kind)
        if code is None or not on_screen(event.index, event.at):
            continue
        times = [t for t in rendered.get((event.index, code), []) if t >= event.at - 0.001]
        if times:
            lags.append(max(0.0, min(times) - event.at))
    changes_per_second = len(events) / window
    for key in ("pagedown", "end", "home"):
        value = statistics.median(timings[key]) * 1000
        print(
            f"(2) {key:<8} median {value:6.1f} ms [{'ok' if value <= 50 else 'OVER TARGET'} ≤ 50 ms]  ({runs} presses)"
        )
    print(f"(3) peak RSS of app + executor: {rss:.1f} MB [{'ok' if rss <= 150 else 'OVER TARGET'} ≤ 150 MB]")
    if lags:
        lags.sort()
        p50, p95 = lags[len(lags) // 2] * 1000, lags[int(len(lags) * 0.95)] * 1000
        verdict = "ok" if p95 <= 250 else "OVER TARGET"
        print(
            f"(4) {changes_per_second:.0f} status changes/s; change → repaint lag for {len(lags)} on-screen changes: "
            f"median {p50:.0f} ms, p95 {p95:.0f} ms, max {lags[-1] * 1000:.0f} ms [{verdict} p95 ≤ 250 ms]"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--first-paint-child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.first_paint_child:
        first_paint_child(args.first_paint_child)
        return
    with tempfile.TemporaryDirectory() as scratch:
        paint = median_of_fresh_processes(__file__, ["--first-paint-child", scratch], args.runs)
    print(
        f"(1) first paint of 1 000 000 partitions, from process start: median {paint:.3f} s "
        f"[{'ok' if paint <= 0.5 else 'OVER TARGET'} ≤ 0.5 s]  ({args.runs} fresh processes)"
    )
    in_process(args.runs)


if __name__ == "__main__":
    main()
