"""PID-reuse traps, run as PID 1 of a fresh PID namespace (``unshare --pid --fork --mount-proc``) where the next
PID can be chosen (``ns_last_pid``): a process we are stopping dies during the grace, an unrelated process takes
its PID (or its process group's number), and the last signal must not reach it.

``python pid_trap.py SCENARIO DIR`` prints one JSON line: ``reused`` (the trap was set: the unrelated process got
the dead one's number) and ``survived`` (the unrelated process is alive after the stop ended).
``python pid_trap.py victim DIR NAME`` is one of the processes being stopped: it reports its PID, ignores SIGTERM
(so the grace runs to its end), notes that it got it, and exits once ``DIR/NAME.fifo`` is opened and closed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

GRACE = 6.0  # long enough for the trap to be set inside it on a loaded machine; the test waits for it once


def victim(directory: Path, name: str) -> None:
    fifo = directory / f"{name}.fifo"
    os.mkfifo(fifo)
    signal.signal(signal.SIGTERM, lambda *_: (directory / f"{name}.term").write_text("term"))
    (directory / f"{name}.pid.tmp").write_text(str(os.getpid()))
    os.rename(directory / f"{name}.pid.tmp", directory / f"{name}.pid")
    with open(fifo, "rb") as reader:  # blocks until the scenario opens the other end
        reader.read()


def _wait_for(path: Path, seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        if time.monotonic() > deadline:
            raise SystemExit(f"pid_trap: {path.name} never appeared")
        time.sleep(0.01)


def _pid_of(directory: Path, name: str) -> int:
    _wait_for(directory / f"{name}.pid")
    return int((directory / f"{name}.pid").read_text())


def _release(directory: Path, name: str) -> None:
    """Let the victim exit: it ends when its FIFO's writer closes."""
    _wait_for(directory / f"{name}.term")
    with open(directory / f"{name}.fifo", "wb"):
        pass


def _victim_argv(directory: Path, name: str) -> list[str]:
    return [sys.executable, __file__, "victim", str(directory), name]


def _take_number(number: int) -> subprocess.Popen:
    """An unrelated process, leader of its own group, that gets ``number`` as its PID."""
    Path("/proc/sys/kernel/ns_last_pid").write_text(str(number - 1))
    return subprocess.Popen(["sleep", "600"], start_new_session=True)


def _reaped(pid: int) -> None:
    """Reap a process that became ours (we are the namespace's init): its PID is free for reuse after."""
    os.waitpid(pid, 0)


def _outcome(unrelated: subprocess.Popen, number: int) -> dict:
    try:  # a SIGKILL sent is pending when the call returns; the process ends when next scheduled
        unrelated.wait(timeout=2)
        survived = False
    except subprocess.TimeoutExpired:
        survived = True
    unrelated.kill()
    unrelated.wait()
    return {"reused": unrelated.pid == number, "survived": survived}


def _stopping(identities: list[tuple[int, float | None, str | None]]) -> threading.Thread:
    from engine.base.processes import stop_verified

    thread = threading.Thread(target=stop_verified, args=(identities, GRACE))
    thread.start()
    return thread


def last_signal(directory: Path) -> dict:
    """Reconcile and takeover stop a lost child (SIGTERM ignored); it dies inside the grace and its PID goes to
    an unrelated process; the SIGKILL at the end of the grace must not reach that process. A second stubborn child
    keeps the grace running to its end."""
    from engine.base.processes import process_identity

    lost = subprocess.Popen(_victim_argv(directory, "lost"), start_new_session=True)
    stubborn = subprocess.Popen(_victim_argv(directory, "stubborn"), start_new_session=True)
    for name in ("lost", "stubborn"):
        _pid_of(directory, name)
    stop = _stopping([(p.pid, *process_identity(p.pid)) for p in (lost, stubborn)])
    _release(directory, "lost")
    lost.wait()
    unrelated = _take_number(lost.pid)
    stop.join()
    stubborn.wait()
    return _outcome(unrelated, lost.pid)


def descendant(directory: Path) -> dict:
    """A descendant of the lost child (in a session of its own) found at the start of the grace dies inside it;
    the unrelated process that takes its PID must survive the last signal."""
    from engine.base.processes import process_identity

    script = f"trap '' TERM; setsid {' '.join(_victim_argv(directory, 'grandchild'))} & wait"
    lost = subprocess.Popen(["sh", "-c", script], start_new_session=True)
    stubborn = subprocess.Popen(_victim_argv(directory, "stubborn"), start_new_session=True)
    grandchild = _pid_of(directory, "grandchild")
    _pid_of(directory, "stubborn")
    stop = _stopping([(p.pid, *process_identity(p.pid)) for p in (lost, stubborn)])
    _release(directory, "grandchild")
    lost.wait()  # its shell reaped the grandchild, then ended
    unrelated = _take_number(grandchild)
    stop.join()
    stubborn.wait()
    return _outcome(unrelated, grandchild)


def leftover(directory: Path) -> dict:
    """An attempt's child ends leaving a process in its group; that process dies inside the grace and the group's
    number goes to an unrelated process group; the executor's SIGKILL of the leftovers must not reach it."""
    from engine.execute.launcher import ChildSpec, ForkExecLauncher

    script = f"{' '.join(_victim_argv(directory, 'leftover'))} & exit 0"
    spec = ChildSpec(["sh", "-c", script], str(directory), dict(os.environ), directory / "child.log")
    child = ForkExecLauncher().launch(spec)
    left = _pid_of(directory, "leftover")
    deadline = time.monotonic() + 30
    while child.poll() is None:
        assert time.monotonic() < deadline, "the child never ended"
        time.sleep(0.01)
    leftovers = child.leftovers()
    child.close()
    assert leftovers is not None and leftovers.alive(), "the leftover was not found"
    leftovers.signal(signal.SIGTERM)
    _release(directory, "leftover")
    _reaped(left)
    unrelated = _take_number(child.pid)
    leftovers.signal(signal.SIGKILL)  # what the executor sends when the grace is over
    leftovers.close()
    return _outcome(unrelated, child.pid)


SCENARIOS = {"last_signal": last_signal, "descendant": descendant, "leftover": leftover}

if __name__ == "__main__":
    if sys.argv[1] == "victim":
        victim(Path(sys.argv[2]), sys.argv[3])
    else:
        print(json.dumps(SCENARIOS[sys.argv[1]](Path(sys.argv[2]))))
