"""The completion bar's throughput (issue 26, item 17): partitions per minute over the last five minutes of the
run, beside the ETA — read from the painted bar, with a clock the test moves."""

from __future__ import annotations

import asyncio

from textual.app import App, ComposeResult

from tests.tui.live import screen_text
from tui.app.sources import SourceState
from tui.app.widgets.completion import CompletionBar

COUNTS = {"queued": 0, "running": 0, "succeeded": 0, "failed": 0, "cancelled": 0, "skipped": 0}


class BarApp(App):
    def __init__(self, clock) -> None:
        super().__init__()
        self.clock = clock

    def compose(self) -> ComposeResult:
        yield CompletionBar(self.clock)


def state(done: int, *, status: str = "running") -> SourceState:
    return SourceState(1, COUNTS, 1000, 1000, done, (), status, None, None, 0.0)


def test_the_rate_is_said_after_ten_seconds_and_follows_the_last_five_minutes():
    """Nothing before 10 s of polls; 30 done in a minute reads 30/min; after five minutes without progress the
    old progress leaves the window and the bar says 0.0/min; a finished run says no rate."""
    now = [0.0]

    async def scenario() -> None:
        app = BarApp(lambda: now[0])
        async with app.run_test(size=(100, 4)) as pilot:
            bar = app.query_one(CompletionBar)

            async def shown(seconds: float, done: int, status: str = "running") -> str:
                now[0] = seconds
                bar.show(state(done, status=status))
                await pilot.pause()
                return screen_text(app).splitlines()[0]

            assert "/min" not in await shown(0, 0)
            assert "/min" not in await shown(5, 5)
            assert "30/min" in await shown(60, 30)
            assert "6.0/min" in await shown(300, 30)  # 30 in the 300 s since the first poll
            assert "0.0/min" in await shown(400, 30)  # the progress left the window: stalled
            assert "/min" not in await shown(401, 1000, "finished")

    asyncio.run(scenario())
