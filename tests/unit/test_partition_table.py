"""The partition table in a minimal app (Pilot), over the saved fixture: what each row draws, the cursor, the
marks, the last row, filters, follow, and the repaint after a poll — read from the lines the widget paints."""

from __future__ import annotations

import asyncio

import pytest
from textual.app import App, ComposeResult

from engine.execute.executor_snapshot import RunningPartition
from engine.store.status import Status
from tests.tui.fixtures import FROZEN, FixedStateSource, build_saved_backfill
from tui.app.widgets.partition_table import PartitionTable, compact


class TableApp(App):
    def __init__(self, source) -> None:
        super().__init__()
        self.source = source

    def compose(self) -> ComposeResult:
        yield PartitionTable(self.source, lambda: FROZEN)


@pytest.fixture
def source(tmp_path):
    return FixedStateSource(build_saved_backfill(tmp_path / "states"))


def lines(table: PartitionTable) -> list[str]:
    return [table.render_line(y).text for y in range(table.size.height)]


def drive(source, scenario, size=(120, 12)) -> None:
    drive_app(TableApp(source), scenario, size)


def test_a_row_shows_index_interval_status_attempts_time_and_reason(source):
    """Row 0 succeeded in 3.5 s; row 40 failed twice (12 s) with its reason, cut to the width; the cursor row
    carries ▸; the header lines up with the rows."""

    async def scenario(pilot, table):
        table.follow = False
        first = table.render_line(0).text
        assert first.startswith("▸  0  2024-01-01 00:00+00 → 2024-01-02 00:00+00  ✓ succeeded    1      3.5s")
        table.select_index(40)
        await pilot.pause()
        row = table.rows.row_of(40) - int(table.scroll_offset.y)
        failed = table.render_line(row).text
        assert failed.startswith("▸ 40  2024-02-10 00:00+00 → 2024-02-11 00:00+00  ✗ failed       2       12s  ")
        assert failed.endswith("  psycopg.OperationalError: connection to …")  # cut at the table's width
        header = table.header_text().plain
        assert header.index("status") == failed.index("✗") and header.index("try") + 2 == failed.index("2       12s")

    drive(source, scenario)


def test_the_reason_is_cut_to_fit_and_dropped_when_there_is_no_room(source):
    """A narrow table ends the reason with … at its last column; narrower still, no reason at all."""

    async def scenario(pilot, table):
        table.select_index(41)
        await pilot.pause()
        row = table.rows.row_of(41) - int(table.scroll_offset.y)
        text = table.render_line(row).text
        assert len(text) == table.scrollable_content_region.width and text.rstrip().endswith("…")
        assert "psycopg" in text

    drive(source, scenario, size=(100, 12))

    async def narrow(pilot, table):
        table.select_index(41)
        await pilot.pause()
        row = table.rows.row_of(41) - int(table.scroll_offset.y)
        assert "psycopg" not in table.render_line(row).text

    drive(source, narrow, size=(86, 12))


def test_keys_move_the_cursor_to_the_last_row_and_back_and_turn_follow_off(source):
    """Down, Page Down, End, Home and Up move the cursor within the plan (never past its last row) and each
    turns follow off; below the last row the table paints blank lines."""

    async def scenario(pilot, table):
        assert table.follow
        await pilot.press("down")
        assert table.cursor_row == 1 and not table.follow
        await pilot.press("pagedown")
        assert table.cursor_row == 1 + table.size.height
        await pilot.press("end")
        assert table.cursor_row == 89 and table.selected_index == 89
        await pilot.press("down", "pagedown")
        assert table.cursor_row == 89
        visible = lines(table)
        assert visible[-1].startswith("▸ 89  2024-03-30 00:00+00 → 2024-03-31 00:00+00  · queued")
        await pilot.press("pageup")
        assert table.cursor_row == 89 - table.size.height
        await pilot.press("home", "up")
        assert table.cursor_row == 0 and int(table.scroll_offset.y) == 0

    drive(source, scenario)


def test_space_marks_and_unmarks_the_selected_row(source):
    """The mark glyph appears and goes away with a second toggle; the set of marked partitions follows."""

    async def scenario(pilot, table):
        table.follow = False
        table.select_index(3)
        await pilot.pause()
        row = table.rows.row_of(3) - int(table.scroll_offset.y)
        table.toggle_mark()
        await pilot.pause()
        assert table.marked == {3} and table.render_line(row).text[1] == "●"
        table.toggle_mark()
        await pilot.pause()
        assert table.marked == set() and table.render_line(row).text[1] == " "

    drive(source, scenario)


def test_a_filter_shows_only_those_statuses_and_keeps_the_selection_when_shown(source):
    """Failed only: rows 40 and 41; the cursor stays on a shown partition; all again restores 90 rows."""

    async def scenario(pilot, table):
        table.select_index(41)
        table.set_filter(frozenset({Status.FAILED}))
        await pilot.pause()
        assert [table.rows.index_at(r) for r in range(len(table.rows))] == [40, 41]
        assert table.selected_index == 41
        shown = lines(table)
        assert [line[:4] for line in shown[:2]] == ["  40", "▸ 41"] and shown[2].strip() == ""
        table.set_filter(None)
        await pilot.pause()
        assert len(table.rows) == 90 and table.selected_index == 41

    drive(source, scenario)


def test_after_a_poll_changed_rows_are_repainted_and_follow_goes_to_the_earliest_running(source):
    """A partition that finished since the last poll is drawn with its new status without any key pressed;
    with follow on, the cursor moves to the earliest running partition."""

    async def scenario(pilot, table):
        running = tuple(RunningPartition(i, "pid", "run", 1, FROZEN - 5, 4000 + i) for i in (43, 44, 45, 46))
        table.update_running(running, True)
        await pilot.pause()
        assert table.selected_index == 43
        row = table.rows.row_of(44) - int(table.scroll_offset.y)
        assert "▶ running" in table.render_line(row).text and "5s" in table.render_line(row).text
        source.board.set(44, Status.SUCCEEDED)
        source.board.set_duration(44, 7.0)
        table.update_running(running[:1] + running[2:], True)
        await pilot.pause()
        assert "✓ succeeded" in app_screen_line(table, 44)
        table.follow = False
        table.update_running(tuple(r for r in running if r.index != 43), True)
        await pilot.pause()
        assert table.selected_index == 43  # follow off: the cursor stays

    drive(source, scenario)


def app_screen_line(table: PartitionTable, index: int) -> str:
    """What the terminal shows on the row of ``index`` (the app's compositor, not the widget's method)."""
    region = table.content_region
    row = table.rows.row_of(index) - int(table.scroll_offset.y)
    strips = table.app.screen._compositor.render_strips()  # the frame as it goes to the terminal
    return strips[region.y + row].text[region.x : region.x + region.width]


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("2024-03-10T00:00:00Z", "2024-03-10 00:00"),
        ("2024-03-10T00:00:00-05:00", "2024-03-10 00:00-05"),
        ("2024-03-10T00:00:30+05:30", "2024-03-10 00:00:30+05:30"),
        ("2024-03-10T06:45:00+05:45", "2024-03-10 06:45+05:45"),
    ],
)
def test_compact_instants_drop_only_what_the_header_says(text, shown):
    """Z and zero seconds go, whole-hour offsets lose their minutes; anything else is kept."""
    assert compact(text) == shown


class Listening(TableApp):
    """The minimal app, keeping every selection and follow message the table posts."""

    def __init__(self, source) -> None:
        super().__init__(source)
        self.selected: list[int] = []
        self.following: list[bool] = []

    def on_partition_selected(self, message) -> None:
        self.selected.append(message.index)

    def on_follow_changed(self, message) -> None:
        self.following.append(message.following)


def drive_app(app: TableApp, scenario, size=(120, 12)) -> None:
    async def run() -> None:
        async with app.run_test(size=size) as pilot:
            table = app.query_one(PartitionTable)
            table.focus()
            await pilot.pause()
            await scenario(pilot, table)

    asyncio.run(run())


def test_the_header_names_every_column_at_its_place(source):
    """The column titles, aligned with the index and interval widths of the plan."""

    async def scenario(pilot, table):
        assert table.header_text().plain == (
            "   #  interval (end exclusive)                   status       try   elapsed  reason"
        )
        assert table.header_text().no_wrap

    drive(source, scenario)


def test_scrolling_puts_the_cursor_where_the_keys_say(source):
    """End shows the last rows; Page Up and Page Down move the view and the cursor by a page; a selected
    partition off screen is shown a third of the way down."""

    async def scenario(pilot, table):
        height = table.size.height
        await pilot.press("end")
        assert int(table.scroll_offset.y) == 90 - height and table.cursor_row == 89
        await pilot.press("pageup")
        assert int(table.scroll_offset.y) == 90 - 2 * height and table.cursor_row == 89 - height
        await pilot.press("home")
        assert int(table.scroll_offset.y) == 0
        await pilot.press("pagedown")
        assert int(table.scroll_offset.y) == height and table.cursor_row == height
        await pilot.press("up")
        assert table.cursor_row == height - 1 and int(table.scroll_offset.y) == height - 1
        await pilot.press("home")
        table.select_index(60)
        await pilot.pause()
        assert int(table.scroll_offset.y) == 60 - height // 3 and not table.follow
        table.select_index(61)  # on screen already: the view stays
        await pilot.pause()
        assert int(table.scroll_offset.y) == 60 - height // 3
        for _ in range(height):
            await pilot.press("down")
        assert int(table.scroll_offset.y) == table.cursor_row - height + 1

    drive(source, scenario)


def test_moving_posts_the_selection_and_navigation_turns_follow_off_once(source):
    """Each move tells the app which partition is selected; the first key turns follow off and says so."""
    app = Listening(source)

    async def scenario(pilot, table):
        app.selected.clear()
        await pilot.press("down", "down", "end")
        await pilot.pause()
        assert app.selected[-3:] == [1, 2, 89]
        assert app.following[-1] is False and app.following.count(False) == 1

    drive_app(app, scenario)


def test_styles_say_what_a_row_is(source):
    """The cursor row on its background, each status in its colour, the reason in the status's colour, the
    mark in magenta, the rows below the plan blank in the plain style."""
    from tui.app.widgets.partition_table import CURSOR, MARK, PLAIN, REASON_STYLES, STATUS_STYLES

    async def scenario(pilot, table):
        table.follow = False
        table.select_index(40)
        table.toggle_mark()
        await pilot.pause()
        row = table.rows.row_of(40) - int(table.scroll_offset.y)
        segments = list(table.render_line(row))
        assert all(segment.style.bgcolor == CURSOR.bgcolor for segment in segments)
        by_text = {segment.text.strip(): segment.style for segment in segments if segment.text.strip()}
        assert by_text["●"].color == MARK.color
        assert by_text["✗ failed"].color == STATUS_STYLES[Status.FAILED].color
        reason = next(style for text, style in by_text.items() if text.startswith("psycopg"))
        assert reason.color == REASON_STYLES[Status.FAILED].color
        other = list(table.render_line(row + 1))
        assert all(segment.style.bgcolor is None for segment in other)
        assert any(s.style.color == STATUS_STYLES[Status.FAILED].color for s in other if "failed" in s.text)

    drive(source, scenario)

    async def below(pilot, table):
        table.set_filter(frozenset({Status.CANCELLED}))
        await pilot.pause()
        [blank] = list(table.render_line(3))
        assert blank.text.strip() == "" and blank.style == PLAIN
        assert "⊘ cancelled" in table.render_line(0).text

    drive(source, below)


def test_a_saved_backfill_s_running_rows_read_interrupted(tmp_path):
    """Nobody runs a saved backfill: a partition recorded running is drawn ↯ interrupted, not ▶ running."""
    from tui.app.sources import open_saved
    from tui.app.widgets.partition_table import INTERRUPTED

    saved = open_saved(build_saved_backfill(tmp_path / "states"))

    async def scenario(pilot, table):
        table.select_index(43)
        await pilot.pause()
        row = table.rows.row_of(43) - int(table.scroll_offset.y)
        text = table.render_line(row + 1).text
        assert "↯ interrupted" in text and "▶" not in text
        styled = [s for s in table.render_line(row + 1) if "interrupted" in s.text or s.text.strip() == "ed"]
        assert styled and all(s.style.color == INTERRUPTED.color for s in styled)

    drive(saved, scenario)


@pytest.mark.parametrize(("seconds", "shown"), [(0, "0s"), (9, "9s"), (10, "10s"), (65, "1m 5s")])
def test_a_running_partition_shows_its_elapsed_time(source, seconds, shown):
    """Elapsed time of a running row: whole seconds under ten, the human duration from ten on."""

    async def scenario(pilot, table):
        table.update_running((RunningPartition(43, "p", "r", 1, FROZEN - seconds, 4043),), True)
        await pilot.pause()
        row = table.rows.row_of(43) - int(table.scroll_offset.y)
        assert table.render_line(row).text.split("▶ running")[1].split()[1:] == shown.split()

    drive(source, scenario)


def test_a_poll_refilters_and_keeps_the_selected_partition(source):
    """Filtered to running: a partition that finished leaves the rows at the next poll, and the cursor stays on
    the partition it was on."""

    async def scenario(pilot, table):
        table.follow = False
        table.set_filter(frozenset({Status.RUNNING}))
        table.select_index(45)
        await pilot.pause()
        assert [table.rows.index_at(r) for r in range(len(table.rows))] == [43, 44, 45, 46]
        source.board.set(43, Status.SUCCEEDED)
        table.update_running((), True)
        await pilot.pause()
        assert [table.rows.index_at(r) for r in range(len(table.rows))] == [44, 45, 46]
        assert table.selected_index == 45 and table.cursor_row == 1
        assert "▸ 45" in lines(table)[1]

    drive(source, scenario)


def lagging(source, index: int):
    """Rewrite ``index``'s record as the writer thread had it a moment before the board: its latest attempt
    still running, no error. Returns the record as it really ended, to be written back."""
    from dataclasses import replace

    spec, store = source.spec, source.store
    interval = spec.plan.interval(index)
    ended = store.read_record(spec.ids.of(interval.start, interval.end), spec.plan, spec.ids.of)
    running = replace(ended.attempts[-1], status="running", error=None, finished_at=None, exit_code=None)
    store.write_record(replace(ended, status="running", attempts=[*ended.attempts[:-1], running]), durable=False)
    return ended


def test_a_reason_read_while_the_record_lagged_is_read_again_when_it_changes(source):
    """The board says failed while the record still holds the running attempt (the writer thread is behind):
    no reason on screen; once the record is written with the same number of attempts, the next poll shows the
    reason — it is never cached for good on the attempt count."""
    ended = lagging(source, 40)

    async def scenario(pilot, table):
        table.select_index(40)
        await pilot.pause()
        line = app_screen_line(table, 40)
        assert "✗ failed       2       12s" in line and "psycopg" not in line  # no reason yet
        table.update_running((), False)  # a poll with the record unchanged: still none
        await pilot.pause()
        assert "psycopg" not in app_screen_line(table, 40)
        source.store.write_record(ended, durable=False)
        table.update_running((), False)
        await pilot.pause()
        assert "psycopg.OperationalError: connection to" in app_screen_line(table, 40)
        assert table.reason(0, Status.SUCCEEDED) is None
        assert table.reason(42, Status.CANCELLED) == "cancelled: interrupted (Ctrl+C)"
        assert table.reason(80, Status.FAILED) is None  # never loaded (off screen): nothing read while painting

    drive(source, scenario)


def test_verification_marks_follow_the_status_and_an_unattempted_row_is_blank(source):
    """A verified success carries ✓ (green) after its label, a failed verification ✗ (red); a cancelled row
    (a 9-letter label) keeps its mark; a queued row shows no attempts and no time."""
    from tui.app.widgets.partition_table import VERIFICATION_MARKS

    async def scenario(pilot, table):
        table.follow = False
        source.board.set_verification(0, {"status": "verified"})
        source.board.set_verification(1, {"status": "failed"})
        source.board.set_verification(42, {"status": "warning"})
        table.refresh()
        await pilot.pause()
        first, second = table.render_line(0), table.render_line(1)
        assert "✓ succeeded ✓  " in first.text and "✓ succeeded ✗  " in second.text
        mark = next(s for s in list(first) if s.text == " ✓")
        assert mark.style.color == VERIFICATION_MARKS[1][1].color and mark.style.bgcolor is not None  # cursor row
        assert next(s for s in list(second) if s.text == " ✗").style.color == VERIFICATION_MARKS[3][1].color
        table.select_index(42)
        await pilot.pause()
        row = table.rows.row_of(42) - int(table.scroll_offset.y)
        assert "⊘ cancelled !  " in table.render_line(row).text
        queued = table.render_line(row + 5).text  # partition 47: never attempted
        assert queued.split("· queued", 1)[1].strip() == ""
        assert all(s.style.bgcolor is not None for s in list(table.render_line(row)))  # padding in the cursor style

    drive(source, scenario)


def test_a_click_selects_the_row_under_the_pointer_and_turns_follow_off(source):
    """A click on the fourth visible row selects it; a click below the last row, even on the line right after
    it, does nothing; the first row is clickable."""
    app = Listening(source)

    async def scenario(pilot, table):
        await pilot.click(PartitionTable, offset=(10, 3))
        await pilot.pause()
        assert table.cursor_row == 3 and not table.follow and app.selected[-1] == 3
        table.set_filter(frozenset({Status.FAILED}))
        await pilot.pause()
        await pilot.click(PartitionTable, offset=(10, 5))  # below the two rows
        await pilot.pause()
        assert table.selected_index == 40 and table.cursor_row == 0
        await pilot.click(PartitionTable, offset=(10, 1))
        await pilot.pause()
        assert table.selected_index == 41 and table.cursor_row == 1
        await pilot.click(PartitionTable, offset=(10, 2))  # the first line below the last row is no row
        await pilot.pause()
        assert table.selected_index == 41 and table.cursor_row == 1
        await pilot.click(PartitionTable, offset=(10, 0))  # the first row is clickable like any other
        await pilot.pause()
        assert table.selected_index == 40 and table.cursor_row == 0

    drive_app(app, scenario)


def test_after_a_layout_change_the_cursor_is_brought_back_on_screen(source):
    """The cursor on the last visible row; the terminal loses half its height: the table scrolls so the cursor
    is a third of the way down, and the row with ▸ reaches the screen."""

    async def scenario(pilot, table):
        table.follow = False
        table.cursor_row = table.size.height - 1
        await pilot.pause()
        assert int(table.scroll_offset.y) == 0
        await pilot.resize_terminal(120, 6)
        await pilot.pause()
        height = table.size.height
        assert height < 10 and int(table.scroll_offset.y) == table.cursor_row - height // 3
        visible = [table.render_line(y).text for y in range(height)]
        assert visible[height // 3].startswith("▸")

    drive(source, scenario)


def test_a_filter_that_matches_nothing_leaves_no_selection(source):
    """No partition skipped: no row, no selected partition, the cursor at 0; End and Page Down do nothing."""

    async def scenario(pilot, table):
        table.set_filter(frozenset({Status.SKIPPED}))
        await pilot.pause()
        assert len(table.rows) == 0 and table.selected_index is None and table.cursor_row == 0
        await pilot.press("end", "pagedown", "down")
        assert table.cursor_row == 0
        assert all(line.strip() == "" for line in lines(table))
        table.set_filter(None)  # rows again, and no partition to keep: the first row
        await pilot.pause()
        assert table.cursor_row == 0 and table.selected_index == 0

    drive(source, scenario)


REASON = "psycopg.OperationalError: connection to server lost"  # partition 40's reason


def row_of_40(source, size: tuple[int, int]) -> tuple[str, int]:
    """Partition 40's row as painted at this terminal size, and the table's width."""
    painted = {}

    async def scenario(pilot, table):
        table.select_index(40)
        await pilot.pause()
        painted["text"] = table.render_line(table.rows.row_of(40) - int(table.scroll_offset.y)).text
        painted["width"] = table.scrollable_content_region.width

    drive(source, scenario, size=size)
    return painted["text"], painted["width"]


def test_a_reason_as_wide_as_its_room_is_whole_and_eight_columns_is_the_least_shown(source):
    """The reason gets what is left after two spaces: exactly its length shows it whole, one less cuts it
    with …; eight columns show seven letters and …, seven columns show none."""
    wide, width = row_of_40(source, (160, 12))
    start = wide.index(REASON)  # where the reason starts: the room is the width from there
    scrollbar = 160 - width

    def at(room: int) -> str:
        text, shown = row_of_40(source, (start + room + scrollbar, 12))
        assert shown == start + room
        return text[start - 2 :].rstrip()

    assert at(len(REASON)) == "  " + REASON
    assert at(len(REASON) - 1) == "  " + REASON[: len(REASON) - 2] + "…"
    assert at(8) == "  psycopg…"
    assert at(7) == ""


def test_a_poll_that_moves_the_selected_partition_within_as_many_rows_follows_it(source):
    """Filtered to running, one partition finishes as another starts: as many rows as before, but the selected
    partition is on another row, and the cursor goes with it; without a change reported, the rows stay."""

    async def scenario(pilot, table):
        table.follow = False
        table.set_filter(frozenset({Status.RUNNING}))
        table.select_index(45)
        await pilot.pause()
        assert table.cursor_row == 2
        source.board.set(43, Status.SUCCEEDED)
        source.board.set(47, Status.RUNNING)
        table.update_running((), False)  # nothing reported as changed: the rows are not rebuilt
        await pilot.pause()
        assert [table.rows.index_at(r) for r in range(len(table.rows))] == [43, 44, 45, 46]
        table.update_running((), True)
        await pilot.pause()
        assert [table.rows.index_at(r) for r in range(len(table.rows))] == [44, 45, 46, 47]
        assert table.selected_index == 45 and table.cursor_row == 1
        assert lines(table)[1].startswith("▸ 45")

    drive(source, scenario)


def test_a_filtered_view_scrolls_over_all_its_rows_and_grows_when_a_poll_adds_one(source):
    """Filtered to queued: End reaches the last of them on screen; filtered to succeeded and queued, a
    partition after the selected one becoming queued (a rerun) adds a row without moving the selection, and
    End still reaches the last row."""

    async def scenario(pilot, table):
        table.follow = False
        table.set_filter(frozenset({Status.QUEUED}))
        await pilot.pause()
        queued = [table.rows.index_at(r) for r in range(len(table.rows))]
        await pilot.press("end")
        assert f"▸ {queued[-1]}" in app_screen_line(table, queued[-1])
        table.set_filter(frozenset({Status.SUCCEEDED, Status.QUEUED}))
        await pilot.press("home")
        before = len(table.rows)
        source.board.set(41, Status.QUEUED)  # a row after the selected one appears (a rerun of 41)
        table.update_running((), True)
        await pilot.pause()
        assert len(table.rows) == before + 1 and table.selected_index == 0 and table.cursor_row == 0
        await pilot.press("end")
        assert table.selected_index == 89 and "▸ 89" in app_screen_line(table, 89)

    drive(source, scenario)


def test_the_view_moves_only_as_far_as_the_cursor_needs(source):
    """A partition on the top row selected: the view stays; one just below the last row: it scrolls to show
    it as the last; Down at the last row scrolls by one; Page Up near the top stops at the first row and the
    top of the table, turning follow off."""

    async def scenario(pilot, table):
        height = table.size.height
        table.select_index(50)
        await pilot.pause()
        top = int(table.scroll_offset.y)
        table.select_index(top)  # the row at the top of the view
        await pilot.pause()
        assert int(table.scroll_offset.y) == top
        table.select_index(top + height)  # just below the last row: centred a third of the way down
        await pilot.pause()
        assert int(table.scroll_offset.y) == top + height - height // 3
        table.cursor_row = int(table.scroll_offset.y) + height - 1  # the last row shown
        await pilot.pause()
        before = int(table.scroll_offset.y)
        await pilot.press("down")
        assert int(table.scroll_offset.y) == before + 1 and table.cursor_row == before + height
        table.select_index(2)
        await pilot.pause()
        assert int(table.scroll_offset.y) == 0
        table.follow = True
        await pilot.press("pageup")
        assert table.cursor_row == 0 and int(table.scroll_offset.y) == 0 and table.follow is False

    drive(source, scenario)
