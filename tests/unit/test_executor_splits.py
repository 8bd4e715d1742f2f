"""The executor's splitting in-process, over real children and a real store (engine/execute/executor_splits.py): a
split written ahead and audited, its halves run and their partition settled, a split the store cannot take, and
halves that never started when a run stopped."""

from __future__ import annotations

import errno
import os
import threading
from pathlib import Path

import orjson
import pytest

from engine.base.errors import StateWriteFailed
from engine.execute.launcher import ForkExecLauncher
from engine.store import audit
from tests.backfills import child_command, read_spans, records, wait_for
from tests.unit.test_scheduling import prepare

HOUR = 3_600_000_000
PATTERN = {"split_pattern": "too many rows", "min_partition": HOUR}


@pytest.fixture
def work(tmp_path) -> Path:
    (tmp_path / ".git").mkdir()
    return tmp_path


class ParentReadingLauncher(ForkExecLauncher):
    """At each launch, before the child exists: what the partition records on disk say (status, halves listed)."""

    def __init__(self, partitions: Path) -> None:
        self.partitions, self.seen = partitions, []

    def launch(self, spec):
        found = [orjson.loads(path.read_bytes()) for path in self.partitions.glob("*.json")]
        listed = {child["id"]: record["status"] for record in found for child in record.get("children") or []}
        self.seen.append(listed.get(spec.env["BACKFILL_PARTITION_ID"]))
        return super().launch(spec)


def _halves(directory: Path) -> dict[str, dict]:
    return {path.stem: orjson.loads(path.read_bytes()) for path in (directory / "splits").glob("*.json")}


def _splits(directory: Path) -> list[dict]:
    return [line for line in audit.read(directory).entries if line["action"] == "SPLIT"]


def test_a_failure_matching_the_pattern_splits_the_day_into_halves_that_succeed(work):
    """A day's child fails "too many rows" (windows over 12 h): the day splits at noon, and as each half starts
    the partition's record on disk already lists it and says running; both halves run their own windows and
    succeed; the partition then says how it split and succeeded, and the audit has one SPLIT line naming the
    partition, the failure, the trigger and this executor; the run succeeded."""
    spans = work / "spans.jsonl"
    prepared = prepare(work, child_command("--spans", str(spans), "--fail-longer-than", "12"), 1, **PATTERN)
    launcher = ParentReadingLauncher(prepared.store.partitions)
    outcome = prepared.executor(grace=5.0, launcher=launcher).run()
    assert launcher.seen == [None, "running", "running"]  # the day (no parent), then each half
    assert (outcome.status, outcome.counts["succeeded"]) == ("succeeded", 1)
    directory = prepared.store.directory
    [record] = records(directory)
    [attempt] = record["attempts"]
    assert (record["status"], attempt["status"]) == ("succeeded", "failed")
    assert attempt["split"] == "split on pattern into 12h + 12h"
    children = record["children"]
    assert [(c["start"], c["end"]) for c in children] == [
        ("2024-01-01T00:00:00Z", "2024-01-01T12:00:00Z"),
        ("2024-01-01T12:00:00Z", "2024-01-02T00:00:00Z"),
    ]
    halves = _halves(directory)
    assert sorted(halves) == sorted(c["id"] for c in children)
    assert {h["status"] for h in halves.values()} == {"succeeded"}
    assert sorted((s["start"], s["end"]) for s in read_spans(spans)) == [  # the day failed before its span
        ("2024-01-01T00:00:00.000000Z", "2024-01-01T11:59:59.999999Z"),
        ("2024-01-01T12:00:00.000000Z", "2024-01-01T23:59:59.999999Z"),
    ]
    [line] = _splits(directory)
    assert (line["backfill_id"], line["partition_id"]) == (prepared.store.id, record["id"])
    assert (line["from_status"], line["to_status"]) == ("failed", "running")
    assert line["reason"] == f"{attempt['error']}: {attempt['split']}"
    assert line["requested_by"] == "--split-on: a failing partition splits on /too many rows/, down to 1h"
    assert line["applied_by"] == f"backfill executor (PID {os.getpid()})"
    assert line["requested_at"] == attempt["finished_at"] <= line["applied_at"]


def test_a_split_the_store_cannot_take_does_not_happen_and_stops_the_run(work, monkeypatch):
    """The disk fills as the split is written ahead: nothing splits (no half starts, no children listed, no SPLIT
    line), the partition fails as it would without --split-on, and the run ends saying the store could not be
    written."""
    spans = work / "spans.jsonl"
    prepared = prepare(work, child_command("--spans", str(spans), "--fail-longer-than", "12"), 1, **PATTERN)
    executor = prepared.executor(grace=5.0)
    writer = executor._writer
    original, calls = writer.write_ahead_many, []

    def full_after_the_first_launch(entries):
        calls.append(entries)
        if len(calls) > 1:  # the day's attempt was written ahead; the next write ahead is its split
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return original(entries)

    monkeypatch.setattr(writer, "write_ahead_many", full_after_the_first_launch)
    with pytest.raises(StateWriteFailed, match=r"could not be written \(No space left on device\)"):
        executor.run()
    directory = prepared.store.directory
    [record] = records(directory)
    assert (record["status"], record.get("children")) == ("failed", None)
    [attempt] = record["attempts"]
    assert attempt.get("split") is None and attempt["error"] == "too many rows for a window of 24 h"
    assert read_spans(spans) == [] and _halves(directory) == {} and _splits(directory) == []


def test_a_stop_while_a_half_runs_settles_each_split_partition_as_its_leaves_say(work, monkeypatch):
    """One child at a time over two days: the first splits and both its halves succeed; the second splits, its
    first half runs until the run is stopped, and its second never starts. The second day is then cancelled on
    disk, as its leaves add up (the first half cancelled, the second queued: listed, with no file), not left
    running with nothing running it; the first stays succeeded."""
    monkeypatch.setenv("CHILD_WAIT_FOR", str(work / "never"))
    command = child_command("--fail-longer-than", "12", "--wait-from", "2024-01-02")
    prepared = prepare(work, command, 2, max_parallel=1, **PATTERN)
    executor = prepared.executor(grace=5.0)
    outcome: list = []
    runner = threading.Thread(target=lambda: outcome.append(executor.run()))
    runner.start()
    directory = prepared.store.directory
    wait_for(lambda: sum(bool(h.get("attempts")) for h in _halves(directory).values()) == 3)
    executor.request_stop("stopped by the test")
    runner.join(60)
    assert not runner.is_alive() and outcome[0].status == "cancelled"
    first, second = records(directory)
    assert (first["status"], second["status"], len(second["children"])) == ("succeeded", "cancelled", 2)
    halves = {key: half["status"] for key, half in _halves(directory).items()}
    assert [halves.get(child["id"]) for child in second["children"]] == ["cancelled", None]
    assert [halves[child["id"]] for child in first["children"]] == ["succeeded", "succeeded"]


def test_a_half_that_fails_the_same_way_splits_again(work):
    """A child refusing windows over 6 hours: the day splits into 12-hour halves, each of those into 6-hour
    quarters, which succeed; each half lists its quarters, and every launch of a half or quarter is reported with
    its own interval."""
    prepared = prepare(work, child_command("--fail-longer-than", "6"), 1, **PATTERN)
    executor = prepared.executor(grace=5.0)
    assert executor.run().status == "succeeded"
    [record] = records(prepared.store.directory)
    halves = _halves(prepared.store.directory)
    quarters = [quarter for child in record["children"] for quarter in halves[child["id"]]["children"]]
    assert [(q["start"][11:16], q["end"][11:16], halves[q["id"]]["status"]) for q in quarters] == [
        ("00:00", "06:00", "succeeded"),
        ("06:00", "12:00", "succeeded"),
        ("12:00", "18:00", "succeeded"),
        ("18:00", "00:00", "succeeded"),
    ]
    spans = [event.span for event in executor.snapshot().events if event.kind == "started"]
    nodes = [*record["children"], *quarters]
    assert sorted(spans, key=str) == sorted([None, *((n["start_us"], n["end_us"]) for n in nodes)], key=str)


def test_a_split_whose_audit_line_cannot_be_written_stops_the_run(work, monkeypatch):
    """The split's record is written but its audit line meets a full disk: the run stops as any run whose store
    cannot be written (one line naming the disk's words), and no half starts."""
    spans = work / "spans.jsonl"
    prepared = prepare(work, child_command("--spans", str(spans), "--fail-longer-than", "12"), 1, **PATTERN)
    original = audit.append

    def full_for_splits(directory, entries):
        entries = list(entries)
        if any(entry["action"] == "SPLIT" for entry in entries):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return original(directory, entries)

    monkeypatch.setattr(audit, "append", full_for_splits)
    with pytest.raises(StateWriteFailed, match=r"could not be written \(No space left on device\)"):
        prepared.executor(grace=5.0).run()
    assert not spans.exists() and _splits(prepared.store.directory) == []


class FencingLauncher(ForkExecLauncher):
    """Its first launch is the moment the executor loses its lease; once that child has been reaped, the
    executor's lease thread says so (it stops the run)."""

    def __init__(self) -> None:
        self.launched, self.executor = 0, None

    def launch(self, spec):
        self.launched += 1
        executor = self.executor
        executor.owns = lambda: False  # from now on, as its lease says

        def poll(_):
            if not executor._active:
                executor._fenced_out("taken over")

        executor.hooks.poll = poll
        return super().launch(spec)


def test_a_fenced_executor_makes_no_split(work):
    """The executor loses its lease while the day's child runs, and the child then fails by the trigger: nothing
    splits (no SPLIT line, no half started, no halves listed), since a fenced executor writes nothing more."""
    spans = work / "spans.jsonl"
    prepared = prepare(work, child_command("--fail-longer-than", "12", "--spans", str(spans)), 1, **PATTERN)
    launcher = FencingLauncher()
    executor = prepared.executor(grace=5.0, launcher=launcher)
    launcher.executor = executor
    executor.run()
    assert launcher.launched == 1 and _splits(prepared.store.directory) == [] and not spans.exists()
    [record] = records(prepared.store.directory)
    assert (record["status"], record.get("children")) == ("running", None)  # as written ahead: a takeover settles it
