"""Compact progress lines: the front end for pipes, CI, ``TERM=dumb`` and ``--no-progress``.

Polls the executor's snapshot a few times a second. Each start and finish is a
line with the running count; when many partitions finish between two polls,
successes are coalesced into one line (failures are always shown), so thousands
of fast partitions do not flood the log. A heartbeat names what is still running
when nothing has happened for a while.
"""

from __future__ import annotations

import signal
import time
from typing import IO

from engine.dates.formatting import InstantFormatter
from engine.execute.executor import Executor
from engine.execute.executor_snapshot import Event, Snapshot
from engine.execute.executor_thread import ExecutorThread
from engine.spec.backfill_spec import BackfillSpec
from engine.store.state_store import StateStore
from tui import human
from tui.cli.terminal import STATUS_STYLE, Paint, nobody_reads, silence

POLL_SECONDS = 0.25
INDIVIDUAL_LINES = 12  # more events than this in one poll are coalesced
HEARTBEAT_SECONDS = 30.0
FINAL = ("succeeded", "failed", "cancelled")
NOBODY_READS = "nobody reads its output any more (the terminal closed, or the pipe's reader left)"


class ProgressLines:
    def __init__(self, executor: Executor, spec: BackfillSpec, store: StateStore, stream: IO[str], paint: Paint):
        self.executor = executor
        self.spec = spec
        self.store = store
        self.stream = stream
        self.paint = paint
        self.formatter = InstantFormatter(spec.zone)
        self.last_sequence = 0
        self.done = 0
        self.last_output = time.monotonic()
        self.stopping_announced = False

    def follow(self, thread: ExecutorThread) -> None:
        """Print until the executor thread has finished, then print what is left."""
        while thread.is_alive():
            thread.join(POLL_SECONDS)
            self.poll()
        self.poll()

    def follow_while_read(self, thread: ExecutorThread, terminals: frozenset[int], *, hangup_stops: bool) -> None:
        """:meth:`follow`. When nobody can read the lines any more (the terminal hung up without a SIGHUP reaching
        us, the pipe's reader went away) that is a hangup: the run is stopped as on SIGHUP when ``hangup_stops``
        (SIGHUP is not ignored), and followed to its end with its lines going nowhere. Any other failure to write
        them is raised, for the caller to stop the run."""
        try:
            self.follow(thread)
        except OSError as error:
            if not nobody_reads(error, self.stream, terminals):
                raise
            silence(self.stream, terminals)
            if hangup_stops:
                self.executor.request_stop(NOBODY_READS, signal.SIGTERM)
            self.follow(thread)

    def poll(self) -> None:
        snapshot = self.executor.snapshot()
        events = [e for e in snapshot.events if e.sequence > self.last_sequence]
        if events:
            missed = events[0].sequence - self.last_sequence - 1
            self.last_sequence = events[-1].sequence
            self._print_events(events, snapshot, missed)
        if snapshot.stop_reason and not self.stopping_announced and snapshot.running:
            self.stopping_announced = True
            self._write(
                self.paint(
                    f"stopping ({snapshot.stop_reason}): waiting for {len(snapshot.running)} active run(s) to exit",
                    "yellow",
                )
            )
        if time.monotonic() - self.last_output >= HEARTBEAT_SECONDS and snapshot.running:
            oldest = min(snapshot.running, key=lambda r: r.started_at)
            self._write(
                f"{self._counter(snapshot)} {len(snapshot.running)} running; longest "
                f"{self._label(oldest.index)} for {human.duration(time.time() - oldest.started_at)}"
            )

    def _counter(self, snapshot: Snapshot) -> str:
        total = human.count(snapshot.selected)
        return f"[{human.count(self.done).rjust(len(total))}/{total}]"

    def _label(self, index: int) -> str:
        return self.formatter.format(self.spec.plan.interval(index).start)

    def _is_final(self, events: list[Event], position: int) -> bool:
        """Whether the event ends its partition in this run (not before a retry or a split, nor a half with others
        of its partition still to go)."""
        event = events[position]
        return event.kind in FINAL and event.final

    def _print_events(self, events: list[Event], snapshot: Snapshot, missed: int) -> None:
        coalesce = len(events) > INDIVIDUAL_LINES or missed > 0
        tally: dict[str, int] = {}
        for position, event in enumerate(events):
            final = self._is_final(events, position)
            if final:
                self.done += 1
            if coalesce and event.kind in ("started", "succeeded", "retrying"):
                tally[event.kind] = tally.get(event.kind, 0) + 1
                continue
            self._write(self._line(event, snapshot, final))
        if coalesce:
            parts = [self.paint(f"{count} {kind}", STATUS_STYLE[kind]) for kind, count in sorted(tally.items())]
            if missed:
                parts.append(f"{missed} more events")
            self._write(
                f"{self._counter(snapshot)} … {', '.join(parts)} since the last update; {len(snapshot.running)} running"
            )

    def _line(self, event: Event, snapshot: Snapshot, final: bool) -> str:
        kind = self.paint(f"{event.kind:<9}", STATUS_STYLE.get(event.kind, "bold"))
        where = self._label(event.index)
        if event.span is not None:  # a half of a split partition
            where = f"⑂ {self.formatter.format(event.span[0])} → {self.formatter.format(event.span[1])}"
        text = f"{self._counter(snapshot)} {kind} {where}"
        if event.kind == "started":
            return f"{text}  run {event.run_id}"
        if event.duration is not None:
            text += f"  {event.duration:.2f}s"
        if event.error:
            text += f"  {event.error}"
        if event.kind in ("failed", "cancelled"):
            text += f"  log {self.store.log_path(event.run_id)}"
        return text

    def _write(self, line: str) -> None:
        self.stream.write(line + "\n")
        self.stream.flush()
        self.last_output = time.monotonic()
