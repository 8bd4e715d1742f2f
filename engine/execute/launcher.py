"""How children are started: one interface, so a preloaded launcher (a fork server with the runner
already imported) or a distributed one can replace fork + exec without touching the scheduler.

A child runs in its own process group (its session leader), with stdin closed and
stdout+stderr appended to its log file.
"""

from __future__ import annotations

import os
import signal
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from engine.base.atomic import FILE_MODE, ensure_directory
from engine.base.processes import TrackedFamily, exited_unreaped, leftovers_of, process_identity, signal_own_group


@dataclass(frozen=True)
class ChildSpec:
    argv: list[str]
    cwd: str
    env: dict[str, str]
    log_path: Path
    inherit_fds: tuple[int, ...] = field(default=())


def open_log(path: Path) -> int:
    """A child's log, opened for appending; ``children/`` is made again when it was removed while the backfill ran
    (logs are evidence, not state, as at a takeover: a missing directory must not fail every start)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND
    try:
        return os.open(path, flags, FILE_MODE)
    except FileNotFoundError:
        ensure_directory(path.parent)
        return os.open(path, flags, FILE_MODE)


def start_failure(spec: ChildSpec, error: OSError) -> str:
    """Why a child did not start, in one line: its program, or its working directory (gone since the backfill
    was saved: Python names the directory in the error when changing into it fails)."""
    if error.filename is not None and str(error.filename) == spec.cwd:
        return f"cannot enter its working directory {spec.cwd!r}: {error.strerror or error}"
    return f"cannot start {spec.argv[0]!r}: {error.strerror or error}"


class Child(Protocol):
    pid: int

    def poll(self) -> int | None:
        """The exit code once exited (negative: killed by that signal), else None. Reaps the child."""

    def exit_fd(self) -> int | None:
        """A descriptor that becomes readable when the child exits (a pidfd), or None to poll."""

    def identity(self) -> tuple[float | None, str | None]:
        """The process's start time and birth (``engine.base.processes.process_identity``), read once when it
        started; (None, None) for a child on another machine, whose task reports them."""

    def signal_group(self, signum: int) -> None:
        """Send a signal to the child's whole process group."""

    def close(self) -> None:
        """Release descriptors once the child has been reaped."""

    def leftovers(self) -> TrackedFamily | None:
        """What the attempt left in its process group (``sleep 30 &``), held so that it can be stopped safely once
        the attempt ended; None when the group outlives attempts by design (a warm runner serves the next
        partition)."""


class Launcher(Protocol):
    name: str  # "exec" or "warm": shown on the dashboard and in progress lines

    def launch(self, spec: ChildSpec) -> Child:
        """Start a child; raise OSError when it cannot be started."""

    def shutdown(self) -> None:
        """The run is over: release whatever the launcher keeps between children (no child is running)."""


class _PopenChild:
    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        self._process = process
        self.pid = process.pid
        try:
            self._pidfd: int | None = os.pidfd_open(process.pid)
        except (AttributeError, OSError):
            self._pidfd = None
        self._identity = process_identity(process.pid)  # unreaped until poll() reaps it: this PID is ours
        self._leftovers: TrackedFamily | None = None

    def poll(self) -> int | None:
        if self._process.returncode is None:
            exited = exited_unreaped(self.pid)  # in place of poll()'s own wait: one system call a turn, as before
            if exited is False:
                return None
            if exited and self._leftovers is None:
                # Found before the reap, while the child's zombie holds its group's number.
                self._leftovers = leftovers_of(self.pid, self._pidfd, self._identity)
        return self._process.poll()

    def exit_fd(self) -> int | None:
        return self._pidfd

    def identity(self) -> tuple[float | None, str | None]:
        return self._identity

    def signal_group(self, signum: int) -> None:
        signal_own_group(self._pidfd, self.pid, signum, reaped=self._process.returncode is not None)

    def close(self) -> None:
        if self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None

    def leftovers(self) -> TrackedFamily | None:
        return self._leftovers


class ForkExecLauncher:
    """Today's launcher: fork + exec of the child's argv (no shell)."""

    name = "exec"

    def shutdown(self) -> None:
        return None

    def launch(self, spec: ChildSpec) -> Child:
        log = open_log(spec.log_path)
        try:
            process = start_in_own_session(spec.argv, spec, log, spec.inherit_fds)
        except OSError as error:
            os.write(log, f"backfill: {start_failure(spec, error)}\n".encode())
            raise
        finally:
            os.close(log)
        return _PopenChild(process)


def start_in_own_session(argv: list[str], spec: ChildSpec, log: int, pass_fds: tuple[int, ...]) -> subprocess.Popen:
    """Start ``argv`` as a child is started: in its own session and process group, in the spec's directory and
    environment, stdin closed, stdout and stderr appended to ``log``."""
    return subprocess.Popen(
        argv,
        cwd=spec.cwd,
        env=spec.env,
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        pass_fds=pass_fds,
    )


def describe_exit(code: int) -> str:
    """``exited with code 3`` or ``killed by SIGKILL``."""
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with code {code}"


def group_alive(group: int) -> bool:
    """Whether any process of this process group still exists (zombies of other parents included)."""
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
