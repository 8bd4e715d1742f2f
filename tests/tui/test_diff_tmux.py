"""The diff view on a real terminal: the details pane says what a partition changed, ``d`` shows the rows."""

from __future__ import annotations

import shlex

from tests.conftest import backfill_argv
from tests.functional.test_diff import _backfill, _orders
from tests.tui.tmux import Tmux


def test_details_say_what_changed_and_d_shows_the_rows(tmp_path, home):
    """A keyed time_interval table whose source moved: the first day's details say ``changed mid.orders +1 -1 ~1``,
    ``d`` opens its diff (the changed amount, the added and the removed row), Esc closes it; the unchanged second
    day's diff shows no row."""
    repo = _orders(tmp_path)
    backfill = _backfill(repo, home)
    tmux = Tmux(
        120, 40, shlex.join([*backfill_argv(), "show", backfill.name]), repo.root, {**home, "TERM": "xterm-256color"}
    )
    try:
        tmux.wait_for("saved backfill (nothing runs it)")
        tmux.keys("Home", "Enter")
        tmux.wait_for("changed mid.orders +1 -1 ~1  (d: the rows)")
        tmux.keys("d")
        screen = tmux.wait_for("What this partition changed")
        assert "mid.orders  by key id: +1 added, -1 removed, ~1 changed (3 rows before, 3 after)" in screen
        assert "~ id=2: amount: 20 → 25" in screen and "+ id=7" in screen and "- id=3" in screen
        tmux.keys("Escape", "Down", "d")
        screen = tmux.wait_for("+0 added, -0 removed, ~0 changed (2 rows before, 2 after)")
        assert "~ id=" not in screen
        tmux.keys("Escape", "q")
        tmux.wait_for("EXIT=0", timeout=30)
    finally:
        tmux.close()
