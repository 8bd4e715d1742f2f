"""The documented second example (examples/guarded): one backfill per tier, exactly as docs/guardrails.md shows."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.conftest import ROOT, run_backfill

CASES = [
    ("auto", ("--tag", "safe", "--start-date", "2024-02-01", "--end-date", "2024-02-05"), 0, "guard   auto"),
    ("approval", ("--tag", "safe", "--start-date", "2024-02-01", "--end-date", "2024-02-29"), 4, "verdict: approval"),
    (
        "approval",
        ("--tag", "safe", "--tag", "append", "--start-date", "2024-01-20", "--end-date", "2024-01-24"),
        4,
        "would duplicate 5 rows",
    ),
    (
        "human-only",
        ("--tag", "safe", "--tag", "adhoc", "--start-date", "2024-02-01", "--end-date", "2024-02-05"),
        4,
        "verdict: human-only",
    ),
    ("never", ("--tag", "landing", "--start-date", "2024-01-20", "--end-date", "2024-01-24"), 3, "verdict: never"),
]


@pytest.fixture(scope="module")
def guarded(tmp_path_factory) -> Path:
    """A copy of examples/guarded with January 2024 run once (its history), as the guide runs it."""
    repo = tmp_path_factory.mktemp("guarded") / "guarded"
    shutil.copytree(ROOT / "examples" / "guarded", repo, ignore=shutil.ignore_patterns("*.duckdb", "logs"))
    (repo / ".git").mkdir()
    first = run_backfill(  # raw.landing is a raw table rebuilt by each run: never, by hand too
        "run",
        "pipeline",
        "--start-date",
        "2024-01-01",
        "--end-date",
        "2024-01-31",
        "--exclude-tag",
        "landing",
        cwd=repo,
    )
    assert first.returncode == 0, first.stdout + first.stderr
    return repo


@pytest.mark.parametrize(("tier", "flags", "code", "says"), CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_each_documented_backfill_gets_its_tier(guarded, home, tier, flags, code, says):
    """Each command of the guide exits with its tier's code and says why."""
    result = run_backfill("pipeline", *flags, "--reason", "docs", "--no-progress", cwd=guarded, env=home)
    assert result.returncode == code, result.stdout + result.stderr
    assert says in result.stdout, result.stdout
