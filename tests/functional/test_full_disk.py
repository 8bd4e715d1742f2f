"""A full disk under the state store: children stopped and waited for, one clear line, no litter, resumable."""

from __future__ import annotations

import contextlib
import os
import shlex
import subprocess
import sys

import psutil
import pytest

from tests.backfills import state_dirs
from tests.conftest import run_backfill
from tests.guard_flags import GUARD

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small tmpfs needs root (CI runs as root)")


@pytest.fixture
def small_disk(tmp_path):
    disk = tmp_path / "disk"
    disk.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(disk)], check=True)
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def leftovers(backfill_id: str) -> list[int]:
    found = []
    for process in psutil.process_iter(["pid"]):
        try:
            if process.environ().get("BACKFILL_ID") == backfill_id:
                found.append(process.pid)
        except (psutil.Error, OSError):
            continue
    return found


def test_enospc_stops_and_waits_for_children_and_stays_resumable(work, home, small_disk):
    """Children writing output fill a 256 KiB store: the executor stops every child and waits for it, prints one
    line naming the problem and the resume command (exit 1), leaves no temporary file and a readable manifest;
    once space is back, --continue completes every partition."""
    child = shlex.join([sys.executable, "-c", "import time; print('x' * 4000); time.sleep(0.3)"])
    args = ("--command", child, "--start-date", "2024-01-01", "--end-date", "2024-12-31", "--max-parallel", "3")
    result = run_backfill(*GUARD, *args, "--state-dir", str(small_disk), cwd=work, env=home, timeout=300)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    [backfill] = state_dirs(small_disk)
    errors = [line for line in result.stderr.splitlines() if line.startswith("backfill: error:")]
    assert len(errors) == 1 and "No space left on device" in errors[0]
    assert "every child was stopped and waited for" in errors[0] and f"--continue {backfill.name}" in errors[0]
    assert leftovers(backfill.name) == []
    assert not [p for p in backfill.rglob("*") if p.name.endswith(".tmp")]
    assert (backfill / "manifest.json").is_file()
    subprocess.run(["mount", "-o", "remount,size=64m", str(small_disk)], check=True)
    resumed = run_backfill(
        "--continue",
        backfill.name,
        "--max-parallel",
        "12",
        "--state-dir",
        str(small_disk),
        cwd=work,
        env=home,
        timeout=600,
    )
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "partitions  366: 366 succeeded" in resumed.stdout


def test_a_full_disk_at_creation_leaves_no_directory_without_a_manifest(work, home, small_disk):
    """No room even for the manifest: one line, nothing started, and no half-made backfill directory."""
    filler = small_disk / "filler"
    with open(filler, "wb") as out, contextlib.suppress(OSError):
        out.write(b"\0" * (1 << 20))
    result = run_backfill(
        *GUARD,
        "--command",
        "true",
        "--start-date",
        "2024-01-01",
        "--end-date",
        "2024-01-02",
        "--state-dir",
        str(small_disk / "states"),
        cwd=work,
        env=home,
    )
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert result.stderr.startswith("backfill: error: ") and len(result.stderr.strip().splitlines()) == 1
    states = small_disk / "states"
    assert not states.exists() or all((d / "manifest.json").is_file() for d in states.iterdir())
