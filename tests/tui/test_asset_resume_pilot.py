"""The details pane of a partition resumed asset by asset says what ran and where the rest came from."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.conftest import run_backfill
from tests.functional.test_asset_resume import attempts, chain, failed_backfill, ran  # noqa: F401 (fixture)
from tests.tui.live import screen_text, wait_until
from tui.app.backfill_app import BackfillApp
from tui.app.screens.backfill_list import BackfillListScreen
from tui.app.screens.dashboard import DashboardScreen
from tui.app.screens.rerun_form import RerunForm
from tui.app.widgets.details import PartitionDetails


async def open_backfill(pilot, app, name: str) -> None:
    """From the browser's list to the backfill's dashboard."""
    await wait_until(pilot, lambda: isinstance(app.screen, BackfillListScreen) and name in screen_text(app))
    await pilot.press("enter")
    await wait_until(pilot, lambda: isinstance(app.screen, DashboardScreen))


def fixed_after_failure(repo, env: dict[str, str], monkeypatch) -> tuple[Path, BackfillApp]:
    """The chain's backfill after c failed, the failure then mended, and the app over its state root with the
    chain's environment."""
    backfill = failed_backfill(repo, env)
    Path(env["FAIL_FLAG"]).unlink()
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return backfill, BackfillApp(root=repo.root / "logs" / "backfills")


def test_the_details_pane_shows_what_an_asset_level_resume_ran_and_took(chain, monkeypatch):  # noqa: F811
    """After c failed and --continue ran c and d only, the details of partition 0 show, under attempt #2,
    "ran c, d; took a, b from #1" on the screen."""
    repo, env = chain
    backfill, app = fixed_after_failure(repo, env, monkeypatch)
    again = run_backfill("--continue", backfill.name, "--no-progress", cwd=repo.root, env=env)
    assert again.returncode == 0, again.stdout + again.stderr

    async def scenario():
        async with app.run_test(size=(120, 40)) as pilot:
            await open_backfill(pilot, app, backfill.name)
            await pilot.press("home", "enter")
            await wait_until(pilot, lambda: app.screen.query_one(PartitionDetails).index == 0)
            await wait_until(pilot, lambda: "ran c, d; took a, b from #1" in screen_text(app))

    asyncio.run(scenario())


@pytest.mark.parametrize("whole", [False, True])
def test_a_rerun_from_the_screen_resumes_asset_by_asset_unless_whole_partitions_is_ticked(chain, monkeypatch, whole):  # noqa: F811
    """The rerun form of a pipeline backfill (r, then Ctrl+S) runs only c and d in each failed partition; with
    "Whole partitions" ticked it runs all four assets again."""
    repo, env = chain
    backfill, app = fixed_after_failure(repo, env, monkeypatch)

    async def scenario():
        async with app.run_test(size=(120, 44)) as pilot:
            await open_backfill(pilot, app, backfill.name)
            await pilot.press("r")
            await wait_until(
                pilot, lambda: isinstance(app.screen, RerunForm) and "Whole partitions" in screen_text(app)
            )
            if whole:
                app.screen.query_one("#whole_partitions").value = True  # read when the form is submitted
            await pilot.press("ctrl+s")
            await wait_until(
                pilot, lambda: all(len(a) == 2 and a[-1]["status"] == "succeeded" for a in attempts(backfill))
            )

    asyncio.run(scenario())
    app.stop_started_runs()
    assert len(ran(env)) == (8 if whole else 4)
    assert [second.get("assets") for _, second in attempts(backfill)] == ([None, None] if whole else [["c", "d"]] * 2)
