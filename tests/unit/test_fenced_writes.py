"""An executor that does not own its lease writes nothing: no summary, no record, no claimed request."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.execute.intervening import RequestPoller
from engine.interventions import requests
from engine.interventions.requests import Request
from engine.store.manifest import now_text
from engine.store.record_writer import RecordWriter
from tests.backfills import child_command
from tests.unit.test_scheduling import prepare


@pytest.fixture
def fenced(tmp_path):
    """An executor whose lease was never renewed (its keeper's validity is long past): it owns nothing, though
    nothing has told it so yet (no fence flag is set)."""
    (tmp_path / ".git").mkdir()
    prepared = prepare(tmp_path, child_command(), 4)
    executor = prepared.executor()
    assert executor.lease is not None and executor.lease.fenced is None
    yield executor
    executor._writer.close()
    prepared.release()


def files(directory: Path) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


def test_a_fenced_executor_asks_its_lease_not_a_flag(fenced):
    """owns() is False for an expired keeper even before any fence flag was set, and it sets one."""
    assert not fenced.owns()
    assert fenced.lease.fenced is not None


def test_a_fenced_executor_writes_no_counts_cache(fenced):
    """The summary `backfill list` reads is not refreshed by an executor past its lease, even when forced."""
    before = files(fenced.store.directory)
    fenced._maybe_write_summary(force=True)
    assert files(fenced.store.directory) == before


def test_a_fenced_executor_leaves_a_queued_request_untouched(fenced):
    """A request waiting in requests/ is neither claimed nor answered nor applied: the owner gets it whole."""
    request = Request("mark", "by hand", "ops@host", now_text(), {"indices": [1], "to": "skipped"})
    requests.submit(fenced.store.directory, request)
    before = files(fenced.store.directory)
    RequestPoller()(fenced)
    assert files(fenced.store.directory) == before


def test_a_request_claimed_just_before_the_fence_is_given_back_unapplied(fenced, monkeypatch):
    """Owned when the poller looks, fenced by the first write: the request is renamed back, nothing written."""
    request = Request("mark", "by hand", "ops@host", now_text(), {"indices": [1], "to": "skipped"})
    requests.submit(fenced.store.directory, request)
    before = files(fenced.store.directory)
    answers = iter([True])
    monkeypatch.setattr(fenced, "owns", lambda: next(answers, False))
    RequestPoller()(fenced)
    assert files(fenced.store.directory) == before


def test_a_record_queued_before_the_fence_is_not_written_after_it(tmp_path):
    """The record writer asks before each write: what an owner queued is dropped once it owns nothing."""
    owner = {"owns": True}
    writer = RecordWriter(tmp_path, lambda: owner["owns"])
    writer.put(tmp_path / "kept.json", b"{}", durable=True)
    writer.drain()
    owner["owns"] = False
    writer.put(tmp_path / "late.json", b"{}", durable=True)
    writer.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kept.json"]
