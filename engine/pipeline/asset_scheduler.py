"""Runs the selected assets in dependency order within the worker and connection limits.

Decisions are made on one thread: an asset starts when every selected upstream
has succeeded, fewer than ``workers`` assets run, its connection has a free
slot (``max_concurrent_assets``), and no Python asset holds the connection's
database exclusively. A failed asset stops only its downstream, which is
reported as ``upstream_failed``.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable

from engine.base.settings import DEFAULT_STOP_GRACE
from engine.dates.durations import format_duration
from engine.pipeline.asset_run import FAILED, TIMEOUT_KILL_AFTER, UPSTREAM_FAILED, AssetResult, AssetRun
from engine.pipeline.duckdb_pool import DuckDBPool
from engine.pipeline.loading import Pipeline


def kill_before_grace(grace: float) -> float:
    """When a cancelled run's scripts get SIGKILL: a second before the stop grace ends, or halfway through a grace
    shorter than two seconds."""
    return max(grace - 1.0, grace / 2)


class AssetScheduler:
    def __init__(
        self,
        pipeline: Pipeline,
        selected: set[str],
        make_run: Callable[[str], AssetRun],
        *,
        workers: int,
        limits: dict[str, int | None],
        pool: DuckDBPool,
        timeout: int | None,
        on_finish: Callable[[AssetResult], None],
        stop_grace: float = DEFAULT_STOP_GRACE,
    ) -> None:
        self.pipeline = pipeline
        self.selected = selected
        self.make_run = make_run
        self.workers = workers
        self.limits = limits
        self.pool = pool
        self.timeout = timeout
        self.on_finish = on_finish
        self.results: dict[str, AssetResult] = {}
        self._active: dict[str, tuple[AssetRun, float]] = {}
        self._began = time.monotonic()  # reset when run() starts: --timeout counts from there
        self._per_connection: dict[str, int] = {}
        self._exclusive: set[str] = set()
        self._finished: queue.Queue[AssetRun] = queue.Queue()
        self._stopping: str | None = None
        self._cancels = 0
        self.stop_grace = stop_grace
        self.peak_concurrency = 0

    def stop(self, reason: str, kill_after: float = TIMEOUT_KILL_AFTER) -> None:
        """From another thread or a signal handler: start nothing more, interrupt what runs (each finishes
        as failed with ``reason``, its transaction rolled back; a script is killed after ``kill_after`` seconds);
        assets not started are reported failed."""
        self._stopping = self._stopping or reason
        for run, _started in list(self._active.values()):
            run.stop(self._stopping, kill_after)

    def cancel(self, reason: str) -> None:
        """A signal to the run: stop it. A script still running gets SIGKILL before the grace the executor gives
        this process ends (its SIGKILL would reach this process's group, never the script's session); a second
        signal kills it at once."""
        self._cancels += 1
        self.stop(reason, kill_after=0.0 if self._cancels > 1 else kill_before_grace(self.stop_grace))

    def _upstream(self, name: str) -> list[str]:
        return [d for d in self.pipeline.upstream(name) if d in self.selected]

    def _ready(self, pending: set[str]) -> list[str]:
        return sorted(
            n
            for n in pending
            if all(self.results.get(u) and self.results[u].status != FAILED for u in self._upstream(n))
        )

    def _can_start(self, name: str) -> bool:
        asset = self.pipeline.assets[name]
        connection = self.pipeline.connection_of(asset)
        if connection is None:
            return True
        if connection in self._exclusive:
            return False
        active = self._per_connection.get(connection, 0)
        if asset.kind == "python":
            return active == 0
        limit = self.limits.get(connection)
        return limit is None or active < limit

    def _start(self, name: str) -> None:
        asset = self.pipeline.assets[name]
        connection = self.pipeline.connection_of(asset)
        if connection is not None:
            self._per_connection[connection] = self._per_connection.get(connection, 0) + 1
            if asset.kind == "python":
                self._exclusive.add(connection)
                self.pool.close(connection)  # the script's process opens the file itself
        run = self.make_run(name)
        self._active[name] = (run, time.monotonic())
        self.peak_concurrency = max(self.peak_concurrency, len(self._active))
        thread = threading.Thread(target=self._work, args=(run,), name=f"asset {name}", daemon=True)
        thread.start()

    def _work(self, run: AssetRun) -> None:
        try:
            run.run()
        finally:
            self._finished.put(run)

    def _finish(self, run: AssetRun) -> None:
        name = run.asset.name
        del self._active[name]
        connection = self.pipeline.connection_of(run.asset)
        if connection is not None:
            self._per_connection[connection] -= 1
            self._exclusive.discard(connection)
        self.results[name] = run.result
        self.on_finish(run.result)

    def _mark_downstream_failed(self, failed: str, pending: set[str]) -> None:
        frontier = [failed]
        while frontier:
            current = frontier.pop()
            for child in self.pipeline.downstream.get(current, []):
                if child in pending:
                    pending.discard(child)
                    result = AssetResult(
                        child, self.pipeline.assets[child].kind, UPSTREAM_FAILED, error=f"upstream {current!r} failed"
                    )
                    self.results[child] = result
                    self.on_finish(result)
                    frontier.append(child)

    def run(self) -> dict[str, AssetResult]:
        pending = set(self.selected)
        self._began = time.monotonic()
        while pending or self._active:
            if self._stopping is not None:
                for name in sorted(pending):
                    result = AssetResult(name, self.pipeline.assets[name].kind, FAILED, error=self._stopping)
                    self.results[name] = result
                    self.on_finish(result)
                pending.clear()
            for name in self._ready(pending):
                if len(self._active) >= self.workers:
                    break
                if self._can_start(name):
                    pending.discard(name)
                    self._start(name)
            try:
                run = self._finished.get(timeout=0.05)
            except queue.Empty:
                run = None
            if run is not None:
                self._finish(run)
                if run.result.status == FAILED:
                    self._mark_downstream_failed(run.asset.name, pending)
            self._enforce_timeouts()
        return self.results

    def _limit_of(self, run: AssetRun) -> tuple[int, str] | None:
        """The asset's own timeout, or the pipeline's default.timeout."""
        if run.asset.timeout is not None:
            return run.asset.timeout, "the asset's timeout"
        if self.pipeline.default_timeout is not None:
            return self.pipeline.default_timeout, "the pipeline's default.timeout"
        return None

    def _enforce_timeouts(self) -> None:
        """Each asset's own limit, and --timeout over the whole run, as Bruin's ("timeout for the entire pipeline
        run"): past it, what runs is stopped and nothing more starts."""
        now = time.monotonic()
        if self.timeout is not None and (now - self._began) * 1_000_000 >= self.timeout:
            self.stop(f"timed out after {format_duration(self.timeout)} (--timeout, the whole run's)")
        for run, started in list(self._active.values()):
            limit = self._limit_of(run)
            if limit is not None and (now - started) * 1_000_000 >= limit[0]:
                run.stop(f"timed out after {format_duration(limit[0])} ({limit[1]})")
