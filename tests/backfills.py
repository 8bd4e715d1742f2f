"""Helpers for executor tests: command templates around tests/child.py, state inspection, waiting."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson

from tests.conftest import ROOT, backfill_argv

CHILD = ROOT / "tests" / "child.py"


def child_command(*extra: str) -> str:
    """A --command template running tests/child.py for each partition."""
    words = [
        sys.executable,
        str(CHILD),
        "--partition",
        "{partition_id}",
        "--start",
        "{start}",
        "--end",
        "{end}",
        *extra,
    ]
    return shlex.join(words)


def read_spans(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def max_overlap(spans: list[tuple[float, float]]) -> int:
    events = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans], key=lambda x: (x[0], x[1]))
    current = peak = 0
    for _, delta in events:
        current += delta
        peak = max(peak, current)
    return peak


def state_dirs(root: Path) -> list[Path]:
    """Saved backfills (a hidden ``.building-*`` directory is one being made, not yet a backfill)."""
    if not root.exists():
        return []
    return sorted(p for p in root.iterdir() if not p.name.startswith(".") and (p / "manifest.json").exists())


def child_running(record: dict[str, Any]) -> bool:
    """Whether a record's partition has a child running: its last attempt is ``running`` with its PID (a write-ahead
    attempt is ``starting``, with no child yet)."""
    last = record["attempts"][-1] if record["attempts"] else {}
    return record["status"] == "running" and last.get("status") == "running" and bool(last.get("pid"))


def rewrite(path: Path, data: bytes | str) -> None:
    """Change a state file as a careful tool does, renamed into place: a record changed so moves the directory's
    time, which the record index notices (docs/state.md, "The record index"; an edit in place is noticed only when
    that record is read, see test_record_index_limits.py)."""
    temporary = path.with_name(f".{path.name}.edit")
    temporary.write_bytes(data.encode() if isinstance(data, str) else data)
    os.replace(temporary, path)


def records(backfill: Path) -> list[dict[str, Any]]:
    return sorted(
        (orjson.loads(p.read_bytes()) for p in (backfill / "partitions").glob("*.json")), key=lambda r: r["index"]
    )


def statuses(backfill: Path) -> dict[int, str]:
    return {r["index"]: r["status"] for r in records(backfill)}


def start_background(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    import os

    environment = {**os.environ, "NO_COLOR": "1", **(env or {})}
    return subprocess.Popen(
        [*backfill_argv(), *args],
        cwd=cwd,
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def wait_for(condition, timeout: float = 30.0, interval: float = 0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"condition not met within {timeout}s")


def alive(pid: int) -> bool:
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def kill_if_running(process: subprocess.Popen[str]) -> None:
    """At the end of a test: a process a failed assertion left running is killed and waited for."""
    if process.poll() is None:
        process.kill()
        process.wait()


def hold_lock(lock_path: Path, *, env: dict[str, str] | None = None) -> subprocess.Popen:
    """Another process holding a backfill's lock (as a live executor does) until :func:`release`; ``env``: its
    environment (``{}``: a process that cleared it, carrying no ``BACKFILL_ID``)."""
    code = f"import fcntl, sys\nhandle = open({str(lock_path)!r}, 'a')\nfcntl.flock(handle, fcntl.LOCK_EX)\n"
    code += "print('held', flush=True)\nsys.stdin.read()\n"
    holder = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                              env=env)  # fmt: skip
    assert holder.stdout.readline() == "held\n"
    return holder


def release(holder: subprocess.Popen) -> None:
    holder.stdin.close()
    holder.wait(30)


def run_until_killed(script: str, where: str, directory: Path) -> None:
    """Run ``script`` (Python source, ``{root}`` replaced by the repository) in a real process with ``where`` and
    ``directory`` as its arguments; it must end killed by SIGKILL, as it means to be."""
    child = subprocess.run(
        [sys.executable, "-c", script.replace("{root!r}", repr(str(ROOT))), where, str(directory)],
        capture_output=True,
        timeout=60,
    )
    assert child.returncode == -9, child.stderr.decode()
