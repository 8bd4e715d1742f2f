"""Another process holding a DuckDB file open for writing, as a pipeline child would."""

from __future__ import annotations

import contextlib
import subprocess
import sys


@contextlib.contextmanager
def writing(database: str):
    """Another process holding the DuckDB file open for writing while the block runs (yields that process)."""
    writer = subprocess.Popen(
        [sys.executable, "-c", "import duckdb, sys; c = duckdb.connect(sys.argv[1]); print('ok', flush=True); "
         "sys.stdin.read()", database],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert writer.stdout.readline() == "ok\n"
        yield writer
    finally:
        writer.stdin.close()
        writer.wait(timeout=30)
