"""The catalog of saved backfills in-process (issue 22, engine/store/catalog.py): the counts cache and when it is
trusted, who may still own a backfill, the summary's state and fields, and a listing that survives damage."""

from __future__ import annotations

import os
import socket
import time

import orjson
import pytest

from engine.store import catalog
from engine.store.catalog import (
    SUMMARY,
    BackfillSummary,
    interrupted_for_reading,
    interrupted_note,
    list_backfills,
    owner_gone,
    partitions_stamp,
    read_counts,
    summarize,
    write_summary,
)
from engine.store.control import Control, Decision, write_control
from engine.store.lease import Lease, write_lease
from engine.store.locks import FileLock
from engine.store.records import Attempt, PartitionRecord
from engine.store.status import Status
from tests.saved_backfills import saved_command_backfill


@pytest.fixture
def saved(tmp_path):
    """A saved command backfill of three days, nothing attempted."""
    return saved_command_backfill(tmp_path, end="2024-01-03")


def record(prepared, index: int, status: str) -> PartitionRecord:
    """Write partition ``index``'s record with one attempt of ``status``; the record."""
    spec = prepared.spec
    interval = spec.plan.interval(index)
    partition_id = spec.ids.of(interval.start, interval.end)
    attempt = Attempt(run_id=f"r{index}", status=status, started_at="2024-01-01T00:00:00Z")
    written = PartitionRecord(partition_id, index, "s", "e", interval.start, interval.end, status, [attempt])
    prepared.store.write_record(written, durable=False)
    return written


def counts(**given: int) -> dict[str, int]:
    return {name: given.get(name, 0) for name in ("queued", "running", "succeeded", "failed", "cancelled", "skipped")}


def test_counts_are_read_from_the_records_then_cached_and_the_cache_trusted_while_current(saved):
    """The first read walks the records and writes .summary.json; the next reads it (a record changed behind
    its back would not show) until a record write changes the directory's time."""
    store = saved.store
    manifest = store.read_manifest()
    record(saved, 0, "succeeded")
    assert read_counts(store, manifest) == counts(queued=2, succeeded=1)
    cached = orjson.loads((store.directory / SUMMARY).read_bytes())
    assert cached["format"] == 1 and cached["partitions_mtime_ns"] == partitions_stamp(store)
    assert cached["counts"] == counts(queued=2, succeeded=1)
    stamp = partitions_stamp(store)
    record(saved, 1, "failed")
    os.utime(store.partitions, ns=(stamp, stamp))  # the write hidden from the stamp: the cache is believed
    assert read_counts(store, manifest) == counts(queued=2, succeeded=1)
    os.utime(store.partitions, ns=(stamp + 1000, stamp + 1000))
    assert read_counts(store, manifest) == counts(queued=1, succeeded=1, failed=1)


@pytest.mark.parametrize(
    "damage",
    [
        lambda c: {**c, "format": 2},
        lambda c: {**c, "partitions_mtime_ns": c["partitions_mtime_ns"] + 1},
        lambda c: {**c, "counts": {**c["counts"], "succeeded": 3, "queued": 0}},  # forged: the check fails
        lambda c: {**c, "check": "0" * 32},
        lambda c: [1],
        lambda c: {k: v for k, v in c.items() if k != "counts"},
    ],
)
def test_a_stale_edited_or_broken_cache_is_recomputed(saved, damage):
    """A cache of another format or time, edited counts, a wrong check, or not a summary at all: the counts come
    from the records again, and the cache is rewritten."""
    store = saved.store
    manifest = store.read_manifest()
    record(saved, 2, "failed")
    read_counts(store, manifest)
    path = store.directory / SUMMARY
    path.write_bytes(orjson.dumps(damage(orjson.loads(path.read_bytes()))))
    assert read_counts(store, manifest) == counts(queued=2, failed=1)
    assert orjson.loads(path.read_bytes())["counts"] == counts(queued=2, failed=1)


def test_a_cache_whose_counts_are_not_the_plan_s_is_not_believed(saved):
    """Counts that do not add up to the plan, or are not whole and non-negative, are recomputed even when
    their check holds (a cache of a plan written by another version)."""
    store = saved.store
    manifest = store.read_manifest()
    stamp = partitions_stamp(store)
    for forged in (counts(queued=2), counts(queued=4, failed=-1), counts(queued=2, failed=True)):
        data = {"format": 1, "partitions_mtime_ns": stamp, "counts": forged,
                "check": catalog._check(store, stamp, forged)}  # fmt: skip
        (store.directory / SUMMARY).write_bytes(orjson.dumps(data))
        assert read_counts(store, manifest) == counts(queued=3)
    honest = counts(queued=1, succeeded=2)
    data = {"format": 1, "partitions_mtime_ns": stamp, "counts": honest, "check": catalog._check(store, stamp, honest)}
    (store.directory / SUMMARY).write_bytes(orjson.dumps(data))
    assert read_counts(store, manifest) == honest  # a current, checked, plausible cache is believed


def test_a_cache_that_cannot_be_written_or_read_is_skipped(saved):
    """A directory where the cache should be: it is neither written nor read (the counts come from the
    records), and nothing is raised (it once was: `backfill list` fell over on an unreadable cache)."""
    store = saved.store
    (store.directory / SUMMARY).mkdir()  # the rename over it fails
    write_summary(store, store.load_board(saved.spec.plan, saved.spec.ids.of)[0], 1)
    assert read_counts(store, store.read_manifest()) == counts(queued=3)


def test_no_partitions_directory_has_stamp_zero(saved):
    """A store whose partitions directory is gone stamps 0 (never the time of something else)."""
    os.rmdir(saved.store.partitions)
    assert partitions_stamp(saved.store) == 0


def test_who_may_still_own_a_backfill(saved):
    """Nobody: no lock, no children's lock, no lease of another host; a lock held, a child holding
    .children.lock, or another host's lease inside its grace keep an owner possible; this host's lease never
    does (its lock says it all)."""
    store = saved.store
    assert owner_gone(store) and not catalog.is_running(store)
    held = FileLock(store.lock_path)
    held.try_acquire()
    try:
        assert catalog.is_running(store) and not owner_gone(store)  # an executor holds the lock
    finally:
        held.release()
    assert not catalog.is_running(store)
    children = FileLock(store.children_lock_path)
    children.try_acquire()
    try:
        assert not owner_gone(store)  # a child of a dead executor still holds .children.lock
    finally:
        children.release()
    now = time.time()
    write_lease(store.directory, Lease(1, "elsewhere", 1, 1.0, now - 10, host_grace=60))
    assert not owner_gone(store)
    write_lease(store.directory, Lease(1, "elsewhere", 1, 1.0, now - 10, host_grace=5))
    assert owner_gone(store)
    write_lease(store.directory, Lease(1, socket.gethostname(), 1, 1.0, now + 60))
    assert owner_gone(store)
    write_lease(store.directory, Lease(1, None, None, None, now + 60))
    assert owner_gone(store)


def test_partitions_left_running_are_read_as_cancelled_only_when_nobody_owns_them(saved):
    """Records still running by a gone executor: cancelled on the board (not on disk), counted, with one note;
    while another host's lease runs, untouched."""
    store = saved.store
    left = [record(saved, 0, "running"), record(saved, 1, "running")]
    board, running = store.load_board(saved.spec.plan, saved.spec.ids.of)
    assert interrupted_for_reading(store, board, []) == 0
    write_lease(store.directory, Lease(1, "elsewhere", 1, 1.0, time.time() + 60))
    assert interrupted_for_reading(store, board, running) == 0 and board.status(0) is Status.RUNNING
    write_lease(store.directory, Lease(1, None, None, None, 0.0))
    assert interrupted_for_reading(store, board, running) == 2
    assert [board.status(i) for i in (0, 1, 2)] == [Status.CANCELLED, Status.CANCELLED, Status.QUEUED]
    assert store.read_record(left[0].id, saved.spec.plan, saved.spec.ids.of).status == "running"
    assert interrupted_note(store, 1).startswith(
        f"1 partition recorded running but no executor owns backfill {store.id}"
    )
    assert interrupted_note(store, 2).startswith("2 partitions recorded running")
    assert interrupted_note(store, 2).endswith(f"backfill --continue {store.id} settles and resumes them")


def test_a_summary_says_what_the_manifest_and_counts_say(saved):
    """Fields from the manifest; incomplete until every partition succeeded or was skipped, then complete; last
    activity from the directory's time once something was attempted."""
    store = saved.store
    summary = summarize(store)
    assert (summary.state, summary.total, summary.target_kind, summary.target) == ("incomplete", 3, "command", "true")
    assert (summary.start, summary.timezone, summary.partition) == ("2024-01-01T00:00:00.000000Z", "UTC", "daily")
    assert summary.last_activity == summary.created_at and summary.error is None and summary.decision is None
    record(saved, 0, "succeeded")
    record(saved, 1, "skipped")
    assert summarize(store).state == "incomplete"
    record(saved, 2, "succeeded")
    done = summarize(store)
    assert done.state == "complete" and done.counts == counts(succeeded=2, skipped=1)
    assert done.last_activity == catalog._iso(partitions_stamp(store)) and done.last_activity.endswith("Z")
    assert done.to_json()["state_dir"] == str(store.directory) and done.to_json()["counts"] == done.counts
    assert set(done.to_json()) == {f for f in BackfillSummary.__dataclass_fields__ if f != "directory"} | {"state_dir"}


def test_a_summary_of_given_counts_and_left_running_partitions(saved):
    """Counts given by the caller are used as given; running ones of a gone owner are added to cancelled."""
    given = counts(running=2, cancelled=1)
    summary = summarize(saved.store, counts=given)
    assert summary.counts == counts(cancelled=3) and summary.state == "incomplete"
    write_lease(saved.store.directory, Lease(1, "elsewhere", 1, 1.0, time.time() + 60))
    assert summarize(saved.store, counts=given).counts == given


def test_paused_cancelled_and_marked_backfills_say_so_with_the_decision(saved):
    """A pause, a cancel and a backfill mark are the state, with who, when and why."""
    store = saved.store
    pause = Decision("paused", "ann@box", "2024-01-01T00:00:00Z", "outage")
    write_control(store.directory, Control(paused=pause))
    summary = summarize(store)
    assert summary.state == "paused" and summary.decision == pause.sentence()
    write_control(store.directory, Control(ended=Decision("cancelled", "bo@box", "2024-01-02T00:00:00Z", "wrong")))
    assert summarize(store).state == "cancelled"
    write_control(store.directory, Control(ended=Decision("failed", "bo@box", "2024-01-02T00:00:00Z", "bad")))
    assert summarize(store).state == "marked-failed"


def test_damage_is_named_and_never_takes_the_listing_down(saved, tmp_path):
    """Unreadable records: zero counts, the error, and listed unreadable (a resume would stop on them); a damaged
    control file: the same; a damaged lease: the error; a damaged manifest: listed unreadable; damaged manifest
    fields show as what they are."""
    store = saved.store
    bad = store.partitions / "f00.json"
    bad.write_text("{")
    os.utime(store.partitions, ns=(1, 1))
    summary = summarize(store)
    assert summary.counts == counts() and summary.error and summary.state == "unreadable"
    bad.unlink()
    (store.directory / "control.json").write_text("[")
    assert "control.json" in summarize(store).error and summarize(store).state == "unreadable"
    (store.directory / "control.json").unlink()
    record(saved, 0, "running")
    (store.directory / "lease.json").write_text("{")
    assert "lease.json" in summarize(store).error
    (store.directory / "lease.json").unlink()
    manifest = orjson.loads((store.directory / "manifest.json").read_bytes())
    odd = summarize(store, manifest={**manifest, "start": 5, "end": None, "partition_count": True})
    assert (odd.start, odd.end, odd.total) == ("5", "", 0)
    other = saved_command_backfill(tmp_path / "other", end="2024-01-01")
    (other.store.directory / "manifest.json").write_text("{")
    root = store.directory.parent
    os.rename(other.store.directory, root / other.store.id)
    listed = list_backfills(root)
    by_id = {s.id: s for s in listed}
    assert by_id[other.store.id].state == "unreadable" and by_id[other.store.id].error
    assert by_id[store.id].state == "incomplete"
    assert [s.id for s in listed] == sorted(by_id, reverse=True)
    assert list_backfills(tmp_path / "nowhere") == []


def test_the_cache_s_check_is_pinned(saved):
    """The check binding a cache to its directory is sha256 of a fixed prefix and the sorted JSON of the ID, the
    stamp and the counts, cut to 32 hex digits: caches written by earlier runs stay valid across versions."""
    import hashlib

    store = saved.store
    given = counts(queued=3)
    text = orjson.dumps({"counts": given, "id": store.id, "stamp": 42}, option=orjson.OPT_SORT_KEYS)
    assert catalog._check(store, 42, given) == hashlib.sha256(b"backfill summary 1\0" + text).hexdigest()[:32]


def test_a_summary_names_its_target_interventions_and_activity_exactly(saved):
    """The name, target and kind from the manifest's target (a pipeline's path when there is no template), the
    interventions its audit log holds (and torn lines), the last activity in UTC seconds."""
    from datetime import UTC, datetime

    from engine.store import audit

    store = saved.store
    audit.append(store.directory, [audit.entry(action="MARK"), audit.entry(action="PAUSE")])
    with open(store.directory / audit.AUDIT, "ab") as handle:
        handle.write(b"{torn\n")
    record(saved, 0, "failed")
    summary = summarize(store)
    assert (summary.interventions, summary.torn_interventions) == (2, 1)
    expected = datetime.fromtimestamp(partitions_stamp(store) // 1_000_000_000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert summary.last_activity == expected
    manifest = orjson.loads((store.directory / "manifest.json").read_bytes())
    pipeline = {**manifest, "target": {"kind": "pipeline", "path": "p/pipeline.yml", "name": "shop"}}
    named = summarize(store, manifest=pipeline)
    assert (named.name, named.target, named.target_kind, named.end) == (
        "shop", "p/pipeline.yml", "pipeline", manifest["end"],
    )  # fmt: skip
    broken = summarize(store, manifest={**manifest, "target": "not a mapping"})
    assert (broken.name, broken.target, broken.target_kind) == ("", "", "")


def test_a_running_backfill_is_running_or_paused(saved):
    """An executor holding the lock: running, or paused once an operator paused it; no lock file: not
    running."""
    store = saved.store
    held = FileLock(store.lock_path)
    held.try_acquire()
    try:
        assert summarize(store).state == "running"
        write_control(store.directory, Control(paused=Decision("paused", "a@b", "t", "why")))
        assert summarize(store).state == "paused"
    finally:
        held.release()
    store.lock_path.unlink()
    assert not catalog.is_running(store)


def test_an_unreadable_backfill_is_listed_with_nothing_but_why(saved):
    """Every field empty or zero, the state unreadable and the error the reader gave."""
    store = saved.store
    (store.directory / "manifest.json").write_text("{")
    [listed] = list_backfills(store.directory.parent)
    assert listed.to_json() == {
        "id": store.id, "state_dir": str(store.directory), "name": "", "target": "", "target_kind": "",
        "start": "", "end": "", "timezone": "", "partition": "", "created_at": "", "last_activity": "",
        "total": 0, "counts": counts(), "state": "unreadable", "error": listed.error, "interventions": 0,
        "torn_interventions": 0, "decision": None,
    }  # fmt: skip
    assert "manifest.json" in listed.error


def test_the_interrupted_note_in_full(saved):
    """The line readers print about partitions left running."""
    store = saved.store
    assert interrupted_note(store, 3) == (
        f"3 partitions recorded running but no executor owns backfill {store.id} (its last one ended without "
        "recording their outcome: a full disk, a crash): shown cancelled; "
        f"backfill --continue {store.id} settles and resumes them"
    )


def test_a_failed_error_while_counting_is_named(saved, monkeypatch):
    """Records that cannot be read: the summary carries the reader's own message."""
    from engine.base.errors import StateUnreadable

    def unreadable(store, manifest):
        raise StateUnreadable("partition 3 is damaged")

    monkeypatch.setattr(catalog, "read_counts", unreadable)
    summary = summarize(saved.store)
    assert summary.error == "partition 3 is damaged" and summary.counts == counts()
