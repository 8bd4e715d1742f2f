"""Pilot tests of status filters over thousands of rows: what the screen shows and what a rerun selects."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

from engine.store.status import Status
from tests.tui.fixtures import build_large_saved_backfill
from tests.tui.live import screen_text, wait_until
from tui.app.backfill_app import BackfillApp
from tui.app.screens.dashboard import DashboardScreen
from tui.app.screens.rerun_form import RerunForm
from tui.app.widgets.partition_table import PartitionTable

ROW = re.compile(r"^\s*▸?\s*\d+\s+\d{4}-\d\d-\d\d ")
DAYS = 9_800  # 4 900 succeeded (even days) and 4 900 queued: both filters span two blocks of 4 096 rows


@pytest.fixture(scope="module")
def large_store(tmp_path_factory):
    return build_large_saved_backfill(tmp_path_factory.mktemp("large"), days=DAYS)


async def choose_filter(pilot, app, label: str) -> None:
    await pilot.press("s")
    await wait_until(pilot, lambda: "Show partitions" in screen_text(app))
    options = ["all", "queued", "running", "succeeded", "failed", "failed or cancelled", "cancelled"]
    await pilot.press(*["down"] * options.index(label), "enter")
    await wait_until(pilot, lambda: f"filter: {label}" in screen_text(app))


def cursor_line(app) -> str:
    return next(line for line in screen_text(app).splitlines() if line.lstrip().startswith("▸"))


@pytest.mark.parametrize(("label", "symbol", "last"), [("succeeded", "✓", DAYS - 2), ("queued", "·", DAYS - 1)])
def test_filtered_end_shows_the_last_matching_partition(large_store: Path, label, symbol, last):
    """With more than 4 096 matching rows, End on a status filter lands on the last partition with that status
    (not a partition of another status, not a crash), and Home on the first."""
    app = BackfillApp(open_store=large_store, frozen=True)

    async def scenario():
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_until(pilot, lambda: isinstance(app.screen, DashboardScreen))
            await choose_filter(pilot, app, label)
            await pilot.press("end")
            await wait_until(pilot, lambda: f" {last} " in cursor_line(app))
            assert symbol in cursor_line(app) and label in cursor_line(app)
            rows = [line for line in screen_text(app).splitlines() if ROW.match(line)]
            assert rows and all(label in line for line in rows), rows
            await pilot.press("pageup", "pageup")
            table = app.screen.query_one(PartitionTable)
            assert app.screen.source.board.status(table.selected_index).label == label
            await pilot.press("home")
            first = 0 if label == "succeeded" else 1
            await wait_until(pilot, lambda: f" {first} " in cursor_line(app))

    asyncio.run(scenario())


def test_rerun_those_matching_the_filter_selects_exactly_the_filtered_partitions(large_store: Path):
    """r on a filtered table offers "those matching the filter" holding exactly the partitions the filter shows."""
    app = BackfillApp(open_store=large_store, frozen=True)

    async def scenario():
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_until(pilot, lambda: isinstance(app.screen, DashboardScreen))
            await choose_filter(pilot, app, "succeeded")
            board = app.screen.source.board
            expected = frozenset(i for i in range(board.size) if board.status(i) is Status.SUCCEEDED)
            await pilot.press("r")
            await wait_until(pilot, lambda: isinstance(app.screen, RerunForm))
            assert "those matching the filter 'succeeded' (4" in screen_text(app)
            [matching] = [c for c in app.screen.choices if c.key == "filter"]
            assert matching.selection.indices == expected and matching.count == len(expected)

    asyncio.run(scenario())


def test_slash_jumps_to_a_date_an_index_or_an_id_prefix(large_store: Path):
    """/ takes a date, a partition number or an ID prefix and puts the cursor (on screen) on that partition;
    a bad value is named in the box and nothing moves."""
    app = BackfillApp(open_store=large_store, frozen=True)

    async def jump(pilot, text: str) -> None:
        await pilot.press("slash")
        await wait_until(pilot, lambda: "Jump to" in screen_text(app))
        await pilot.press(*text, "enter")

    async def scenario():
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_until(pilot, lambda: isinstance(app.screen, DashboardScreen))
            spec = app.screen.source.spec
            await jump(pilot, "2010-06-15T13:30")
            day = (2010 - 2000) * 365 + 3 + 31 + 28 + 31 + 30 + 31 + 14  # 2000, 2004 and 2008 were leap years
            await wait_until(pilot, lambda: f" {day} " in cursor_line(app) and "2010-06-15 00:00" in cursor_line(app))
            await jump(pilot, "9794")
            await wait_until(pilot, lambda: " 9794 " in cursor_line(app))
            target = spec.plan.interval(4321)
            await jump(pilot, spec.ids.of(target.start, target.end)[:8])
            await wait_until(pilot, lambda: " 4321 " in cursor_line(app))
            await jump(pilot, "1999-01-01")
            await wait_until(pilot, lambda: "outside this backfill's range" in screen_text(app))
            await pilot.press("escape")
            await wait_until(pilot, lambda: " 4321 " in cursor_line(app))

    asyncio.run(scenario())


def test_q_on_a_saved_backfill_just_leaves_and_the_footer_says_so(large_store: Path):
    """A backfill nobody runs here: the footer offers "q Leave", the status line says q leaves, and q exits."""
    app = BackfillApp(open_store=large_store, frozen=True)

    async def scenario():
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_until(pilot, lambda: isinstance(app.screen, DashboardScreen))
            await wait_until(pilot, lambda: "q Leave" in screen_text(app))
            assert "q Stop" not in screen_text(app) and "· q leaves" in screen_text(app)
            await pilot.press("q")
            await wait_until(pilot, lambda: not app.is_running)

    asyncio.run(scenario())


def test_clicking_a_row_selects_it(large_store: Path):
    """A mouse click on a row of the partition table moves the cursor (on screen) to that row."""
    app = BackfillApp(open_store=large_store, frozen=True)

    async def scenario():
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_until(pilot, lambda: isinstance(app.screen, DashboardScreen))
            await pilot.press("pagedown")
            table = app.screen.query_one(PartitionTable)
            top = int(table.scroll_offset.y)
            await pilot.click(PartitionTable, offset=(10, 4))
            await wait_until(pilot, lambda: table.selected_index == top + 4)
            assert f" {top + 4} " in cursor_line(app)

    asyncio.run(scenario())


def test_a_saved_view_has_no_follow_mode_and_counts_use_separators(large_store: Path):
    """Nothing runs a saved backfill: no 'follow on' and no f key offered; counts carry thousands separators."""
    app = BackfillApp(open_store=large_store, frozen=True)

    async def scenario():
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_until(pilot, lambda: "q Leave" in screen_text(app))
            text = screen_text(app)
            assert "follow" not in text.lower() and "f Follow" not in text
            assert "4,900/9,800 succeeded" in text and "✓ 4,900 succeeded" in text

    asyncio.run(scenario())


def test_at_80x24_the_details_pane_leaves_the_log_eight_lines_and_help_scrolls(large_store: Path):
    """80×24: with the details pane open the log area keeps at least 8 rows; help opens within the screen and
    scrolls to its last key, and on to the legend's last glyph."""
    from tui.app.widgets.log_view import LogView

    app = BackfillApp(open_store=large_store, frozen=True)

    async def scenario():
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_until(pilot, lambda: isinstance(app.screen, DashboardScreen))
            await pilot.press("enter")
            await wait_until(pilot, lambda: "partition 0" in screen_text(app))
            log = app.screen.query_one(LogView)
            assert log.region.height >= 8 and log.region.bottom <= 22
            lines = screen_text(app).splitlines()
            assert len(lines) <= 24 and all(len(line) <= 80 for line in lines)
            assert any(line.strip().startswith("id ") for line in lines), "the ID is visible at 80×24"
            await pilot.press("escape", "question_mark")
            await wait_until(pilot, lambda: "Keys" in screen_text(app))
            assert "this help" not in screen_text(app), "the list is longer than 24 rows"
            for _ in range(60):  # ↓ scrolls a line at a time, to the last key
                if "this help" in screen_text(app):
                    break
                await pilot.press("down")
            assert "this help" in screen_text(app)
            await pilot.press("end")  # and on to the legend's last glyph
            await wait_until(pilot, lambda: "N interventions" in screen_text(app))

    asyncio.run(scenario())


def test_the_rerun_form_takes_arrow_keys_from_the_first_moment(large_store: Path):
    """r opens the form with the partition choice focused: ↓ moves the choice at once, no click or Tab first."""
    from textual.widgets import RadioSet

    app = BackfillApp(open_store=large_store, frozen=True)

    async def scenario():
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_until(pilot, lambda: isinstance(app.screen, DashboardScreen))
            await pilot.press("r")
            await wait_until(pilot, lambda: isinstance(app.screen, RerunForm))
            radio = app.screen.query_one(RadioSet)
            assert app.focused is radio
            before = radio._selected
            await pilot.press("down")
            await wait_until(pilot, lambda: radio._selected != before)

    asyncio.run(scenario())


def test_counts_in_the_filter_dialog_and_the_rerun_form_are_thousands_separated(large_store: Path):
    """The filter dialog's and the rerun form's counts read 4,900 and 9,800, as every other count does."""
    app = BackfillApp(open_store=large_store, frozen=True)

    async def scenario():
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_until(pilot, lambda: isinstance(app.screen, DashboardScreen))
            await pilot.press("s")
            await wait_until(pilot, lambda: "Show partitions" in screen_text(app))
            text = screen_text(app)
            assert "all  (9,800)" in text and "queued  (4,900)" in text and "succeeded  (4,900)" in text
            await pilot.press("escape")
            await pilot.press("r")
            await wait_until(pilot, lambda: isinstance(app.screen, RerunForm))
            assert re.search(r"\(4,900\)", screen_text(app)), screen_text(app)

    asyncio.run(scenario())


def test_at_80x24_the_details_pane_shows_the_last_two_attempts_and_eight_log_lines(tmp_path):
    """80×24, partition 40 (failed twice) selected with the details open: its interval, reason and ID, both
    attempts, and the log's last eight lines are on screen at once; the table keeps three rows."""
    from tests.tui.fixtures import build_saved_backfill

    app = BackfillApp(open_store=build_saved_backfill(tmp_path / "states"), frozen=True)

    async def scenario():
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_until(pilot, lambda: isinstance(app.screen, DashboardScreen))
            app.screen.query_one(PartitionTable).select_index(40)
            await pilot.press("enter")
            await wait_until(pilot, lambda: "psycopg.OperationalError: connection to server lost" in screen_text(app))
            lines = screen_text(app).splitlines()
            assert any(line.strip().startswith("▸ #2 failed") for line in lines), lines
            assert any(line.strip().startswith("#1 failed") for line in lines), lines
            attempts = [line for line in lines if line.strip().startswith(("▸ #", "#"))]
            assert attempts and not any(line.rstrip().endswith("…") for line in attempts), attempts  # never cut
            log = [line for line in lines if line.startswith(("loading orders", "Traceback", "  File", "psycopg"))]
            assert len(log) >= 8, lines
            rows = [line for line in lines if re.match(r"[▸ ]\s+\d+  2024-02-\d\d → 2024-02-\d\d  ", line)]
            assert len(rows) == 3, lines
            # the reason column stays beside the scrollbar at 80 columns (midnight boundaries show as dates)
            assert "psycopg.Operational" in next(row for row in rows if row.startswith("▸")), rows

    asyncio.run(scenario())


def test_at_80x24_the_rerun_form_s_errors_wrap_whole_and_refuse_what_the_command_line_refuses(tmp_path):
    """80×24: a retry count in words and a parallelism in Arabic-Indic digits (which int() would take as 3) are
    each refused beside their field in a wrapped line read whole; Run stays disabled; an absurd worker count
    too, while 100,000 is allowed."""
    from tests.tui.fixtures import build_saved_backfill

    app = BackfillApp(open_store=build_saved_backfill(tmp_path / "states"), frozen=True)

    async def scenario():
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_until(pilot, lambda: isinstance(app.screen, DashboardScreen))
            await pilot.press("r")
            await wait_until(pilot, lambda: isinstance(app.screen, RerunForm))
            app.screen.query_one("#retries").value = "three"
            app.screen.query_one("#max_parallel").value = "٣"
            app.screen.query_one("#workers").value = "1_0"
            await pilot.pause()
            flat = " ".join(" ".join(line.strip(" │▆▇").split()) for line in screen_text(app).splitlines())
            assert "'three' is not a whole number: use ASCII digits from 0 to 100,000" in flat
            error = app.screen.query_one("#error-max_parallel")
            assert error.render().plain == "'٣' is not a whole number: use ASCII digits from 1 to 100,000"
            assert error.size.height >= 2  # wrapped, not cut at the form's edge
            assert app.screen.query_one("#submit").disabled
            app.screen.query_one("#max_parallel").value = "100000"
            app.screen.query_one("#retries").value = "0"
            await pilot.pause()
            assert "'1_0' is not a whole number" in app.screen.query_one("#error-workers").render().plain
            app.screen.query_one("#workers").value = "100001"
            await pilot.pause()
            assert app.screen.query_one("#error-workers").render().plain == "100,001 is too large: use at most 100,000"
            assert app.screen.query_one("#error-max_parallel").render().plain == ""
            app.screen.query_one("#workers").value = "4"
            await pilot.pause()
            assert not app.screen.query_one("#submit").disabled

    asyncio.run(scenario())


def test_at_80_columns_the_status_line_shortens_the_record_path_in_the_middle(tmp_path):
    """A finished run's record path longer than the line: its start and its file name stay, the middle gives
    way (never "· record" alone), and the line ends with how to quit."""
    from engine.execute.executor_snapshot import FINISHED
    from tests.tui.fixtures import FixedStateSource, build_saved_backfill
    from tui.app.widgets.status_line import StatusLine

    class Finished(FixedStateSource):
        record = "/home/operator/repositories/warehouse/.context/backfill-orders-20240101-20240331-5eed01.yml"

        def poll(self):
            from dataclasses import replace

            return replace(super().poll(), outcome="succeeded")

    source = Finished(build_saved_backfill(tmp_path / "states"), state=FINISHED)
    app = BackfillApp(source, frozen=True)

    async def scenario():
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_until(pilot, lambda: "record" in app.screen.query_one(StatusLine).render_line_text().plain)
            line = app.screen.query_one(StatusLine).render_line_text().plain
            shown = line.split(" · record ")[1].split(" · q to quit")[0]
            assert shown.startswith("/home/") and shown.endswith("-5eed01.yml") and "…" in shown, line
            assert len(shown) >= 24

    asyncio.run(scenario())
