"""A PID reused inside the grace is never signalled: traps set in a fresh PID namespace (tests/pid_trap.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

TRAP = Path(__file__).resolve().parents[1] / "pid_trap.py"

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0, reason="a PID namespace with ns_last_pid needs root (CI runs as root)"
)


def _trap(scenario: str, tmp_path: Path) -> dict:
    """Run one scenario as init of a new PID namespace; its JSON outcome."""
    done = subprocess.run(
        ["unshare", "--pid", "--fork", "--mount-proc", sys.executable, str(TRAP), scenario, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout.strip().splitlines()[-1])
    assert outcome["reused"], "the trap was not set: the unrelated process did not get the number"
    return outcome


def test_the_last_sigkill_of_reconcile_and_takeover_spares_a_process_that_took_the_lost_childs_pid(tmp_path):
    """The lost child dies inside the grace and its PID is reused: the SIGKILL at the grace's end misses it."""
    assert _trap("last_signal", tmp_path)["survived"]


def test_a_descendant_found_at_the_start_of_the_grace_is_signalled_only_while_it_is_itself(tmp_path):
    """A grandchild (own session) tracked at the start dies inside the grace; its PID's new owner survives."""
    assert _trap("descendant", tmp_path)["survived"]


def test_the_executor_sigkill_of_leftovers_spares_a_new_group_with_the_old_groups_number(tmp_path):
    """What an attempt left in its group dies inside the grace, the group number is reused: it is not hit."""
    assert _trap("leftover", tmp_path)["survived"]
