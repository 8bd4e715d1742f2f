"""What a child leaves in its process group is stopped when its attempt ends: nothing outlives a backfill."""

from __future__ import annotations

import psutil

from tests.backfills import state_dirs
from tests.conftest import run_backfill
from tests.guard_flags import GUARD

DAYS = ("--start-date", "2024-01-01", "--end-date", "2024-01-03")


def with_backfill_id(backfill_id: str) -> list[int]:
    found = []
    for process in psutil.process_iter(["pid"]):
        try:
            if process.environ().get("BACKFILL_ID") == backfill_id and process.status() != psutil.STATUS_ZOMBIE:
                found.append(process.pid)
        except (psutil.Error, OSError):
            continue
    return found


def test_a_background_grandchild_is_stopped_when_its_attempt_ends(work, home):
    """`sleep 300 &` in a child that exits at once: the backfill succeeds and no sleep is left behind."""
    result = run_backfill(*GUARD, "--command", "sh -c 'sleep 300 & echo started'", *DAYS, cwd=work, env=home)
    assert result.returncode == 0, result.stderr
    [backfill] = state_dirs(work / "logs" / "backfills")
    assert with_backfill_id(backfill.name) == []


def test_a_grandchild_ignoring_sigterm_is_killed_after_the_grace(work, home):
    """A grandchild that ignores SIGTERM is SIGKILLed once the grace period is over; the backfill waits for it."""
    result = run_backfill(
        *GUARD,
        "--command",
        'sh -c "sh -c \'trap \\"\\" TERM; sleep 300\' & echo started"',
        *DAYS,
        cwd=work,
        env={**home, "BACKFILL_STOP_GRACE": "1"},
    )
    assert result.returncode == 0, result.stderr
    [backfill] = state_dirs(work / "logs" / "backfills")
    assert with_backfill_id(backfill.name) == []


SETSID_LEFTOVER = """\
if [ -s escaped.pid ] && [ -d /proc/$(cat escaped.pid) ] && ! grep -q '^State:.*Z' /proc/$(cat escaped.pid)/status
then echo "$1" >> alive-at-start.txt
fi
rm -f escaped.pid
sh -c 'setsid sleep 300 & echo $! > escaped.pid; wait' &
while [ ! -s escaped.pid ]; do :; done
"""


def test_what_a_leftover_started_in_a_session_of_its_own_does_not_outlive_its_attempt(work, home):
    """Each partition leaves a shell in its group that has started ``setsid sleep 300``, in a session of its own:
    it was not in the group, so it ran on beside the next partitions and outlived the backfill (exit 0). It is
    found through the shell that started it: no partition starts beside the last one's, and none is left."""
    (work / "job.sh").write_text(SETSID_LEFTOVER)
    result = run_backfill(*GUARD, "--command", "sh job.sh {start}", *DAYS, "--no-progress", cwd=work, env=home)
    assert result.returncode == 0, result.stdout + result.stderr
    [backfill] = state_dirs(work / "logs" / "backfills")
    assert not (work / "alive-at-start.txt").exists(), (work / "alive-at-start.txt").read_text()
    assert with_backfill_id(backfill.name) == []
