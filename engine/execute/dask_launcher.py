"""``--launcher dask``: each attempt is one Dask task that runs the child on a worker (see ``dask_task``).

The executor keeps deciding everything (what runs, how many at once, retries,
records); Dask only places tasks on workers. Output comes back as events on the
backfill's topic and is written to the attempt's log here, in order. Stopping
signals the recorded process group on its worker (``client.run``), since a
running task cannot be interrupted.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from engine.base.errors import BadInput
from engine.execute.launcher import ChildSpec
from engine.execute.local_cluster import LocalCluster
from engine.store.records import RecordStatus

if TYPE_CHECKING:
    from engine.guardrails.definition_watch import DefinitionWatch
    from engine.store.records import Attempt, PartitionRecord
    from engine.store.state_store import Generation

BEAT_SECONDS = 1.0
CONNECT_TIMEOUT = 5  # seconds to reach a scheduler at takeover
WATCH_SLACK = 3.0  # a task notices its executor's silence this late at most (its watch tick and variable read)
LOG_END_WAIT = 5.0  # seconds an ended attempt waits for the rest of its output, or for its task's return
# flags naming a file of the state directory: its bytes travel with the task
GIVEN_FILES = ("--judged-files", "--judged-sql")


def stop_remote_attempts(
    backfill_id: str, running: list[PartitionRecord], previous: Generation | None, grace: float
) -> list[str]:
    """Before a new executor starts anything: every child an earlier one left on a Dask cluster is stopped
    (SIGTERM, SIGKILL after ``grace``) and confirmed gone, on each scheduler its records or its generation name.

    Each worker also fences the older generations off (no task of theirs starts a child any more) and stops
    the children it knows of, so a child whose identity never reached the records is found as well. A scheduler
    that cannot be reached is waited out: its tasks stop their children once their executor's heartbeat has
    been silent for their grace (or cannot be read), which bounds the wait. Notes for the operator come back."""
    by_scheduler: dict[str, list[Attempt]] = {}
    for record in running:
        for attempt in record.attempts:
            if (
                attempt.status == RecordStatus.RUNNING
                and attempt.launcher == "dask"
                and (attempt.remote or {}).get("scheduler")
            ):
                by_scheduler.setdefault(attempt.remote["scheduler"], []).append(attempt)
    children_grace = grace
    if previous is not None and previous.cluster:
        by_scheduler.setdefault(previous.cluster, [])
        children_grace = max(grace, previous.cluster_grace)
    below = (previous.number if previous is not None else 0) + 1
    notes = []
    for address, attempts in by_scheduler.items():
        note = _stop_on_scheduler(address, attempts, backfill_id, below, grace, children_grace)
        if note:
            notes.append(note)
    return notes


def _stop_on_scheduler(
    address: str, attempts: list[Attempt], backfill_id: str, below: int, grace: float, children_grace: float
) -> str | None:
    from engine.base.errors import Refused
    from engine.execute.dask_task import raise_fence, signal_group, stop_generation

    _distributed()  # not installed: that error, not a wait for an unreachable scheduler
    try:
        client = _client(address, CONNECT_TIMEOUT)
    except Exception as error:
        waited = 2 * children_grace + BEAT_SECONDS + WATCH_SLACK
        time.sleep(waited)
        return (
            f"the Dask scheduler {address} of the previous executor cannot be reached ({type(error).__name__}): "
            f"waited {waited:.0f}s for its children there to stop themselves"
        )
    try:
        raise_fence(client, backfill_id, below)  # first: a worker that joins after the sweep below is fenced too
        deadline = time.monotonic() + grace
        signum = signal.SIGTERM
        recorded = [a for a in attempts if "pgid" in a.remote]
        while True:
            workers = set(client.scheduler_info().get("workers", {}))
            alive: list[str] = []
            for attempt in recorded:
                worker = attempt.remote["worker"]
                if worker in workers:  # a worker gone took its children with it
                    answer = client.run(
                        signal_group,
                        attempt.remote["pgid"],
                        signum,
                        attempt.pid_started,
                        attempt.pid_birth,
                        workers=[worker],
                        on_error="ignore",
                    )
                    if answer.get(worker) is True:
                        alive.append(f"PID {attempt.pid} on {worker}")
            swept = client.run(stop_generation, backfill_id, below, signum, on_error="ignore")
            alive += [
                f"process group {group} on {worker}"
                for worker, groups in swept.items()
                if isinstance(groups, list)
                for group in groups
            ]
            if not alive:
                return None
            time.sleep(0.2)
            if time.monotonic() > deadline:
                signum = signal.SIGKILL
            if time.monotonic() > deadline + 10:
                raise Refused(f"children of an earlier executor could not be stopped: {', '.join(sorted(set(alive)))}")
    finally:
        client.close()


def scheduler_address(given: str | None) -> str:
    """--dask-scheduler, else DASK_SCHEDULER_ADDRESS, else Dask's ``scheduler-address`` configuration."""
    from engine.spec.backfill_spec import check_scheduler_address

    if given:
        return check_scheduler_address(given, "--dask-scheduler")
    address = os.environ.get("DASK_SCHEDULER_ADDRESS")
    if address:
        return check_scheduler_address(address, "DASK_SCHEDULER_ADDRESS")
    import dask

    address = dask.config.get("scheduler-address", None)
    if not address:
        raise BadInput(
            "--launcher dask needs a scheduler: pass --dask-scheduler tcp://HOST:8786 (or set "
            "DASK_SCHEDULER_ADDRESS), or use --launcher dask-local:N for a local cluster"
        )
    return check_scheduler_address(str(address), "Dask's scheduler-address setting")


def allowed_failures(client: Any) -> int:
    """The scheduler's ``allowed-failures``: how many times it reruns a task whose worker died."""

    def read(dask_scheduler: Any = None) -> int:
        # Defined here, it travels by value: the scheduler's machine needs Dask, nothing of ours.
        import dask

        return int(dask.config.get("distributed.scheduler.allowed-failures"))

    return int(client.run_on_scheduler(read))


def _client(address: str, timeout: float | None = None) -> Any:
    """A client of the scheduler at ``address``, or an error within ``timeout`` seconds (Dask's connect timeout,
    30 s by default). Dask bounds the connection and not the scheduler's answer to its handshake: a port that
    accepts and never answers (another service, a proxy without its backend) held the client, and the backfill
    with it, for ever; another service's greeting (an SSH banner) read as a Dask frame's length raised MemoryError
    with a traceback. So the handshake is tried first, on a thread of its own, under the same deadline."""
    import asyncio

    distributed = _distributed()
    if timeout is None:
        import dask.utils

        timeout = float(dask.utils.parse_timedelta(dask.config.get("distributed.comm.timeouts.connect"), "s"))
    arguments = distributed.Security().get_connection_args("client")
    if address.startswith(("tls://", "wss://")) and arguments.get("ssl_context") is None:
        raise BadInput(
            f"{address} needs Dask's TLS settings: distributed.comm.tls.ca-file, .client.cert and .client.key (or "
            "the DASK_DISTRIBUTED__COMM__TLS__… variables)"
        )
    answered: list[BaseException | None] = []

    async def handshake() -> None:
        # A second more than Dask's own connect takes to give up on a refused or unroutable address (its message
        # says so): past it, the connection was made and the handshake is what never came.
        comm = await asyncio.wait_for(distributed.comm.connect(address, timeout=timeout, **arguments), timeout + 1)
        await comm.close()

    def probe() -> None:
        try:
            asyncio.run(handshake())
            answered.append(None)
        except BaseException as error:  # told on the caller's thread
            answered.append(error)

    thread = threading.Thread(target=probe, name="dask handshake", daemon=True)
    thread.start()
    thread.join(timeout + 6)
    failed = answered[0] if answered else TimeoutError()
    if isinstance(failed, TimeoutError):
        raise TimeoutError(
            f"the Dask scheduler at {address} did not answer within {timeout + 1:g} s (a port that accepts "
            "connections and never answers: is it a Dask scheduler's address?)"
        ) from None
    if isinstance(failed, Exception) and not isinstance(failed, OSError):  # bytes that are no Dask message
        said = f"{type(failed).__name__}: {failed}" if str(failed) else f"{type(failed).__name__} reading its handshake"
        raise ConnectionError(
            f"{address} did not answer as a Dask scheduler ({said}): another service's port?"
        ) from None
    if failed is not None:
        raise failed
    return distributed.Client(address, set_as_default=False, timeout=timeout)


def _check_installed() -> None:
    import importlib.util

    if importlib.util.find_spec("distributed") is None:
        _distributed()  # the error naming the extra


def _distributed() -> Any:
    try:
        import distributed
    except ImportError:
        raise BadInput(
            "--launcher dask needs Dask distributed, which is not installed: pip install 'backfill[dask]'"
        ) from None
    return distributed


@dataclass
class _Stream:
    """What the events of one attempt have told so far."""

    log_path: str
    info: dict[str, Any] = field(default_factory=dict)
    pending: dict[int, bytes] = field(default_factory=dict)  # chunks that arrived before their predecessors
    next_seq: int = 0
    ended: threading.Event = field(default_factory=threading.Event)
    code: int | None = None  # the child's exit status, as its task reported it
    chunks: int | None = None  # how many chunks of output the child wrote in all, once its task reported it
    on_end: Any = None  # called once the exit is known and the last of the output is written


class DaskChild:
    """One attempt's task, as the executor sees a child. Its exit wakes the executor through a pipe that the
    future's completion (and, for a failure, the last of its output) writes to: no polling."""

    def __init__(self, launcher: DaskLauncher, future: Any, stream: _Stream) -> None:
        self._launcher = launcher
        self._future = future
        self._stream = stream
        self.lost: str | None = None  # why the attempt's outcome is unknown (its worker died)
        self._code: int | None = None
        self._half_done_at: float | None = None
        self._wake_read, self._wake_write = os.pipe()
        os.set_blocking(self._wake_read, False)
        os.set_blocking(self._wake_write, False)  # a full pipe already wakes the executor
        self._closing = threading.Lock()
        self._closed = False
        stream.on_end = self._wake
        future.add_done_callback(lambda _: self._wake())

    @property
    def pid(self) -> int:
        """The remote child's PID once its task reported it (0 before)."""
        return int(self._stream.info.get("pid", 0))

    @property
    def worker(self) -> str | None:
        return self._stream.info.get("worker")

    @property
    def remote(self) -> dict[str, Any]:
        """Where the child runs: the cluster from the start, the worker, host and process group once its task
        reported them (launches never wait for that; the executor records them when they arrive)."""
        where = dict(self._launcher.placement)
        info = self._stream.info
        if info:
            where.update(worker=info["worker"], host=info["host"], pgid=info["pgid"])
            where["pid_started"] = info.get("pid_started")
            where["pid_birth"] = info.get("pid_birth")
        return where

    def _wake(self) -> None:
        with self._closing:  # a closed descriptor's number may already belong to another file: never write to it
            if not self._closed:
                with contextlib.suppress(BlockingIOError):
                    os.write(self._wake_write, b"x")

    def poll(self) -> int | None:
        if self._code is not None:
            return self._code
        code = self._poll()
        if code is not None:
            # The outcome is taken: let the future go now. The scheduler recomputes the lost results of futures
            # a client still holds, so a worker that dies later would run this finished attempt's child again.
            self._future.release()
        return code

    def _poll(self) -> int | None:
        with contextlib.suppress(BlockingIOError):
            os.read(self._wake_read, 64)  # what woke the executor is consumed: a later wake is a new event
        stream = self._stream
        if stream.ended.is_set() and (self._future.done() or self._waited_too_long()):
            # The task reported the exit and every chunk of output is written; and the scheduler knows its worker
            # is free, or the attempt submitted next could be queued behind another task on a busy worker.
            self._code = stream.code
        elif not self._future.done():
            return None
        elif self._future.status == "cancelled":  # stopped before it started: no child ever ran
            self._code = -signal.SIGKILL
        elif self._future.status == "finished":
            # Done, but the report of its exit has not arrived: wait for it (its arrival wakes the executor), not
            # for ever.
            if not self._waited_too_long():
                return None
            self._code = int(self._future.result())
        else:
            error = self._future.exception()
            self.lost = f"worker {self.worker or '?'} lost ({type(error).__name__})"
            info = stream.info
            if info:
                self._launcher.stop_orphan(info["host"], info["pgid"], info.get("pid_started"), info.get("pid_birth"))
            self._code = -9
        return self._code

    def _waited_too_long(self) -> bool:
        """Whether one half of an attempt's end (its task's return, its exit's report) came LOG_END_WAIT seconds
        ago without the other."""
        self._half_done_at = self._half_done_at or time.monotonic()
        return time.monotonic() - self._half_done_at >= LOG_END_WAIT

    def exit_fd(self) -> int | None:
        return self._wake_read

    def identity(self) -> tuple[float | None, str | None]:
        return None, None  # on another machine: its task reports them (see ``remote``)

    def signal_group(self, signum: int) -> None:
        info = self._stream.info
        if info:
            self._launcher.signal_remote(
                info["worker"], info["pgid"], signum, info.get("pid_started"), info.get("pid_birth")
            )
        elif signum == signal.SIGKILL or not self._future.done():
            self._future.cancel()  # not started yet: it never will

    def close(self) -> None:
        self._launcher.forget(self._future.key)
        with self._closing:
            self._closed = True
            os.close(self._wake_read)
            os.close(self._wake_write)

    def leftovers(self) -> None:
        return None  # the task clears its own group on its worker


class DaskLauncher:
    name = "dask"

    def __init__(
        self, *, address: str | None, local_workers: int | None, backfill_id: str, generation: int, grace: float
    ) -> None:
        _check_installed()
        self._cluster: LocalCluster | None = None
        if local_workers is not None:
            self._cluster = LocalCluster(local_workers)
        distributed = _distributed()
        import logging

        # Dask reports on the executor's stderr (connections, slow event loops): the terminal is the dashboard's
        # and the progress lines'. Only errors get through.
        logging.getLogger("distributed").setLevel(logging.ERROR)
        try:
            if self._cluster is not None:
                address = self._cluster.scheduler_address()
            self.client = _client(address)
        except BaseException:
            if self._cluster is not None:
                self._cluster.close()
            raise
        retried = allowed_failures(self.client)
        if retried != 0:
            self.shutdown_client()
            raise BadInput(
                f"the Dask scheduler at {address} reruns a task whose worker died (allowed-failures {retried}): "
                "backfill owns retries, so start it with distributed.scheduler.allowed-failures: 0"
            )
        self.backfill_id, self.generation = backfill_id, generation
        # Recorded with every attempt from its launch: what a later executor reaches to stop it. A local cluster
        # dies with its executor, and its workers' children with them.
        self.placement = {"cluster": "local"} if self._cluster is not None else {"scheduler": address}
        self.topic = f"backfill-{backfill_id}"
        # One heartbeat per executor generation: a child of an executor that died stops itself even when a
        # successor is already beating under the backfill's name.
        self.beat = f"backfill-beat-{backfill_id}-g{generation}"
        self.grace = grace
        self._streams: dict[str, _Stream] = {}
        self._given_bytes: dict[str, bytes] = {}  # a given file's path → its bytes, read once
        self._lock = threading.Lock()
        self._beat_variable = distributed.Variable(self.beat, client=self.client)
        self._beat_variable.set(time.time())
        self._stop_beat = threading.Event()
        self._beat_thread = threading.Thread(target=self._beat, name="dask heartbeat", daemon=True)
        self._beat_thread.start()
        self.client.subscribe_topic(self.topic, self._on_event)

    # ------------------------------------------------------------ cluster

    def describe(self) -> str:
        workers = self.client.scheduler_info().get("workers", {})
        threads = sum(int(w.get("nthreads", 0)) for w in workers.values())
        where = "local cluster" if self._cluster is not None else self.client.scheduler.address
        return f"dask {where}: {len(workers)} workers, {threads} threads"

    def threads(self) -> int:
        return sum(int(w.get("nthreads", 0)) for w in self.client.scheduler_info().get("workers", {}).values())

    def check_target_visible(self, path: str) -> None:
        """Before the first launch: every worker must see the pipeline at the same path (a shared filesystem)."""
        from engine.execute.dask_task import can_see

        seen = self.client.run(can_see, path)
        blind = sorted(address for address, visible in seen.items() if not visible)
        if blind:
            raise BadInput(
                f"worker {blind[0]} cannot see {path}: pipeline targets need the repository at the same path on "
                "every worker (a shared filesystem)" + (f"; {len(blind) - 1} more" if len(blind) > 1 else "")
            )

    def check_definition(self, watch: DefinitionWatch) -> None:
        """Before the first launch: every worker must read the pipeline's files and ``.bruin.yml`` as they were
        judged (a worker with its own checkout at the same path may hold another version of them)."""
        from engine.guardrails.definition_watch import read_definition

        paths, config = watch.on_worker()
        seen = self.client.run(read_definition, paths, config)
        differing = [(address, watch.differences(read)) for address, read in sorted(seen.items())]
        differing = [(address, names) for address, names in differing if names]
        if differing:
            address, names = differing[0]
            shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
            raise BadInput(
                f"worker {address} reads another version of the pipeline than was judged ({shown} differ): pipeline "
                "targets need the same repository at the same path on every worker (a shared filesystem)"
                + (f"; {len(differing) - 1} more" if len(differing) > 1 else "")
            )

    # ------------------------------------------------------------ attempts

    def launch(self, spec: ChildSpec) -> DaskChild:
        from engine.execute.dask_task import run_child

        run_id = os.path.basename(spec.log_path)[: -len(".log")]
        stream = _Stream(str(spec.log_path))
        with self._lock:
            self._streams[run_id] = stream
        future = self.client.submit(
            run_child,
            spec.argv,
            spec.cwd,
            spec.env,
            run_id,
            self.topic,
            self.beat,
            self.grace,
            self.grace,
            self.backfill_id,
            self.generation,
            self._given(spec.argv),
            key=run_id,
            pure=False,
            retries=0,
        )
        return DaskChild(self, future, stream)

    def _given(self, argv: list[str]) -> dict[str, bytes]:
        """The files of the state directory a pipeline partition's run is given (``--judged-files``,
        ``--judged-sql``), sent with the task: a worker need not see the state directory. Read once per file the
        executor wrote."""
        given = {}
        for flag in GIVEN_FILES:
            if flag in argv:
                path = argv[argv.index(flag) + 1]
                if path not in self._given_bytes:
                    with open(path, "rb") as file:
                        self._given_bytes[path] = file.read()
                given[flag] = self._given_bytes[path]
        return given

    def signal_remote(self, worker: str, group: int, signum: int, started: float | None, birth: str | None) -> None:
        from engine.execute.dask_task import signal_group

        try:
            self.client.run(signal_group, group, signum, started, birth, workers=[worker], on_error="ignore")
        except Exception:  # a worker gone: its child is gone with it
            return

    def stop_orphan(self, host: str, group: int, started: float | None, birth: str | None) -> None:
        """The worker of an attempt died: SIGKILL what may remain of its child through any worker on the same
        host (a lost machine took the child with it)."""
        from engine.execute.dask_task import signal_group

        workers = self.client.scheduler_info().get("workers", {})
        same_host = [address for address, info in workers.items() if info.get("host") == host]
        same_host = same_host or [address for address in workers if address.split("//")[-1].startswith(host)]
        if same_host:
            try:
                self.client.run(
                    signal_group, group, signal.SIGKILL, started, birth, workers=same_host[:1], on_error="ignore"
                )
            except Exception:
                return

    def forget(self, key: str) -> None:
        with self._lock:
            self._streams.pop(key, None)

    def _on_event(self, event: Any) -> None:
        _, message = event if isinstance(event, tuple) else (None, event)
        run_id = message.get("run_id")
        with self._lock:
            stream = self._streams.get(run_id)
        if stream is None:
            return
        kind = message.get("kind")
        if stream.code is not None and kind in ("started", "start_failed"):
            return  # its child already reported its exit: a task the scheduler ran again refused (RAN_ALREADY)
        if kind == "started":
            stream.info = message
        elif kind == "start_failed":
            with open(stream.log_path, "ab") as log:
                log.write(f"backfill: cannot start the child on its worker: {message.get('error')}\n".encode())
            stream.code = int(message.get("code", 127))
            self._end(stream)
        elif kind == "log":
            stream.pending[int(message["seq"])] = message["data"]
            self._flush(stream)
        elif kind == "exit":
            if not stream.info:  # it ended before it was reported started: its identity comes with its end
                stream.info = message
            stream.code, stream.chunks = int(message["code"]), int(message["chunks"])
            self._flush(stream)

    def _flush(self, stream: _Stream) -> None:
        if stream.pending:
            with open(stream.log_path, "ab") as log:
                while stream.next_seq in stream.pending:
                    log.write(stream.pending.pop(stream.next_seq))
                    stream.next_seq += 1
        if stream.chunks is not None and stream.next_seq >= stream.chunks and not stream.ended.is_set():
            self._end(stream)

    @staticmethod
    def _end(stream: _Stream) -> None:
        stream.ended.set()
        if stream.on_end is not None:
            stream.on_end()

    def _beat(self) -> None:
        while not self._stop_beat.wait(BEAT_SECONDS):
            try:
                self._beat_variable.set(time.time())
            except Exception:  # the scheduler is unreachable: its tasks see the silence and stop themselves
                continue

    def shutdown_client(self) -> None:
        self.client.close()
        if self._cluster is not None:
            self._cluster.close()

    def shutdown(self) -> None:
        self._stop_beat.set()
        from engine.execute.dask_task import forget_claims

        with contextlib.suppress(Exception):  # the scheduler gone: its metadata went with it
            forget_claims(self.client, self.backfill_id)
        self.shutdown_client()
