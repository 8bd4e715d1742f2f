"""``backfill __local-cluster N EXECUTOR_PID``: the process behind ``--launcher dask-local:N``, started by the
engine's ``LocalCluster`` (never by a person). Its standard output carries the scheduler's address, one line;
the end of its standard input (the executor gone) ends it."""

from __future__ import annotations

import sys

from engine.base.errors import EXIT_BAD_INPUT, EXIT_FAILED


def serve(args: list[str]) -> int:
    from engine.execute.local_cluster import serve_local_cluster

    if len(args) != 2 or not all(arg.isascii() and arg.isdecimal() for arg in args):
        sys.stderr.write("backfill: error: __local-cluster takes WORKERS EXECUTOR_PID (started by the engine)\n")
        return EXIT_BAD_INPUT

    def announce(address: str) -> None:
        sys.stdout.write(address + "\n")
        sys.stdout.flush()

    served = serve_local_cluster(int(args[0]), int(args[1]), announce=announce, wait=sys.stdin.buffer.read)
    return 0 if served else EXIT_FAILED
