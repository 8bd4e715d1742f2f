"""Reading never needs write access: list and show work on a read-only mount of the state store."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.backfills import state_dirs
from tests.conftest import run_backfill
from tests.guard_flags import GUARD

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="a read-only bind mount needs root (CI runs as root)")


@pytest.fixture
def read_only(tmp_path: Path):
    """A read-only bind mount of a directory; unmounted afterwards."""
    source, view = tmp_path / "source", tmp_path / "view"
    source.mkdir()
    view.mkdir()
    subprocess.run(["mount", "--bind", str(source), str(view)], check=True)
    try:
        yield source, view
    finally:
        subprocess.run(["umount", str(view)], check=False)


def test_list_and_show_read_a_read_only_store(work, home, read_only):
    """A store made by a real run, then mounted read-only: list (text and JSON) and show (text and JSON) work
    and write nothing."""
    source, view = read_only
    result = run_backfill(
        *GUARD,
        "--command",
        "false",
        "--start-date",
        "2024-01-01",
        "--end-date",
        "2024-01-03",
        "--state-dir",
        str(source),
        cwd=work,
        env=home,
    )
    assert result.returncode == 1
    [backfill] = state_dirs(source)
    (backfill / ".summary.json").unlink(missing_ok=True)  # so list must read the records and would cache them
    subprocess.run(["mount", "-o", "remount,bind,ro", str(view)], check=True)
    before = sorted(p.relative_to(source) for p in source.rglob("*"))
    listed = run_backfill("list", "--state-dir", str(view), "--output", "json", cwd=work, env=home)
    assert listed.returncode == 0, listed.stderr
    [summary] = json.loads(listed.stdout)["backfills"]
    assert summary["id"] == backfill.name and summary["counts"]["failed"] == 1
    text = run_backfill("list", "--state-dir", str(view), "--output", "text", cwd=work, env=home)
    assert text.returncode == 0 and backfill.name in text.stdout
    for output in ("text", "json"):
        shown = run_backfill("show", backfill.name, "--state-dir", str(view), "--output", output, cwd=work, env=home)
        assert shown.returncode == 0, shown.stderr
        assert "exited with code 1" in shown.stdout or "failed" in shown.stdout
    assert sorted(p.relative_to(source) for p in source.rglob("*")) == before
