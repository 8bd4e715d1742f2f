"""Failure triage (issue 26, item 14) over a real backfill whose partitions failed two ways: the groups on screen,
Enter filtering the table to one kind, r opening the rerun form for it; the same groups in the run's summary
and in `show --output json`."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest
from textual.widgets import Input

from engine.store.state_store import StateStore
from tests.backfills import state_dirs
from tests.conftest import run_backfill
from tests.guard_flags import GUARD
from tests.tui.live import screen_text, wait_until
from tui.app.backfill_app import BackfillApp
from tui.app.screens.dashboard import DashboardScreen
from tui.app.screens.export_form import ExportForm
from tui.app.screens.rerun_form import RerunForm
from tui.app.screens.triage import TriageScreen
from tui.app.widgets.partition_table import PartitionTable

TEMPLATE = (
    "sh -c 'case {start_date} in "
    '2024-01-0[2468]) echo "load failed for {start_date}: HTTP 503"; exit 1;; '
    '2024-01-05) echo "mid.a failed: division by zero"; exit 1;; '
    "esac'"
)


@pytest.fixture
def failed_twice(tmp_path: Path, home, monkeypatch) -> tuple[Path, str]:
    """Ten days: four failed with HTTP 503 (2, 4, 6, 8 January), one with a division by zero (5 January)."""
    for key, value in home.items():
        monkeypatch.setenv(key, value)
    work = tmp_path / "work"
    (work / ".git").mkdir(parents=True)
    result = run_backfill(*GUARD, "--command", TEMPLATE, "--start-date", "2024-01-01", "--end-date", "2024-01-10",
                          "--on-failure", "continue", "--no-progress", cwd=work, env=home)  # fmt: skip
    assert result.returncode == 1, result.stderr
    [backfill] = state_dirs(work / "logs" / "backfills")
    return backfill, result.stdout


def test_the_summary_and_the_json_name_each_kind_of_failure(failed_twice, home):
    """The run's summary says how many kinds and which; show --output json lists each group with its count,
    first and last partition and an example reason as written."""
    backfill, summary = failed_twice
    assert (
        "kinds       2 kinds of failure: load failed for <time>: HTTP <n> (4); mid.a failed: division by zero (1)"
        in summary
    )
    shown = run_backfill("show", backfill.name, "--output", "json", cwd=backfill.parent, env=home)
    document = json.loads(shown.stdout)
    groups = document["failure_groups"]
    assert document["failure_groups_total"] == 2
    assert [(g["signature"], g["count"], g["first"]["index"], g["last"]["index"]) for g in groups] == [
        ("load failed for <time>: HTTP <n>", 4, 1, 7),
        ("mid.a failed: division by zero", 1, 4, 4),
    ]
    assert groups[0]["example"] == "load failed for 2024-01-02: HTTP 503" and len(groups[0]["first"]["id"]) == 64


def test_t_lists_the_kinds_enter_filters_to_one_and_r_reruns_it(failed_twice):
    """At 160×48: t lists both kinds with their counts and spans; Enter on the first shows only its four
    partitions, the status line naming the kind; t then r on the second opens the rerun form offering exactly
    its one partition."""
    backfill, _ = failed_twice
    app = BackfillApp(open_store=StateStore(backfill), frozen=True)

    async def scenario():
        async with app.run_test(size=(160, 48)) as pilot:
            await wait_until(pilot, lambda: isinstance(app.screen, DashboardScreen))
            await pilot.press("t")
            await wait_until(pilot, lambda: isinstance(app.screen, TriageScreen))
            text = screen_text(app)
            assert "5 failed, 2 kinds" in text
            assert "4  #1–#7  load failed for <time>: HTTP <n>" in text
            assert "1  #4–#4  mid.a failed: division by zero" in text
            assert "e.g. partition 1: load failed for 2024-01-02: HTTP 503" in text
            await pilot.press("enter")
            await wait_until(pilot, lambda: isinstance(app.screen, DashboardScreen))
            table = app.screen.query_one(PartitionTable)
            assert [table.rows.index_at(r) for r in range(len(table.rows))] == [1, 3, 5, 7]
            await wait_until(pilot, lambda: "filter: failure: load failed for <time>: HTTP <n>" in screen_text(app))
            await pilot.press("t")
            await wait_until(pilot, lambda: isinstance(app.screen, TriageScreen))
            await pilot.press("down", "r")
            await wait_until(pilot, lambda: isinstance(app.screen, RerunForm))
            assert "those matching the filter 'failure: mid.a failed: division by zero' (1)" in screen_text(app)

    asyncio.run(scenario())


def said(app) -> str:
    """The screen's words with wrapping undone: a long path may wrap inside a form."""
    return " ".join(screen_text(app).replace("│", " ").split())


def squeezed(text: str) -> str:
    """``text`` without any space or border: a path wrapped in the middle of a word still reads whole."""
    return "".join(text.replace("│", "").replace("▌", "").split())


def test_e_exports_the_rows_shown_as_csv_or_json_and_refuses_what_it_cannot_write(failed_twice, tmp_path):
    """Filtered to one kind of failure, e writes exactly its four rows — reasons as their records hold them —
    to the CSV named, and says where; a .json name writes JSON; a file in a directory that does not exist, or
    with another extension, is refused in one line on the form and nothing is written."""
    import csv

    backfill, _ = failed_twice
    app = BackfillApp(open_store=StateStore(backfill), frozen=True)
    target = tmp_path / "kinds.csv"

    async def export(pilot, path: Path) -> None:
        await wait_until(pilot, lambda: isinstance(app.screen, DashboardScreen))  # the last form has gone
        await pilot.press("e")
        await wait_until(pilot, lambda: isinstance(app.screen, ExportForm))
        field = app.screen.query_one("#export-path", Input)
        field.value = str(path)
        await pilot.press("enter")

    async def scenario():
        async with app.run_test(size=(160, 48), notifications=True) as pilot:
            await wait_until(pilot, lambda: isinstance(app.screen, DashboardScreen))
            await pilot.press("t")
            await wait_until(pilot, lambda: isinstance(app.screen, TriageScreen))
            await pilot.press("enter")
            await wait_until(pilot, lambda: "filter: failure:" in screen_text(app))
            await export(pilot, tmp_path / "missing" / "x.csv")
            missing = squeezed(f"{tmp_path / 'missing'} is not a directory")
            await wait_until(pilot, lambda: missing in squeezed(screen_text(app)))
            app.screen.query_one("#export-path", Input).value = str(tmp_path / "x.txt")
            await pilot.press("enter")
            await wait_until(pilot, lambda: "'x.txt' ends in neither .csv nor .json" in said(app))
            await pilot.press("escape")
            await export(pilot, target)
            await wait_until(pilot, lambda: "wrote 4 rows to" in said(app) and target.exists())
            assert squeezed(f"wrote 4 rows to {target}") in squeezed(screen_text(app))  # the notification says where
            await export(pilot, tmp_path / "kinds.json")
            await wait_until(pilot, lambda: (tmp_path / "kinds.json").exists())

    asyncio.run(scenario())
    rows = list(csv.DictReader(target.open()))
    assert [(r["index"], r["status"], r["attempts"], r["reason"]) for r in rows] == [
        (str(i), "failed", "1", f"load failed for 2024-01-0{i + 1}: HTTP 503") for i in (1, 3, 5, 7)
    ]
    assert rows[0]["start"] == "2024-01-02T00:00:00Z" and len(rows[0]["id"]) == 64
    document = json.loads((tmp_path / "kinds.json").read_text())
    assert document["backfill"] == backfill.name and [p["index"] for p in document["partitions"]] == [1, 3, 5, 7]
    assert not (tmp_path / "missing").exists() and not (tmp_path / "x.txt").exists()


def test_o_cycles_the_order_of_the_rows_and_the_status_line_says_which(failed_twice):
    """o: duration, attempts, status (the failures first, in plan order), then the plan's order again; the
    status line names the order, and the selected partition stays selected."""
    backfill, _ = failed_twice
    app = BackfillApp(open_store=StateStore(backfill), frozen=True)

    def first_row() -> str:
        return next(
            line
            for line in screen_text(app).splitlines()
            if "2024-01-" in line and (" failed" in line or "succeeded" in line)
        )

    async def scenario():
        async with app.run_test(size=(120, 30)) as pilot:
            await wait_until(pilot, lambda: isinstance(app.screen, DashboardScreen))
            table = app.screen.query_one(PartitionTable)
            await pilot.press("o")
            await wait_until(pilot, lambda: "sort: duration (o to change)" in screen_text(app))
            await pilot.press("o")
            await wait_until(pilot, lambda: "sort: attempts" in screen_text(app))
            await pilot.press("o")
            await wait_until(pilot, lambda: "sort: status" in screen_text(app))
            assert [table.rows.index_at(r) for r in range(len(table.rows))] == [1, 3, 4, 5, 7, 0, 2, 6, 8, 9]
            assert first_row().lstrip("▸ ").startswith("1  2024-01-02") and "✗ failed" in first_row()
            table.select_index(4)
            await pilot.press("o")
            await wait_until(pilot, lambda: "sort:" not in screen_text(app))
            assert [table.rows.index_at(r) for r in range(3)] == [0, 1, 2] and table.selected_index == 4

    asyncio.run(scenario())


def test_ctrl_f_filters_rows_by_text_in_reason_interval_status_and_id(failed_twice):
    """Ctrl+F '503' shows the four partitions whose reason holds it; backslash '2024-01-05' the two whose interval
    shows that date (Jan 4 ends there); 'succ' the five succeeded; a status filter is kept under a text
    ('failed · "zero"'), and empty text brings every row of it back; an ID's middle finds its partition."""
    backfill, _ = failed_twice
    app = BackfillApp(open_store=StateStore(backfill), frozen=True)

    def rows_shown() -> list[str]:
        table = app.screen.query_one(PartitionTable)
        return [re.search(r"\d{4}-\d\d-\d\d", table.render_line(y).text).group() for y in range(len(table.rows))]

    def status_line() -> str:
        from tui.app.widgets.status_line import StatusLine

        return app.screen.query_one(StatusLine).render_line_text().plain

    async def find(pilot, key: str, text: str) -> None:
        from tui.app.screens.find import FindScreen

        await pilot.press(key)
        await wait_until(pilot, lambda: isinstance(app.screen, FindScreen))
        field = app.screen.query_one(Input)
        field.value = ""
        await pilot.press(*text, "enter")
        await wait_until(pilot, lambda: isinstance(app.screen, DashboardScreen))
        await pilot.pause()

    async def scenario():
        async with app.run_test(size=(160, 48), notifications=True) as pilot:
            await wait_until(pilot, lambda: isinstance(app.screen, DashboardScreen))
            await find(pilot, "ctrl+f", "503")
            assert rows_shown() == ["2024-01-02", "2024-01-04", "2024-01-06", "2024-01-08"]
            assert 'filter: "503"' in status_line() and "4 rows hold '503'" in screen_text(app)
            await find(pilot, "backslash", "2024-01-05")
            assert rows_shown() == ["2024-01-04", "2024-01-05"]
            await find(pilot, "ctrl+f", "SUCC")
            assert rows_shown() == ["2024-01-01", "2024-01-03", "2024-01-07", "2024-01-09", "2024-01-10"]
            await pilot.press("s")
            await pilot.pause()
            await pilot.press("down", "down", "down", "down", "enter")  # failed
            await pilot.pause()
            assert len(rows_shown()) == 5 and "filter: failed (s to change)" in status_line()  # s drops the text
            await find(pilot, "ctrl+f", "zero")
            assert rows_shown() == ["2024-01-05"] and 'filter: failed · "zero"' in status_line()
            await find(pilot, "ctrl+f", "")
            assert len(rows_shown()) == 5 and '"zero"' not in status_line() and "filter: failed" in status_line()
            store = StateStore(backfill)
            from engine.store.manifest import spec_of

            spec = spec_of(store.read_manifest())
            last = spec.plan.interval(9)
            middle = spec.ids.of(last.start, last.end)[20:30]
            await pilot.press("s")
            await pilot.pause()
            await pilot.press("enter")  # all
            await pilot.pause()
            await find(pilot, "ctrl+f", middle)
            assert rows_shown() == ["2024-01-10"]
            await find(pilot, "ctrl+f", "no such text")
            assert rows_shown() == [] and "0 rows hold 'no such text'" in screen_text(app)

    asyncio.run(scenario())


def test_the_copy_menu_offers_a_resume_command_exact_from_here(failed_twice, home):
    """Y on a cancelled backfill whose store this directory would not search: the resume command carries the
    absolute --state-dir and --reason TEXT (a cancelled backfill needs one), and c copies exactly that."""
    backfill, _ = failed_twice
    cancel = run_backfill("cancel", backfill.name, "--reason", "wrong range", cwd=backfill.parent, env=home)
    assert cancel.returncode == 0, cancel.stderr
    app = BackfillApp(open_store=StateStore(backfill), frozen=True)
    copied: list[str] = []
    app.copy_to_clipboard = copied.append  # what reaches the clipboard (a tmux test reads the real one)
    expected = f"backfill --continue {backfill.name} --state-dir {backfill.parent.resolve()} --reason TEXT"

    async def scenario():
        from tui.app.screens.copy_menu import CopyMenu

        async with app.run_test(size=(160, 48), notifications=True) as pilot:
            await wait_until(pilot, lambda: isinstance(app.screen, DashboardScreen))
            await pilot.press("Y")
            await wait_until(pilot, lambda: isinstance(app.screen, CopyMenu))
            flat = "".join("".join(line.strip(" │").split()) for line in screen_text(app).splitlines())
            assert "".join(expected.split()) in flat  # whole, wrapped to the box
            await pilot.press("c")
            await wait_until(pilot, lambda: "copied the resume command" in screen_text(app))

    asyncio.run(scenario())
    assert copied == [expected]
