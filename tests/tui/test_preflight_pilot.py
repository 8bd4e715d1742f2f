"""The pre-flight screen (Pilot) and, in a real terminal (tmux), the backfill it lets run."""

from __future__ import annotations

import asyncio
import json
import shlex
from pathlib import Path

import pytest

from engine.execute.backfill import state_root_for
from engine.execute.guarding import request_for_new
from engine.guardrails.preflight import run_preflight
from engine.guardrails.request import GuardOptions
from engine.pipeline.options import RunOptions
from engine.spec.backfill_spec import ExecutionOptions
from engine.spec.planning import plan_request
from tests.backfills import state_dirs
from tests.builder import Repo
from tests.conftest import backfill_argv
from tests.functional.test_guardrails import anomaly_backfill, daily  # noqa: F401 - daily is a fixture
from tests.tui.live import screen_text, wait_until
from tests.tui.tmux import Tmux
from tui.app.preflight_app import PreflightApp
from tui.app.screens.preflight import PreflightAnswer

WEEK = ("2024-01-08", "2024-01-12")


def human_only_repo(root: Path) -> Repo:
    """A standard pipeline whose only asset runs its SQL as written: human-only."""
    repo = Repo(root, guardrails="standard")
    repo.sql("mid.adhoc", "CREATE TABLE IF NOT EXISTS adhoc_log AS SELECT DATE '{{ start_date }}' AS day")
    repo.run_ok("--start-date", "2023-12-01", "--end-date", "2024-01-07")
    return repo


@pytest.fixture
def preflight(tmp_path, home, monkeypatch):
    for key, value in home.items():
        monkeypatch.setenv(key, value)
    repo = human_only_repo(tmp_path / "repo")
    planned = plan_request(
        target=str(repo.pipeline_dir), command=None, name=None, start=WEEK[0], end=WEEK[1], timezone="UTC",
        partition="daily", environment=None, config_file=None, run_options=RunOptions(), options=ExecutionOptions(),
        force=False, cwd=repo.root,
    )  # fmt: skip
    root = state_root_for(planned.spec, None, repo.root).path
    return run_preflight(request_for_new(planned, GuardOptions(), reason=None, root=root, cwd=repo.root))


def test_the_digest_must_be_typed_back_to_approve_a_human_only_plan(preflight):
    """The screen lists the checks and the verdict; Enter without a reason says so; a wrong digest is refused
    on screen; the right prefix (8 characters) approves with the reason typed."""
    app = PreflightApp(preflight, "p · a week", None)
    answers: list = []

    async def scenario():
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_until(pilot, lambda: "verdict human-only" in screen_text(app))
            text = screen_text(app)
            assert "mid.adhoc runs its SQL as written" in text and f"plan digest {preflight.short_digest}" in text
            await pilot.press("enter")
            await wait_until(pilot, lambda: "Give a reason" in screen_text(app))
            await pilot.press(*"fix the log", "enter")
            await pilot.press(*"deadbeef", "enter")
            await wait_until(pilot, lambda: "That is not this plan's digest" in screen_text(app))
            assert app.is_running
            await pilot.press(*["backspace"] * 8, *preflight.digest[:8], "enter")
            await wait_until(pilot, lambda: app.return_code is not None)
        answers.append(app.return_value)

    asyncio.run(scenario())
    assert answers == [PreflightAnswer("fix the log", True)]


def test_escape_runs_nothing(preflight):
    """Esc leaves the screen without an answer (the command then exits 4, nothing saved)."""
    app = PreflightApp(preflight, "p · a week", "r")

    async def scenario():
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_until(pilot, lambda: "verdict human-only" in screen_text(app))
            await pilot.press("escape")
            await wait_until(pilot, lambda: app.return_code is not None)

    asyncio.run(scenario())
    assert app.return_value is None


def test_a_human_only_backfill_runs_once_the_digest_is_typed_in_a_real_terminal(tmp_path, home):
    """In tmux: no --reason, human-only plan; the pre-flight screen asks for both, the backfill then runs in
    the dashboard, and the approval is saved as typed at the terminal by user@host."""
    repo = human_only_repo(tmp_path / "repo")
    command = shlex.join([*backfill_argv(), "p", "--start-date", WEEK[0], "--end-date", WEEK[1]])
    tmux = Tmux(120, 40, command, repo.root, {**home, "TERM": "xterm-256color"})
    try:
        screen = tmux.wait_for("verdict human-only")
        digest = screen.split("plan digest ", 1)[1].split()[0]
        tmux.keys("fix the log", "Enter")
        tmux.keys(digest[:10], "Enter")
        tmux.wait_for("partitions  5: 5 succeeded", timeout=60)
    finally:
        tmux.close()
    [backfill] = state_dirs(repo.root / "logs" / "backfills")
    invocation = json.loads((backfill / "guardrails.json").read_text())["invocations"][0]
    assert invocation["reason"] == "fix the log"
    assert invocation["approval"]["how"] == "typed at the terminal" and invocation["approval"]["tier"] == "human-only"


def test_verification_marks_and_numbers_reach_the_screen(daily, home, monkeypatch):  # noqa: F811 - the fixture
    """Browsing the anomaly backfill: verified rows show ✓ after their status, the failed one ✗ with the
    verification reason, and its details pane the rows, bounds and bucket mean."""
    from tui.app.backfill_app import BackfillApp

    for key, value in home.items():
        monkeypatch.setenv(key, value)
    _, backfill = anomaly_backfill(daily, home)
    app = BackfillApp(root=backfill.parent)

    async def scenario():
        async with app.run_test(size=(140, 44)) as pilot:
            await pilot.press("enter")
            await wait_until(pilot, lambda: "2024-01-10 00:00" in screen_text(app))
            lines = screen_text(app).splitlines()
            row = lambda day: next(line for line in lines if f"{day} 00:00 →" in line)  # noqa: E731
            assert "✓ succeeded ✓" in row("2024-01-08") and "✓ succeeded ✓" in row("2024-01-09")
            assert "✗ failed    ✗" in row("2024-01-10") and "verification: mid.daily: 100 rows" in row("2024-01-10")
            assert "· queued" in row("2024-01-11")
            await pilot.press("home", "down", "down", "enter")
            await wait_until(pilot, lambda: "verification: failed" in screen_text(app))
            assert "mid.daily 100 rows outside 5–20 (Wednesday mean 10 over" in screen_text(app)

    asyncio.run(scenario())


def test_at_80x24_every_check_reads_whole_and_the_digest_and_reason_stay_in_view(preflight):
    """80×24: the failing check's detail wraps under itself instead of being cut; the list scrolls (Tab to it,
    End) to the last check, read whole too; the verdict with the plan digest and the reason field never leave
    the screen, so approving is never typed blind."""
    app = PreflightApp(preflight, "p · a week", None)

    async def scenario():
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_until(pilot, lambda: "verdict human-only" in screen_text(app))
            words = " ".join(screen_text(app).split())
            assert "mid.adhoc runs its SQL as written: its effect on data cannot be judged" in words
            assert "…" not in screen_text(app)  # nothing cut
            assert "why this backfill runs" in screen_text(app)
            await pilot.press("shift+tab")
            await pilot.press("end")
            await wait_until(pilot, lambda: "verification" in screen_text(app))
            words = " ".join(screen_text(app).split())
            assert "each partition verified against its run record and history (on)" in words
            assert f"plan digest {preflight.short_digest}" in screen_text(app)

    asyncio.run(scenario())
