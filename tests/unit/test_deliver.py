"""Getting a request applied exactly once, in-process over a real state store: by this command under the lock
when nobody holds it, by an executor (a thread holding the real flock) when one does, never by both, and a
clear refusal when the holder never answers."""

from __future__ import annotations

import socket
import subprocess
import threading
import time
from pathlib import Path

import orjson
import pytest

from engine.base.errors import Refused
from engine.base.processes import process_identity
from engine.interventions import requests
from engine.interventions.apply import CommandHolder, apply
from engine.interventions.deliver import deliver, owned_elsewhere
from engine.interventions.requests import Request, Result
from engine.store.lease import OTHER_HOST_GRACE, Lease, write_lease
from engine.store.locks import FileLock
from tests.saved_backfills import saved_command_backfill


@pytest.fixture
def holder(tmp_path: Path) -> CommandHolder:
    """A saved 10-day backfill of `true`, nothing attempted, its lock free."""
    prepared = saved_command_backfill(tmp_path, end="2024-01-10")
    return CommandHolder(prepared.store, prepared.spec, prepared.board, "test (PID 1)")


def mark(index: int = 2) -> Request:
    return Request("mark", "fixed by hand", "ops@host", "2026-12-01T00:00:00Z", {"indices": [index], "to": "succeeded"})


def leftovers(holder: CommandHolder) -> list[str]:
    folder = requests.folder(holder.store.directory)
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


class Executor(threading.Thread):
    """Holds the backfill's lock like a live executor and, once told to, answers requests the way it does."""

    def __init__(self, holder: CommandHolder, *, answer: bool = True) -> None:
        super().__init__(daemon=True)
        self.holder, self.answers = holder, answer
        self.lock = FileLock(holder.store.lock_path)
        assert self.lock.try_acquire()
        self.serve = threading.Event()
        self.done = threading.Event()
        self.claimed: list[str] = []

    def run(self) -> None:
        self.serve.wait()
        directory = self.holder.store.directory
        while not self.done.is_set():
            for request_id in requests.pending(directory):
                request = requests.claim(directory, request_id)
                if request is None:
                    continue
                self.claimed.append(request_id)
                if self.answers:
                    requests.answer(directory, request_id, apply(request, self.holder))
            time.sleep(0.01)

    def stop(self) -> None:
        self.done.set()
        if self.is_alive():
            self.join()
        self.lock.release()


def test_with_no_executor_the_command_applies_the_request_itself(holder):
    """The lock is free: the request is applied here, no request file is written, the lock is released."""
    held = []
    result = deliver(holder.store, mark(), lambda: held.append(1) or holder, wait=5)
    assert (result.exit_code, result.changed) == (0, 1) and held == [1]
    assert leftovers(holder) == []
    assert FileLock(holder.store.lock_path).try_acquire()


def test_a_live_executor_applies_the_request_and_the_command_gets_its_answer(holder):
    """The lock is held: the request goes to the executor, which claims and applies it; the command returns
    its answer and leaves no file behind."""
    executor = Executor(holder)
    executor.start()
    executor.serve.set()
    try:
        result = delivered(holder, wait=600)  # the answer is taken as it comes, not at the end of the wait
    finally:
        executor.stop()
    assert (result.exit_code, result.message, result.changed) == (0, "marked 1 partition succeeded", 1)
    assert len(executor.claimed) == 1
    assert leftovers(holder) == []


def test_an_executor_that_never_claims_is_refused_and_the_request_withdrawn(holder):
    """Nobody claims within the wait: a refusal saying nothing changed, and the request is taken back so a
    thawed executor can never apply it later."""
    executor = Executor(holder)  # holds the lock, never serves
    try:
        with pytest.raises(Refused) as raised:
            deliver(holder.store, mark(), lambda: pytest.fail("applied under a held lock"), wait=0.3)
    finally:
        executor.stop()
    assert str(raised.value) == (
        f"the executor of backfill {holder.store.id} did not take the request within 0.3 s: nothing changed; it "
        "may be stopped (SIGSTOP) or hung — backfill reconcile checks its lease"
    )
    assert leftovers(holder) == []
    assert requests.pending(holder.store.directory) == []


def test_a_claim_without_an_answer_is_reported_not_repeated(holder):
    """The executor claimed the request but never answered: the command says so and does not apply it
    itself (the executor may have applied it)."""
    executor = Executor(holder, answer=False)
    executor.start()
    executor.serve.set()
    try:
        with pytest.raises(Refused) as raised:
            deliver(holder.store, mark(), lambda: pytest.fail("applied twice"), wait=0.5)
    finally:
        executor.stop()
    assert str(raised.value) == (
        f"the executor of backfill {holder.store.id} took the request but gave no answer: see backfill audit "
        f"{holder.store.id}"
    )
    assert len(executor.claimed) == 1


def test_an_executor_that_ends_before_claiming_leaves_the_request_to_the_command(holder):
    """The executor stops (lock freed) with the request still pending: the command withdraws it and applies it
    itself, once."""
    executor = Executor(holder)
    applied = []
    result_box: list[Result] = []
    sender = threading.Thread(
        target=lambda: result_box.append(deliver(holder.store, mark(), lambda: applied.append(1) or holder, wait=10)),
        daemon=True,
    )
    sender.start()
    deadline = time.monotonic() + 10
    while not requests.pending(holder.store.directory):  # the command handed the request over
        assert time.monotonic() < deadline
        time.sleep(0.01)
    executor.lock.release()  # the executor ends without claiming
    sender.join(10)
    executor.done.set()
    assert applied == [1] and result_box[0].exit_code == 0
    assert executor.claimed == [] and leftovers(holder) == []


def test_an_owner_on_another_host_gets_the_request_although_the_lock_is_free(holder):
    """Our flock cannot see another host's executor: while its lease (plus the grace) runs, the request goes
    to it; past the grace the command applies it."""
    directory = holder.store.directory
    write_lease(directory, Lease(3, "other-host", 77, 1.0, time.time() + 30))
    assert owned_elsewhere(holder.store)
    with pytest.raises(Refused, match="did not take the request within 0.2 s"):
        deliver(holder.store, mark(), lambda: pytest.fail("applied beside a live owner"), wait=0.2)
    write_lease(directory, Lease(3, "other-host", 77, 1.0, time.time() - OTHER_HOST_GRACE + 30))
    assert owned_elsewhere(holder.store)  # expired, but inside the grace: only slow to renew
    write_lease(directory, Lease(3, "other-host", 77, 1.0, time.time() - OTHER_HOST_GRACE - 1))
    assert not owned_elsewhere(holder.store)
    assert deliver(holder.store, mark(), lambda: holder, wait=1).exit_code == 0


def test_a_live_executor_whose_lock_file_was_removed_gets_the_request(holder):
    """`rm .lock` beside a live executor: the lock is free, but the lease names a live process of this host, so the
    request goes to the executor and is not applied here. A lease naming that PID with another start time (a
    reused PID) names no live owner: the command applies the request."""
    owner = subprocess.Popen(["sleep", "60"])  # the process the lease names; the thread answers for it
    executor = Executor(holder)
    try:
        started, _ = process_identity(owner.pid)
        write_lease(holder.store.directory, Lease(1, socket.gethostname(), owner.pid, started, time.time() + 60))
        holder.store.lock_path.unlink()
        executor.serve.set()
        executor.start()
        result = deliver(holder.store, mark(), lambda: pytest.fail("applied beside a live executor"), wait=5)
        assert result.exit_code == 0 and len(executor.claimed) == 1
        executor.stop()
        write_lease(holder.store.directory, Lease(1, socket.gethostname(), owner.pid, started - 5, time.time() + 60))
        assert deliver(holder.store, mark(3), lambda: holder, wait=1).exit_code == 0
    finally:
        executor.stop()
        owner.kill()
        owner.wait()


def test_our_own_host_and_an_unowned_lease_are_not_elsewhere(holder):
    """A lease of this host (the flock speaks for it), an unowned lease and no lease: not owned elsewhere."""
    directory = holder.store.directory
    assert not owned_elsewhere(holder.store)
    write_lease(directory, Lease(1, socket.gethostname(), 77, 1.0, time.time() + 60))
    assert not owned_elsewhere(holder.store)
    write_lease(directory, Lease(1, None, None, None, time.time() + 60, note="ended"))
    assert not owned_elsewhere(holder.store)


def test_the_request_files_are_claimed_by_exactly_one_side(tmp_path):
    """Submit, claim and answer; a withdrawn request cannot be claimed, a claimed one cannot be withdrawn."""
    first, second = mark(1), mark(2)
    path = requests.submit(tmp_path, first)
    assert path == tmp_path / "requests" / f"{first.id}.json"
    assert orjson.loads(path.read_bytes()) == {
        "format": 1, "id": first.id, "action": "mark", "reason": "fixed by hand", "requested_by": "ops@host",
        "requested_at": "2026-12-01T00:00:00Z", "params": {"indices": [1], "to": "succeeded"},
    }  # fmt: skip
    requests.submit(tmp_path, second)
    assert requests.pending(tmp_path) == sorted([first.id, second.id])
    claimed = requests.claim(tmp_path, first.id)
    assert claimed == first
    assert not requests.withdraw(tmp_path, first)
    assert requests.withdraw(tmp_path, second)
    assert requests.claim(tmp_path, second.id) is None
    assert requests.take_result(tmp_path, first) is None
    requests.answer(tmp_path, first.id, Result(0, "done", 3))
    assert requests.pending(tmp_path) == []
    assert requests.take_result(tmp_path, first) == Result(0, "done", 3)
    assert requests.take_result(tmp_path, first) is None  # taken once
    assert sorted(p.name for p in (tmp_path / "requests").iterdir()) == []


def test_pending_requests_are_listed_oldest_first_without_answers_or_claims(tmp_path):
    """IDs begin with the time they were made; answers and claimed files are not pending."""
    folder = tmp_path / "requests"
    folder.mkdir()
    for name in ("20-b.json", "10-a.json", "15-c.claimed", "12-d.result.json", "13-e.withdrawn"):
        (folder / name).write_text("{}")
    assert requests.pending(tmp_path) == ["10-a", "20-b"]
    assert requests.pending(tmp_path / "none") == []


NOT_PARAMS = b'{"id": 1, "action": "x", "reason": "r", "requested_by": "b", "requested_at": "t", "params": 5}'


@pytest.mark.parametrize("content", [b"{not json", b'{"action": "mark"}', b"[1]", NOT_PARAMS])
def test_a_request_of_another_version_is_answered_not_applied(tmp_path, content):
    """A request file that is not one this version reads is claimed and answered with exit 2, not applied."""
    folder = tmp_path / "requests"
    folder.mkdir()
    (folder / "5-x.json").write_bytes(content)
    assert requests.claim(tmp_path, "5-x") is None
    assert requests.take_result(tmp_path, Request("mark", "", "", "", {}, "5-x")) == Result(
        2, "request 5-x is not a request of this version"
    )
    assert list(folder.iterdir()) == []


def test_a_request_reads_back_with_defaults(tmp_path):
    """A request without params has none; a result without a count changed nothing."""
    assert Request.from_json(
        {"id": 9, "action": "cancel", "reason": "r", "requested_by": "b", "requested_at": "t"}
    ) == Request("cancel", "r", "b", "t", {}, "9")
    assert Result.from_json({"exit_code": "3", "message": 4}) == Result(3, "4", 0)
    assert Result(1, "no", 2).to_json() == {"exit_code": 1, "message": "no", "changed": 2}
    assert Request("a", "r", "b", "t").id != Request("a", "r", "b", "t").id


class LateAnswer(threading.Thread):
    """An executor that claims the request at once but answers only after the command found it claimed (its
    withdraw failed): the answers that come after the command stopped waiting for a claim."""

    def __init__(self, holder: CommandHolder, monkeypatch, *, release_lock: bool) -> None:
        super().__init__(daemon=True)
        self.holder, self.release_lock = holder, release_lock
        self.lock = FileLock(holder.store.lock_path)
        assert self.lock.try_acquire()
        self.withdraw_failed = threading.Event()
        original = requests.withdraw

        def withdraw(directory, request):
            taken_back = original(directory, request)
            if not taken_back:
                self.withdraw_failed.set()
            return taken_back

        monkeypatch.setattr(requests, "withdraw", withdraw)

    def run(self) -> None:
        directory = self.holder.store.directory
        while not (pending := requests.pending(directory)):
            time.sleep(0.01)
        request = requests.claim(directory, pending[0])
        if self.release_lock:
            self.lock.release()  # the executor ends right after claiming
        assert self.withdraw_failed.wait(30)
        requests.answer(directory, pending[0], apply(request, self.holder))


def delivered(holder: CommandHolder, wait: float) -> Result:
    """``deliver`` in a thread, so that a command that never returns fails the test instead of hanging it."""
    box: list = []
    sender = threading.Thread(
        target=lambda: box.append(deliver(holder.store, mark(), lambda: pytest.fail("applied twice"), wait=wait)),
        daemon=True,
    )
    sender.start()
    sender.join(60)
    assert not sender.is_alive(), "deliver never returned"
    return box[0]


def test_a_claim_just_before_the_executor_ends_is_answered_not_applied_again(holder, monkeypatch):
    """The executor claims the request and ends: the command takes the lock, finds the request claimed, and
    waits for the executor's answer instead of applying it a second time."""
    executor = LateAnswer(holder, monkeypatch, release_lock=True)
    executor.start()
    result = delivered(holder, wait=600)
    executor.join(30)
    assert (result.exit_code, result.changed) == (0, 1)
    assert leftovers(holder) == []


def test_a_claim_at_the_deadline_still_gets_its_answer(holder, monkeypatch):
    """The executor claims just as the command's wait ends: the command cannot withdraw it, so it waits the
    same time again for the answer, and returns it."""
    executor = LateAnswer(holder, monkeypatch, release_lock=False)
    executor.start()
    try:
        result = delivered(holder, wait=0.5)
    finally:
        executor.join(30)
        executor.lock.release()
    assert (result.exit_code, result.changed) == (0, 1)


class FencedClaimer(LateAnswer):
    """An executor that claims the request, then finds itself fenced and gives it back unapplied — after the
    command found it claimed."""

    def run(self) -> None:
        directory = self.holder.store.directory
        while not (pending := requests.pending(directory)):
            time.sleep(0.01)
        requests.claim(directory, pending[0])
        assert self.withdraw_failed.wait(30)
        requests.unclaim(directory, pending[0])


def test_a_request_given_back_unapplied_is_withdrawn_not_left_for_later(holder, monkeypatch):
    """Claimed, then given back by a fenced executor while the command waits for the answer: the command
    withdraws it and says nothing changed — no request is left in requests/ for a later executor to apply."""
    executor = FencedClaimer(holder, monkeypatch, release_lock=False)
    executor.start()
    try:
        with pytest.raises(Refused, match="gave the request back unapplied: nothing changed"):
            deliver(holder.store, mark(), lambda: pytest.fail("applied"), wait=1)
    finally:
        executor.join(30)
        executor.lock.release()
    assert leftovers(holder) == []


def test_only_the_executor_a_reconcile_fenced_counts_as_a_fenced_holder_of_the_lock(tmp_path):
    """The lock's holder is the fenced executor only while the lease is unowned, names it as fenced, and no
    executor took over since (the generation file still names it): an ended lease, an owned one, or a new
    generation all send requests the usual way."""
    from engine.store.lease import Lease, write_lease
    from engine.store.ownership import held_by_fenced_owner
    from tests.saved_backfills import saved_command_backfill

    store = saved_command_backfill(tmp_path, end="2024-01-02").store
    store.write_generation(1, 4242, 17.5, "t")
    write_lease(store.directory, Lease(2, None, None, None, 0.0, (), "reconciled", fenced=(4242, 17.5)))
    assert held_by_fenced_owner(store)
    write_lease(store.directory, Lease(2, None, None, None, 0.0, (), "ended"))
    assert not held_by_fenced_owner(store)
    write_lease(store.directory, Lease(3, "h", 4243, 18.0, 9e9, (), None, fenced=(4242, 17.5)))
    assert not held_by_fenced_owner(store)
    write_lease(store.directory, Lease(2, None, None, None, 0.0, (), "reconciled", fenced=(4242, 17.5)))
    store.write_generation(2, 4243, 18.0, "t")  # a takeover since: the lock is the new owner's
    assert not held_by_fenced_owner(store)
    store.write_generation(1, 4242, 17.6, "t")  # the same PID, another process
    assert not held_by_fenced_owner(store)


def test_past_a_fenced_executor_that_still_holds_the_lock_the_command_applies_the_request(holder):
    """A reconcile fenced the executor out (frozen, still holding ``.lock``): it will answer nothing, so the request
    is applied here, once, and no request file is left for it to find when it thaws; a cancel is not failed for the
    ``.children.lock`` it holds. Before the fence, the same holder gets the request (and, never answering, the
    command is refused)."""
    executor = Executor(holder)  # holds the lock and serves nothing: frozen
    try:
        generation = holder.store.read_generation()
        with pytest.raises(Refused, match="did not take the request"):
            deliver(holder.store, mark(), lambda: pytest.fail("applied beside its holder"), wait=0.3)
        fence = (generation.pid, generation.pid_started)
        write_lease(holder.store.directory, Lease(2, None, None, None, 0.0, (), "reconciled", fenced=fence))
        held = []
        result = deliver(holder.store, mark(), lambda: held.append(1) or holder, wait=5)
        assert (result.exit_code, result.changed, held) == (0, 1, [1])
        assert leftovers(holder) == [] and executor.claimed == []
        # The fenced executor holds .children.lock too (as every executor does): a cancel is not failed for it.
        children = FileLock(holder.store.children_lock_path)
        assert children.try_acquire()
        cancel = Request("cancel", "runaway", "ops@host", "2026-12-01T00:00:00Z", {})
        cancelled = deliver(holder.store, cancel, lambda: holder, wait=5)
        assert (cancelled.exit_code, cancelled.message) == (0, f"backfill {holder.store.id} cancelled")
        children.release()
    finally:
        executor.stop()
