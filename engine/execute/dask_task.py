"""What runs on a Dask worker for one attempt: the child, started exactly as locally, its output streamed back.

Dask cannot interrupt a running task, so the task owns its child's whole life: it
starts it in its own session, reports its identity and every chunk of output as
events on the backfill's topic, stops it when the executor's heartbeat goes
silent (a dead executor must not leave remote children running), clears its
process group when it ends, and returns its exit status.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import socket
import subprocess
import tempfile
import threading
import time
from typing import Any

from engine.base.parent_death import start_bound_to_thread
from engine.base.processes import Tracked, TrackedFamily, leftovers_of, process_identity, signal_own_group
from engine.execute.launcher import group_alive

CHUNK = 64 * 1024  # at most this much output per event: nothing is buffered without bound
QUIET_START = 0.05  # seconds a child may run before its task reports it started
FENCED = 126  # what a task returns when a newer executor fenced its generation off before its child started
RAN_ALREADY = 125  # what a task returns when its run ID's child already ran (the scheduler ran it again)

# This worker process's children, by backfill: what a newer executor's takeover stops (``stop_generation``),
# including children whose identity never reached their dead executor's records. A generation fenced off here
# starts no child any more; the lock makes fencing and starting exclusive.
_LOCK = threading.Lock()
_CHILDREN: dict[str, tuple[str, int, subprocess.Popen[bytes]]] = {}  # run ID → (backfill ID, generation, child)
_FENCES: dict[str, int] = {}  # backfill ID → the lowest generation still allowed to start children


def run_child(
    argv: list[str],
    cwd: str,
    env: dict[str, str],
    run_id: str,
    topic: str,
    beat: str,
    grace: float,
    silence: float,
    backfill_id: str,
    generation: int,
    given: dict[str, bytes] | None = None,
) -> int:
    """Run one attempt's child on this worker; its exit status (negative: killed by that signal). ``given``: for
    a flag of the argv, the bytes of the file it names on the executor's machine, put in a file of this worker's
    own for the child (the backfill's state directory need not be shared)."""
    from distributed import get_worker

    worker = get_worker()
    claim = _claim(backfill_id, run_id, generation)
    if claim == "ran":
        why = "this attempt's child already ran: the scheduler ran its task again after a worker was lost"
        worker.log_event(topic, {"run_id": run_id, "kind": "start_failed", "error": why, "code": RAN_ALREADY})
        return RAN_ALREADY
    with _LOCK:
        if claim == "fenced" or generation < _FENCES.get(backfill_id, 0):
            why = "a newer executor of this backfill took it over before its child started"
            worker.log_event(topic, {"run_id": run_id, "kind": "start_failed", "error": why, "code": FENCED})
            return FENCED
        made: list[str] = []  # the given files' copies on this worker, removed when the child ends
        try:
            process = _spawn(_with_given(argv, given or {}, made), cwd, env)
        except OSError as error:
            _remove(made)
            why = error.strerror or str(error)
            worker.log_event(topic, {"run_id": run_id, "kind": "start_failed", "error": why, "code": 127})
            return 127
        _CHILDREN[run_id] = (backfill_id, generation, process)
    try:
        started, birth = process_identity(process.pid)
        identity = {
            "pid": process.pid,
            "pgid": process.pid,
            "host": socket.gethostname(),
            "worker": worker.address,
            "pid_started": started,
            "pid_birth": birth,
        }
        chunks: list[int] = []
        reader = threading.Thread(target=_stream, args=(worker, topic, run_id, process, chunks), daemon=True)
        reader.start()
        exited = _ExitWatch(process)
        # A child that ends at once is reported once, with its exit: one message fewer per short attempt. Until
        # it is reported, a takeover finds it through this worker's registry.
        if not exited.wait(QUIET_START):
            worker.log_event(topic, {"run_id": run_id, "kind": "started", **identity})
            _watch_heartbeat(exited, process, beat, grace, silence)
        # What the child left in its group is held before the reap, while its zombie keeps the group's number.
        # Without a pidfd the wait above reaped the child already: its number may be another process's now.
        leftovers = leftovers_of(process.pid, exited.fd) if process.returncode is None else TrackedFamily()
        exited.close()
        code = process.wait()
        # Stopped before the output is read to its end: a leftover holding the child's output open (`sleep 600 &`
        # in a shell) would otherwise keep the attempt waiting for as long as it runs.
        leftovers.stop(grace)
        reader.join()
        # The outcome travels with the output, in the same stream: the executor needs no second round trip to
        # fetch the task's result, and knows how many chunks to write before the log is whole.
        worker.log_event(topic, {"run_id": run_id, "kind": "exit", "code": code, "chunks": chunks[0], **identity})
    finally:
        _remove(made)
        with _LOCK:
            _CHILDREN.pop(run_id, None)
    return code


def _with_given(argv: list[str], given: dict[str, bytes], made: list[str]) -> list[str]:
    """``argv`` with the value of each given flag replaced by a temporary file of this worker's holding its bytes
    (each listed in ``made``)."""
    argv = list(argv)
    for flag, data in given.items():
        descriptor, path = tempfile.mkstemp(prefix="backfill-given-", suffix=".json")
        made.append(path)
        with os.fdopen(descriptor, "wb") as file:
            file.write(data)
        argv[argv.index(flag) + 1] = path
    return argv


def _remove(paths: list[str]) -> None:
    for path in paths:
        with contextlib.suppress(OSError):
            os.unlink(path)


def _spawn(argv: list[str], cwd: str, env: dict[str, str]) -> subprocess.Popen[bytes]:
    """The child in its own session, killed if the worker thread that started it dies (a worker killed or lost),
    so a retry elsewhere never runs beside it (Linux; elsewhere the executor's signal must do)."""
    return start_bound_to_thread(argv, cwd, env)


def _stream(worker: Any, topic: str, run_id: str, process: subprocess.Popen[bytes], chunks: list[int]) -> None:
    assert process.stdout is not None
    sequence = 0
    while True:
        data = process.stdout.read1(CHUNK)  # type: ignore[attr-defined]
        if not data:
            break
        worker.log_event(topic, {"run_id": run_id, "kind": "log", "seq": sequence, "data": data})
        sequence += 1
    chunks.append(sequence)


class _ExitWatch:
    """Waits for a child's exit and wakes the moment it comes (a pidfd): ``Popen.wait(timeout)`` polls, up to
    50 ms late, which every attempt would pay."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        self._process = process
        try:
            self.fd: int | None = os.pidfd_open(process.pid)
        except (AttributeError, OSError):  # not Linux 5.3+: poll
            self.fd = None

    def wait(self, timeout: float) -> bool:
        """Whether the child exited within ``timeout`` seconds (it is not reaped)."""
        if self.fd is None:
            try:
                self._process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                return False
            return True
        ready, _, _ = select.select([self.fd], [], [], timeout)
        return bool(ready)

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def _watch_heartbeat(
    exited: _ExitWatch, process: subprocess.Popen[bytes], beat: str, grace: float, silence: float
) -> None:
    """Until the child exits: when the executor's heartbeat (a scheduler variable it refreshes every second) has
    been silent for ``silence`` seconds, SIGTERM the child's group, then SIGKILL after ``grace``.

    Silence is a value that stopped changing, timed on this worker's monotonic clock: the value is the executor's
    wall clock, and comparing it with ours would take skew between the hosts, or a step of either clock, for
    silence and stop live work."""
    from distributed import Variable, get_client

    variable = None  # made on the first half-second: a short child never needs it
    stopping_since: float | None = None
    heard: float | None = None
    heard_at = time.monotonic()
    while True:
        if exited.wait(0.5):  # returns the moment the child exits: no task outlasts its child by a tick
            return
        try:
            variable = variable or Variable(beat, client=get_client())
            value = float(variable.get(timeout=2))
        except Exception:  # the scheduler unreachable, or no beat: nothing heard
            value = heard
        if value != heard:
            heard, heard_at = value, time.monotonic()
        if stopping_since is None and time.monotonic() - heard_at > silence:
            stopping_since = time.monotonic()
            _signal_child(process, signal.SIGTERM)
        elif stopping_since is not None and time.monotonic() - stopping_since >= grace:
            _signal_child(process, signal.SIGKILL)


def _signal_child(process: subprocess.Popen[bytes], signum: int) -> None:
    """Signal this worker's own child's group, only while the child is unreaped (its PID, and so the group's
    number, cannot belong to another process)."""
    signal_own_group(None, process.pid, signum, reaped=process.returncode is not None)


def _claim(backfill_id: str, run_id: str, generation: int) -> str:
    """Whether this task may start its run ID's child: ``"claimed"`` the first time the cluster's scheduler hears of
    it, ``"ran"`` after (a result lost with its worker and recomputed, or a task run again while its first copy
    still runs on a worker taken for lost), ``"fenced"`` once a newer executor took the backfill over. Claims and
    fences live in the scheduler's metadata, where every worker sees them — one that joined after the takeover's
    sweep too — and are read and written there in one step: a claim read, then written by a second message, let two
    tasks claiming at once both through."""
    from distributed import get_client

    def claim_once(owner: str, run_id: str, generation: int, dask_scheduler: Any = None) -> str:
        # Run by the scheduler in its event loop, between any two messages. Defined here, it travels by value: the
        # scheduler's machine needs nothing of ours installed.
        if generation < dask_scheduler.get_metadata(["backfill", owner, "fence"], default=0):
            return "fenced"
        key = ["backfill", owner, "ran", run_id]
        if dask_scheduler.get_metadata(key, default=None) is not None:
            return "ran"
        dask_scheduler.set_metadata(key, True)
        return "claimed"

    return str(get_client().run_on_scheduler(claim_once, backfill_id or "-", run_id, generation))


def raise_fence(client: Any, backfill_id: str, below: int) -> None:
    """A takeover's first step on a scheduler: no task of a generation below ``below`` claims a run ID there any
    more, on whichever worker it runs (the workers' own fences reach only those present at the sweep)."""

    def fence_once(owner: str, below: int, dask_scheduler: Any = None) -> None:
        key = ["backfill", owner, "fence"]
        dask_scheduler.set_metadata(key, max(below, dask_scheduler.get_metadata(key, default=0)))

    client.run_on_scheduler(fence_once, backfill_id or "-", below)


def forget_claims(client: Any, backfill_id: str) -> None:
    """Drop a backfill's claims from the scheduler once its executor is done with the cluster."""
    client.set_metadata(["backfill", backfill_id or "-", "ran"], {})


def signal_group(group: int, signum: int, started: float | None = None, birth: str | None = None) -> bool:
    """Run on a worker through ``client.run``: signal a child's process group there; whether it is alive. The
    worker's own child is signalled while unreaped; a child of another worker process on this host (its worker
    died) only once verified by its start time, and through a handle on it. A bare group number is never
    signalled: it may have been reused."""
    with _LOCK:
        own = [process for _, _, process in _CHILDREN.values() if process.pid == group]
    if own:
        _signal_child(own[0], signum)
        return group_alive(group)  # not poll(): the child is reaped by run_child, after its leftovers are held
    family = TrackedFamily()
    leader = Tracked.verify(group, started, birth)
    if leader is None:
        return False
    family.add(leader)
    family.signal(signum)
    alive = family.alive()
    family.close()
    return alive


def can_see(path: str) -> bool:
    """Run on every worker before the first launch: whether the target exists at the same path there."""
    return os.path.exists(path)


def stop_generation(backfill_id: str, below: int, signum: int) -> list[int]:
    """Run on every worker through ``client.run`` when an executor takes a backfill over: no task of an older
    generation starts a child here any more, and those running are signalled; the groups still alive."""
    with _LOCK:
        _FENCES[backfill_id] = max(below, _FENCES.get(backfill_id, 0))
        children = [
            process for owner, generation, process in _CHILDREN.values() if owner == backfill_id and generation < below
        ]
    alive = []
    for process in children:
        _signal_child(process, signum)
        if group_alive(process.pid):
            alive.append(process.pid)
    return alive
