"""What the Dask launcher's tests share: a cluster of worker processes reached by address, and waiting for an
executor's children to be reported running."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil

from tests.backfills import records, state_dirs


@contextmanager
def external_cluster(
    tmp_path: Path, env: dict[str, str] | None = None
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """A local cluster of two worker processes in a session of its own (with ``env`` added to its environment),
    as a scheduler address to pass to ``--dask-scheduler``; stopped at the end unless the test killed it."""
    address_file = tmp_path / "address"
    cluster = subprocess.Popen(
        [sys.executable, str(Path(__file__).with_name("dask_cluster.py")), str(address_file)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        env={**os.environ, **env} if env else None,
    )
    try:
        yield wait_for_text(address_file, 60), cluster
    finally:
        if cluster.poll() is None:
            cluster.terminate()
        cluster.wait(30)


@contextmanager
def silent_port(port: int = 0, greeting: bytes = b"") -> Iterator[str]:
    """A TCP address (``tcp://127.0.0.1:PORT``; ``port`` 0: any free one) that accepts connections, says
    ``greeting`` and then nothing: another service's port given as a scheduler's, or a proxy without its backend."""
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(16)
    held: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                held.append(listener.accept()[0])
                held[-1].sendall(greeting)
            except OSError:  # closed at the end
                return

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"tcp://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        listener.shutdown(socket.SHUT_RDWR)
        listener.close()
        thread.join(10)
        for connection in held:
            connection.close()


def wait_for_text(path: Path, timeout: float = 30) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return path.read_text().strip()
        time.sleep(0.05)
    raise AssertionError(f"{path} never appeared")


def only_backfill(work: Path) -> Path:
    [backfill] = state_dirs(work / "logs" / "backfills")
    return backfill


def running_children(work: Path, count: int, timeout: float = 60) -> list[int]:
    """The PIDs of the backfill's running children once ``count`` of them are recorded (a remote child's PID
    is recorded when its task reports it)."""
    deadline = time.monotonic() + timeout
    pids: list[int] = []
    while len(pids) < count and time.monotonic() < deadline:
        time.sleep(0.2)
        try:
            pids = [r["attempts"][-1]["pid"] for r in records(only_backfill(work)) if r["status"] == "running"]
        except ValueError:  # no backfill yet, or a record caught mid-write
            pids = []
        pids = [pid for pid in pids if pid]
    assert len(pids) == count, f"{len(pids)} of {count} children reported running"
    return pids


def alive(pid: int) -> bool:
    return psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
