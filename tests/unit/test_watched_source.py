"""Watching a backfill another process runs: its records are read once to open it (not once for the board and
again for their times), and what that single pass reads still counts the watched run's own progress."""

from __future__ import annotations

import pytest

from engine.dates.formatting import InstantFormatter
from engine.spec.parallelism import Parallelism
from engine.store import records as records_module
from engine.store import state_store as state_store_module
from engine.store.records import Attempt, PartitionRecord, RecordStatus
from tests.saved_backfills import saved_command_backfill
from tui.app.sources import WatchedSource

RUN_STARTED = 1_764_000_000.0  # 2025-11-24T16:00:00Z


def attempt(status: str, finished: str | None) -> Attempt:
    return Attempt(run_id="r", status=status, started_at="2025-11-24T15:00:00Z", finished_at=finished)


@pytest.fixture
def watched(tmp_path, monkeypatch):
    """Five days: one ended by an earlier run, one ended in the watched run, one running, two queued; the
    generation says the run selected three and when it began. Every record read is counted."""
    prepared = saved_command_backfill(tmp_path, end="2024-01-05")
    store, spec = prepared.store, prepared.spec
    formatter = InstantFormatter(spec.zone)
    for index, status, finished in [
        (0, RecordStatus.SUCCEEDED, "2025-11-24T15:30:00Z"),  # before the run began
        (1, RecordStatus.FAILED, "2025-11-24T16:00:05Z"),  # in the watched run
        (2, RecordStatus.RUNNING, None),
    ]:
        interval = spec.plan.interval(index)
        record = PartitionRecord.fresh(spec.ids.of(interval.start, interval.end), interval, formatter, status)
        record.attempts.append(attempt(status, finished))
        store.write_record(record, durable=False)
    generation = store.write_generation(2, 4242, 1.0, "2025-11-24T15:59:59Z")
    store.record_selection(generation, 3, RUN_STARTED, (2, 2))
    reads: list[str] = []

    def counted(original):
        def read(path, *args, **kwargs):
            reads.append(str(path))
            return original(path, *args, **kwargs)

        return read

    monkeypatch.setattr(state_store_module, "read_record", counted(state_store_module.read_record))
    monkeypatch.setattr(records_module, "read_record", counted(records_module.read_record))
    return prepared, reads


def test_each_record_is_read_once_and_the_run_s_own_progress_is_counted(watched):
    """Three records, three reads; the run selected three and one of them ended since it began (the earlier
    run's success is not counted); the running one is known."""
    prepared, reads = watched
    source = WatchedSource.load(prepared.spec, prepared.store, prepared.options, Parallelism(2, 2, None))
    assert len(reads) == 3 and len(set(reads)) == 3
    assert (source.progress.selected, source.progress.finished) == (3, 1)
    state = source.poll()
    assert [p.index for p in state.running] == [2]
    assert (state.selected, state.finished) == (3, 1)


def test_a_record_written_while_it_was_read_is_read_again_on_the_next_scan(watched):
    """The files' times are taken before the records are read: a record that changes after its time was
    taken is read again by the next scan, so the screen never keeps a stale status."""
    prepared, _ = watched
    store, spec = prepared.store, prepared.spec
    source = WatchedSource.load(spec, store, prepared.options, Parallelism(2, 2, None))
    interval = spec.plan.interval(2)
    partition_id = spec.ids.of(interval.start, interval.end)
    record = store.read_record(partition_id, spec.plan, spec.ids.of)
    record.status = RecordStatus.SUCCEEDED
    record.attempts[-1] = attempt(RecordStatus.SUCCEEDED, "2025-11-24T16:01:00Z")
    import os

    path = store.record_path(partition_id)
    store.write_record(record, durable=False)
    before = os.stat(path).st_mtime_ns
    os.utime(path, ns=(before + 1_000_000_000, before + 1_000_000_000))  # a later write, whatever the clock's step
    os.utime(store.partitions, ns=(before + 2_000_000_000, before + 2_000_000_000))
    source._last_scan = 0.0
    state = source.poll()
    assert state.counts["succeeded"] == 2 and not state.running and state.finished == 2
