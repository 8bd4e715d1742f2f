"""Split partitions on a real terminal: the live dashboard shows ``⑂ done/leaves``, → opens a partition's halves
under it, ← folds them, and the details pane shows the tree with each leaf's attempts."""

from __future__ import annotations

import shlex

from tests.backfills import child_command, state_dirs
from tests.conftest import backfill_argv
from tests.guard_flags import GUARD
from tests.tui.tmux import Tmux


def test_the_dashboard_shows_a_split_partition_as_a_tree(tmp_path, home):
    """A day times out whole and splits; while its halves wait, its row says ``⑂ 0/2`` and → shows both halves
    running, indented under it; the summary says what split. Browsed after: ``⑂ 2/2``, → opens, ← on a half
    folds, Enter shows the tree in the details."""
    work = tmp_path / "work"
    (work / ".git").mkdir(parents=True)
    release = work / "release"
    command = shlex.join(
        [
            *backfill_argv(),
            *GUARD,
            "--command",
            child_command("--hang-longer-than", "12", "--wait-for", str(release)),
            "--start-date",
            "2024-01-01",
            "--end-date",
            "2024-01-01",
            "--timeout",
            "2s",
            "--split-on",
            "timeout",
            "--max-parallel",
            "2",
        ]
    )
    tmux = Tmux(120, 40, command, work, {**home, "TERM": "xterm-256color"})
    try:
        screen = tmux.wait_for("⑂ 0/2", timeout=60)
        assert "0  2024-01-01 00:00 → 2024-01-02 00:00  ▶ running" in screen
        tmux.keys("Right")
        screen = tmux.wait_for("└ 2024-01-01 12:00 → 24:00")
        rows = [line for line in screen.splitlines() if "└" in line]
        assert len(rows) == 2 and all("▶ running" in row for row in rows), screen
        assert "└ 2024-01-01 00:00 → 12:00" in rows[0]
        assert "▾ 0/2" in screen
        release.touch()
        screen = tmux.wait_for("EXIT=0", timeout=60)
        assert "split       1 partition split in this run (1 split, down to 1 level)" in screen
    finally:
        tmux.close()
    [backfill] = state_dirs(work / "logs" / "backfills")
    assert len(list((backfill / "splits").glob("*.json"))) == 2
    tmux = Tmux(
        120, 40, shlex.join([*backfill_argv(), "show", backfill.name]), work, {**home, "TERM": "xterm-256color"}
    )
    try:
        screen = tmux.wait_for("⑂ 2/2")
        assert "0  2024-01-01 00:00 → 2024-01-02 00:00  ✓ succeeded" in screen and "└" not in screen
        tmux.keys("Right")
        screen = tmux.wait_for("▾ 2/2")
        rows = [line for line in screen.splitlines() if "└" in line]
        assert len(rows) == 2 and all("✓ succeeded" in row for row in rows), screen
        tmux.keys("Down", "Left")  # on a half, ← folds its partition
        screen = tmux.wait_for("⑂ 2/2")
        assert "└" not in screen
        tmux.keys("Enter")
        screen = tmux.wait_for("⑂ split: 2/2 leaves done, 1 level deep")
        assert "split on timeout into 12h + 12h" in screen
        tmux.keys("q")
        tmux.wait_for("EXIT=0", timeout=30)
    finally:
        tmux.close()
