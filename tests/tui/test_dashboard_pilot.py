"""Pilot tests of the live dashboard: every key and mode, against a real executor running real children."""

from __future__ import annotations

import asyncio
import os
import re
import sys
import time
from pathlib import Path

import pytest

from engine.store.status import Status
from tests.backfills import alive, child_command, records
from tests.tui.live import screen_text, start_live, wait_until
from tui.app.widgets import log_view
from tui.app.widgets.details import PartitionDetails
from tui.app.widgets.log_view import LogView

SLOW = f"{sys.executable} -c 'import time; print(\"working\", flush=True); time.sleep(30)'"


@pytest.fixture
def work(tmp_path: Path, home, monkeypatch) -> Path:
    for key, value in home.items():
        monkeypatch.setenv(key, value)
    return tmp_path


def run(coroutine):
    return asyncio.run(coroutine)


def test_follow_mode_tracks_the_earliest_running_partition_and_navigation_turns_it_off(work):
    """Follow keeps the cursor on the earliest running partition; ↓ turns follow off (the status line says so);
    f turns it back on."""
    live = start_live(work, SLOW, "2024-01-01", "2024-01-30", max_parallel=2)

    async def scenario():
        async with live.app.run_test(size=(120, 40)) as pilot:
            await wait_until(pilot, lambda: live.executor.snapshot().running)
            await wait_until(pilot, lambda: live.table.selected_index == 0 and live.table.follow)
            assert "follow on" in live.status_line()
            await pilot.press("down", "down", "j")
            assert live.table.selected_index == 3 and not live.table.follow
            assert "follow off — press f to follow execution" in live.status_line()
            await pilot.press("k")
            assert live.table.selected_index == 2
            await pilot.press("f")
            await wait_until(pilot, lambda: live.table.follow and live.table.selected_index == 0)

    try:
        run(scenario())
    finally:
        live.finish()


def test_page_home_end_move_through_many_partitions(work):
    """PageDown/PageUp move a page, End goes to the last partition, Home to the first; rows are rendered."""
    live = start_live(work, SLOW, "2024-01-01T00:00:00Z", "2024-01-08T00:00:00Z", partition="1m", max_parallel=1)

    async def scenario():
        async with live.app.run_test(size=(100, 30)) as pilot:
            await wait_until(pilot, lambda: live.table.size.height > 0 and len(live.table.rows) > 0)
            height = live.table.size.height
            await pilot.press("pagedown")
            assert live.table.selected_index == height and not live.table.follow
            assert live.table.scroll_offset.y >= 1
            await pilot.press("pagedown", "pageup")
            assert live.table.selected_index == height
            await pilot.press("end")
            assert live.table.selected_index == 7 * 1440 - 1
            assert "2024-01-07 23:59 → 2024-01-08 00:00" in live.row_text(height - 1)
            await pilot.press("home")
            assert live.table.selected_index == 0 and live.table.scroll_offset.y == 0
            assert "2024-01-01 00:00 → 2024-01-01 00:01" in live.row_text(0)

    try:
        run(scenario())
    finally:
        live.finish()


def test_details_pane_shows_interval_id_attempts_and_tails_the_log(work):
    """Enter opens details: interval in the zone and UTC, the partition ID, the attempt, and its log growing live."""
    script = work / "talk.py"
    script.write_text("import time\nfor i in range(100):\n    print(f'line {i}', flush=True)\n    time.sleep(0.1)\n")
    live = start_live(work, f"{sys.executable} {script}", "2024-01-01", "2024-01-02", max_parallel=1)

    async def scenario():
        async with live.app.run_test(size=(120, 40)) as pilot:
            await wait_until(pilot, lambda: live.executor.snapshot().running)
            await pilot.press("enter")
            details = live.screen.query_one(PartitionDetails)
            await wait_until(pilot, lambda: details.display and details.index == 0)
            summary = screen_text(live.app)
            interval = live.prepared.spec.plan.interval(0)
            assert live.prepared.spec.ids.of(interval.start, interval.end) in summary
            assert "2024-01-01T00:00:00Z → 2024-01-02T00:00:00Z" in summary and "UTC" in summary
            assert "#1 running" in summary
            log = live.screen.query_one(LogView)
            await wait_until(pilot, lambda: log.index is not None and log.index.line_count >= 3)
            first = log.index.line_count
            await wait_until(pilot, lambda: log.index.line_count > first)  # the log tails while the child runs
            assert (
                log.render_line(log.size.height - 1).text.startswith("line ") or log.index.line_count < log.size.height
            )
            await pilot.press("escape")
            assert not details.display

    try:
        run(scenario())
    finally:
        live.finish()


def test_log_wrap_and_jump_to_end(work):
    """In the log, w wraps long lines and End jumps back to the end (following it)."""
    script = work / "long.py"
    script.write_text("print('x' * 300)\nfor i in range(200):\n    print(f'row {i}')\nimport time\ntime.sleep(30)\n")
    live = start_live(work, f"{sys.executable} {script}", "2024-01-01", "2024-01-01", max_parallel=1)

    async def scenario():
        async with live.app.run_test(size=(100, 40)) as pilot:
            await wait_until(pilot, lambda: live.executor.snapshot().running)
            await pilot.press("enter")
            log = live.screen.query_one(LogView)
            await wait_until(pilot, lambda: log.index is not None and log.index.line_count >= 201)
            await pilot.press("tab")
            assert log.has_focus
            await pilot.press("home")
            assert log.scroll_offset.y == 0 and not log.follow_end
            assert log.render_line(1).text.startswith("row 0")
            await pilot.press("w")
            assert log.wrap and log.render_line(1).text.startswith("x")
            assert log.render_line(log.size.height - 1).text.strip() != ""
            await pilot.press("w", "end")
            assert log.follow_end and log.scroll_offset.y == log.index.line_count - log.size.height
            assert log.render_line(log.size.height - 1).text.startswith("row 199")

    try:
        run(scenario())
    finally:
        live.finish()


def test_a_progress_bar_s_endless_line_shows_its_start_the_bytes_left_out_and_its_latest_end(work, monkeypatch):
    """A child drawing a progress bar (``\\r``, never a newline) makes one line of its whole run. It was read whole
    at every poll while shown (a 50 MB one took 84 % of a core, beside the executor); the screen now shows its start,
    how many bytes are left out, and its end, which follows the bar as it moves."""
    monkeypatch.setattr(log_view, "LINE_SHOWN", 300)  # the whole of it within one screen, wrapped
    script = work / "bar.py"
    script.write_text(
        "import sys, time\nsys.stdout.write('START' + 'x' * 200_000)\n"
        "for i in range(10_000):\n    sys.stdout.write(f'\\r step {i:05d}'); sys.stdout.flush(); time.sleep(0.02)\n"
    )
    live = start_live(work, f"{sys.executable} {script}", "2024-01-01", "2024-01-01", max_parallel=1)

    def steps() -> list[int]:
        return [int(step) for step in re.findall(r"step (\d{5})", screen_text(live.app))]

    async def scenario():
        async with live.app.run_test(size=(100, 40)) as pilot:
            await wait_until(pilot, lambda: live.executor.snapshot().running)
            await pilot.press("enter")
            log = live.screen.query_one(LogView)
            await wait_until(pilot, lambda: log.index is not None and log.index.size > 200_000)
            await pilot.press("tab", "w")
            await wait_until(pilot, lambda: steps())
            text = screen_text(live.app)
            assert "STARTxxx" in text and "bytes of this line not shown (v opens the whole log)" in text
            first = max(steps())
            await wait_until(pilot, lambda: steps() and max(steps()) > first)  # the end follows the bar

    try:
        run(scenario())
    finally:
        live.finish()


def test_log_search_highlights_matches_n_and_n_wrap_and_f_pauses_and_follows(work):
    """In the log: / 'error' finds line 51 from the top and highlights it on screen; n goes to 151, then 251, n
    again wraps to 51 and says so, N wraps back to 251, N again finds 151; the pane's title says which; F
    pauses following, F follows
    the end again; without a terminal to hand over, v says so."""
    from tui.app.screens.log_search import LogSearchScreen
    from tui.app.widgets.log_view import CURRENT_MATCH, MATCH

    script = work / "lines.py"
    script.write_text(
        "special = {50: 'ERROR one', 150: 'an error', 250: 'error two and Error three'}\n"
        "for i in range(300):\n"
        "    print(special.get(i, f'row {i}'))\n"
        "import time\ntime.sleep(30)\n"
    )
    live = start_live(work, f"{sys.executable} {script}", "2024-01-01", "2024-01-01", max_parallel=1)

    def title() -> str:
        return str(live.screen.query_one("#details").border_title)

    def styles_of(log, y: int) -> list[tuple[str, object]]:
        return [(segment.text, segment.style) for segment in log.render_line(y)]

    async def scenario():
        async with live.app.run_test(size=(100, 40), notifications=True) as pilot:
            await wait_until(pilot, lambda: live.executor.snapshot().running)
            await pilot.press("enter")
            log = live.screen.query_one(LogView)
            await wait_until(pilot, lambda: log.index is not None and log.index.line_count >= 300)
            await pilot.press("tab", "home")
            await pilot.press("slash")
            await wait_until(pilot, lambda: isinstance(live.app.screen, LogSearchScreen))
            await pilot.press(*"error", "enter")
            await wait_until(pilot, lambda: log.match_line == 50)
            y = 50 - int(log.scroll_offset.y)
            assert 0 <= y < log.size.height and ("ERROR", CURRENT_MATCH) in styles_of(log, y)
            assert "/error: line 51 (n/N)" in title() and "paused at line" in title()
            await pilot.press("n")
            assert log.match_line == 150 and "/error: line 151 (n/N)" in title()
            await pilot.press("n")
            y = 250 - int(log.scroll_offset.y)
            assert log.match_line == 250 and ("error", CURRENT_MATCH) in styles_of(log, y)
            assert ("Error", CURRENT_MATCH) in styles_of(log, y)  # every match on the line, any case
            await pilot.press("n")
            assert log.match_line == 50 and "/error: line 51 (wrapped)" in title()
            assert ("error", MATCH) not in styles_of(log, 50 - int(log.scroll_offset.y))
            await pilot.press("N")
            assert log.match_line == 250 and "line 251 (wrapped)" in title()
            await pilot.press("N")
            assert log.match_line == 150 and "(wrapped)" not in title()  # the nearest before, not the first
            await pilot.press("F")
            await pilot.pause()
            assert log.follow_end and "log following the end (F pauses)" in title()
            assert log.render_line(log.size.height - 1).text.startswith("row 299")
            await pilot.press("F")
            await pilot.pause()
            assert not log.follow_end and "paused at line" in title()
            await pilot.press("v")  # no terminal to hand over here (tests/tui/test_dashboard_tmux.py: a real one)
            await wait_until(pilot, lambda: "cannot hand the" in screen_text(live.app))

    try:
        run(scenario())
    finally:
        live.finish()


def test_status_filter_and_failed_navigation(work):
    """s filters by status (only failed rows shown); n and N jump between failed partitions and wrap around."""
    fails = (
        f'{sys.executable} -c \'import sys; sys.exit(1 if "{{start_date}}" in ("2024-01-03", "2024-01-07") else 0)\''
    )
    live = start_live(
        work, fails, "2024-01-01", "2024-01-10", max_parallel=2, on_failure="continue", exit_when_succeeded=False
    )

    async def scenario():
        async with live.app.run_test(size=(120, 40), notifications=True) as pilot:
            await wait_until(pilot, lambda: live.executor.snapshot().outcome is not None)
            await wait_until(pilot, lambda: "Backfill failed — 2 failed: n jumps to the next one" in live.status_line())
            await pilot.press("home", "n")
            assert live.table.selected_index == 2
            await pilot.press("n")
            assert live.table.selected_index == 6
            await pilot.press("N")
            assert live.table.selected_index == 2
            await pilot.press("n", "n")  # past the last failure: wraps to the first, and says so
            assert live.table.selected_index == 2
            await wait_until(pilot, lambda: "wrapped to the first failure" in screen_text(live.app))
            await pilot.press("N")
            assert live.table.selected_index == 6, "N before the first failure wraps to the last"
            await pilot.press("f", "n")  # works from follow mode too
            assert live.table.selected_index == 2 and not live.table.follow
            await pilot.press("s")
            await wait_until(pilot, lambda: "Show partitions" in screen_text(live.app))
            await pilot.press("down", "down", "down", "down", "enter")  # all, queued, running, succeeded, failed
            await wait_until(pilot, lambda: len(live.table.rows) == 2)
            assert [live.table.rows.index_at(r) for r in range(2)] == [2, 6]
            assert "filter: failed" in live.status_line()
            assert "✗ failed" in live.row_text(0) and "2024-01-03 00:00" in live.row_text(0)
            await pilot.press("s")
            await wait_until(pilot, lambda: "Show partitions" in screen_text(live.app))
            await pilot.press("enter")  # all
            assert len(live.table.rows) == 10 and live.table.selected_index == 2

    try:
        run(scenario())
    finally:
        live.finish()


def test_opening_the_details_pane_keeps_the_selected_row_on_screen(work):
    """End selects the last partition at the bottom of the table; Enter halves the table and the selected row
    is still visible, in the table and on the screen."""
    live = start_live(work, "true", "2024-01-01", "2024-03-31", max_parallel=4, exit_when_succeeded=False)

    async def scenario():
        async with live.app.run_test(size=(120, 40)) as pilot:
            await wait_until(pilot, lambda: live.executor.snapshot().outcome is not None)
            await pilot.press("end")
            await pilot.press("enter")
            table = live.table

            def selected_row_in_the_halved_table() -> bool:
                top = int(table.scroll_offset.y)
                return table.size.height < 20 and top <= table.cursor_row < top + table.size.height

            await wait_until(pilot, selected_row_in_the_halved_table)
            lines = lambda: screen_text(live.app).splitlines()  # noqa: E731
            await wait_until(pilot, lambda: any(line.lstrip().startswith("▸") and " 90 " in line for line in lines()))

    try:
        run(scenario())
    finally:
        live.finish()


def test_earlier_attempt_log_with_brackets(work):
    """With retries, [ shows the log of an earlier attempt and ] returns to the latest."""
    marker = work / "failed-once"
    script = work / "flaky.py"
    script.write_text(
        "import os, sys\n"
        f"marker = {str(marker)!r}\n"
        "if not os.path.exists(marker):\n"
        "    open(marker, 'w').close()\n    print('first attempt fails')\n    sys.exit(2)\n"
        "print('second attempt works')\n"
    )
    live = start_live(
        work, f"{sys.executable} {script}", "2024-01-01", "2024-01-01", retries=1, exit_when_succeeded=False
    )

    async def scenario():
        async with live.app.run_test(size=(120, 40)) as pilot:
            await wait_until(pilot, lambda: live.executor.snapshot().outcome == "succeeded")
            await pilot.press("home", "enter")
            log = live.screen.query_one(LogView)
            await wait_until(pilot, lambda: log.index is not None and log.index.line_count >= 1)
            assert "second attempt works" in log.render_line(0).text
            await pilot.press("left_square_bracket")
            await wait_until(pilot, lambda: "first attempt fails" in log.render_line(0).text)
            summary = screen_text(live.app)
            assert "▸ #1 failed" in summary and "#2 succeeded" in summary
            await pilot.press("right_square_bracket")
            await wait_until(pilot, lambda: "second attempt works" in log.render_line(0).text)

    try:
        run(scenario())
    finally:
        live.finish()


def test_help_screen_opens_and_closes(work):
    """? shows every key, then a legend of every glyph the table draws (scrolled to); Escape closes it."""
    live = start_live(work, SLOW, "2024-01-01", "2024-01-02")

    async def scenario():
        async with live.app.run_test(size=(100, 30)) as pilot:
            await pilot.press("question_mark")
            await wait_until(pilot, lambda: live.app.screen.__class__.__name__ == "HelpScreen")
            text = screen_text(live.app)
            assert "follow execution again" in text and "next or previous failed partition" in text
            await pilot.press("end")
            await wait_until(pilot, lambda: "What the table draws" in screen_text(live.app))
            legend = screen_text(live.app)
            glyphs = (("↯", "interrupted:"), ("■", "stopping:"), ("⊘", "cancelled:"),
                      ("? after the status", "insufficient history"), ("●", "marked with space"))  # fmt: skip
            for glyph, meaning in glyphs:
                assert any(glyph in line and meaning in line for line in legend.splitlines()), (glyph, legend)
            await pilot.press("escape")
            assert live.app.screen.__class__.__name__ == "DashboardScreen"

    try:
        run(scenario())
    finally:
        live.finish()


@pytest.mark.parametrize(
    ("keys", "reason"),
    [
        (("q", "y"), "stopped from the dashboard (q)"),
        (("q", "q"), "stopped from the dashboard (q)"),
        (("ctrl+c",), "interrupted (Ctrl+C)"),
    ],
)
def test_stop_key_shows_stopping_and_returns_only_after_children_exit(work, keys, reason):
    """q confirmed (y or q again) or Ctrl+C (at once) stops scheduling and cancels children; 'Stopping… waiting
    for N active runs' shows while a stubborn child lingers; the app returns once every child has exited."""
    stubborn = child_command("--ignore-signals", "--sleep", "60")
    live = start_live(work, stubborn, "2024-01-01", "2024-01-05", max_parallel=2, grace=2.0)

    async def scenario():
        async with live.app.run_test(size=(120, 40)) as pilot:
            await wait_until(pilot, lambda: len(live.executor.snapshot().running) == 2)
            pids = [r.pid for r in live.executor.snapshot().running]
            await pilot.press(*keys)
            await wait_until(pilot, lambda: "Stopping…" in live.status_line())
            assert "Stopping… waiting for 2 active runs to exit" in live.status_line()
            assert all(alive(pid) for pid in pids)
            await wait_until(pilot, lambda: not live.app.is_running, timeout=20)
            return pids

    try:
        pids = run(scenario())
        live.thread.join(timeout=20)
        assert live.app.return_value == "cancelled"
        assert not any(alive(pid) for pid in pids)
        assert live.executor.snapshot().stop_reason == reason
    finally:
        live.finish()


def test_ctrl_c_again_escalates_and_each_stopping_child_counts_down_to_sigkill(work):
    """Ctrl+C: the rows of children being stopped read '■ stopping' with the seconds left before SIGKILL, and the
    status line says what Ctrl+C does next; again: SIGTERM sent; a third time: SIGKILL now, and the app returns
    once both children are gone — long before the 300 s grace."""
    deaf = child_command("--ignore-signals", "--sleep", "600")
    live = start_live(work, deaf, "2024-01-01", "2024-01-05", max_parallel=2, grace=300.0)

    async def scenario():
        async with live.app.run_test(size=(120, 40)) as pilot:
            await wait_until(pilot, lambda: len(live.executor.snapshot().running) == 2)
            pids = [r.pid for r in live.executor.snapshot().running]
            await pilot.press("ctrl+c")
            await wait_until(pilot, lambda: "Ctrl+C again sends SIGTERM now" in live.status_line())
            assert "Stopping… waiting for 2 active runs to exit" in live.status_line()
            await wait_until(pilot, lambda: re.search(r"■ stopping\s+1\s+kill 29\ds", screen_text(live.app)))
            assert len(re.findall(r"■ stopping\s+1\s+kill 29\ds", screen_text(live.app))) == 2
            await pilot.press("ctrl+c")
            await wait_until(pilot, lambda: "SIGTERM sent; Ctrl+C again sends SIGKILL now" in live.status_line())
            assert all(alive(pid) for pid in pids)  # deaf to SIGTERM too
            await pilot.press("ctrl+c")
            await wait_until(pilot, lambda: not live.app.is_running, timeout=30)
            return pids

    try:
        pids = run(scenario())
        live.thread.join(timeout=30)
        assert not live.thread.is_alive() and not any(alive(pid) for pid in pids)
        assert [r["attempts"][-1]["exit_code"] for r in records(live.prepared.store.directory)] == [-9, -9]
    finally:
        live.finish()


def test_a_successful_backfill_closes_the_dashboard_by_itself(work):
    """When every partition succeeds, the app exits on its own with 'succeeded'."""
    live = start_live(work, "true", "2024-01-01", "2024-01-05")

    async def scenario():
        async with live.app.run_test(size=(100, 30)) as pilot:
            await wait_until(pilot, lambda: not live.app.is_running, timeout=30)

    try:
        run(scenario())
        assert live.app.return_value == "succeeded"
    finally:
        live.finish()


def test_q_asks_before_cancelling_running_children_and_any_other_key_keeps_them(work):
    """One q with children running only asks (footer and status line say how to confirm); another key keeps the
    backfill running with its children alive."""
    live = start_live(work, SLOW, "2024-01-01", "2024-01-05", max_parallel=2)

    async def scenario():
        async with live.app.run_test(size=(120, 40)) as pilot:
            await wait_until(pilot, lambda: len(live.executor.snapshot().running) == 2)
            await wait_until(pilot, lambda: "q Stop" in screen_text(live.app))
            pids = [r.pid for r in live.executor.snapshot().running]
            await pilot.press("q")
            await wait_until(pilot, lambda: "Stop the backfill? 2 running children" in screen_text(live.app))
            assert live.executor.snapshot().stop_reason is None and all(alive(pid) for pid in pids)
            await pilot.press("down")
            await wait_until(pilot, lambda: "Stop the backfill?" not in screen_text(live.app))
            await pilot.pause(0.3)
            assert live.app.is_running and live.executor.snapshot().stop_reason is None
            assert all(alive(pid) for pid in pids)
            assert live.table.selected_index == 0, "the key that cancelled the question does nothing else"

    try:
        run(scenario())
    finally:
        live.finish()


def test_a_failed_backfill_stays_open_until_q(work):
    """A failed backfill keeps the dashboard on its outcome until q."""
    live = start_live(work, "false", "2024-01-01", "2024-01-03")

    async def scenario():
        async with live.app.run_test(size=(100, 30)) as pilot:
            await wait_until(pilot, lambda: "Backfill failed" in live.status_line())
            await pilot.pause(0.5)  # time to exit, if the dashboard wrongly closed itself on a failure
            assert live.app.is_running
            await pilot.press("q")
            await wait_until(pilot, lambda: not live.app.is_running)

    try:
        run(scenario())
        assert live.app.return_value == "failed"
    finally:
        live.finish()


def test_resizing_keeps_the_selection_down_to_80x24(work):
    """Resizing (to 80×24 and back) keeps the selected partition and the rows fit the width."""
    live = start_live(work, SLOW, "2024-01-01", "2024-12-31", max_parallel=1)

    async def scenario():
        async with live.app.run_test(size=(140, 45)) as pilot:
            await wait_until(pilot, lambda: live.table.size.height > 0 and len(live.table.rows) > 0)
            await pilot.press("pagedown", "down", "down")
            selected = live.table.selected_index
            await pilot.resize_terminal(80, 24)

            def selected_row_visible() -> bool:
                y = live.table.cursor_row - int(live.table.scroll_offset.y)
                return live.table.size.height < 20 and 0 <= y < live.table.size.height

            narrow = re.compile(r"▸\s+\d+\s+2024-\d\d-\d\d → 2024-\d\d-\d\d\s+[·▶✓] \w+")
            await wait_until(pilot, lambda: selected_row_visible() and narrow.search(screen_text(live.app)))
            assert live.table.selected_index == selected
            lines = screen_text(live.app).splitlines()
            assert len(lines) <= 24 and all(len(line) <= 80 for line in lines)
            [cursor] = [line for line in lines if line.startswith("▸")]
            # every column of the selected row made it onto the 80-column screen, the last one included; midnight
            # boundaries are dates alone there (the reason's room), and their times come back when it is wider
            assert narrow.search(cursor), cursor
            assert "interval (end exclusive)" in lines[4]
            await pilot.resize_terminal(120, 40)
            wide = re.compile(r"^▸\s+\d+\s+2024-\d\d-\d\d 00:00 → 2024-\d\d-\d\d 00:00\s+[·▶✓] \w+", re.M)
            await wait_until(pilot, lambda: wide.search(screen_text(live.app)))
            assert live.table.selected_index == selected

    try:
        run(scenario())
    finally:
        live.finish()


def test_statuses_repaint_in_place(work):
    """Rows change in place as statuses change: a queued row becomes running then succeeded."""
    live = start_live(
        work,
        f"{sys.executable} -c 'import time; time.sleep(0.5)'",
        "2024-01-01",
        "2024-01-03",
        max_parallel=1,
        exit_when_succeeded=False,
    )

    async def scenario():
        async with live.app.run_test(size=(100, 30)) as pilot:
            seen: list[str] = []
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and live.executor.snapshot().outcome is None:
                text = live.row_text(2)
                status = next(s.label for s in Status if s.label in text)
                if not seen or seen[-1] != status:
                    seen.append(status)
                await pilot.pause(0.05)
            await wait_until(pilot, lambda: "succeeded" in live.row_text(2))
            assert seen[0] == "queued" and "running" in seen

    try:
        run(scenario())
    finally:
        live.finish()


def test_no_children_left_after_the_app_closes(work):
    """Closing the app (even without q) stops the executor's children: none outlives it."""
    live = start_live(work, SLOW, "2024-01-01", "2024-01-03", max_parallel=2)

    async def scenario():
        async with live.app.run_test(size=(100, 30)) as pilot:
            await wait_until(pilot, lambda: len(live.executor.snapshot().running) == 2)
            return [r.pid for r in live.executor.snapshot().running]

    pids = run(scenario())
    live.finish()
    assert not any(alive(pid) for pid in pids)
    assert os.path.isdir(live.prepared.store.directory)


def test_a_pipeline_backfill_shows_its_warm_runners_and_each_attempts_runner_pid(work, shop):
    """The header says the partitions run in warm runners; the details pane names the runner's PID."""
    live = start_live(shop, "", "2024-01-01", "2024-01-03", target=str(shop / "pipeline"), exit_when_succeeded=False)

    async def scenario():
        async with live.app.run_test(size=(120, 40)) as pilot:
            await wait_until(pilot, lambda: live.executor.snapshot().counts["succeeded"] == 3)
            await pilot.press("enter")
            details = live.screen.query_one(PartitionDetails)
            await wait_until(pilot, lambda: details.display and details.index is not None)
            [record] = [r for r in records(live.prepared.store.directory) if r["index"] == details.index]
            screen = screen_text(live.app)
            assert "16 workers  warm runners" in screen
            assert f"      warm runner pid {record['attempts'][-1]['pid']}\n" in screen, screen

    try:
        run(scenario())
    finally:
        live.finish()


def test_on_a_dask_cluster_the_header_names_it_and_details_name_the_worker(work):
    """dask-local:1: the header names the cluster (workers, threads); a running attempt's details name its
    worker, and its log tails live although the child runs in the worker's process."""
    script = work / "talk.py"
    script.write_text("import time\nfor i in range(100):\n    print(f'line {i}', flush=True)\n    time.sleep(0.1)\n")
    live = start_live(
        work, f"{sys.executable} {script}", "2024-01-01", "2024-01-02", max_parallel=1, launcher="dask-local:1"
    )

    async def scenario():
        async with live.app.run_test(size=(120, 40)) as pilot:
            await wait_until(pilot, lambda: live.executor.snapshot().running)
            assert "dask local cluster: 1 workers, 1 threads" in screen_text(live.app)
            await pilot.press("enter")
            details = live.screen.query_one(PartitionDetails)
            await wait_until(pilot, lambda: details.display and details.index == 0)
            await wait_until(pilot, lambda: "on worker tcp://" in screen_text(live.app))
            log = live.screen.query_one(LogView)
            await wait_until(pilot, lambda: log.index is not None and log.index.line_count >= 3)

    try:
        run(scenario())
    finally:
        live.finish()


def test_at_80_columns_the_footer_of_a_live_run_cuts_no_label(work):
    """80×24 while children run here: every footer label is whole (it once read "c Cance"): the keys are packed
    tight and r, which cannot rerun a run going on here, is out of the footer until the run ends."""
    live = start_live(work, SLOW, "2024-01-01", "2024-01-05", max_parallel=2)

    async def scenario():
        async with live.app.run_test(size=(80, 24)) as pilot:
            await wait_until(pilot, lambda: len(live.executor.snapshot().running) == 2)
            await wait_until(pilot, lambda: "a Audit" in screen_text(live.app).splitlines()[-1])
            footer = screen_text(live.app).splitlines()[-1]
            for label in ("f Follow", "⏎ Details", "/ Jump", "s Filter", "? Help", "q Stop", "m Mark", "c Cancel",
                          "p Pause", "a Audit"):  # fmt: skip
                assert label in footer, footer
            assert "Rerun" not in footer

    try:
        run(scenario())
    finally:
        live.finish()
