"""A local Dask cluster of two worker processes for tests, its scheduler address written to ARGV[1]; runs until
terminated. The scheduler never reruns a task whose worker died (backfill owns retries)."""

from __future__ import annotations

import signal
import sys
from pathlib import Path


def main() -> None:
    import dask
    from distributed import LocalCluster

    dask.config.set({"distributed.scheduler.allowed-failures": 0})
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        Path(sys.argv[1]).write_text(cluster.scheduler_address)
        try:
            signal.pause()
        except KeyboardInterrupt:
            return


def _stop(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, _stop)
    main()
