"""An executor that does not own its lease writes nothing: no summary, no record, no claimed request."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

import engine.interventions.apply as applying
from engine.base.errors import Fenced
from engine.execute import intervening
from engine.execute.intervening import RequestPoller
from engine.interventions import requests
from engine.interventions.requests import Request, Result
from engine.store import audit
from engine.store.manifest import now_text
from engine.store.record_writer import RecordWriter
from engine.store.status import Status
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


@pytest.fixture
def owning(fenced, monkeypatch):
    """The same executor, taken to own its lease (no loop runs here to renew it): it applies what it is sent."""
    monkeypatch.setattr(fenced, "owns", lambda: True)
    return fenced


def skip_request(index: int) -> Request:
    return Request("mark", "by hand", "ops@host", now_text(), {"indices": [index], "to": "skipped"})


def test_an_owner_applies_waiting_requests_oldest_first_and_answers_each(owning):
    """Each waiting request is claimed, applied as this executor (named in the audit with its generation and PID)
    and answered, oldest first."""
    directory = owning.store.directory
    first, second = skip_request(0), Request("set", "slower", "ops@host", now_text(), {"max_parallel": 1})
    for request in (first, second):
        requests.submit(directory, request)
    RequestPoller()(owning)
    assert requests.pending(directory) == []
    assert [requests.take_result(directory, request).exit_code for request in (first, second)] == [0, 0]
    assert owning.board.status(0).label == "skipped" and owning.requested_parallel == 1
    generation = owning.takeover.generation
    [line, *_] = [entry for entry in audit.read(directory).entries if entry.get("partition_id")]
    assert line["applied_by"] == f"executor generation {generation.number} (PID {generation.pid} on {generation.host})"


def test_requests_are_looked_for_at_most_every_half_second(owning, monkeypatch):
    """A request sent just after a look waits for the next one, half a second later, not a turn of the loop."""
    clock = {"now": 1000.0}
    monkeypatch.setattr(intervening.time, "monotonic", lambda: clock["now"])
    poller = RequestPoller()
    poller(owning)
    waiting = skip_request(1)
    requests.submit(owning.store.directory, waiting)
    clock["now"] += intervening.POLL_SECONDS - 0.01
    poller(owning)
    assert requests.pending(owning.store.directory) == [waiting.id]
    clock["now"] += 0.01
    poller(owning)
    assert requests.pending(owning.store.directory) == []


def test_a_store_that_cannot_be_written_refuses_the_request_saying_why(owning, monkeypatch):
    """The request's writes fail (a full disk): it is answered with the error and that nothing changed."""

    def full(request, holder):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(applying, "apply", full)
    sent = skip_request(1)
    requests.submit(owning.store.directory, sent)
    RequestPoller()(owning)
    result = requests.take_result(owning.store.directory, sent)
    assert (result.exit_code, result.message) == (
        1, "the request could not be applied (No space left on device): nothing changed"
    )  # fmt: skip


def test_a_lease_lost_part_way_is_answered_and_a_lease_lost_before_the_answer_leaves_none(owning, monkeypatch):
    """Fenced after a first write: the answer says so and points to the audit. Fenced once applied: no answer is
    written (it would be a write too); the request stays claimed for its sender to find unanswered."""
    directory = owning.store.directory

    def fenced_midway(request, holder):
        holder.before_write()
        raise Fenced("lost")

    monkeypatch.setattr(applying, "apply", fenced_midway)
    sent = skip_request(1)
    requests.submit(directory, sent)
    RequestPoller()(owning)
    result = requests.take_result(directory, sent)
    assert (result.exit_code, result.message) == (1, "the executor lost its lease part-way through: see backfill audit")
    monkeypatch.setattr(applying, "apply", lambda request, holder: Result(0, "applied"))
    answers = iter([True, False])  # owned when the poller looks; no longer when it would answer
    monkeypatch.setattr(owning, "owns", lambda: next(answers, False))
    late = skip_request(2)
    requests.submit(directory, late)
    RequestPoller()(owning)
    assert requests.take_result(directory, late) is None
    assert requests.pending(directory) == []  # claimed, not given back: its sender finds it unanswered


def test_a_fenced_holder_refuses_its_first_write(fenced):
    """The holder asks the lease before each write: a fenced executor's first write raises Fenced, counted nowhere."""
    holder = intervening.ExecutorHolder(fenced)
    with pytest.raises(Fenced, match=f"executor of backfill {fenced.store.id} no longer owns its lease"):
        holder.before_write()
    assert holder.writes == 0


def test_a_request_withdrawn_before_its_claim_does_not_hold_up_the_next(owning, monkeypatch):
    """The sender withdrew the oldest request between the listing and its claim: the next one is still applied in
    the same look."""
    directory = owning.store.directory
    withdrawn, kept = skip_request(0), skip_request(1)
    for request in (withdrawn, kept):
        requests.submit(directory, request)
    claim = requests.claim
    monkeypatch.setattr(intervening.requests, "claim", lambda d, rid: None if rid == withdrawn.id else claim(d, rid))
    RequestPoller()(owning)
    assert requests.take_result(directory, kept).exit_code == 0 and owning.board.status(1).label == "skipped"


def test_the_holder_hands_each_decision_to_the_executor_as_its_screens_see_it(owning):
    """What an applied request decides reaches the executor, as its snapshot (what every screen reads) shows: a
    pause and its resume, a new --max-parallel, a mark on the board, a stop of single partitions, a cancel (none
    running: zero stopped), and an end of the whole backfill."""
    holder = intervening.ExecutorHolder(owning)
    holder.pause(True, "paused by ops: the warehouse is busy")
    assert owning.snapshot().intervention == "paused by ops: the warehouse is busy" and owning.paused is not None
    holder.pause(False, "resumed")
    assert owning.paused is None and owning.snapshot().intervention is None
    assert holder.set_parallel(3) == "3 at once now" and owning.snapshot().parallel[0] == 3
    holder.update([(2, Status.SKIPPED, 1)])
    assert (owning.board.status(2), owning.board.attempts(2)) == (Status.SKIPPED, 1)
    holder.stop_partitions([0], "by ops: a bad day")
    assert owning.snapshot().intervention == "by ops: a bad day"
    assert holder.cancel("cancelled by ops: wrong range") == 0
    snapshot = owning.snapshot()
    assert (snapshot.intervention, snapshot.stop_reason) == ("cancelled by ops: wrong range", "by ops: wrong range")
    holder.end("succeeded", "marked succeeded by ops")
    assert owning.snapshot().intervention == "marked succeeded by ops"
    assert owning._decide_outcome().value == "succeeded"  # what the run then ends as
