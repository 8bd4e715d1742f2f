"""Pilot tests of the browser: saved backfills produced by real runs, browsed, filtered, inspected and rerun."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import orjson
import pytest

from engine.dates.durations import parse_duration
from tests.backfills import child_command, records, rewrite, start_background, state_dirs, wait_for
from tests.conftest import run_backfill
from tests.guard_flags import GUARD, REASON
from tests.tui.live import screen_text, wait_until
from tui.app.backfill_app import BackfillApp
from tui.app.screens.backfill_list import BackfillListScreen
from tui.app.screens.dashboard import DashboardScreen
from tui.app.screens.rerun_form import RerunForm
from tui.app.sources import ExecutorSource, SavedSource, WatchedSource
from tui.app.widgets.details import PartitionDetails
from tui.app.widgets.log_view import LogView
from tui.app.widgets.partition_table import PartitionTable

EIGHT_DAYS = ("--start-date", "2024-01-01", "--end-date", "2024-01-08")


@pytest.fixture
def work(tmp_path: Path, home, monkeypatch) -> Path:
    for key, value in home.items():
        monkeypatch.setenv(key, value)
    directory = tmp_path / "work"
    (directory / ".git").mkdir(parents=True)
    return directory


def failed_backfill(work: Path, home, broken: Path) -> Path:
    """A real run: 2024-01-03 and 2024-01-06 fail twice (with --retries 1) while ``broken`` exists."""
    broken.write_text("the bug")
    template = child_command("--fail-on", "2024-01-03", "--fail-on", "2024-01-06", "--fail-while", str(broken))
    result = run_backfill(
        *GUARD, "--command", template, *EIGHT_DAYS, "--retries", "1", "--on-failure", "continue", cwd=work, env=home
    )
    assert result.returncode == 1, result.stderr
    [backfill] = state_dirs(work / "logs" / "backfills")
    return backfill


def let_days_end(work: Path, days) -> None:
    """The children of these January days (waiting on ``go-2024-01-0D``) may end."""
    for day in days:
        (work / f"go-2024-01-0{day}").write_text("")


def dashboard(app) -> DashboardScreen:
    return next(s for s in reversed(app.screen_stack) if isinstance(s, DashboardScreen))


async def open_watched(pilot, app) -> DashboardScreen:
    """From the list, open the backfill another process runs: its dashboard, watching it."""
    await wait_until(pilot, lambda: "running" in screen_text(app))
    await pilot.press("enter")
    await wait_until(pilot, lambda: isinstance(app.screen, DashboardScreen))
    screen = dashboard(app)
    assert isinstance(screen.source, WatchedSource)
    return screen


def test_list_open_filter_details_attempt_log_rerun_form_live_completion(work, home):
    """The whole operator path: list → open → filter failed → details → the earlier attempt's log → rerun form
    (errors shown, Run disabled, then fixed and submitted) → live dashboard → completion; the disk shows it."""
    broken = work / "BROKEN"
    backfill = failed_backfill(work, home, broken)
    app = BackfillApp(root=work / "logs" / "backfills")

    async def scenario():
        async with app.run_test(size=(120, 44)) as pilot:
            await wait_until(
                pilot, lambda: isinstance(app.screen, BackfillListScreen) and "incomplete" in screen_text(app)
            )
            text = screen_text(app)
            assert backfill.name in text and "incomplete" in text and "6/8 ✗2" in text
            await pilot.press("enter")
            await wait_until(pilot, lambda: any(isinstance(s, DashboardScreen) for s in app.screen_stack))
            screen = dashboard(app)
            assert isinstance(screen.source, SavedSource) and not isinstance(screen.source, WatchedSource)
            table = screen.query_one(PartitionTable)
            await pilot.press("s")
            await wait_until(pilot, lambda: "Show partitions" in screen_text(app))
            await pilot.press("down", "down", "down", "down", "enter")
            await wait_until(pilot, lambda: [table.rows.index_at(r) for r in range(len(table.rows))] == [2, 5])
            await pilot.press("home", "enter")
            details = screen.query_one(PartitionDetails)
            await wait_until(pilot, lambda: details.index == 2 and len(details.attempts) == 2)
            log = screen.query_one(LogView)
            await wait_until(pilot, lambda: log.index is not None and log.index.line_count >= 2)
            latest_log = log.path
            await pilot.press("left_square_bracket")
            await wait_until(pilot, lambda: log.path != latest_log and log.path.name.endswith("-p2-a1.log"))
            assert "failing 2024-01-03 on purpose" in "\n".join(log.render_line(y).text for y in range(5))
            await pilot.press("escape", "r")
            await wait_until(pilot, lambda: isinstance(app.screen, RerunForm) and "failed (2)" in screen_text(app))
            form = app.screen
            retries = form.query_one("#retries")
            retries.value = "x"
            form.query_one("#max_parallel").value = "0"
            await wait_until(
                pilot,
                lambda: (
                    "'x' is not a whole number: use ASCII" in screen_text(app)
                    and "0 is too small: use 1 or more" in screen_text(app)
                ),
            )
            assert form.query_one("#submit").disabled
            await pilot.press("ctrl+s")
            assert isinstance(app.screen, RerunForm), "an invalid form cannot be submitted"
            retries.value = "0"
            form.query_one("#max_parallel").value = "2"
            form.query_one("#timeout").value = "soon"
            await wait_until(pilot, lambda: "'soon' is not a duration (e.g. 30m)" in screen_text(app))
            assert form.query_one("#submit").disabled
            form.query_one("#timeout").value = "1m"
            await wait_until(pilot, lambda: not form.query_one("#submit").disabled)
            broken.unlink()  # the fix is merged
            await pilot.press("ctrl+s")
            await wait_until(pilot, lambda: isinstance(app.screen, DashboardScreen))
            live = dashboard(app)
            assert isinstance(live.source, ExecutorSource)
            await wait_until(pilot, lambda: live.source.poll().outcome is not None)
            assert live.source.poll().outcome == "succeeded"
            await wait_until(pilot, lambda: "Backfill succeeded" in screen_text(app))  # painted on the next poll

    asyncio.run(scenario())
    app.stop_started_runs()
    final = records(backfill)
    assert [r["status"] for r in final] == ["succeeded"] * 8
    assert [len(r["attempts"]) for r in final] == [1, 1, 3, 1, 1, 3, 1, 1]
    assert final[2]["attempts"][-1]["status"] == "succeeded"


def test_marked_partitions_can_be_rerun(work, home):
    """Space marks partitions; the form offers exactly the marked ones, and only they run again."""
    broken = work / "BROKEN"
    backfill = failed_backfill(work, home, broken)
    app = BackfillApp(root=work / "logs" / "backfills")

    async def scenario():
        async with app.run_test(size=(120, 44)) as pilot:
            await wait_until(
                pilot, lambda: isinstance(app.screen, BackfillListScreen) and "incomplete" in screen_text(app)
            )
            await pilot.press("enter")
            await wait_until(pilot, lambda: isinstance(app.screen, DashboardScreen) and "✗ failed" in screen_text(app))
            await pilot.press("home", "space", "down", "down", "down", "space", "r")
            await wait_until(pilot, lambda: "the marked partitions (2)" in screen_text(app))
            await pilot.click("#which-marked")
            await wait_until(pilot, lambda: app.screen.query_one("#which-marked").value)
            await pilot.press("ctrl+s")
            # Partition 0 succeeded: running it again needs its own reason, asked on the pre-flight screen.
            await wait_until(pilot, lambda: "verdict auto" in screen_text(app))
            await pilot.press(*"rerun two", "enter")
            await wait_until(pilot, lambda: len(app.started_runs) == 1)
            live = dashboard(app)
            await wait_until(pilot, lambda: live.source.poll().outcome is not None)

    asyncio.run(scenario())
    app.stop_started_runs()
    assert [len(r["attempts"]) for r in records(backfill)] == [2, 1, 2, 2, 1, 2, 1, 1]
    invocations = json.loads((backfill / "guardrails.json").read_text())["invocations"]
    assert [(i["mode"], i["reason"]) for i in invocations] == [("trigger", "test"), ("rerun", "rerun two")]


def test_a_backfill_running_elsewhere_is_watched_live_and_cannot_be_rerun(work, home):
    """Opened while another process runs it: rows update from the state files, and the form says it cannot
    be resumed here (Run disabled)."""
    process = start_background(*GUARD, "--command", child_command("--sleep", "0.4"), *EIGHT_DAYS, cwd=work, env=home)
    try:
        backfill = wait_for(lambda: (state_dirs(work / "logs" / "backfills") or [None])[0])
        wait_for(lambda: any(r["status"] == "running" for r in records(backfill)))
        app = BackfillApp(root=work / "logs" / "backfills")

        async def scenario():
            async with app.run_test(size=(120, 44)) as pilot:
                await wait_until(pilot, lambda: "running" in screen_text(app))
                await pilot.press("enter")
                await wait_until(pilot, lambda: isinstance(app.screen, DashboardScreen))
                screen = dashboard(app)
                assert isinstance(screen.source, WatchedSource)
                first = screen.source.poll().counts["succeeded"]
                await wait_until(pilot, lambda: screen.source.poll().counts["succeeded"] > first)
                await pilot.press("r")
                await wait_until(pilot, lambda: f"running in another process (PID {process.pid})" in screen_text(app))
                assert app.screen.query_one("#submit").disabled
                await pilot.press("escape")
                await wait_until(pilot, lambda: screen.source.poll().counts["succeeded"] == 8, timeout=30)
                await wait_until(pilot, lambda: "saved backfill (nothing runs it)" in screen_text(app))

        asyncio.run(scenario())
    finally:
        process.wait(timeout=60)


@pytest.mark.parametrize("index", ["kept", "removed"])
def test_a_record_damaged_under_a_watching_screen_ends_neither_the_screen_nor_the_run(work, home, index):
    """A running partition's record garbled while another process runs the backfill and this screen watches it
    (with its record index, or with the index removed too: a double fault): the screen ended, "the dashboard
    failed". It now goes on showing the run to its end, and the damaged partition's details name the damage."""
    template = child_command("--wait-for", str(work / "go-{start_date}"))
    process = start_background(*GUARD, "--command", template, *EIGHT_DAYS, "--max-parallel", "2", cwd=work, env=home)
    try:
        backfill = wait_for(lambda: (state_dirs(work / "logs" / "backfills") or [None])[0])
        wait_for(lambda: sum(r["status"] == "running" for r in records(backfill)) == 2)
        app = BackfillApp(root=work / "logs" / "backfills")

        async def scenario():
            async with app.run_test(size=(120, 44)) as pilot:
                screen = await open_watched(pilot, app)
                if index == "removed":
                    (backfill / "partitions.idx").unlink()
                [first] = [p for p in (backfill / "partitions").glob("*.json") if b'"index":0' in p.read_bytes()]
                rewrite(first, b"{garbled")
                polled = screen.source._version
                (work / "go-2024-01-02").write_text("")  # the other running day ends: a change the screen shows
                await wait_until(pilot, lambda: screen.source._version > polled and "1/8" in screen_text(app))
                await pilot.press("home", "enter")
                await wait_until(pilot, lambda: "is not valid JSON" in screen_text(app))
                assert f"partition file partitions/{first.name} is not valid JSON" in screen_text(app).replace(
                    "\n   ", " "
                )
                let_days_end(work, range(1, 9))
                await wait_until(pilot, lambda: "8/8 succeeded" in screen_text(app), timeout=30)

        asyncio.run(scenario())
    finally:
        let_days_end(work, range(1, 9))
        process.wait(timeout=60)
    assert process.returncode == 0
    assert [r["status"] for r in records(backfill)] == ["succeeded"] * 8


def test_show_and_list_as_json_and_text(work, home):
    """`list` and `show` print the documented JSON and text; --status filters the listing, not the counts."""
    broken = work / "BROKEN"
    backfill = failed_backfill(work, home, broken)
    listed = json.loads(run_backfill("list", "--output", "json", cwd=work, env=home).stdout)
    [entry] = listed["backfills"]
    assert entry["id"] == backfill.name and entry["state"] == "incomplete" and entry["total"] == 8
    assert entry["counts"] == {"queued": 0, "running": 0, "succeeded": 6, "failed": 2, "cancelled": 0, "skipped": 0}
    shown = json.loads(
        run_backfill("show", backfill.name[:15], "--output", "json", "--status", "failed", cwd=work, env=home).stdout
    )
    assert shown["backfill"]["state"] == "incomplete" and shown["summary"]["failed"] == 2
    assert [p["index"] for p in shown["partitions"]] == [2, 5] and shown["has_more"] is False
    assert len(shown["partitions"][0]["attempts"]) == 2
    text = run_backfill("list", "--output", "text", cwd=work, env=home).stdout
    assert backfill.name in text and "8 ✓6 ✗2" in text
    shown_text = run_backfill(
        "show", backfill.name, "--output", "text", "--status", "succeeded", "--limit", "2", cwd=work, env=home
    ).stdout
    assert "showing 1–2 of 6; next page: repeat with --offset 2 --limit 2" in shown_text
    missing = run_backfill("show", "nope", "--output", "json", cwd=work, env=home)
    assert missing.returncode == 2 and "no backfill 'nope'" in missing.stderr
    summary = orjson.loads((backfill / ".summary.json").read_bytes())
    assert summary["counts"]["failed"] == 2


def test_a_resumed_backfill_watched_from_elsewhere_counts_only_its_own_run(work, home):
    """A --continue of the 4 failed days of 8, run by another process: the watched screen measures progress
    as that executor does — 0/4, then 1/4 done with an ETA from that run's own start — never the 4 days an
    earlier run finished (it once read 4/8, and an ETA ten times too short)."""
    broken = work / "broken"
    broken.write_text("the bug")
    let_days_end(work, range(1, 9))
    template = child_command("--fail-while", str(broken), "--wait-for", str(work / "go-{start_date}"),
                             *(word for day in range(5, 9) for word in ("--fail-on", f"2024-01-0{day}")))  # fmt: skip
    first = run_backfill(*GUARD, "--command", template, *EIGHT_DAYS, "--on-failure", "continue", cwd=work, env=home)
    assert first.returncode == 1, first.stderr
    [backfill] = state_dirs(work / "logs" / "backfills")
    broken.unlink()
    for day in range(5, 9):
        (work / f"go-2024-01-0{day}").unlink()
    process = start_background(*REASON, "--continue", backfill.name, "--max-parallel", "4", cwd=work, env=home)
    try:
        wait_for(lambda: sum(r["status"] == "running" for r in records(backfill)) == 4)
        app = BackfillApp(root=work / "logs" / "backfills")

        async def scenario():
            async with app.run_test(size=(120, 44)) as pilot:
                screen = await open_watched(pilot, app)
                generation = orjson.loads((backfill / ".generation.json").read_bytes())
                assert generation["selected"] == 4
                assert screen.source.started_at == generation["run_started_at"]
                await wait_until(pilot, lambda: "0/4 done" in screen_text(app))
                assert "ETA" not in screen_text(app) and "left" not in screen_text(app)
                (work / "go-2024-01-05").write_text("")
                await wait_until(pilot, lambda: "1/4 done" in screen_text(app) and "ETA " in screen_text(app))
                elapsed, left = re.search(r"elapsed (\S+)  ETA (\S+)", screen_text(app)).groups()
                # One of four done: three more at that pace. The earlier run's four days, counted, gave 0.6×.
                assert parse_duration(left, "ETA") >= 2 * parse_duration(elapsed, "elapsed")
                let_days_end(work, range(6, 9))
                await wait_until(pilot, lambda: "8/8 succeeded" in screen_text(app), timeout=30)

        asyncio.run(scenario())
    finally:
        let_days_end(work, range(5, 9))
        process.wait(timeout=60)
