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
import signal
import socket
import subprocess
import threading
import time
from typing import Any

CHUNK = 64 * 1024  # at most this much output per event: nothing is buffered without bound
BEAT_PREFIX = "backfill-beat-"


def run_child(
    argv: list[str], cwd: str, env: dict[str, str], run_id: str, topic: str, beat: str, grace: float, silence: float
) -> int:
    """Run one attempt's child on this worker; its exit status (negative: killed by that signal)."""
    from distributed import get_worker

    worker = get_worker()
    try:
        process = subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_die_with_worker,
        )
    except OSError as error:
        worker.log_event(topic, {"run_id": run_id, "kind": "start_failed", "error": error.strerror or str(error)})
        return 127
    worker.log_event(
        topic,
        {
            "run_id": run_id,
            "kind": "started",
            "pid": process.pid,
            "pgid": process.pid,
            "host": socket.gethostname(),
            "worker": worker.address,
            "pid_started": _started(process.pid),
        },
    )
    reader = threading.Thread(target=_stream, args=(worker, topic, run_id, process), daemon=True)
    reader.start()
    _watch_heartbeat(worker, process, beat, grace, silence)
    code = process.wait()
    reader.join()
    _clear_group(process.pid, grace)
    return code


def _die_with_worker() -> None:
    """In the child, before exec: SIGKILL it if the worker thread that started it dies (a worker killed or
    lost), so a retry elsewhere never runs beside it (Linux; elsewhere the executor's signal must do)."""
    import ctypes

    with contextlib.suppress(Exception):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _started(pid: int) -> float | None:
    try:
        import psutil

        return psutil.Process(pid).create_time()
    except Exception:  # gone already: the executor records no start time
        return None


def _stream(worker: Any, topic: str, run_id: str, process: subprocess.Popen[bytes]) -> None:
    assert process.stdout is not None
    sequence = 0
    while True:
        data = process.stdout.read1(CHUNK)  # type: ignore[attr-defined]
        if not data:
            break
        worker.log_event(topic, {"run_id": run_id, "kind": "log", "seq": sequence, "data": data})
        sequence += 1
    worker.log_event(topic, {"run_id": run_id, "kind": "log_end", "seq": sequence})


def _watch_heartbeat(worker: Any, process: subprocess.Popen[bytes], beat: str, grace: float, silence: float) -> None:
    """Until the child exits: when the executor's heartbeat (a scheduler variable it refreshes every second) has
    been silent for ``silence`` seconds, SIGTERM the child's group, then SIGKILL after ``grace``."""
    from distributed import Variable, get_client

    variable = None  # made on the first half-second: a short child never needs it
    stopping_since: float | None = None
    while True:
        try:
            process.wait(timeout=0.5)  # returns the moment the child exits: no task outlasts its child by a tick
            return
        except subprocess.TimeoutExpired:
            pass
        try:
            variable = variable or Variable(beat, client=get_client())
            last = float(variable.get(timeout=2))
        except Exception:
            last = 0.0
        if stopping_since is None and time.time() - last > silence:
            stopping_since = time.monotonic()
            _signal(process.pid, signal.SIGTERM)
        elif stopping_since is not None and time.monotonic() - stopping_since >= grace:
            _signal(process.pid, signal.SIGKILL)


def _clear_group(group: int, grace: float) -> None:
    """Processes the child left in its group (``sleep 30 &``) are stopped like local leftovers."""
    if not _alive(group):
        return
    _signal(group, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while _alive(group) and time.monotonic() < deadline:
        time.sleep(0.05)
    _signal(group, signal.SIGKILL)


def _alive(group: int) -> bool:
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _signal(group: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(group, signum)


def signal_group(group: int, signum: int) -> bool:
    """Run on a worker through ``client.run``: signal a child's process group there."""
    _signal(group, signum)
    return _alive(group)


def can_see(path: str) -> bool:
    """Run on every worker before the first launch: whether the target exists at the same path there."""
    return os.path.exists(path)
