"""A live dashboard for Pilot tests: a real executor on its thread running real children."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

from engine.base.settings import Settings
from engine.execute.backfill import Prepared, create_backfill, state_root_for
from engine.execute.executor import Executor
from engine.pipeline.options import RunOptions
from engine.spec.backfill_spec import ExecutionOptions
from engine.spec.planning import plan_request
from tui.app.backfill_app import BackfillApp
from tui.app.screens.dashboard import DashboardScreen
from tui.app.sources import ExecutorSource
from tui.app.widgets.partition_table import PartitionTable
from tui.app.widgets.status_line import StatusLine


@dataclass
class Live:
    app: BackfillApp
    executor: Executor
    prepared: Prepared
    thread: threading.Thread

    @property
    def table(self) -> PartitionTable:
        return self.screen.query_one(PartitionTable)

    @property
    def screen(self) -> DashboardScreen:
        return next(s for s in self.app.screen_stack if isinstance(s, DashboardScreen))

    def status_line(self) -> str:
        return self.screen.query_one(StatusLine).render_line_text().plain

    def row_text(self, y: int) -> str:
        return self.table.render_line(y).text

    def finish(self) -> None:
        self.executor.request_stop("test finished")
        self.thread.join(timeout=60)


def start_live(
    work: Path,
    command: str,
    start: str,
    end: str,
    *,
    partition: str = "daily",
    max_parallel: int = 2,
    retries: int = 0,
    on_failure: str = "stop",
    grace: float = 30.0,
    exit_when_succeeded: bool = True,
    target: str | None = None,
    launcher: str = "warm",
) -> Live:
    """Create a backfill of ``command`` (or of the pipeline ``target``) under ``work`` and start executing it."""
    planned = plan_request(
        target=target,
        command=None if target else command,
        name=None,
        start=start,
        end=end,
        timezone="UTC",
        partition=partition,
        environment=None,
        config_file=None,
        run_options=RunOptions(),
        options=ExecutionOptions(max_parallel=max_parallel, retries=retries, on_failure=on_failure, launcher=launcher),
        force=False,
    )
    root = state_root_for(planned.spec, str(work / "states"), work)
    prepared = create_backfill(planned, root=root, cwd=work, settings=Settings())
    if target:
        assert prepared.launcher_name == "warm"
    executor = prepared.executor(grace=grace)
    source = ExecutorSource(executor, options=prepared.options, parallelism=prepared.parallelism)
    app = BackfillApp(source, closes_when_done=exit_when_succeeded)
    thread = threading.Thread(target=executor.run, name="executor", daemon=True)
    thread.start()
    return Live(app, executor, prepared, thread)


def screen_text(app) -> str:
    """What the terminal shows, as plain text lines (rebuilt from Textual's own SVG screenshot)."""
    import html
    import re

    svg = app.export_screenshot()
    spans = []
    for match in re.finditer(
        r'<text[^>]*?x="([\d.]+)" y="([\d.]+)" textLength="([\d.]+)"[^>]*clip-path[^>]*>([^<]*)</text>', svg
    ):
        content = html.unescape(match.group(4)).replace("\xa0", " ").replace("\n", " ").replace("\n", " ")
        spans.append((float(match.group(2)), float(match.group(1)), float(match.group(3)), content))
    widths = [length / len(text) for _, _, length, text in spans if text and length]
    cell = min(widths) if widths else 12.2
    rows: dict[float, list[str]] = {}
    for y, x, _, content in spans:
        row = rows.setdefault(y, [])
        column = round(x / cell)
        if len(row) < column:
            row.extend(" " * (column - len(row)))
        row[column : column + len(content)] = list(content)
    return "\n".join("".join(row).rstrip() for _, row in sorted(rows.items()))


async def wait_until(pilot, condition, timeout: float = 30.0) -> None:
    """Let the app run until ``condition()`` holds; fail after ``timeout`` seconds (never a fixed sleep)."""
    import time

    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await pilot.pause(0.05)
