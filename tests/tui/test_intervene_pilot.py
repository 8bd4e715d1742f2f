"""Pilot tests of stepping in from the screen: the mark form (preview, validation, what reaches the disk), and
pause, resume and cancel of a live run from its dashboard."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import orjson
import pytest

from tests.backfills import child_command, records, state_dirs
from tests.conftest import run_backfill
from tests.guard_flags import GUARD
from tests.tui.live import screen_text, start_live, wait_until
from tui.app.backfill_app import BackfillApp
from tui.app.screens.audit_view import AuditScreen
from tui.app.screens.intervene_forms import MarkForm, ReasonForm

SLOW = f"{sys.executable} -c 'import time; time.sleep(30)'"


@pytest.fixture
def work(tmp_path: Path, home, monkeypatch) -> Path:
    for key, value in home.items():
        monkeypatch.setenv(key, value)
    directory = tmp_path / "work"
    (directory / ".git").mkdir(parents=True)
    return directory


def audit_actions(backfill: Path) -> list[str]:
    path = backfill / "audit.jsonl"
    return [orjson.loads(line)["action"] for line in path.read_bytes().splitlines()] if path.exists() else []


def test_the_mark_form_previews_validates_and_marks_what_the_filter_shows(work, home):
    """s → failed, m: the form offers the selected partition or the 2 the filter shows, previews '2 partitions
    will be marked succeeded', refuses an empty reason and non-ASCII rows (Mark disabled, the error on screen),
    then marks both: the disk has the marks, the audit 2 MARK lines, the audit view (a) lists them."""
    template = child_command("--fail-on", "2024-01-03", "--fail-on", "2024-01-06")
    result = run_backfill(*GUARD, "--command", template, "--start-date", "2024-01-01", "--end-date", "2024-01-08",
                          "--on-failure", "continue", cwd=work, env=home)  # fmt: skip
    assert result.returncode == 1
    [backfill] = state_dirs(work / "logs" / "backfills")
    app = BackfillApp(root=work / "logs" / "backfills")

    async def scenario():
        async with app.run_test(size=(120, 40), notifications=True) as pilot:
            await pilot.press("enter")  # open the only backfill of the list
            await pilot.pause()
            await pilot.press("s")
            await pilot.pause()
            await pilot.press("down", "down", "down", "down", "enter")  # all, queued, running, succeeded, failed
            await pilot.pause()
            await pilot.press("m")
            await wait_until(pilot, lambda: isinstance(app.screen, MarkForm))
            await pilot.click("#filter")
            await pilot.pause()
            shown = screen_text(app)
            assert "every partition matching the filter 'failed' (2)" in shown
            assert "2 partitions will be marked succeeded" in shown
            assert "say why: the reason is recorded" in shown
            assert app.screen.query_one("#submit").disabled
            await pilot.click("#mark-rows")
            await pilot.press(*"١٢")
            await pilot.pause()
            assert "is not a row count: give ASCII digits" in screen_text(app)
            await pilot.press("backspace", "backspace", "1", "2")
            await pilot.click("#mark-reason")
            await pilot.press(*"loaded by hand")
            await pilot.pause()
            assert not app.screen.query_one("#submit").disabled
            await pilot.press("ctrl+s")
            await wait_until(pilot, lambda: audit_actions(backfill) == ["MARK", "MARK"])
            await wait_until(pilot, lambda: "marked 2 partitions succeeded" in screen_text(app))
            await pilot.press("a")
            await wait_until(pilot, lambda: isinstance(app.screen, AuditScreen))
            shown = screen_text(app)
            assert "2 interventions" in shown and shown.count("failed → succeeded") == 2
            await pilot.press("enter")
            await pilot.pause()
            for _ in range(20):  # the details scroll: every field is reached with the arrow keys
                if "target_count: 12" in screen_text(app):
                    break
                await pilot.press("down")
                await pilot.pause()
            assert "target_count: 12" in screen_text(app)

    asyncio.run(scenario())
    marked = [r for r in records(backfill) if r["attempts"][-1].get("kind") == "mark"]
    assert [(r["status"], r["attempts"][-1]["rows"]) for r in marked] == [("succeeded", 12), ("succeeded", 12)]


def test_pause_resume_and_cancel_a_live_run_from_its_dashboard(work):
    """p with a reason pauses the running executor (the status line says by whom; nothing new starts), p again
    resumes it, c with a reason cancels it: children stopped, 'Backfill cancelled — cancelled by …' on screen,
    and PAUSE, RESUME, CANCEL in the audit log."""
    live = start_live(work, SLOW, "2024-01-01", "2024-01-20", max_parallel=2, exit_when_succeeded=False)
    backfill = live.prepared.store.directory

    async def reason(pilot, text: str) -> None:
        await wait_until(pilot, lambda: isinstance(live.app.screen, ReasonForm))
        await pilot.press(*text, "enter")

    async def scenario():
        async with live.app.run_test(size=(120, 40), notifications=True) as pilot:
            await wait_until(pilot, lambda: len(live.executor.snapshot().running) == 2)
            await pilot.press("p")
            await reason(pilot, "migration")
            await wait_until(pilot, lambda: live.executor.paused is not None)
            await wait_until(pilot, lambda: "Paused by" in live.status_line() and "migration" in live.status_line())
            await wait_until(pilot, lambda: "p Resume" in screen_text(live.app))
            assert len(live.executor.snapshot().running) == 2 and "p Pause" not in screen_text(live.app)
            await pilot.press("p")
            await reason(pilot, "done")
            await wait_until(pilot, lambda: live.executor.paused is None)
            await wait_until(pilot, lambda: "Paused by" not in live.status_line())
            await wait_until(pilot, lambda: "p Pause" in screen_text(live.app))
            await pilot.press("p")  # paused again, and resumed from another terminal
            await reason(pilot, "again")
            await wait_until(pilot, lambda: "Paused by" in live.status_line() and "p Resume" in screen_text(live.app))
            resumed = await asyncio.to_thread(
                run_backfill,
                "resume",
                backfill.name,
                "--state-dir",
                str(work / "states"),
                "--reason",
                "from the shell",
                cwd=work,
                env=dict(os.environ),
            )
            assert resumed.returncode == 0, resumed.stdout + resumed.stderr
            await wait_until(
                pilot, lambda: "Paused by" not in live.status_line() and "p Pause" in screen_text(live.app)
            )
            await pilot.press("c")
            await reason(pilot, "wrong file")
            await wait_until(pilot, lambda: "Backfill cancelled — cancelled by" in live.status_line(), timeout=60)
            assert "wrong file" in screen_text(live.app)

    try:
        asyncio.run(scenario())
    finally:
        live.finish()
    assert audit_actions(backfill) == ["PAUSE", "RESUME", "PAUSE", "RESUME", "CANCEL"]
    assert not [r for r in records(backfill) if r["status"] == "running"]


def test_more_or_fewer_at_once_and_stopping_one_partition_from_the_dashboard(work):
    """+ proposes one more at once (3), refuses a non-ASCII count, and with a reason three children run and the
    header says so; x on a running row stops only that partition (recorded cancelled, the others go on); x on
    a row that does not run says so and opens nothing; - brings it back to 2. Audited SET, CANCEL, SET."""
    from tui.app.screens.intervene_forms import ParallelForm

    live = start_live(work, SLOW, "2024-01-01", "2024-01-20", max_parallel=2, exit_when_succeeded=False)
    backfill = live.prepared.store.directory

    def header() -> str:
        return live.screen.query_one("#run-header").render().plain

    async def scenario():
        async with live.app.run_test(size=(120, 40), notifications=True) as pilot:
            await wait_until(pilot, lambda: len(live.executor.snapshot().running) == 2)
            assert "  2 parallel" in header()
            await pilot.press("plus")
            await wait_until(pilot, lambda: isinstance(live.app.screen, ParallelForm))
            shown = screen_text(live.app)
            assert "--max-parallel (now 2)" in shown and "Saved and audited" in shown
            assert live.app.screen.query_one("#parallel-value").value == "3"
            await pilot.click("#parallel-value")
            await pilot.press("end", "backspace", "٣")
            await pilot.pause()
            assert "'٣' is not a count of partitions at once" in screen_text(live.app)
            assert live.app.screen.query_one("#submit").disabled
            await pilot.press("backspace", "3")
            await pilot.click("#reason")
            await pilot.press(*"quiet hour", "enter")
            await wait_until(pilot, lambda: len(live.executor.snapshot().running) == 3)
            await wait_until(pilot, lambda: "  3 parallel" in header())
            await pilot.press("home")  # partition 0, running
            await pilot.pause()
            await pilot.press("x")
            await wait_until(pilot, lambda: isinstance(live.app.screen, ReasonForm))
            assert "Stop partition 0 now" in screen_text(live.app)
            await pilot.press(*"bad source", "enter")
            await wait_until(pilot, lambda: records(backfill)[0]["status"] == "cancelled", timeout=60)
            await wait_until(pilot, lambda: len(live.executor.snapshot().running) == 3)  # the others go on
            assert 0 not in {p.index for p in live.executor.snapshot().running}
            assert records(backfill)[0]["attempts"][-1]["error"].endswith(": bad source")
            await pilot.press("end")  # the last partition: queued
            await pilot.pause()
            await pilot.press("x")
            await wait_until(
                pilot, lambda: "x stops a running partition: select one that runs" in screen_text(live.app)
            )
            assert not isinstance(live.app.screen, ReasonForm)
            await pilot.press("minus")
            await wait_until(pilot, lambda: isinstance(live.app.screen, ParallelForm))
            assert live.app.screen.query_one("#parallel-value").value == "2"
            await pilot.press(*"peak", "enter")
            await wait_until(pilot, lambda: live.executor.parallel == 2 and "  2 parallel" in header())

    try:
        asyncio.run(scenario())
    finally:
        live.finish()
    assert audit_actions(backfill) == ["SET", "CANCEL", "SET"]


def test_an_answer_that_comes_after_the_screen_was_taken_down_is_dropped(work, monkeypatch):
    """A request's answer arriving while the app closes (its table already gone — what CI once hit: the last
    request of a test answered during shutdown) is dropped: no crash of the app, nothing shown."""
    import threading

    from tui.app import intervening
    from tui.app.screens.intervene_forms import ParallelForm
    from tui.app.widgets.partition_table import PartitionTable

    live = start_live(work, SLOW, "2024-01-01", "2024-01-05", max_parallel=1, exit_when_succeeded=False)
    answer, asked = threading.Event(), threading.Event()
    real_send = intervening.send

    def held_send(*args, **kwargs):
        result = real_send(*args, **kwargs)
        asked.set()
        answer.wait(30)
        return result

    monkeypatch.setattr(intervening, "send", held_send)

    async def scenario():
        async with live.app.run_test(size=(120, 40), notifications=True) as pilot:
            await wait_until(pilot, lambda: len(live.executor.snapshot().running) == 1)
            await pilot.press("plus")
            await wait_until(pilot, lambda: isinstance(live.app.screen, ParallelForm))
            await pilot.press(*"more", "enter")
            await wait_until(pilot, lambda: asked.is_set(), timeout=30)
            await live.screen.query_one(PartitionTable).remove()  # as the app's shutdown does
            answer.set()
            await wait_until(pilot, lambda: not [w for w in live.screen.workers if w.is_running])
            assert live.app._exception is None

    try:
        asyncio.run(scenario())
    finally:
        live.finish()
