"""A full disk under the state store: children stopped and waited for, one clear line, no litter, resumable."""

from __future__ import annotations

import contextlib
import os
import shlex
import subprocess
import sys

import orjson
import psutil
import pytest

from tests.backfills import child_command, child_running, records, start_background, state_dirs, wait_for
from tests.conftest import run_backfill, tmpfs
from tests.guard_flags import GUARD

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small tmpfs needs root (CI runs as root)")


@pytest.fixture
def small_disk(tmp_path):
    with tmpfs(tmp_path / "disk", "256k") as disk:
        yield disk


def leftovers(backfill_id: str) -> list[int]:
    found = []
    for process in psutil.process_iter(["pid"]):
        try:
            if process.environ().get("BACKFILL_ID") == backfill_id:
                found.append(process.pid)
        except (psutil.Error, OSError):
            continue
    return found


def test_enospc_stops_and_waits_for_children_and_stays_resumable(work, home, small_disk, tmp_path):
    """Children writing output fill a 256 KiB store: the executor stops every child and waits for it, prints one
    line naming the problem and the resume command (exit 1), leaves no temporary file and a readable manifest.
    Every record is final, written into its reserve's room once the children were stopped (show and list say
    nothing runs); --continue on the still-full disk is one
    line, no frames; once space is back it completes every partition, and every child that ran (a ledger each
    writes first thing, off the full disk) has its attempt, naming its PID."""
    ledger = tmp_path / "ledger"
    began = (
        "import json, os, time; "
        f"open({str(ledger)!r}, 'a').write(json.dumps([os.environ['BACKFILL_RUN_ID'], os.getpid()]) + '\\n'); "
        "print('x' * 4000); time.sleep(0.3)"
    )
    child = shlex.join([sys.executable, "-c", began])
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
    left_running = [r for r in records(backfill) if r["status"] == "running"]
    shown = run_backfill("show", backfill.name, "--state-dir", str(small_disk), cwd=work, env=home)
    assert shown.returncode == 0, shown.stderr
    assert "running" not in shown.stdout.split("partitions:")[1].splitlines()[0]
    assert left_running == []  # the reserve's room took every final record, once the children were stopped
    assert "recorded running but no executor owns" not in shown.stderr
    listed = run_backfill("list", "--output", "json", "--state-dir", str(small_disk), cwd=work, env=home)
    assert orjson.loads(listed.stdout)["backfills"][0]["counts"]["running"] == 0
    still_full = run_backfill("--continue", backfill.name, "--state-dir", str(small_disk), cwd=work, env=home)
    assert still_full.returncode == 1 and "Traceback" not in still_full.stderr, still_full.stderr
    [line] = still_full.stderr.splitlines()
    assert line.startswith("backfill: error:") and "No space left on device" in line
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
    attempts = {a["run_id"]: a for r in records(backfill) for a in r["attempts"]}
    ran = [orjson.loads(line) for line in ledger.read_text().splitlines()]
    wrong = [
        (run_id, pid, attempts[run_id]["pid"], attempts[run_id]["status"])
        for run_id, pid in ran
        if attempts[run_id]["pid"] != pid
    ]
    assert ran and not wrong, wrong


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


def test_no_room_for_the_reserve_starts_nothing_and_continue_completes_once_there_is(work, home, small_disk):
    """Room for the backfill's files but not for its reserve (64 KiB + 8 KiB per parallel child): one line naming
    the reserve, exit 1, no child started; with room for it (fewer at a time), --continue runs every partition."""
    filler = small_disk / "filler"
    filler.write_bytes(b"\0" * (150 * 1024))
    days = ("--start-date", "2024-01-01", "--end-date", "2024-01-03")
    spans = work / "spans"
    args = ("--command", child_command("--spans", str(spans)), *days, "--max-parallel", "32")
    result = run_backfill(*GUARD, *args, "--state-dir", str(small_disk), cwd=work, env=home)
    assert result.returncode == 1, result.stdout + result.stderr
    [line] = result.stderr.splitlines()
    assert "has no room for its 320 KiB reserve" in line and "nothing was started" in line, line
    assert not spans.exists()
    [backfill] = state_dirs(small_disk)
    assert not (backfill / ".reserve").exists()
    filler.unlink()
    resumed = run_backfill(
        "--continue", backfill.name, "--max-parallel", "2", "--state-dir", str(small_disk), cwd=work, env=home
    )  # 80 KiB of reserve
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert len(spans.read_text().splitlines()) == 3
    assert not (backfill / ".reserve").exists()  # given back at the end


def test_a_live_max_parallel_without_room_for_its_reserve_is_refused_and_changes_nothing(work, home, small_disk):
    """`backfill set --max-parallel 32` while it runs, on a store with room for 2's reserve but not 32's: refused
    in one line naming the disk's error, nothing saved or audited, and the run goes on two at a time."""
    released = work / "released"
    days = ("--start-date", "2024-01-01", "--end-date", "2024-01-04")
    args = ("--command", child_command("--wait-for", str(released)), *days, "--max-parallel", "2")
    process = start_background(*GUARD, *args, "--no-progress", "--state-dir", str(small_disk), cwd=work, env=home)
    backfill = wait_for(lambda: (state_dirs(small_disk) or [None])[0], timeout=30)
    wait_for(lambda: sum(1 for r in records(backfill) if child_running(r)) == 2, timeout=30)
    filler = small_disk / "filler"
    filler.write_bytes(b"\0" * (100 * 1024))  # what is left is less than 320 KiB - 80 KiB
    bigger = run_backfill(
        "set",
        backfill.name,
        "--max-parallel",
        "32",
        "--reason",
        "r",
        "--state-dir",
        str(small_disk),
        cwd=work,
        env=home,
    )
    assert bigger.returncode == 1, bigger.stdout + bigger.stderr
    assert bigger.stderr.strip().endswith("the request could not be applied (No space left on device): nothing changed")
    assert not (backfill / "control.json").exists() and not (backfill / "audit.jsonl").exists()
    assert sum(1 for r in records(backfill) if child_running(r)) == 2
    filler.unlink()
    released.touch()
    out, err = process.communicate(timeout=60)
    assert process.returncode == 0, out + err


def test_a_takeover_on_a_full_disk_changes_nothing_and_says_so(work, home, small_disk):
    """A --continue on a disk with no room left: the takeover's first write (its own lease, before it stops any
    child) fails, and that is one line naming the store and the disk's error, exit 1, before anything was settled
    or started; the records and the lease are as they were, and the backfill resumes once there is room."""
    days = ("--start-date", "2024-01-01", "--end-date", "2024-01-03")
    first = run_backfill(*GUARD, "--command", "false", *days, "--state-dir", str(small_disk), cwd=work, env=home)
    assert first.returncode == 1, first.stdout + first.stderr
    [backfill] = state_dirs(small_disk)
    before = {path.name: path.read_bytes() for path in (backfill / "partitions").glob("*.json")}
    lease = (backfill / "lease.json").read_bytes()
    filler = small_disk / "filler"
    with contextlib.suppress(OSError), open(filler, "wb") as out:
        while True:
            out.write(b"\0" * 4096)
            out.flush()
    resumed = run_backfill("--continue", backfill.name, "--rerun", "failed", "--reason", "again", "--state-dir",
                           str(small_disk), cwd=work, env=home)  # fmt: skip
    assert resumed.returncode == 1, resumed.stdout + resumed.stderr
    [line] = resumed.stderr.splitlines()
    assert f"the state store {backfill} could not be written (No space left on device) while taking backfill" in line
    assert f"nothing was started; free space or fix the disk, then backfill --continue {backfill.name}" in line
    assert {path.name: path.read_bytes() for path in (backfill / "partitions").glob("*.json")} == before
    assert (backfill / "lease.json").read_bytes() == lease
    filler.unlink()
    again = run_backfill("--continue", backfill.name, "--rerun", "failed", "--reason", "again", "--state-dir",
                         str(small_disk), cwd=work, env=home)  # fmt: skip
    assert again.returncode == 1, again.stdout + again.stderr  # `false` fails again, now that it could run
    assert [len(r["attempts"]) for r in records(backfill) if r["status"] == "failed"] == [2]
