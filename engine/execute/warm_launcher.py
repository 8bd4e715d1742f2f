"""The warm launcher: pipeline partitions sent to long-lived runner processes instead of a new process each.

A partition of a pipeline backfill is a ``backfill run``; started fresh, most of its cost is the
interpreter and the imports, not its SQL. Here each parallel slot has a runner (``backfill __warm-runner``)
that serves one partition after another, keeping its imports, the parsed pipeline and the DuckDB handles.
To the executor nothing changes: a partition is still a :class:`Child` with a PID (the runner's), an exit
code, a descriptor that becomes readable when it ends, and a process group to signal (the runner's own,
its session). What a runner does not survive — SIGKILL after the grace period, a crash — fails only the
partition it was running; the next partition gets a fresh runner.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess

import orjson

from engine.base.internal_verbs import RUNNER_VERB
from engine.base.processes import process_identity, signal_own_group
from engine.base.settings import RUNNER_PARTITIONS
from engine.execute.children import backfill_program
from engine.execute.launcher import ChildSpec, open_log, start_in_own_session

SHUTDOWN_SECONDS = 10.0  # a runner closing its databases at the end of the run gets this long before SIGKILL
# A runner is replaced after serving this many partitions: DuckDB's native memory grows with the runs one
# process has served (about 6 % per 1 000 runs of the example; Python objects do not grow), so recycling
# keeps a runner's memory flat at the cost of one start-up per RUNNER_PARTITIONS partitions.


class _Runner:
    """One runner process and the two pipes it is driven through."""

    def __init__(self, spec: ChildSpec) -> None:
        requests_read, requests = os.pipe()
        replies, replies_write = os.pipe()
        self.requests: int | None = requests  # None once closed
        self.replies: int | None = replies
        log = open_log(spec.log_path)
        try:
            argv = [*backfill_program(), RUNNER_VERB, str(requests_read), str(replies_write), str(os.getpid())]
            # Whatever the runner says before its first partition (an import failure) lands in that log.
            self.process = start_in_own_session(argv, spec, log, (requests_read, replies_write, *spec.inherit_fds))
        except OSError:
            for fd in (requests, replies):
                os.close(fd)
            raise
        finally:
            os.close(log)
            os.close(requests_read)
            os.close(replies_write)
        os.set_blocking(replies, False)
        self.pid = self.process.pid
        self.identity = process_identity(self.pid)
        self.buffer = b""
        self.served = 0

    def send(self, spec: ChildSpec, program_length: int) -> None:
        request = {"argv": spec.argv[program_length:], "cwd": spec.cwd, "env": spec.env, "log": str(spec.log_path)}
        os.write(self.requests, orjson.dumps(request) + b"\n")

    def alive(self) -> bool:
        return self.process.poll() is None

    def signal_group(self, signum: int) -> None:
        """Only while the runner is unreaped: its PID, and so its group's number, is ours until then."""
        signal_own_group(None, self.pid, signum, reaped=self.process.returncode is not None)

    def close_requests(self) -> None:
        """End of file for the runner: it closes its databases and exits. Idempotent (a descriptor number is
        never closed twice: another thread may have been given it since)."""
        if self.requests is not None:
            with contextlib.suppress(OSError):
                os.close(self.requests)
            self.requests = None

    def close(self) -> None:
        self.close_requests()
        if self.replies is not None:
            with contextlib.suppress(OSError):
                os.close(self.replies)
            self.replies = None


class WarmChild:
    """One partition served by a runner."""

    def __init__(self, runner: _Runner, launcher: WarmLauncher) -> None:
        self._runner = runner
        self._launcher = launcher
        self.pid = runner.pid
        self._fd = runner.replies  # kept: the runner may be retired (its pipes closed) once this partition ends
        self._code: int | None = None

    def poll(self) -> int | None:
        if self._code is not None:
            return self._code
        runner = self._runner
        ended = False
        while True:
            try:
                chunk = os.read(runner.replies, 4096)
            except BlockingIOError:
                break
            if not chunk:
                ended = True  # the runner is gone: its end of the pipe closed
                break
            runner.buffer += chunk
        if b"\n" in runner.buffer:
            line, runner.buffer = runner.buffer.split(b"\n", 1)
            self._code = int(orjson.loads(line)["exit"])
            self._launcher.release(runner)
        elif ended or not runner.alive():
            # A crash, an out-of-memory kill, SIGKILL after the grace: this partition fails, the runner is
            # replaced for the next one.
            self._code = runner.process.wait()
            self._launcher.discard(runner)
        return self._code

    def exit_fd(self) -> int | None:
        return self._fd  # the same for the whole partition: the executor unregisters it after

    def identity(self) -> tuple[float | None, str | None]:
        return self._runner.identity  # the runner's, read when it started

    def signal_group(self, signum: int) -> None:
        self._runner.signal_group(signum)

    def close(self) -> None:
        return None

    def leftovers(self) -> None:
        return None  # the runner's group outlives the partition by design


class WarmLauncher:
    name = "warm"

    def __init__(self, runner_partitions: int = RUNNER_PARTITIONS) -> None:
        self._runner_partitions = runner_partitions
        self._program_length = len(backfill_program())
        self._idle: list[_Runner] = []
        self._all: list[_Runner] = []

    def launch(self, spec: ChildSpec) -> WarmChild:
        os.close(open_log(spec.log_path))
        while self._idle:
            runner = self._idle.pop()
            if not runner.alive():
                self.discard(runner)
                continue
            try:
                runner.send(spec, self._program_length)
            except OSError:  # it died between the check and the write
                runner.process.wait()
                self.discard(runner)
                continue
            return WarmChild(runner, self)
        runner = _Runner(spec)
        self._all.append(runner)
        runner.send(spec, self._program_length)
        return WarmChild(runner, self)

    def release(self, runner: _Runner) -> None:
        runner.served += 1
        if runner.served < self._runner_partitions:
            self._idle.append(runner)
            return
        # Retire it now, and wait: its successor must not find the DuckDB file still held by it.
        self._all.remove(runner)
        self._end(runner)

    def discard(self, runner: _Runner) -> None:
        """A runner that died: never idle (it was taken from the idle ones, or was serving a partition)."""
        runner.close()
        with contextlib.suppress(ValueError):  # after a shutdown it is in no list: nothing to fail a stop for
            self._all.remove(runner)

    def shutdown(self) -> None:
        """End every runner: end of file on its requests (it closes its databases and exits), SIGKILL to its
        group if it has not left within SHUTDOWN_SECONDS."""
        runners, self._all, self._idle = self._all, [], []
        for runner in runners:
            runner.close_requests()
        for runner in runners:
            self._end(runner)

    @staticmethod
    def _end(runner: _Runner) -> None:
        runner.close_requests()
        try:
            runner.process.wait(timeout=SHUTDOWN_SECONDS)
        except subprocess.TimeoutExpired:
            runner.signal_group(signal.SIGKILL)
            runner.process.wait()
        runner.close()
