"""Run a backfill under the dashboard: the executor on its thread, the app on the main thread.

The app returns when the backfill succeeded, or when the user quits a finished
one, or after a stop once every child has exited. Whatever happens to the app,
the executor is stopped and joined before we return: no child outlives us.
"""

from __future__ import annotations

import signal
import threading

from engine.execute.backfill import Prepared
from engine.execute.executor import Executor, Outcome
from tui.app.backfill_app import BackfillApp
from tui.app.sources import ExecutorSource


def run_with_dashboard(executor: Executor, prepared: Prepared, *, no_color: bool) -> Outcome:
    result: dict[str, object] = {}

    def work() -> None:
        try:
            result["outcome"] = executor.run()
        except BaseException as error:
            result["error"] = error

    thread = threading.Thread(target=work, name="executor", daemon=False)
    source = ExecutorSource(executor, options=prepared.options, parallelism=prepared.parallelism)
    app = BackfillApp(source, no_color=no_color)
    previous = signal.signal(signal.SIGTERM, lambda *_: executor.request_stop("terminated (SIGTERM)"))
    thread.start()
    try:
        app.run()
    finally:
        if thread.is_alive():
            executor.request_stop("the dashboard closed")
        thread.join()
        signal.signal(signal.SIGTERM, previous)
    if "error" in result:
        raise result["error"]  # type: ignore[misc]
    return result["outcome"]  # type: ignore[return-value]
