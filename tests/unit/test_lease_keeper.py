"""The executor's lease keeper in-process over a real state directory: what it writes, when it renews, and every
way it is fenced out (an expiry it slept through, a reconcile, another owner) so that a stale executor never
writes as the owner."""

from __future__ import annotations

import os
import socket
import threading
import time

import pytest

from engine.base.boot_clock import since_boot
from engine.base.errors import StateWriteFailed
from engine.base.processes import process_started
from engine.base.settings import Settings
from engine.interventions.leasing import LeaseKeeper
from engine.store.lease import LEASE, Lease, LeasedAttempt, read_lease, write_lease
from engine.store.state_store import StateStore
from tests.hang_guard import finishes

SHORT = Settings(lease_seconds=30.0, lease_renew_seconds=0.05)
RUNNING = (LeasedAttempt("run-1", 4, 999, 12.5),)


@pytest.fixture
def store(tmp_path):
    directory = tmp_path / "bf-1"
    directory.mkdir()
    return StateStore(directory)


@pytest.fixture(params=["looked at between renewals", "the renewal alone"])
def seen_by(request, monkeypatch) -> str:
    """Another owner's lease is seen by the look at each ownership check, and by the renewal when that look is not
    due (or gone): each path is tested on its own."""
    if request.param == "the renewal alone":
        monkeypatch.setattr(LeaseKeeper, "_taken_by", lambda self: None)
    return request.param


def until(condition, seconds: float = 10.0) -> None:
    """Wait for a state, not for a time."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "the state never came"
        time.sleep(0.01)


def test_the_first_lease_names_this_process_and_what_it_runs(store):
    """Started, the keeper writes its epoch, host, PID and start time, the expiry a lease ahead, and the
    attempts it supervises."""
    keeper = LeaseKeeper(store, 3, SHORT)
    before = time.time()
    keeper.start(lambda: RUNNING, lambda message: None)
    try:
        lease = read_lease(store.directory)
        assert (lease.epoch, lease.host, lease.pid) == (3, socket.gethostname(), os.getpid())
        assert lease.pid_started == process_started(os.getpid())
        assert before + 30 <= lease.expires_at <= time.time() + 30
        assert lease.attempts == RUNNING and lease.note is None
        assert keeper.owns() and keeper.valid_until == lease.expires_at
    finally:
        finishes(keeper.stop)


def test_the_epoch_grows_past_every_earlier_owner(store):
    """A new owner's epoch is above the last one written, and at least its generation."""
    write_lease(store.directory, Lease(8, None, None, None, 0.0, (), "ended"))
    assert LeaseKeeper(store, 2, SHORT).epoch == 9
    assert LeaseKeeper(store, 20, SHORT).epoch == 20
    (store.directory / LEASE).unlink()
    assert LeaseKeeper(store, 0, SHORT).epoch == 0


def test_the_lease_is_renewed_while_the_executor_runs(store):
    """The renewal thread moves the expiry on and keeps the attempts current."""
    running = [RUNNING]
    keeper = LeaseKeeper(store, 1, SHORT)
    keeper.start(lambda: running[0], lambda message: None)
    try:
        first = read_lease(store.directory).expires_at
        running[0] = ()
        until(lambda: read_lease(store.directory).expires_at > first and read_lease(store.directory).attempts == ())
        assert keeper.owns()
    finally:
        finishes(keeper.stop)


def test_an_expiry_slept_through_fences_the_executor(store):
    """Past its expiry (a SIGSTOP longer than the lease) the executor no longer owns the backfill, says why
    once, and never writes the lease again."""
    told = []
    keeper = LeaseKeeper(store, 1, Settings(lease_seconds=30.0, lease_renew_seconds=15.0))
    keeper.start(tuple, told.append)
    try:
        written = (store.directory / LEASE).read_bytes()
        keeper.valid_until = 1_700_000_000.0  # as if it woke up long after its lease ran out
        keeper._valid_until_boot = since_boot() - 1.0
        assert not keeper.owns()
        assert not keeper.owns()
        assert told == ["its lease expired at 2023-11-14T22:13:20Z before it was renewed (was it stopped?)"]
        assert keeper.fenced == told[0]
    finally:
        finishes(keeper.stop)
    assert (store.directory / LEASE).read_bytes() == written  # not even the "ended" lease


def test_a_reconcile_fences_the_executor_with_its_note(store, seen_by):
    """A reconcile raises the epoch and clears the owner: at its next turn the keeper fences itself with the
    reconcile's note, and its stop leaves the reconciled lease alone."""
    told = []
    fenced = threading.Event()
    keeper = LeaseKeeper(store, 1, SHORT)
    keeper.start(tuple, lambda message: (told.append(message), fenced.set()))
    reconciled = Lease(2, None, None, None, time.time(), (), "reconciled lost by ops@host")
    write_lease(store.directory, reconciled)
    assert fenced.wait(10)
    finishes(keeper.stop)
    assert told == ["its lease was taken away (reconciled lost by ops@host)"]
    assert not keeper.owns()
    assert read_lease(store.directory) == reconciled


@pytest.mark.parametrize(
    "taken",
    [
        Lease(1, "other-host", 5, 1.0, 0.0),  # same epoch, another host
        Lease(1, socket.gethostname(), 1, 1.0, 0.0),  # same epoch, another process
        Lease(7, socket.gethostname(), os.getpid(), 1.0, 0.0),  # a newer epoch
    ],
)
def test_another_owner_fences_the_executor(store, taken, seen_by):
    """Any other epoch, host or PID in the file: another owner took it, and this one stops writing."""
    told = []
    fenced = threading.Event()
    keeper = LeaseKeeper(store, 1, SHORT)
    keeper.start(tuple, lambda message: (told.append(message), fenced.set()))
    write_lease(store.directory, taken)
    assert fenced.wait(10)
    finishes(keeper.stop)
    assert told == ["its lease was taken away (another owner took it)"]
    assert read_lease(store.directory) == taken


def test_a_deleted_or_damaged_lease_fences_the_executor(store):
    """A lease that vanished or cannot be read is not ours to renew: fenced, and nothing is written over it."""
    fenced = threading.Event()
    keeper = LeaseKeeper(store, 1, SHORT)
    keeper.start(tuple, lambda message: fenced.set())
    (store.directory / LEASE).write_bytes(b"{damaged")
    assert fenced.wait(10)
    finishes(keeper.stop)
    assert keeper.fenced == "its lease was taken away (another owner took it)"
    assert (store.directory / LEASE).read_bytes() == b"{damaged"


def test_a_clean_stop_leaves_the_lease_unowned(store):
    """The run ended: the lease keeps its epoch, names no owner and says it ended."""
    keeper = LeaseKeeper(store, 4, SHORT)
    keeper.start(lambda: RUNNING, lambda message: None)
    finishes(keeper.stop)
    lease = read_lease(store.directory)
    assert (lease.epoch, lease.host, lease.pid, lease.pid_started, lease.attempts, lease.note) == (
        4, None, None, None, (), "ended"
    )  # fmt: skip
    assert lease.expires_at <= time.time()


def test_a_stop_over_a_damaged_lease_replaces_it(store):
    """A damaged lease at the end (not yet seen by the renewal) is replaced by the ended one."""
    keeper = LeaseKeeper(store, 4, Settings(lease_seconds=30.0, lease_renew_seconds=15.0))
    keeper.start(tuple, lambda message: None)
    (store.directory / LEASE).write_bytes(b"[")
    finishes(keeper.stop)
    assert read_lease(store.directory).note == "ended"


def test_a_lease_that_cannot_be_written_starts_nothing(store):
    """The first lease cannot be written (its directory replaced by a file): one line saying nothing was
    started."""
    keeper = LeaseKeeper(store, 1, SHORT)
    store.directory.rmdir()
    store.directory.write_text("not a directory")
    with pytest.raises(StateWriteFailed) as raised:
        keeper.start(tuple, lambda message: None)
    assert str(raised.value) == (
        f"the lease of backfill {store.id} cannot be written (Not a directory): nothing was started"
    )
    assert keeper._thread is None


def test_a_keeper_never_started_owns_nothing(store):
    """Before its first lease is written the executor owns nothing: owns() is False and says why."""
    keeper = LeaseKeeper(store, 1, SHORT)
    assert not keeper.owns()
    assert keeper.fenced.startswith("its lease expired at 1970-01-01T00:00:00Z")


def test_a_stop_leaves_a_newer_owner_s_lease_alone(store, seen_by):
    """A newer owner wrote its lease before this executor noticed (no renewal due yet): the stop does not
    overwrite it with an ended lease."""
    keeper = LeaseKeeper(store, 1, Settings(lease_seconds=30.0, lease_renew_seconds=15.0))
    keeper.start(tuple, lambda message: None)
    newer = Lease(2, "other-host", 9, 1.0, time.time() + 60)
    write_lease(store.directory, newer)
    finishes(keeper.stop)
    assert read_lease(store.directory) == newer


def test_a_stop_on_a_full_disk_is_quiet(store, monkeypatch):
    """The ended lease cannot be written (a full disk): the stop still returns; the lease just expires."""
    keeper = LeaseKeeper(store, 1, Settings(lease_seconds=30.0, lease_renew_seconds=15.0))
    keeper.start(tuple, lambda message: None)

    def full(directory, lease):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("engine.interventions.leasing.write_lease", full)
    finishes(keeper.stop)
    assert read_lease(store.directory).note is None  # the running lease, left to expire


def test_a_renewal_that_fails_once_is_retried(store, monkeypatch):
    """One renewal fails (a full disk for a moment): the keeper tries again at its next turn and stays the
    owner."""
    from engine.interventions import leasing

    original, failures = leasing.write_lease, []

    def flaky(directory, lease):
        if not failures:
            failures.append(1)
            raise OSError(28, "No space left on device")
        original(directory, lease)

    keeper = LeaseKeeper(store, 1, SHORT)
    keeper.start(tuple, lambda message: None)
    first = read_lease(store.directory).expires_at
    monkeypatch.setattr(leasing, "write_lease", flaky)
    try:
        until(lambda: failures and read_lease(store.directory).expires_at > first)
        assert keeper.owns()
    finally:
        finishes(keeper.stop)


def test_another_host_with_our_pid_and_epoch_fences_the_executor(store, seen_by):
    """The same epoch and PID written from another host is another owner too."""
    fenced = threading.Event()
    keeper = LeaseKeeper(store, 1, SHORT)
    keeper.start(tuple, lambda message: fenced.set())
    write_lease(store.directory, Lease(1, "other-host", os.getpid(), 1.0, 0.0))
    assert fenced.wait(10)
    finishes(keeper.stop)


def test_a_turn_before_the_renewal_is_due_keeps_waiting(store):
    """Renewing every 1.5 s, the thread wakes every second: a turn that finds the renewal not yet due waits
    for the next one, and the lease is renewed all the same."""
    keeper = LeaseKeeper(store, 1, Settings(lease_seconds=30.0, lease_renew_seconds=1.5))
    keeper.start(tuple, lambda message: None)
    try:
        first = read_lease(store.directory).expires_at
        until(lambda: read_lease(store.directory).expires_at > first)
    finally:
        finishes(keeper.stop)


def test_stop_returns_once_the_renewal_thread_has_ended(store):
    """After stop() no renewal can race the ended lease: the thread is gone."""
    keeper = LeaseKeeper(store, 1, SHORT)
    keeper.start(tuple, lambda message: None)
    finishes(keeper.stop)
    assert not keeper._thread.is_alive()
    assert read_lease(store.directory).note == "ended"


def test_a_stopped_keeper_keeps_the_ownership_it_had_when_it_stopped(store):
    """Past stop() the lease is given up, not lapsed: a shutdown outlasting its validity (warm runners closing)
    does not fence the run's last writes; a keeper fenced before it stopped stays fenced."""
    keeper = LeaseKeeper(store, 4, SHORT)
    keeper.start(lambda: RUNNING, lambda message: None)
    finishes(keeper.stop)
    keeper.valid_until = time.time() - 60  # the shutdown took longer than the lease held
    assert keeper.owns() and keeper.fenced is None
    fenced = LeaseKeeper(store, 5, SHORT)  # never started: its validity long past
    finishes(fenced.stop)
    assert not fenced.owns()


def test_the_lease_carries_its_expiry_on_this_boot_s_clock(store):
    """The lease names this boot and when it runs out on the boot clock (what a same-host reconcile judges by,
    whatever the wall clock says), a lease ahead of the moment it was written, renewal after renewal."""
    from engine.base.boot_clock import boot_id

    keeper = LeaseKeeper(store, 1, SHORT)
    before = since_boot()
    keeper.start(lambda: RUNNING, lambda message: None)
    try:
        first = read_lease(store.directory)
        assert first.boot == boot_id() and first.boot
        assert before + 30 <= first.expires_boot <= since_boot() + 30
        until(lambda: read_lease(store.directory).expires_boot > first.expires_boot)
    finally:
        finishes(keeper.stop)


def test_the_lease_states_the_grace_other_hosts_give_it(store):
    """BACKFILL_OTHER_HOST_GRACE where the executor runs is written into its lease, so every reader on another
    host waits that long past the expiry, whatever its own setting."""
    from dataclasses import replace

    keeper = LeaseKeeper(store, 1, replace(SHORT, other_host_grace=7.5))
    keeper.start(lambda: RUNNING, lambda message: None)
    try:
        lease = read_lease(store.directory)
        assert lease.host_grace == 7.5 and lease.held_elsewhere_until() == lease.expires_at + 7.5
    finally:
        finishes(keeper.stop)


@pytest.mark.parametrize("how", ["removed", "moved", "replaced", "a file"])
def test_a_store_directory_that_is_no_longer_the_one_taken_over_fences_the_keeper(store, tmp_path, how):
    """Removed, moved away, another directory in its place or a file there: the keeper no longer owns the
    backfill, says why once, and the lease is not written again at that path."""
    keeper = LeaseKeeper(store, 1, SHORT)
    told: list[str] = []
    keeper.start(tuple, told.append)
    try:
        assert keeper.owns()
        moved = tmp_path / "elsewhere"
        store.directory.rename(moved)
        if how == "replaced":
            store.directory.mkdir()
        elif how == "a file":
            store.directory.write_text("")
        elif how == "removed":
            for path in moved.iterdir():
                path.unlink()
            moved.rmdir()
        until(lambda: not keeper.owns())  # looked at every few milliseconds
        assert told == [f"its state directory {store.directory} was removed or moved while it ran"]
        assert not keeper.owns() and len(told) == 1
        assert not (store.directory / LEASE).exists()
    finally:
        keeper.stop()


def test_a_store_directory_that_cannot_be_looked_at_is_not_taken_for_removed(store, monkeypatch):
    """An error other than its absence (EIO: a network file system's hiccup, a disk's) is no proof of removal: the
    keeper still owns the backfill. (The error is simulated: a real one cannot be made on demand.)"""
    import errno

    from engine.interventions import leasing

    keeper = LeaseKeeper(store, 1, SHORT)
    keeper.start(tuple, lambda message: None)
    real_stat = os.stat

    looks: list[str] = []

    def failing(path, *args, **kwargs):
        if os.fspath(path) == os.fspath(store.directory):
            looks.append(os.fspath(path))
            raise OSError(errno.EIO, "Input/output error")
        return real_stat(path, *args, **kwargs)

    try:
        monkeypatch.setattr(leasing.os, "stat", failing)
        looked = time.monotonic() + 20 * leasing.DIRECTORY_CHECK_SECONDS
        while time.monotonic() < looked:  # long enough for several looks at the directory
            assert keeper.owns()
        assert looks
    finally:
        monkeypatch.undo()
        keeper.stop()


class BootClock:
    """A boot clock the test moves by hand; it counts how often it was read (each renewal turn reads it)."""

    def __init__(self, start: float) -> None:
        self.now, self.reads = start, 0

    def __call__(self) -> float:
        self.reads += 1
        return self.now


def test_the_lease_is_renewed_when_due_and_not_before(store, monkeypatch):
    """Turn after turn the thread leaves a lease that is not yet due alone, and renews it once a full renewal
    interval has passed on the boot clock (exactly then, not a turn later)."""
    from engine.interventions import leasing

    clock = BootClock(1000.0)
    monkeypatch.setattr(leasing, "since_boot", clock)
    keeper = LeaseKeeper(store, 1, Settings(lease_seconds=30.0, lease_renew_seconds=0.25))
    keeper.start(tuple, lambda message: None)
    try:
        first = read_lease(store.directory)
        assert first.expires_boot == 1030.0
        seen = clock.reads
        until(lambda: clock.reads >= seen + 6)  # three turns or more, the clock standing still
        assert read_lease(store.directory) == first  # not written again
        clock.now = 1000.25  # exactly one renewal interval later
        until(lambda: read_lease(store.directory).expires_boot == 1030.25)
        assert keeper.owns()
    finally:
        finishes(keeper.stop)


def test_the_last_instant_of_the_lease_is_still_owned(store, monkeypatch):
    """At its expiry's very instant the executor still owns the backfill; a moment past it, it is fenced."""
    from engine.interventions import leasing

    clock = BootClock(1000.0)
    monkeypatch.setattr(leasing, "since_boot", clock)
    keeper = LeaseKeeper(store, 1, Settings(lease_seconds=30.0, lease_renew_seconds=15.0))
    keeper.start(tuple, lambda message: None)
    try:
        clock.now = 1030.0
        assert keeper.owns()
        clock.now = 1030.001
        assert not keeper.owns()
    finally:
        finishes(keeper.stop)


def test_the_directory_is_looked_at_every_few_milliseconds_not_at_every_write(store, monkeypatch):
    """A hundred ownership checks in a row look at the store's directory a few times, not a hundred (a stat at
    every write cost ~5 % of a backfill of `true`)."""
    from engine.interventions import leasing

    keeper = LeaseKeeper(store, 1, SHORT)
    keeper.start(tuple, lambda message: None)
    looks: list[object] = []
    real = leasing._replaced
    try:
        monkeypatch.setattr(leasing, "_replaced", lambda *args: looks.append(args) or real(*args))
        assert all(keeper.owns() for _ in range(100))
        assert 1 <= len(looks) <= 50
    finally:
        monkeypatch.undo()
        finishes(keeper.stop)


def test_the_renewal_thread_is_a_named_daemon(store):
    """The renewal thread is called `lease` (what a stack dump shows) and never holds a dying process open."""
    keeper = LeaseKeeper(store, 1, SHORT)
    keeper.start(tuple, lambda message: None)
    try:
        assert keeper._thread.name == "lease" and keeper._thread.daemon
    finally:
        finishes(keeper.stop)


def test_a_lease_taken_over_is_seen_at_the_next_ownership_check_not_the_next_renewal(store):
    """A takeover that nothing stopped (the lock files removed) writes its own lease: the executor sees it at its
    next ownership check, a few milliseconds later, instead of at its next renewal (up to 15 s, launching beside
    the new owner until then). Its own renewal, a removed lease and a damaged one are no proof of another owner
    there (the renewal decides those)."""
    from engine.interventions import leasing

    keeper = LeaseKeeper(store, 1, Settings(lease_seconds=60.0, lease_renew_seconds=15.0))
    keeper.start(tuple, lambda message: None)

    def owns_now() -> bool:
        keeper._next_directory_check = 0.0  # due: the look is every DIRECTORY_CHECK_SECONDS
        return keeper.owns()

    try:
        assert leasing.DIRECTORY_CHECK_SECONDS <= 0.01
        keeper._write()  # a renewal
        assert owns_now()
        write_lease(store.directory, read_lease(store.directory))  # ours, read before the renewal noted it
        assert owns_now()
        (store.directory / LEASE).unlink()
        assert owns_now()
        (store.directory / LEASE).write_bytes(b"{damaged")
        assert owns_now()
        write_lease(
            store.directory, Lease(2, socket.gethostname(), os.getpid() + 1, 1.0, time.time() + 60, note="taking over")
        )
        assert not owns_now()
        assert keeper.fenced == "its lease was taken away (taking over)"
    finally:
        finishes(keeper.stop)
