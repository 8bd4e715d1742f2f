"""The executor's lease, kept by a thread of its own so that a long hook (a snapshot, a verification query)
never lets it lapse, while a stopped process (SIGSTOP, a frozen VM) lets it lapse as it should."""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime

from engine.base.boot_clock import boot_id, since_boot
from engine.base.errors import StateWriteFailed
from engine.base.processes import process_started
from engine.base.settings import Settings
from engine.store.lease import LEASE, Lease, LeasedAttempt, read_lease, write_lease
from engine.store.state_store import StateStore

DIRECTORY_CHECK_SECONDS = 0.005  # how often ownership looks at the store's directory (removed or moved?)


class LeaseKeeper:
    """Writes the backfill's lease, renews it, and fences its executor out when it is no longer the owner:
    its own renewal came too late (the lease expired while it was stopped), or someone reconciled it."""

    def __init__(self, store: StateStore, generation: int, settings: Settings) -> None:
        self.store = store
        self.seconds, self.renew = settings.lease_seconds, settings.lease_renew_seconds
        self.host_grace = settings.other_host_grace
        previous = read_lease(store.directory)
        self.epoch = max(generation, (previous.epoch + 1) if previous else 0)
        self.host = socket.gethostname()
        self.pid = os.getpid()
        self._started = process_started(self.pid)
        self.valid_until = 0.0  # Unix seconds, for messages: when the lease written last runs out
        # Seconds since boot: past this, nothing may be written as this backfill's owner. Measured on the boot
        # clock, which counts time suspended (a frozen VM lapses) and which no wall-clock step moves.
        self._valid_until_boot = 0.0
        self.fenced: str | None = None
        self._running: Callable[[], tuple[LeasedAttempt, ...]] = tuple
        self._on_fenced: Callable[[str], None] = lambda message: None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._released: bool | None = None  # set by stop(): whether it still owned the lease then
        found = os.stat(store.directory)
        self._directory = (found.st_dev, found.st_ino)  # the store this executor took over, which it writes
        self._next_directory_check = 0.0  # monotonic seconds
        self._written: tuple[int, int] | None = None  # lease.json as this keeper last wrote it (inode, mtime)

    def start(self, running: Callable[[], tuple[LeasedAttempt, ...]], on_fenced: Callable[[str], None]) -> None:
        self._running, self._on_fenced = running, on_fenced
        try:
            self._write()
        except OSError as error:  # before anything runs: say so and start nothing
            raise StateWriteFailed(
                f"the lease of backfill {self.store.id} cannot be written ({error.strerror or error}): "
                "nothing was started"
            ) from None
        self._thread = threading.Thread(target=self._work, name="lease", daemon=True)
        self._thread.start()

    def owns(self) -> bool:
        """Whether this executor may write an outcome now (checked right before each write). Once stopped, the
        answer it had when it stopped: the lease is given up, not lapsed, and a shutdown that outlasts it (warm
        runners closing) must not fence the run's last writes."""
        if self._released is not None:
            return self._released
        if self.fenced is None and since_boot() > self._valid_until_boot:
            self._fence(f"its lease expired at {_when(self.valid_until)} before it was renewed (was it stopped?)")
        if self.fenced is None and (now := time.monotonic()) >= self._next_directory_check:
            # Deleted (`rm -rf logs` to free space) or moved while it ran: a write would make a new, partial store
            # there, and a resume would run again what that store no longer holds. Looked at every few
            # milliseconds, not at every write: a stat of the directory the writer is syncing costs ~5 % of a
            # backfill of `true` (benchmarks/compare_commits.py --scenario exec).
            self._next_directory_check = now + DIRECTORY_CHECK_SECONDS
            if _replaced(self.store.directory, self._directory):
                self._fence(f"its state directory {self.store.directory} was removed or moved while it ran")
            elif (owner := self._taken_by()) is not None:
                # Taken over behind its back (its lock files removed): the renewal would notice only up to
                # 15 s later, launching beside the new owner until then.
                self._fence(f"its lease was taken away ({owner})")
        return self.fenced is None

    def _taken_by(self) -> str | None:
        """Who holds the lease, when lease.json is no longer what this keeper wrote and names another owner."""
        try:
            found = os.stat(self.store.directory / LEASE)
        except OSError:
            return None  # removed: no proof of another owner (the renewal writes it again)
        if (found.st_ino, found.st_mtime_ns) == self._written:
            return None
        try:
            current = read_lease(self.store.directory)
        except Exception:
            return None  # damaged or half-read: the renewal decides
        if current is None or self._ours(current):
            return None  # ours (a renewal being written)
        return current.note or "another owner took it"

    def _ours(self, lease: Lease) -> bool:
        """Whether ``lease`` is the one this keeper writes: its epoch, on this host, by this process."""
        return (lease.epoch, lease.host, lease.pid) == (self.epoch, self.host, self.pid)

    def stop(self) -> None:
        """The run ended: stop renewing and leave the lease unowned (unless someone else owns it now)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._released = self.owns()
        if self._released:
            try:
                current = read_lease(self.store.directory)
            except Exception:  # a damaged lease file: the next owner replaces it
                current = None
            if current is None or current.epoch == self.epoch:
                with contextlib.suppress(OSError):  # a full disk: the lease just expires; nothing runs any more
                    write_lease(self.store.directory, Lease(self.epoch, None, None, None, time.time(), (), "ended"))

    def _write(self) -> None:
        boot_now, now = since_boot(), time.time()
        lease = Lease(
            self.epoch, self.host, self.pid, self._started, now + self.seconds, self._running(),
            boot=boot_id() or None, expires_boot=boot_now + self.seconds, host_grace=self.host_grace,
        )  # fmt: skip
        write_lease(self.store.directory, lease)
        with contextlib.suppress(OSError):
            found = os.stat(self.store.directory / LEASE)
            self._written = (found.st_ino, found.st_mtime_ns)
        self.valid_until, self._valid_until_boot = now + self.seconds, boot_now + self.seconds

    def _work(self) -> None:
        while not self._stop.wait(min(self.renew, 1.0)):
            now = since_boot()
            if not self.owns():
                return
            if now + self.seconds - self._valid_until_boot < self.renew:
                continue  # not due yet (checks every second, renews every `renew` seconds)
            try:
                current = read_lease(self.store.directory)
            except Exception:
                current = None
            if current is None or not self._ours(current):
                what = current.note if current is not None and current.note else "another owner took it"
                self._fence(f"its lease was taken away ({what})")
                return
            try:
                self._write()
            except OSError:
                continue  # retried on the next turn; past the expiry the executor fences itself

    def _fence(self, message: str) -> None:
        if self.fenced is None:
            self.fenced = message
            self._on_fenced(message)


def _replaced(directory: os.PathLike[str] | str, identity: tuple[int, int]) -> bool:
    """Whether the store's directory is no longer the one taken over (``identity``: its device and inode):
    removed, moved away, or another in its place. Another error (a network file system's hiccup) is no proof."""
    try:
        found = os.stat(directory)
    except (FileNotFoundError, NotADirectoryError):
        return True
    except OSError:
        return False
    return (found.st_dev, found.st_ino) != identity


def _when(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
