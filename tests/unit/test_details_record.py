"""The details pane over a record that lags the status board (issue 26, item 2): it shows what the record holds
now, read again whenever the record changes — never a finished status above an attempt still running for good."""

from __future__ import annotations

import asyncio

from textual.app import App, ComposeResult

from tests.tui.fixtures import FixedStateSource, build_saved_backfill
from tests.tui.live import screen_text
from tests.unit.test_partition_table import lagging
from tui.app.widgets.details import PartitionDetails


class DetailsApp(App):
    def __init__(self, source) -> None:
        super().__init__()
        self.source = source

    def compose(self) -> ComposeResult:
        yield PartitionDetails(self.source)


def summary(app) -> str:
    """The pane's summary as the terminal shows it (the log below it left out)."""
    return screen_text(app).split("[ and ] choose")[0]


def attempt_line(text: str, number: int) -> str:
    return next(line for line in text.splitlines() if line.lstrip("▸ ").startswith(f"#{number} "))


def test_the_pane_shows_the_record_as_it_is_now_whatever_the_attempt_count(tmp_path):
    """Partition 40 failed on its second attempt, but the record still holds that attempt running: the pane
    shows it running; when the record is written (two attempts still), the next poll shows it failed with its
    reason, and a poll with nothing changed keeps the pane as it is."""
    source = FixedStateSource(build_saved_backfill(tmp_path / "states"))
    ended = lagging(source, 40)

    async def scenario() -> None:
        app = DetailsApp(source)
        async with app.run_test(size=(120, 24)) as pilot:
            details = app.query_one(PartitionDetails)
            details.show_partition(40)
            await pilot.pause()
            text = summary(app)
            assert "partition 40  failed" in text and "running" in attempt_line(text, 2)
            assert text.count("psycopg.OperationalError") == 1  # the first attempt's, under it
            details.poll()
            await pilot.pause()
            assert "running" in attempt_line(summary(app), 2)
            source.store.write_record(ended, durable=False)
            details.poll()
            await pilot.pause()
            text = summary(app)
            assert "failed" in attempt_line(text, 2) and "running" not in attempt_line(text, 2)
            assert text.count("psycopg.OperationalError: connection to server lost") == 2  # and as the reason

    asyncio.run(scenario())
