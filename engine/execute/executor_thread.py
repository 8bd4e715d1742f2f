"""The executor on a thread of its own, as every front end runs it: the outcome, or the exception that ended
the run, kept for whoever joins it (never lost to a thread's excepthook)."""

from __future__ import annotations

import threading

from engine.execute.executor import Executor, Outcome


class ExecutorThread:
    """Started once; :meth:`result` joins it and returns the outcome or raises what the executor raised."""

    def __init__(self, executor: Executor, name: str = "executor") -> None:
        self.executor = executor
        self.outcome: Outcome | None = None  # set when the executor returned
        self.error: BaseException | None = None  # set when it raised instead
        self._thread = threading.Thread(target=self._work, name=name, daemon=False)

    def _work(self) -> None:
        try:
            self.outcome = self.executor.run()
        except BaseException as error:
            self.error = error

    def start(self) -> ExecutorThread:
        self._thread.start()
        return self

    def is_alive(self) -> bool:
        return self._thread.is_alive()

    def join(self, timeout: float | None = None) -> None:
        self._thread.join(timeout)

    def result(self) -> Outcome:
        """Wait for the end of the run: its outcome, or the exception that ended it, raised here."""
        self._thread.join()
        if self.error is not None:
            raise self.error
        assert self.outcome is not None
        return self.outcome
