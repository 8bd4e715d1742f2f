"""Partition IDs named on the command line: a whole ID with a record is found from its file (a resume of one
partition of a million never hashes the whole plan); any other ID or prefix is found by walking the plan, with
the same answers and refusals."""

from __future__ import annotations

import pytest

from engine.base.errors import BadInput
from engine.dates.formatting import InstantFormatter
from engine.spec.identity import PartitionIds
from engine.store.records import Attempt, PartitionRecord, RecordStatus
from tests.saved_backfills import saved_command_backfill
from tui.cli.resume import resolve_ids


@pytest.fixture
def loaded(tmp_path, monkeypatch):
    """A saved backfill of 60 days whose partition 7 has a record; every ID computed is counted."""
    from engine.execute.backfill import load_backfill

    prepared = saved_command_backfill(tmp_path, end="2024-03-01")
    spec, store = prepared.spec, prepared.store
    interval = spec.plan.interval(7)
    record = PartitionRecord.fresh(
        spec.ids.of(interval.start, interval.end), interval, InstantFormatter(spec.zone), RecordStatus.FAILED
    )
    record.attempts.append(Attempt(run_id="r", status=RecordStatus.FAILED, started_at="2025-01-01T00:00:00Z"))
    store.write_record(record, durable=False)
    loaded = load_backfill(store.id, "states", tmp_path)
    hashed = []
    real = PartitionIds.of
    monkeypatch.setattr(PartitionIds, "of", lambda self, start, end: hashed.append(start) or real(self, start, end))
    return loaded, hashed


def id_of(loaded, index: int) -> str:
    interval = loaded.spec.plan.interval(index)
    return PartitionIds.of(loaded.spec.ids, interval.start, interval.end)


def test_a_whole_id_with_a_record_is_found_from_its_file_without_walking_the_plan(loaded):
    """Partition 7's whole ID (in capitals, as pasted): found, and at most its own ID hashed, not the 60."""
    loaded, hashed = loaded
    wanted = id_of(loaded, 7).upper()
    hashed.clear()
    assert resolve_ids(loaded, [wanted]) == frozenset({7})
    assert len(hashed) <= 2


def test_other_ids_and_prefixes_are_found_by_the_walk_with_the_same_refusals(loaded):
    """A whole ID never attempted, a prefix, both with a recorded whole ID: found; a prefix of no partition and a
    prefix too short are refused naming the value."""
    loaded, _ = loaded
    assert resolve_ids(loaded, [id_of(loaded, 30), id_of(loaded, 50)[:10], id_of(loaded, 7)]) == {30, 50, 7}
    with pytest.raises(BadInput, match="'fffffffffff0' matches no partition"):
        resolve_ids(loaded, ["fffffffffff0"])
    with pytest.raises(BadInput, match="is not a partition ID"):
        resolve_ids(loaded, ["abc"])
