"""A deterministic saved backfill for snapshot tests and screenshots.

Written through the real store API (manifest, partition records, child logs) with
fixed IDs and times, so the screen is identical on every run. ``FixedStateSource``
reads it like any saved backfill and reports a chosen run state (mid-run or
stopping) with a fixed start time; only the snapshots use it — Pilot tests drive
real executors.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

from engine.execute.executor_snapshot import RUNNING
from engine.pipeline.options import RunOptions
from engine.spec import planning
from engine.spec.backfill_spec import ExecutionOptions
from engine.store.manifest import manifest_of
from engine.store.records import Attempt, PartitionRecord
from engine.store.state_store import StateStore
from tui.app.sources import SavedSource, SourceState

FROZEN = datetime(2024, 3, 15, 12, 0, 0, tzinfo=UTC).timestamp()
BACKFILL_ID = "20240315-115500-5eed01"


def _when(seconds_before: float) -> str:
    return (
        datetime.fromtimestamp(FROZEN - seconds_before, UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")
    )


def plan_request(**inputs):
    """Plan a fixture's command backfill; its program (dbt, etl.py) need not exist on this machine, since
    nothing is run: the fixture writes the records a run would have written."""
    from unittest import mock

    with mock.patch.object(planning, "check_program"):
        return planning.plan_request(**inputs)


def build_saved_backfill(root: Path) -> StateStore:
    """90 days of a command backfill in Europe/London: 40 succeeded, 2 failed (one retried), 1 cancelled,
    4 running, the rest queued."""
    planned = plan_request(
        target=None,
        command="python etl.py --from {start} --to {end}",
        name="orders etl",
        start="2024-01-01",
        end="2024-03-30",
        timezone="Europe/London",
        partition="daily",
        environment=None,
        config_file=None,
        run_options=RunOptions(),
        options=ExecutionOptions(max_parallel=4, retries=1),
        force=False,
    )
    spec = planned.spec
    store = StateStore(root / BACKFILL_ID)
    manifest = manifest_of(spec, backfill_id=BACKFILL_ID, working_directory="/srv/etl", options=planned.options)
    manifest["created_at"] = _when(300)
    store.create(manifest)
    plan = spec.plan
    # A consistent timeline: an earlier invocation was interrupted 60 s before this one started (partition
    # 42 cancelled); this one started at FROZEN - 125 with 4 lanes, each attempt starting when its lane is
    # free and lasting exactly its duration; a retry follows its failed attempt; 43-46 are running now.
    started = FROZEN - 125
    lanes = [started] * 4
    timeline: dict[int, list[tuple[str, float, float | None, float | None]]] = {
        42: [("cancelled", started - 90, started - 60, 30.0)]
    }

    def schedule(index: int, status: str, seconds: float | None) -> None:
        lane = min(range(4), key=lambda n: lanes[n])
        earliest = max(lanes[lane], timeline[index][-1][2] or 0) if index in timeline else lanes[lane]
        end = earliest + seconds if seconds is not None else None
        lanes[lane] = end if end is not None else float("inf")
        timeline.setdefault(index, []).append((status, earliest, end, seconds))

    for index in range(40):
        schedule(index, "succeeded", 3.5 + index % 5)
        if index == 20:
            schedule(40, "failed", 10.5)
            schedule(41, "failed", 10.5)
        if index == 30:
            schedule(40, "failed", 11.5)  # the retry, after the first attempt ended
    for index in range(43, 47):
        schedule(index, "running", None)
    for index in range(47):
        interval = plan.interval(index)
        partition_id = spec.ids.of(interval.start, interval.end)
        attempts = []
        for number, (status, began, ended, seconds) in enumerate(timeline[index], start=1):
            run_id = f"{BACKFILL_ID}-p{index}-a{number}"
            errors = {
                "failed": "psycopg.OperationalError: connection to server lost",
                "cancelled": "cancelled: interrupted (Ctrl+C)",
            }
            attempts.append(
                Attempt(
                    run_id=run_id,
                    status=status,
                    started_at=_when(FROZEN - began),
                    finished_at=_when(FROZEN - ended) if ended is not None else None,
                    exit_code={"succeeded": 0, "failed": 1, "cancelled": -2}.get(status),
                    error=errors.get(status),
                    log=f"children/{run_id}.log",
                    duration=seconds,
                    pid=4000 + index if status == "running" else None,
                )
            )
        status = attempts[-1].status
        record = PartitionRecord(partition_id, index, "", "", interval.start, interval.end, status, attempts)
        store.write_record(record, durable=False)
        for attempt in attempts:
            log = store.directory / attempt.log
            lines = [f"loading orders for {interval.index}: batch {n}" for n in range(1, 6)]
            if attempt.status == "failed":
                lines += [
                    "Traceback (most recent call last):",
                    '  File "etl.py", line 42, in load',
                    "psycopg.OperationalError: connection to server lost",
                ]
            log.write_text("\n".join(lines) + "\n")
    stamp = int((FROZEN - 30) * 1e9)
    os.utime(store.partitions, ns=(stamp, stamp))  # "last activity" is the directory's time: fix it too
    return store


def build_complete_backfill(root: Path) -> StateStore:
    """A small finished backfill of a pipeline-like command, every partition succeeded."""
    planned = plan_request(
        target=None,
        command="dbt run --vars {start_date}",
        name="dbt daily models",
        start="2024-02-01",
        end="2024-02-07",
        timezone="UTC",
        partition="daily",
        environment=None,
        config_file=None,
        run_options=RunOptions(),
        options=ExecutionOptions(),
        force=False,
    )
    spec = planned.spec
    backfill_id = "20240314-090000-c0ffee"
    store = StateStore(root / backfill_id)
    manifest = manifest_of(spec, backfill_id=backfill_id, working_directory="/srv/dbt", options=planned.options)
    manifest["created_at"] = _when(86_400)
    store.create(manifest)
    for interval in spec.plan:
        run_id = f"{backfill_id}-p{interval.index}-a1"
        attempt = Attempt(
            run_id=run_id,
            status="succeeded",
            started_at=_when(86_000 - interval.index * 60),
            finished_at=_when(85_990 - interval.index * 60),
            exit_code=0,
            log=f"children/{run_id}.log",
            duration=10.0,
        )
        record = PartitionRecord(
            spec.ids.of(interval.start, interval.end),
            interval.index,
            "",
            "",
            interval.start,
            interval.end,
            "succeeded",
            [attempt],
        )
        store.write_record(record, durable=False)
        (store.directory / attempt.log).write_text("ok\n")
    stamp = int((FROZEN - 85_000) * 1e9)
    os.utime(store.partitions, ns=(stamp, stamp))
    return store


class FixedStateSource(SavedSource):
    """The saved fixture shown as if an executor were at a fixed point of its run."""

    def __init__(self, store: StateStore, *, state: str = RUNNING, stop_reason: str | None = None) -> None:
        from engine.spec.parallelism import Parallelism
        from engine.store.manifest import spec_of

        spec = spec_of(store.read_manifest())
        board, running = store.load_board(spec.plan, spec.ids.of)
        options = ExecutionOptions(max_parallel=4, retries=1)
        super().__init__(spec, store, board, running, options, Parallelism(4, 4, None), started_at=FROZEN - 125)
        self.state = state
        self.stop_reason = stop_reason
        self.can_stop = True

    @property
    def nobody_runs(self) -> bool:
        return False

    def poll(self) -> SourceState:
        counts = self.board.counts()
        finished = counts["succeeded"] + counts["failed"] + counts["cancelled"]
        return SourceState(
            1,
            counts,
            self.board.size,
            self.board.size,
            finished,
            self._running,
            self.state,
            self.stop_reason,
            None,
            self.started_at,
        )

    def stop(self, reason: str) -> None:
        self.stop_reason = reason


def build_large_saved_backfill(root: Path, *, days: int, succeeded_every: int = 2) -> StateStore:
    """A saved command backfill of ``days`` daily partitions where every ``succeeded_every``-th one succeeded
    (one non-overlapping 2-second attempt each) and the rest are queued: large filters across many blocks."""
    from engine.dates.instants import format_instant

    start = datetime(2000, 1, 1, tzinfo=UTC)
    end = datetime.fromtimestamp(start.timestamp() + (days - 1) * 86_400, UTC)
    planned = plan_request(
        target=None,
        command="python etl.py --day {start_date}",
        name="long history",
        start=start.date().isoformat(),
        end=end.date().isoformat(),
        timezone="UTC",
        partition="daily",
        environment=None,
        config_file=None,
        run_options=RunOptions(),
        options=ExecutionOptions(),
        force=False,
    )
    spec = planned.spec
    backfill_id = "20240315-100000-b16b16"
    store = StateStore(root / backfill_id)
    manifest = manifest_of(spec, backfill_id=backfill_id, working_directory="/srv/etl", options=planned.options)
    manifest["created_at"] = _when(days * 3 + 60)
    store.create(manifest)
    for index in range(0, len(spec.plan), succeeded_every):
        interval = spec.plan.interval(index)
        run_id = f"{backfill_id}-p{index}-a1"
        began = FROZEN - days * 3 + index * 3
        attempt = Attempt(
            run_id=run_id,
            status="succeeded",
            started_at=format_instant(int(began * 1e6), UTC),
            finished_at=format_instant(int((began + 2) * 1e6), UTC),
            exit_code=0,
            log=f"children/{run_id}.log",
            duration=2.0,
        )
        record = PartitionRecord(
            spec.ids.of(interval.start, interval.end),
            index,
            "",
            "",
            interval.start,
            interval.end,
            "succeeded",
            [attempt],
        )
        store.write_record(record, durable=False)
    return store


def build_split_backfill(root: Path) -> StateStore:
    """Three days in Europe/Berlin of a command run with ``--split-on timeout``: the 26th split 12 h + 12 h and
    succeeded; the 27th (25 hours) split 12 h + 13 h, its 13 hours 6 h + 7 h, and its last leaf failed on memory;
    the 28th is queued. Records written as the executor writes them: the partitions' with their halves listed,
    the halves' in splits/, every node what its leaves add up to."""
    from engine.dates.formatting import InstantFormatter
    from engine.dates.split import halves, leaf_id
    from engine.store.records import SplitChild
    from engine.store.split_tree import SplitNode, fresh_half, settle_node

    planned = plan_request(
        target=None, command="python load.py {start} {end_exclusive}", name="events", start="2024-10-26",
        end="2024-10-28", timezone="Europe/Berlin", partition="daily", environment=None, config_file=None,
        run_options=RunOptions(), options=ExecutionOptions(max_parallel=4, timeout=2_000_000, split_on=("timeout",)),
        force=False,
    )  # fmt: skip
    spec, backfill_id = planned.spec, "20240315-114000-5p1175"
    store = StateStore(root / backfill_id)
    manifest = manifest_of(spec, backfill_id=backfill_id, working_directory="/srv/events", options=planned.options)
    manifest["created_at"] = _when(400)
    store.create(manifest)
    formatter = InstantFormatter(spec.zone)
    clock = [300.0]

    def attempt(run_id: str, status: str, seconds: float, error: str | None = None, split: str | None = None):
        began = clock[0]
        clock[0] -= seconds
        (store.directory / "children").mkdir(exist_ok=True)
        (store.directory / f"children/{run_id}.log").write_text(f"loading events ({run_id})\n" + (error or "") + "\n")
        return Attempt(
            run_id=run_id, status=status, started_at=_when(began), finished_at=_when(began - seconds),
            exit_code={"succeeded": 0, "failed": -2 if error and error.startswith("timed") else 1}.get(status),
            error=error, log=f"children/{run_id}.log", duration=seconds, split=split,
        )  # fmt: skip

    def split(node: SplitNode, index: int, text: str) -> list[SplitNode]:
        record = node.record
        parts = halves(record.start_us, record.end_us, spec.zone, min_length=3_600_000_000)
        assert parts is not None
        record.children = [
            SplitChild(leaf_id(record.id, a, b), formatter.format(a), formatter.format(b), a, b) for a, b in parts
        ]
        record.attempts.append(attempt(f"{backfill_id}-p{index}-s{node.path}-a1".replace("-s-", "-"), "failed", 2.0,
                                       "timed out after 2s", text))  # fmt: skip
        node.halves = [
            SplitNode(fresh_half(record, c), node.path + str(n), parent=node) for n, c in enumerate(record.children)
        ]
        return node.halves

    for index in (0, 1):
        interval = spec.plan.interval(index)
        start, end = formatter.format(interval.start), formatter.format(interval.end)
        partition_id = spec.ids.of(interval.start, interval.end)
        root_record = PartitionRecord(partition_id, index, start, end, interval.start, interval.end, "running")
        root = SplitNode(root_record)
        first, second = split(root, index, "split on timeout into " + ("12h + 12h" if index == 0 else "12h + 13h"))
        leaves = [first]
        if index == 1:
            leaves += split(second, index, "split on timeout into 6h + 7h")
        else:
            leaves.append(second)
        for number, leaf in enumerate(leaves):
            failing = index == 1 and number == len(leaves) - 1
            leaf.record.attempts.append(
                attempt(
                    f"{backfill_id}-p{index}-s{leaf.path}-a1",
                    "failed" if failing else "succeeded",
                    1.5 + number,
                    "MemoryError" if failing else None,
                )
            )
            leaf.record.status = "failed" if failing else "succeeded"
        for node in reversed(list(root.nodes())):
            if node.halves:
                settle_node(node)
            store.write_record(node.record, durable=False)
    stamp = int((FROZEN - 30) * 1e9)
    os.utime(store.partitions, ns=(stamp, stamp))
    return store
