"""``--launcher dask``: each attempt is one Dask task that runs the child on a worker (see ``dask_task``).

The executor keeps deciding everything (what runs, how many at once, retries,
records); Dask only places tasks on workers. Output comes back as events on the
backfill's topic and is written to the attempt's log here, in order. Stopping
signals the recorded process group on its worker (``client.run``), since a
running task cannot be interrupted.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from engine.base.errors import BadInput
from engine.execute.launcher import ChildSpec

START_WAIT = 60.0  # seconds a submitted attempt may take to report its child started
BEAT_SECONDS = 1.0


def stop_remote_attempts(running: list[Any], address: str, grace: float) -> None:
    """Before a new executor starts anything: every child an earlier one left running on a worker is stopped
    (SIGTERM, SIGKILL after ``grace``) and confirmed gone through its worker; a worker no longer in the cluster
    took its children with it. An unreachable scheduler refuses the takeover: never two live children."""
    from engine.base.errors import Refused
    from engine.execute.dask_task import signal_group

    remote = [
        a for record in running for a in record.attempts if a.status == "running" and a.remote and "pgid" in a.remote
    ]
    if not remote:
        return
    distributed = _distributed()
    try:
        client = distributed.Client(address, set_as_default=False, timeout=15)
    except Exception as error:
        raise Refused(
            f"the Dask scheduler {address} that ran this backfill's attempts cannot be reached ({error}): their "
            f"children stop themselves within {2 * grace:.0f}s of their executor's end; continue after that"
        ) from None
    try:
        deadline = time.monotonic() + grace
        signum = signal.SIGTERM
        while remote:
            workers = set(client.scheduler_info().get("workers", {}))
            alive = []
            for attempt in remote:
                worker = attempt.remote["worker"]
                if worker not in workers:
                    continue
                answer = client.run(signal_group, attempt.remote["pgid"], signum, workers=[worker], on_error="ignore")
                if answer.get(worker):
                    alive.append(attempt)
            remote = alive
            if remote:
                time.sleep(0.2)
                if time.monotonic() > deadline:
                    signum = signal.SIGKILL
                if time.monotonic() > deadline + 10:
                    shown = ", ".join(f"PID {a.pid} on {a.remote['worker']}" for a in remote)
                    raise Refused(f"children of an earlier executor could not be stopped: {shown}")
    finally:
        client.close()


def scheduler_address(given: str | None) -> str:
    """--dask-scheduler, else DASK_SCHEDULER_ADDRESS, else Dask's ``scheduler-address`` configuration."""
    if given:
        return given
    import os as _os

    address = _os.environ.get("DASK_SCHEDULER_ADDRESS")
    if not address:
        import dask

        address = dask.config.get("scheduler-address", None)
    if not address:
        raise BadInput(
            "--launcher dask needs a scheduler: pass --dask-scheduler tcp://HOST:8786 (or set "
            "DASK_SCHEDULER_ADDRESS), or use --launcher dask-local:N for a local cluster"
        )
    return str(address)


def _allowed_failures() -> int:
    import dask

    return int(dask.config.get("distributed.scheduler.allowed-failures"))


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
    started: threading.Event = field(default_factory=threading.Event)
    info: dict[str, Any] = field(default_factory=dict)
    pending: dict[int, bytes] = field(default_factory=dict)  # chunks that arrived before their predecessors
    next_seq: int = 0
    ended: threading.Event = field(default_factory=threading.Event)
    start_error: str | None = None


class DaskChild:
    """One attempt's task, as the executor sees a child."""

    def __init__(self, launcher: DaskLauncher, future: Any, stream: _Stream) -> None:
        self._launcher = launcher
        self._future = future
        self._stream = stream
        self.lost: str | None = None  # why the attempt's outcome is unknown (its worker died)
        self._code: int | None = None

    @property
    def pid(self) -> int:
        """The remote child's PID once its task reported it (0 before)."""
        return int(self._stream.info.get("pid", 0))

    @property
    def worker(self) -> str | None:
        return self._stream.info.get("worker")

    @property
    def remote(self) -> dict[str, Any] | None:
        """Where the child runs, once its task reported it: the executor records it then (launches never wait)."""
        info = self._stream.info
        if not info:
            return None
        return {
            "worker": info["worker"],
            "host": info["host"],
            "pgid": info["pgid"],
            "pid_started": info.get("pid_started"),
        }

    def poll(self) -> int | None:
        if self._code is not None:
            return self._code
        if not self._future.done():
            return None
        if self._future.status == "cancelled":  # stopped before it started: no child ever ran
            self._code = -signal.SIGKILL
            return self._code
        if self._future.status == "finished":
            code = int(self._future.result())
            if code != 0:  # the failure's reason is read from the log's last lines: wait for them
                self._stream.ended.wait(5)
            self._code = code
        else:
            error = self._future.exception()
            self.lost = f"worker {self.worker or '?'} lost ({type(error).__name__})"
            info = self._stream.info
            if info:
                self._launcher.stop_orphan(info["host"], info["pgid"])
            self._code = -9
        return self._code

    def exit_fd(self) -> int | None:
        return None

    def signal_group(self, signum: int) -> None:
        info = self._stream.info
        if info:
            self._launcher.signal_remote(info["worker"], info["pgid"], signum)
        elif signum == signal.SIGKILL or not self._future.done():
            self._future.cancel()  # not started yet: it never will

    def close(self) -> None:
        self._launcher.forget(self._future.key)

    def leftover_group(self) -> int | None:
        return None  # the task clears its own group on its worker


class DaskLauncher:
    name = "dask"

    def __init__(
        self, *, address: str | None, local_workers: int | None, backfill_id: str, generation: int, grace: float
    ) -> None:
        distributed = _distributed()
        import logging

        # Dask reports on the executor's stderr (connections, slow event loops): the terminal is the dashboard's
        # and the progress lines'. Only errors get through.
        logging.getLogger("distributed").setLevel(logging.ERROR)
        self._cluster = None
        if local_workers is not None:
            import dask

            # We own retries and their records: the scheduler must never rerun an attempt on its own.
            dask.config.set({"distributed.scheduler.allowed-failures": 0})
            self._cluster = distributed.LocalCluster(
                n_workers=local_workers,
                threads_per_worker=1,
                processes=True,
                dashboard_address=None,
                silence_logs=logging.ERROR,
            )
            address = self._cluster.scheduler_address
        self.client = distributed.Client(address, set_as_default=False)
        retried = self.client.run_on_scheduler(_allowed_failures)
        if retried != 0:
            self.shutdown_client()
            raise BadInput(
                f"the Dask scheduler at {address} reruns a task whose worker died (allowed-failures {retried}): "
                "backfill owns retries, so start it with distributed.scheduler.allowed-failures: 0"
            )
        self.topic = f"backfill-{backfill_id}"
        # One heartbeat per executor generation: a child of an executor that died stops itself even when a
        # successor is already beating under the backfill's name.
        self.beat = f"backfill-beat-{backfill_id}-g{generation}"
        self.grace = grace
        self._streams: dict[str, _Stream] = {}
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
            key=run_id,
            pure=False,
            retries=0,
        )
        return DaskChild(self, future, stream)

    def signal_remote(self, worker: str, group: int, signum: int) -> None:
        from engine.execute.dask_task import signal_group

        try:
            self.client.run(signal_group, group, signum, workers=[worker], on_error="ignore")
        except Exception:  # a worker gone: its child is gone with it
            return

    def stop_orphan(self, host: str, group: int) -> None:
        """The worker of an attempt died: SIGKILL what may remain of its child through any worker on the same
        host (a lost machine took the child with it)."""
        from engine.execute.dask_task import signal_group

        workers = self.client.scheduler_info().get("workers", {})
        same_host = [address for address, info in workers.items() if info.get("host") == host]
        same_host = same_host or [address for address in workers if address.split("//")[-1].startswith(host)]
        if same_host:
            try:
                self.client.run(signal_group, group, signal.SIGKILL, workers=same_host[:1], on_error="ignore")
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
        if kind == "started":
            stream.info = message
            stream.started.set()
        elif kind == "start_failed":
            stream.start_error = message.get("error")
            with open(stream.log_path, "ab") as log:
                log.write(f"backfill: cannot start the child on its worker: {stream.start_error}\n".encode())
            stream.ended.set()
        elif kind == "log":
            stream.pending[int(message["seq"])] = message["data"]
            self._flush(stream)
        elif kind == "log_end":
            self._flush(stream)
            stream.ended.set()

    def _flush(self, stream: _Stream) -> None:
        with open(stream.log_path, "ab") as log:
            while stream.next_seq in stream.pending:
                log.write(stream.pending.pop(stream.next_seq))
                stream.next_seq += 1

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
        self.shutdown_client()
