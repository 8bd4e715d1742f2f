"""The executor as PID 1 of its PID namespace (a container started without an init): what an attempt leaves behind
is given to it to reap when the attempt's child exits, and it reaps it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import backfill_argv
from tests.guard_flags import GUARD

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="a PID namespace needs root (CI runs as root)")

COUNT = """\
import os, subprocess, sys
zombies = 0
for name in filter(str.isdigit, os.listdir("/proc")):
    try:
        fields = open(f"/proc/{name}/stat").read().rsplit(")", 1)[1].split()
    except OSError:
        continue
    zombies += fields[0] == "Z" and fields[1] == "1"
with open(sys.argv[2], "a") as out:
    out.write(f"{sys.argv[1]} {zombies}\\n")
subprocess.Popen(["sleep", "30"])  # left behind in the attempt's group: stopped as the attempt ends
"""


def test_as_pid_1_the_executor_reaps_what_its_attempts_left_behind(work, home, tmp_path):
    """Thirty partitions run one at a time, each leaving `sleep 30` behind, under an executor that is PID 1. Each
    leftover is stopped as its attempt ends and, given to PID 1, reaped. The zombies of PID 1 that each partition
    counts as it starts stay at 0–2 (a leftover not yet swept). Before, they grew by one a partition, 29 at the
    last: in a container with a PID limit, forks would fail once the zombies filled it."""
    script, counts = tmp_path / "count.py", tmp_path / "counts.txt"
    script.write_text(COUNT)
    argv = [*backfill_argv(), *GUARD, "--command", f"{sys.executable} {script} {{start}} {counts}",
            "--start-date", "2024-01-01", "--end-date", "2024-01-30", "--no-progress"]  # fmt: skip
    environment = {**os.environ, **home, "NO_COLOR": "1"}
    done = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", *argv], cwd=work, env=environment,
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    seen = [int(line.split()[1]) for line in Path(counts).read_text().splitlines()]
    assert len(seen) == 30 and max(seen) <= 2, seen


STUBBORN = """\
import os, subprocess
from engine.base.processes import leftovers_of
child = subprocess.Popen(["sh", "-c", "sh -c \\"trap '' TERM; exec sleep 30\\" & echo $!"], start_new_session=True,
                         stdout=subprocess.PIPE, text=True)
left = int(child.stdout.readline())
pidfd = os.pidfd_open(child.pid)
os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)
family = leftovers_of(child.pid, pidfd)
print(child.wait(), flush=True)
family.stop(0.2)
try:
    print(open(f"/proc/{left}/stat").read().rsplit(")", 1)[1].split()[0])
except FileNotFoundError:
    print("reaped")
"""


def test_as_pid_1_a_leftover_that_ignores_sigterm_is_killed_then_reaped():
    """A leftover that ignores SIGTERM is SIGKILLed at the grace's end, given a moment to die, and reaped by PID 1,
    not left a zombie; the attempt's own child keeps its exit status (0 here, read after its leftovers were held)."""
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-c", STUBBORN], cwd=root,
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert (done.returncode, done.stdout) == (0, "0\nreaped\n"), done.stderr
