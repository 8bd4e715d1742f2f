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
        tmux.escape("What this partition changed")
        tmux.keys("Down", "d")
        screen = tmux.wait_for("+0 added, -0 removed, ~0 changed (2 rows before, 2 after)")
        assert "~ id=" not in screen
        tmux.escape("What this partition changed")
        tmux.keys("q")
        tmux.wait_for("EXIT=0", timeout=30)
    finally:
        tmux.close()


def _preview_on_the_preflight_screen(repo, home) -> tuple[str, str]:
    """A new backfill of January's first two days: F2 on its pre-flight screen, the screen once the diff of the
    first day shows, then Esc twice; what the terminal shows at the shell afterwards."""
    command = shlex.join([*backfill_argv(), "p", "--start-date", "2024-01-01", "--end-date", "2024-01-02"])
    tmux = Tmux(120, 40, command, repo.root, {**home, "TERM": "xterm-256color"})
    try:
        tmux.wait_for("why this backfill runs (required)")
        tmux.keys("F2")
        preview = tmux.wait_for("+1 added, -1 removed, ~1 changed (3 rows before, 3 after)")
        tmux.keys("Escape", "Escape")
        return preview, tmux.wait_for("EXIT=", timeout=30)
    finally:
        tmux.close()


def test_the_preflight_screen_previews_the_first_partition(tmp_path, home):
    """On the pre-flight screen (a reason still to give), F2 runs the first day into a scratch copy and shows what
    it would change; Esc twice cancels: nothing ran, every file of the repository is as it was."""
    from tests.functional.test_diff import _digests

    repo = _orders(tmp_path)
    before = _digests(repo)
    preview, after = _preview_on_the_preflight_screen(repo, home)
    assert "preview: partition 0 run into a scratch copy" in preview and "~ id=2: amount: 20 → 25" in preview
    assert "EXIT=0" not in after
    assert _digests(repo) == before


def test_the_preflight_screen_s_preview_leaves_out_python_code(tmp_path, home):
    """F2 with a Python asset that writes outside the repository: the screen names it as not run in the preview
    and still shows the SQL table's diff; the file outside is never written."""
    repo = _orders(tmp_path)
    outside = tmp_path / "outside.txt"
    repo.python("mid.cleanup", f"open({str(outside)!r}, 'w').write('ran')", depends=["mid.orders"])
    preview, _ = _preview_on_the_preflight_screen(repo, home)
    assert "not run in the preview: mid.cleanup (Python code can write outside the scratch copy)" in preview
    assert not outside.exists()
