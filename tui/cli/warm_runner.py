"""The warm runner: one long-lived ``backfill run`` serving partition after partition (``--launcher warm``).

The executor starts it with two descriptors: each request arrives on one as a JSON line (the ``backfill
run`` arguments, working directory, environment and log file of one partition), and the exit code goes
back on the other. A run is exactly what ``backfill run ARGS`` would be — same parser, same output (into
that partition's log, through descriptors 1 and 2), same run record, same exit code — minus the start-up:
the imports are done once, the parsed pipeline is kept (read again when any of its files changes), and the
DuckDB handles of a run that fully succeeded stay open for the next one.

SIGINT or SIGTERM during a run interrupts its queries and Python assets (their transactions roll back);
the runner answers 130 and waits for the next request. It never outlives the executor: the parent's death
kills it (``PR_SET_PDEATHSIG``), and end of file on its requests makes it close its databases and leave.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import traceback
from collections.abc import Callable

import orjson

from engine.base.errors import EXIT_BAD_INPUT, EXIT_CANCELLED
from engine.base.parent_death import set_parent_death_signal


def serve_from_arguments(args: list[str], main: Callable[[list[str]], int]) -> int:
    """``main`` is the ``backfill`` command itself: each request is run exactly as ``backfill ARGS`` would. Typed by
    hand with anything but two open descriptors and a PID, one line and exit 2 (never a traceback)."""
    usable = len(args) == 3 and all(arg.isascii() and arg.isdecimal() for arg in args)
    if usable:
        requests, replies, parent = (int(value) for value in args)
        usable = _open(requests) and _open(replies)
    if not usable:
        sys.stderr.write(
            "backfill: error: __warm-runner takes REQUESTS REPLIES EXECUTOR_PID, two open descriptors and a process "
            "ID (started by the warm launcher)\n"
        )
        return EXIT_BAD_INPUT
    return serve(requests, replies, parent, main)


def _open(descriptor: int) -> bool:
    try:
        os.fstat(descriptor)
    except (OSError, OverflowError):
        return False
    return True


def serve(requests_fd: int, replies_fd: int, parent: int, main: Callable[[list[str]], int]) -> int:
    _die_with(parent)
    from engine.pipeline.duckdb_pool import PARKED
    from engine.pipeline.loading import PIPELINES
    from engine.pipeline.runner import CANCELLATION
    from engine.pipeline.templating import environment
    from engine.pipeline.yamlfile import line_loader
    from tui.cli.run_command import run_command  # noqa: F401  (imported now, not during the first partition)

    environment(), line_loader()  # jinja2 and PyYAML, imported on first use elsewhere: here before the first partition

    PIPELINES.enabled = PARKED.enabled = True
    state = {"running": False}

    def on_stop(signum: int, _frame: object) -> None:
        if state["running"]:
            CANCELLATION.cancel(f"cancelled ({signal.Signals(signum).name})")

    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, on_stop)
    null = os.open(os.devnull, os.O_RDWR)
    with os.fdopen(requests_fd, "rb") as requests:
        for line in requests:
            request = orjson.loads(line)
            CANCELLATION.reset()
            state["running"] = True
            try:
                code = _run_one(request, main, null)
            finally:
                state["running"] = False
            if CANCELLATION.reason is not None and code != 0:
                code = EXIT_CANCELLED
            os.write(replies_fd, orjson.dumps({"exit": code}) + b"\n")
    PARKED.close_all()
    return 0


def _run_one(request: dict, main, null: int) -> int:
    """One ``backfill run``, its output in the partition's log; the exit code, whatever happens."""
    log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    os.environ.clear()
    os.environ.update(request["env"])
    try:
        os.chdir(request["cwd"])
        return main(request["argv"])
    except SystemExit as error:
        return error.code if isinstance(error.code, int) else 1
    except BaseException:  # a bug of ours: the traceback goes to the partition's log, the runner goes on
        traceback.print_exc()
        return 1
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os.dup2(null, 1)
        os.dup2(null, 2)


def _die_with(parent: int) -> None:
    """Be killed when the executor's process ends, however it ends (SIGKILL included)."""
    set_parent_death_signal(signal.SIGKILL)
    if os.getppid() != parent:  # the parent died before the call above took effect
        os._exit(1)
