"""The real ``backfill`` command on a slow disk for partition records: each rename into a ``partitions/`` directory
waits ``SLOW_RECORD_SECONDS`` first. A write the executor must wait for is then visibly waited for, or not.

Run as ``python tests/slow_records.py ARGS...``; everything but the delay is the product's own code.
"""

from __future__ import annotations

import os
import sys
import time

import engine.base.atomic as atomic
from tui.cli.main import main

_DELAY = float(os.environ.get("SLOW_RECORD_SECONDS", "1"))
_replace = atomic._replace


def slow_replace(temporary: str, path) -> None:
    if os.path.basename(os.path.dirname(os.fspath(path))) == "partitions":
        time.sleep(_DELAY)
    _replace(temporary, path)


atomic._replace = slow_replace

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
