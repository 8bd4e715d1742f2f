"""Stopping and crashing: SIGINT, SIGTERM, stubborn children, SIGKILL of the parent, orphans, a second executor."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from tests.backfills import alive, child_command, records, start_background, state_dirs, statuses, wait_for
from tests.conftest import run_backfill
from tests.guard_flags import GUARD, REASON

SIX_DAYS = ("--start-date", "2024-01-01", "--end-date", "2024-01-06")


def backfill_dir(work: Path) -> Path:
    return wait_for(lambda: (state_dirs(work / "logs" / "backfills") or [None])[0])


def running_pids(backfill: Path, count: int) -> list[int]:
    """Wait until ``count`` partitions are running; their children's PIDs."""

    def ready():
        running = [r for r in records(backfill) if r["status"] == "running" and r["attempts"][-1]["pid"]]
        return running if len(running) >= count else None

    return [r["attempts"][-1]["pid"] for r in wait_for(ready)]


@pytest.mark.parametrize(
    ("signum", "reason"), [(signal.SIGINT, "interrupted (Ctrl+C)"), (signal.SIGTERM, "terminated (SIGTERM)")]
)
def test_signal_cancels_children_then_resume_completes(work, home, signum, reason):
    """SIGINT or SIGTERM mid-run: children stopped and waited for, partitions cancelled, exit 130;
    --continue then runs everything not yet succeeded."""
    process = start_background(
        *GUARD,
        "--command",
        child_command(),
        *SIX_DAYS,
        "--max-parallel",
        "2",
        cwd=work,
        env={**home, "CHILD_SLEEP": "30"},
    )
    backfill = backfill_dir(work)
    pids = running_pids(backfill, 2)
    os.kill(process.pid, signum)
    stdout, stderr = process.communicate(timeout=40)
    assert process.returncode == 130, stderr
    assert not any(alive(pid) for pid in pids)
    assert statuses(backfill) == {0: "cancelled", 1: "cancelled"}
    assert all(r["attempts"][-1]["error"] == f"cancelled: {reason}" for r in records(backfill))
    assert f"resume      backfill --continue {backfill.name}" in stdout
    resumed = run_backfill("--continue", backfill.name, "--max-parallel", "3", cwd=work, env=home)
    assert resumed.returncode == 0, resumed.stderr
    assert statuses(backfill) == {i: "succeeded" for i in range(6)}
    assert [len(r["attempts"]) for r in records(backfill)][:2] == [2, 2]


def test_stubborn_children_are_killed_after_the_grace_period(work, home):
    """A child ignoring SIGINT and SIGTERM is SIGKILLed once the grace period is over; the parent waits."""
    process = start_background(
        *GUARD,
        "--command",
        child_command("--ignore-signals", "--sleep", "60"),
        *SIX_DAYS,
        cwd=work,
        env={**home, "BACKFILL_STOP_GRACE": "3"},
    )
    backfill = backfill_dir(work)
    [pid] = running_pids(backfill, 1)
    started = time.monotonic()
    os.kill(process.pid, signal.SIGINT)
    process.communicate(timeout=30)
    elapsed = time.monotonic() - started
    assert process.returncode == 130
    assert 2.5 <= elapsed < 15, elapsed
    assert not alive(pid)
    assert records(backfill)[0]["attempts"][0]["exit_code"] == -signal.SIGKILL


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_stop_signal_sent_again_sends_sigterm_then_sigkill_now(work, home, signum):
    """Ctrl+C (or SIGTERM) three times to `backfill` without a terminal, under a grace of 300 s: the child deaf
    to everything gets its first signal, then SIGTERM at the second, then SIGKILL at the third — the executor
    waits for it and exits 130 long before the grace would have ended."""
    log = work / "signals"
    process = start_background(
        *GUARD, "--command", child_command("--ignore-signals", "--record-signals", str(log), "--sleep", "600"),
        *SIX_DAYS, cwd=work, env={**home, "BACKFILL_STOP_GRACE": "300"},
    )  # fmt: skip
    backfill = backfill_dir(work)
    [pid] = running_pids(backfill, 1)
    first = "SIGINT" if signum == signal.SIGINT else "SIGTERM"
    os.kill(process.pid, signum)
    wait_for(lambda: log.exists() and log.read_text().split() == [first])
    os.kill(process.pid, signum)
    wait_for(lambda: log.read_text().split() == [first, "SIGTERM"])
    assert alive(pid)
    os.kill(process.pid, signum)
    process.communicate(timeout=60)
    assert process.returncode == 130 and not alive(pid)
    assert records(backfill)[0]["attempts"][0]["exit_code"] == -signal.SIGKILL


def test_a_closed_terminal_stops_once_however_many_hangups(work, home):
    """SIGHUP twice: the child gets SIGTERM once, and nothing more before the grace's SIGKILL (nobody is at a
    closed terminal to insist)."""
    log = work / "signals"
    process = start_background(
        *GUARD, "--command", child_command("--ignore-signals", "--record-signals", str(log), "--sleep", "600"),
        *SIX_DAYS, cwd=work, env={**home, "BACKFILL_STOP_GRACE": "3"},
    )  # fmt: skip
    backfill = backfill_dir(work)
    running_pids(backfill, 1)
    os.kill(process.pid, signal.SIGHUP)
    wait_for(lambda: log.exists() and log.read_text().split() == ["SIGTERM"])
    os.kill(process.pid, signal.SIGHUP)
    process.communicate(timeout=60)
    assert log.read_text().split() == ["SIGTERM"]
    assert records(backfill)[0]["attempts"][0]["exit_code"] == -signal.SIGKILL


def test_sigkill_of_the_parent_then_continue_loses_nothing_and_never_overlaps(work, home):
    """SIGKILL the executor mid-run: its children live on. --continue stops them (found by PID and start time),
    records them cancelled 'previous executor interrupted', and reruns them; no two children of one partition
    are ever alive together, and every partition ends succeeded."""
    locks = work / "locks"
    locks.mkdir()
    template = child_command("--exclusive-dir", str(locks))
    process = start_background(  # children outlive every wait of the takeover: they must be stopped, not awaited
        *GUARD, "--command", template, *SIX_DAYS, "--max-parallel", "2", cwd=work, env={**home, "CHILD_SLEEP": "300"}
    )
    backfill = backfill_dir(work)
    orphans = running_pids(backfill, 2)
    os.kill(process.pid, signal.SIGKILL)
    process.communicate(timeout=10)
    assert all(alive(pid) for pid in orphans), "children outlive a killed parent"
    resumed = run_backfill("--continue", backfill.name, "--max-parallel", "2", cwd=work, env=home)
    assert resumed.returncode == 0, resumed.stderr
    assert not any(alive(pid) for pid in orphans)
    assert not (locks / "OVERLAP").exists()
    final = records(backfill)
    assert [r["status"] for r in final] == ["succeeded"] * 6
    interrupted = [r["attempts"][0] for r in final if len(r["attempts"]) == 2]
    assert len(interrupted) == 2
    assert all(a["status"] == "cancelled" and a["error"] == "previous executor interrupted" for a in interrupted)


@pytest.mark.parametrize("lease_left", [True, False])
def test_a_killed_executor_its_parent_never_waited_for_is_taken_over(work, home, lease_left):
    """SIGKILL the executor from a supervisor that never waits for it (``Popen.kill()`` without ``wait()``): it
    stays a zombie with its PID and start time, which its lease (or, without one, its generation) names. A
    --continue refused it as "already running" for as long as the zombie lasted; it is dead, holds no lock and
    writes nothing, so the takeover stops its orphans and runs everything once."""
    locks = work / "locks"
    locks.mkdir()
    template = child_command("--exclusive-dir", str(locks))
    process = start_background(
        *GUARD, "--command", template, *SIX_DAYS, "--max-parallel", "2", cwd=work, env={**home, "CHILD_SLEEP": "300"}
    )
    try:
        backfill = backfill_dir(work)
        orphans = running_pids(backfill, 2)
        if not lease_left:
            (backfill / "lease.json").unlink()
        os.kill(process.pid, signal.SIGKILL)
        wait_for(lambda: Path(f"/proc/{process.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z")
        resumed = run_backfill("--continue", backfill.name, "--max-parallel", "2", cwd=work, env=home)
        assert resumed.returncode == 0, resumed.stderr
        assert not any(alive(pid) for pid in orphans)
        assert not (locks / "OVERLAP").exists()
        assert [r["status"] for r in records(backfill)] == ["succeeded"] * 6
    finally:
        process.communicate(timeout=10)


def test_orphan_found_by_its_environment_is_stopped_before_resuming(work, home):
    """A live process holding the children lock with this BACKFILL_ID (a child whose attempt was never
    recorded) is found through its environment and stopped before anything runs."""
    result = run_backfill(*GUARD, "--command", "true", *SIX_DAYS, "--on-failure", "stop", cwd=work, env=home)
    assert result.returncode == 0
    backfill = backfill_dir(work)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, sys, time; f = open(sys.argv[1], 'w'); "
            "fcntl.flock(f, fcntl.LOCK_EX); print('locked', flush=True); time.sleep(60)",
            str(backfill / ".children.lock"),
        ],
        env={**os.environ, "BACKFILL_ID": backfill.name},
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert holder.stdout.readline().strip() == "locked"
    resumed = run_backfill(*REASON, "--continue", backfill.name, "--rerun", "all", cwd=work, env=home)
    holder.wait(timeout=10)
    assert resumed.returncode == 0, resumed.stderr
    assert holder.returncode == -signal.SIGTERM


def test_a_second_executor_of_the_same_backfill_is_refused(work, home):
    """While one executor runs a backfill, another --continue of it is refused at once (exit 3)."""
    process = start_background(
        *GUARD, "--command", child_command(), *SIX_DAYS, cwd=work, env={**home, "CHILD_SLEEP": "30"}
    )
    backfill = backfill_dir(work)
    running_pids(backfill, 1)
    started = time.monotonic()
    second = run_backfill("--continue", backfill.name, cwd=work, env=home)
    assert time.monotonic() - started < 10
    assert second.returncode == 3
    assert f"backfill {backfill.name} is already running by executor PID {process.pid}" in second.stderr
    os.kill(process.pid, signal.SIGINT)
    process.communicate(timeout=40)
    lock = os.open(backfill / ".lock", os.O_RDWR)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)  # released once the executor is gone
    finally:
        os.close(lock)


@pytest.mark.parametrize(
    "removed",
    [
        (".lock", ".children.lock"),
        (".lock", ".children.lock", "lease.json"),
        (".lock", ".children.lock", ".generation.json"),
    ],
)
def test_a_running_executor_whose_lock_files_were_removed_is_not_taken_over(work, home, removed):
    """The lock files of a running backfill removed (a cleanup of dot files): a --continue found the locks free,
    stopped the running executor's children and ran the backfill beside it, and the first executor went on
    launching for up to a lease renewal (15 s), so a partition had two live children. Its lease and its
    generation name a live executor: the --continue is refused (exit 3) and stops nothing."""
    process = start_background(
        *GUARD, "--command", child_command(), *SIX_DAYS, cwd=work, env={**home, "CHILD_SLEEP": "30"}
    )
    backfill = backfill_dir(work)
    [child] = running_pids(backfill, 1)
    for name in removed:
        (backfill / name).unlink()
    second = run_backfill("--continue", backfill.name, cwd=work, env=home)
    try:
        assert second.returncode == 3, second.stdout + second.stderr
        said = f"backfill {backfill.name} is already running by executor PID {process.pid}"
        assert said in second.stderr and "lock file" in second.stderr, second.stderr
        assert alive(child)
    finally:
        os.kill(process.pid, signal.SIGINT)
        process.communicate(timeout=40)


def test_an_executor_taken_over_behind_its_back_starts_nothing_more(work, home, tmp_path):
    """Its lock files, lease and generation all removed, nothing names the running executor, and a --continue takes
    the backfill over (stopping its children). The first executor went on launching until its next lease renewal
    (up to 15 s), running every later partition a second time beside the new one. It now sees its lease replaced
    within a few milliseconds and starts nothing more: each partition runs once, bar those the takeover stopped."""
    ledger, locks = tmp_path / "began.jsonl", tmp_path / "locks"
    locks.mkdir()
    template = child_command("--began", str(ledger), "--exclusive-dir", str(locks))
    # Children of 1.5 s: the takeover lands while the first two run, not as one of them ends (an executor's launch
    # in the moment between its last look and the takeover's search for children is the window left open).
    env = {**home, "CHILD_SLEEP": "1.5"}
    first = start_background(*GUARD, "--command", template, *SIX_DAYS, "--max-parallel", "2", "--on-failure",
                             "continue", cwd=work, env=env)  # fmt: skip
    backfill = backfill_dir(work)
    running_pids(backfill, 2)
    for name in (".lock", ".children.lock", "lease.json", ".generation.json"):
        (backfill / name).unlink()
    second = run_backfill("--continue", backfill.name, "--on-failure", "continue", "--max-parallel", "2", cwd=work,
                          env=env)  # fmt: skip
    out, err = first.communicate(timeout=60)
    assert second.returncode == 0, second.stdout + second.stderr
    assert "its lease was taken away (taking over)" in out + err, out + err
    assert not (locks / "OVERLAP").exists()
    runs = [json.loads(line)["run_id"] for line in ledger.read_text().splitlines()]
    assert len(runs) == 6 + 2, runs  # the two the takeover stopped run again
    assert [r["status"] for r in records(backfill)] == ["succeeded"] * 6


def test_a_takeover_that_cannot_find_what_holds_the_children_lock_leaves_the_backfill_unowned(work, home):
    """Something holds ``.children.lock`` that neither the records nor any environment name: the takeover waits its
    grace, refuses (exit 3) and starts nothing. The lease it wrote first, to fence any executor still running, is
    given back: the backfill is left unowned, not held for a minute by a process that has ended; once the holder is
    gone the backfill resumes."""
    result = run_backfill(*GUARD, "--command", "true", *SIX_DAYS, "--on-failure", "stop", cwd=work, env=home)
    assert result.returncode == 0
    backfill = backfill_dir(work)
    holder = subprocess.Popen(
        [sys.executable, "-c", "import fcntl, sys; f = open(sys.argv[1], 'w'); fcntl.flock(f, fcntl.LOCK_EX); "
         "print('locked', flush=True); sys.stdin.read()", str(backfill / ".children.lock")],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        assert holder.stdout.readline().strip() == "locked"
        refused = run_backfill(*REASON, "--continue", backfill.name, "--rerun", "all", cwd=work,
                               env={**home, "BACKFILL_STOP_GRACE": "0"})  # fmt: skip
        assert refused.returncode == 3, refused.stdout + refused.stderr
        assert "are still alive and could not be found or stopped" in refused.stderr
        lease = json.loads((backfill / "lease.json").read_text())
        assert (lease["host"], lease["pid"], lease["note"]) == (None, None, "a takeover gave up")
    finally:
        holder.communicate("", timeout=10)
    resumed = run_backfill(*REASON, "--continue", backfill.name, "--rerun", "all", cwd=work, env=home)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr


def test_a_copy_of_a_running_backfill_s_store_is_refused_and_stops_nothing(work, home, tmp_path):
    """A repository copied with its logs/ while its backfill runs: --continue from the copy is refused (exit 3,
    naming the original's store), and the original's child, whose environment carries the same BACKFILL_ID, is
    not stopped: the copy would otherwise have run its partition again."""
    process = start_background(
        *GUARD, "--command", child_command(), *SIX_DAYS, cwd=work, env={**home, "CHILD_SLEEP": "30"}
    )
    backfill = backfill_dir(work)
    [child] = running_pids(backfill, 1)
    copy = tmp_path / "copy"
    shutil.copytree(work, copy, ignore=shutil.ignore_patterns("*.tmp"))
    second = run_backfill("--continue", backfill.name, "--reason", "from the copy", cwd=copy, env=home)
    assert second.returncode == 3, second.stderr
    assert f"backfill {backfill.name} is running from another copy of its state" in second.stderr
    assert f"(executor PID {process.pid} on " in second.stderr
    assert alive(child)
    os.kill(process.pid, signal.SIGINT)
    process.communicate(timeout=40)
    [attempt] = records(backfill)[0]["attempts"]
    assert attempt["status"] == "cancelled"  # by our own Ctrl+C, not a SIGTERM from the copy


def test_cancel_after_the_executor_was_killed_stops_the_children_it_left(work, home):
    """SIGKILL the executor (the OOM killer): its children live on. `backfill cancel` holds the lock itself and
    stops them (verified by PID and start time) before it says so; before, it said "2 running children stopped"
    and stopped none."""
    process = start_background(
        *GUARD,
        "--command",
        child_command(),
        *SIX_DAYS,
        "--max-parallel",
        "2",
        cwd=work,
        env={**home, "CHILD_SLEEP": "300"},
    )
    backfill = backfill_dir(work)
    orphans = running_pids(backfill, 2)
    os.kill(process.pid, signal.SIGKILL)
    process.communicate(timeout=10)
    assert all(alive(pid) for pid in orphans)
    cancelled = run_backfill("cancel", backfill.name, "--reason", "runaway", cwd=work, env=home)
    assert cancelled.returncode == 0, cancelled.stderr
    assert f"backfill {backfill.name} cancelled; 2 running children stopped" in cancelled.stdout
    assert not any(alive(pid) for pid in orphans)


def test_a_cancel_beside_a_live_executor_whose_lock_file_was_removed_goes_to_that_executor(work, home):
    """`rm .lock` (a cleanup of dot files) while the executor runs: the lock is free, but the cancel is not applied
    by the command beside the live executor (it would stop the children from under it and settle the records the
    executor goes on writing). The executor takes it: it stops its children, records them cancelled by the operator,
    and exits 1 saying who stepped in."""
    process = start_background(
        *GUARD, "--command", child_command(), *SIX_DAYS, "--max-parallel", "2", cwd=work,
        env={**home, "CHILD_SLEEP": "300"},
    )  # fmt: skip
    backfill = backfill_dir(work)
    children = running_pids(backfill, 2)
    (backfill / ".lock").unlink()
    cancelled = run_backfill("cancel", backfill.name, "--reason", "runaway", cwd=work, env=home)
    out, err = process.communicate(timeout=60)
    assert cancelled.returncode == 0, cancelled.stderr
    assert cancelled.stdout == f"backfill {backfill.name} cancelled; 2 running children stopped\n"
    assert process.returncode == 1, out + err
    assert "stepped in  cancelled by" in out and ": runaway" in out
    assert not any(alive(pid) for pid in children)
    stopped = [r["attempts"][-1] for r in records(backfill) if r["attempts"]]
    assert [a["status"] for a in stopped] == ["cancelled", "cancelled"]
    assert all(a["error"].startswith("cancelled: by ") and a["error"].endswith(": runaway") for a in stopped)


@pytest.mark.parametrize("how", ["deleted", "moved", "replaced"])
def test_a_store_removed_while_it_runs_stops_the_run_and_is_not_made_again(work, home, tmp_path, how):
    """`rm -rf logs` (to free space), `mv logs logs.old`, or a backup copied back over it while two children run:
    the executor stops them and writes nothing more, so no partial store is made again at the old path (before,
    the next write made `partitions/` there and a launch failed "cannot start 'sleep'"), nor written into
    another; it says why, exit 1, and gives no resume command for a store that is gone. Moved back, the backfill
    resumes to the end."""
    process = start_background(
        *GUARD, "--command", child_command(), *SIX_DAYS, "--max-parallel", "2", cwd=work,
        env={**home, "CHILD_SLEEP": "30", "BACKFILL_STOP_GRACE": "3"},
    )  # fmt: skip
    backfill = backfill_dir(work)
    children = running_pids(backfill, 2)
    moved = tmp_path / "logs.old"
    if how == "deleted":
        shutil.rmtree(work / "logs")
    elif how == "moved":
        (work / "logs").rename(moved)
    else:
        shutil.copytree(work / "logs", moved, ignore=shutil.ignore_patterns("*.tmp"))
        shutil.rmtree(work / "logs")
        shutil.copytree(moved, work / "logs")
        before = {path.name: path.read_bytes() for path in (backfill / "partitions").iterdir()}
    out, err = process.communicate(timeout=60)
    assert process.returncode == 1, out + err
    assert f"stopped itself without recording anything: its state directory {backfill} was removed or moved" in out
    assert not any(alive(pid) for pid in children)
    if how == "replaced":
        assert {path.name: path.read_bytes() for path in (backfill / "partitions").iterdir()} == before  # unwritten
        return
    assert f"state       {backfill} is gone: put it back there to resume" in out
    assert "resume      " not in out
    assert not (work / "logs").exists()
    if how == "moved":
        moved.rename(work / "logs")
        resumed = run_backfill("--continue", backfill.name, "--no-progress", cwd=work, env=home)
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
        assert [r["status"] for r in records(backfill)] == ["succeeded"] * 6


def test_children_logs_removed_while_it_runs_are_made_again(work, home, tmp_path):
    """`rm -rf` of the backfill's children/ (its logs) while the first child runs: the next partitions still start,
    each with its log, and all succeed; before, each failed "cannot start" naming the program."""
    release = tmp_path / "release"
    process = start_background(
        *GUARD, "--command", child_command("--wait-for", str(release)), *SIX_DAYS, cwd=work, env=home
    )
    backfill = backfill_dir(work)
    running_pids(backfill, 1)
    shutil.rmtree(backfill / "children")
    release.touch()
    out, err = process.communicate(timeout=60)
    assert process.returncode == 0, out + err
    assert [r["status"] for r in records(backfill)] == ["succeeded"] * 6
    assert len(list((backfill / "children").glob("*-p*-a1.log"))) == 5  # the first one's went with the directory


def test_a_copy_whose_lease_expired_is_not_reconciled_while_the_original_runs(work, home, tmp_path):
    """The copy's lease is never renewed: once it expires, a --continue (which reconciles an expired lease first)
    and `backfill reconcile` from the copy would take the original's executor for lost and stop its child. Both
    are refused (exit 3) and the child lives."""
    lease = {"BACKFILL_LEASE_SECONDS": "2", "BACKFILL_LEASE_RENEW_SECONDS": "0.5"}
    process = start_background(
        *GUARD, "--command", child_command(), *SIX_DAYS, cwd=work, env={**home, **lease, "CHILD_SLEEP": "60"}
    )
    backfill = backfill_dir(work)
    [child] = running_pids(backfill, 1)
    copy = tmp_path / "copy"
    shutil.copytree(work, copy, ignore=shutil.ignore_patterns("*.tmp"))
    copied = copy / backfill.relative_to(work)
    reconciled = lambda: run_backfill("reconcile", backfill.name, cwd=copy, env=home)  # noqa: E731
    refused = wait_for(lambda: (result := reconciled()).returncode != 0 and result, timeout=30)  # once expired
    assert refused.returncode == 3, refused.stdout + refused.stderr
    assert f"backfill {backfill.name} is running from another copy of its state" in refused.stderr
    assert json.loads((copied / "lease.json").read_text())["pid"] == process.pid  # the copy's lease, unsettled
    resumed = run_backfill("--continue", backfill.name, "--reason", "from the copy", cwd=copy, env=home)
    assert resumed.returncode == 3, resumed.stdout + resumed.stderr
    assert alive(child)
    os.kill(process.pid, signal.SIGINT)
    process.communicate(timeout=40)


def test_an_intervention_from_a_copy_of_a_running_backfill_s_store_is_refused(work, home, tmp_path):
    """`backfill cancel` from a copy of the store (a repository copied with its logs/) while the original runs:
    refused (exit 3) naming the original, its child left alone; the copy's records name that child, and the
    cancel would have stopped it from a store that does not run it."""
    process = start_background(
        *GUARD, "--command", child_command(), *SIX_DAYS, cwd=work, env={**home, "CHILD_SLEEP": "30"}
    )
    backfill = backfill_dir(work)
    [child] = running_pids(backfill, 1)
    copy = tmp_path / "copy"
    shutil.copytree(work, copy, ignore=shutil.ignore_patterns("*.tmp"))
    cancelled = run_backfill("cancel", backfill.name, "--reason", "from the copy", cwd=copy, env=home)
    assert cancelled.returncode == 3, cancelled.stdout + cancelled.stderr
    assert f"backfill {backfill.name} is running from another copy of its state" in cancelled.stderr
    assert alive(child)
    os.kill(process.pid, signal.SIGINT)
    process.communicate(timeout=40)


def test_a_deleted_children_lock_never_lets_new_attempts_run_beside_live_orphans(work, home):
    """SIGKILL the executor, delete .children.lock: --continue still finds the orphans (records and environment),
    stops them by PID before launching, and no partition ever has two live children; the dead executor's
    temporary file is cleared."""
    locks = work / "locks"
    locks.mkdir()
    process = start_background(
        *GUARD,
        "--command",
        child_command("--exclusive-dir", str(locks)),
        *SIX_DAYS,
        "--max-parallel",
        "2",
        cwd=work,
        env={**home, "CHILD_SLEEP": "300"},
    )
    backfill = backfill_dir(work)
    orphans = running_pids(backfill, 2)
    os.kill(process.pid, signal.SIGKILL)
    process.communicate(timeout=10)
    (backfill / ".children.lock").unlink()
    # What a record write cut by the SIGKILL leaves: a temporary file named after the dead executor.
    litter = backfill / "partitions" / f".{'0' * 64}.json.{process.pid}.140000.tmp"
    litter.write_text("{")
    (backfill / "records").mkdir(exist_ok=True)  # and what a backfill record's copy cut by it leaves
    record_litter = backfill / "records" / f".backfill-x-20240101T000000Z.yml.{process.pid}.140000.tmp"
    record_litter.write_text("backfill_id:")
    resumed = run_backfill(
        "--continue", backfill.name, "--max-parallel", "2", cwd=work, env={**home, "CHILD_SLEEP": "0"}
    )
    assert resumed.returncode == 0, resumed.stderr
    assert not litter.exists() and not record_litter.exists()
    assert not any(alive(pid) for pid in orphans)
    assert not (locks / "OVERLAP").exists()
    assert [r["status"] for r in records(backfill)] == ["succeeded"] * 6


def test_an_attempt_whose_start_record_was_lost_never_shares_its_run_id(work, home):
    """SIGKILL before a start record reaches disk (simulated: the record removed, the child alive, its log kept):
    --continue finds the child through its environment, stops it, and the new attempt gets a new run ID and
    log; the old log is kept as it was."""
    process = start_background(
        *GUARD, "--command", child_command(), *SIX_DAYS, cwd=work, env={**home, "CHILD_SLEEP": "300"}
    )
    backfill = backfill_dir(work)
    [orphan] = running_pids(backfill, 1)
    old_log = backfill / "children" / f"{backfill.name}-p0-a1.log"
    before = wait_for(lambda: old_log.read_text())  # the child has written its first line
    os.kill(process.pid, signal.SIGKILL)
    process.communicate(timeout=10)
    [record_file] = list((backfill / "partitions").glob("*.json"))
    record_file.unlink()
    resumed = run_backfill("--continue", backfill.name, cwd=work, env={**home, "CHILD_SLEEP": "0"})
    assert resumed.returncode == 0, resumed.stderr
    assert not alive(orphan)
    first = next(r for r in records(backfill) if r["index"] == 0)
    assert [a["run_id"] for a in first["attempts"]] == [f"{backfill.name}-p0-a2"]
    assert old_log.read_text() == before


@pytest.mark.parametrize(
    ("signum", "received"), [(signal.SIGINT, "SIGINT"), (signal.SIGTERM, "SIGTERM"), (signal.SIGHUP, "SIGTERM")]
)
def test_a_child_receives_one_cancellation_signal_then_sigkill_after_the_grace(work, home, signum, received):
    """Ctrl+C forwards SIGINT, SIGTERM and SIGHUP (a closed terminal) forward SIGTERM — once, at once, nothing
    else before SIGKILL at the end of the grace period; the executor waits and exits 130."""
    log = work / "signals"
    process = start_background(
        *GUARD,
        "--command",
        child_command("--record-signals", str(log), "--sleep", "60"),
        *SIX_DAYS,
        cwd=work,
        env={**home, "BACKFILL_STOP_GRACE": "3"},
    )
    backfill = backfill_dir(work)
    [pid] = running_pids(backfill, 1)
    os.kill(process.pid, signum)
    process.communicate(timeout=30)
    assert process.returncode == 130
    assert log.read_text() == received + "\n"
    assert not alive(pid)
    assert records(backfill)[0]["attempts"][0]["exit_code"] == -signal.SIGKILL


def test_a_resume_never_writes_back_records_it_read_before_taking_the_lock(work, home, monkeypatch):
    """The race: a resume reads the records, the old executor records a success and dies, then the resume
    takes the lock. The records are read again under the lock, so the success stays (not overwritten as
    'cancelled: previous executor interrupted') and the partition is not run again."""
    from engine.base.settings import Settings
    from engine.execute.backfill import load_backfill, prepare_resume, replan
    from engine.execute.rerun import PartitionSelection
    from engine.store.status import Status

    for key, value in home.items():
        monkeypatch.setenv(key, value)
    process = start_background(
        *GUARD,
        "--command",
        child_command(),
        *SIX_DAYS,
        "--max-parallel",
        "2",
        cwd=work,
        env={**home, "CHILD_SLEEP": "300"},
    )
    backfill = backfill_dir(work)
    orphans = running_pids(backfill, 2)
    os.kill(process.pid, signal.SIGKILL)
    process.communicate(timeout=10)
    loaded = load_backfill(backfill.name, None, work)  # the resume reads ...
    [first] = [r for r in records(backfill) if r["index"] == 0]
    assert first["status"] == "running"
    first["status"] = "succeeded"  # ... and the old executor, in its last moment, records a success
    first["attempts"][-1].update(status="succeeded", exit_code=0, finished_at="2026-01-01T00:00:00.000000Z")
    path = backfill / "partitions" / f"{first['id']}.json"
    path.write_bytes(orjson.dumps(first))
    planned = replan(loaded.spec, loaded_options(loaded))
    prepared = prepare_resume(loaded, planned, PartitionSelection(), settings=Settings())
    try:
        on_disk = orjson.loads(path.read_bytes())
        assert on_disk["status"] == "succeeded" and on_disk["attempts"][-1]["status"] == "succeeded"
        assert prepared.board.status(0) is Status.SUCCEEDED
        assert prepared.board.status(1) is Status.CANCELLED
        assert not any(alive(pid) for pid in orphans)
    finally:
        prepared.takeover.children_lock.release()
        prepared.takeover.lock.release()


def loaded_options(loaded):
    from engine.store.manifest import initial_options

    return initial_options(loaded.manifest)


def test_readers_show_partitions_left_running_by_a_dead_executor_as_cancelled_only_once_nothing_runs(work, home):
    """SIGKILL the executor: while its children live (they hold .children.lock) show and list still say running.
    Once they are gone too, show and list count those partitions cancelled, show says once why and what settles
    them, and nothing was written (the records still say running until --continue)."""
    process = start_background(
        *GUARD, "--command", child_command(), *SIX_DAYS, "--max-parallel", "2", cwd=work,
        env={**home, "CHILD_SLEEP": "300"},
    )  # fmt: skip
    backfill = backfill_dir(work)
    orphans = running_pids(backfill, 2)
    os.kill(process.pid, signal.SIGKILL)
    process.communicate(timeout=10)

    def seen() -> tuple[str, str, dict]:
        shown = run_backfill("show", backfill.name, cwd=work, env=home)
        listed = run_backfill("list", "--output", "json", cwd=work, env=home)
        assert shown.returncode == 0 and listed.returncode == 0, shown.stderr + listed.stderr
        return shown.stdout, shown.stderr, orjson.loads(listed.stdout)["backfills"][0]["counts"]

    out, err, counts = seen()
    assert "running 2" in out and counts["running"] == 2 and "no executor owns" not in err
    for pid in orphans:
        os.kill(pid, signal.SIGKILL)
    wait_for(lambda: not any(alive(pid) for pid in orphans))
    before = {p.name: p.read_bytes() for p in (backfill / "partitions").glob("*.json")}
    out, err, counts = seen()
    partitions_line = out.split("partitions:")[1].splitlines()[0]
    assert "running" not in partitions_line and "cancelled 2" in partitions_line, out
    assert (counts["running"], counts["cancelled"]) == (0, 2)
    [note] = [line for line in err.splitlines() if line.startswith("backfill: note:")]
    assert "2 partitions recorded running but no executor owns" in note and f"--continue {backfill.name}" in note
    assert {p.name: p.read_bytes() for p in (backfill / "partitions").glob("*.json")} == before


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_a_stop_signal_before_the_executor_starts_leaves_nothing_and_exits_130(work, home, signum):
    """SIGTERM or SIGHUP while the command waits to join the live-work registry (its lock held here), before any
    store exists: it stops as Ctrl+C does, exit 130, and leaves no backfill and no half-built one (the default
    action used to end it at once; during a store's build that left a .building-* directory behind)."""
    import fcntl

    import psutil

    live = Path(home["XDG_STATE_HOME"]) / "backfill" / "live"
    live.mkdir(parents=True)
    with open(live / ".lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        process = start_background(*GUARD, "--command", "true", *SIX_DAYS, "--no-progress", cwd=work, env=home)

        def waiting_for_the_registry() -> bool:
            try:
                return any(f.path == str(live / ".lock") for f in psutil.Process(process.pid).open_files())
            except psutil.Error:
                return False

        wait_for(waiting_for_the_registry)
        process.send_signal(signum)
        out, err = process.communicate(timeout=30)
    assert process.returncode == 130, out + err
    backfills = work / "logs" / "backfills"
    assert not backfills.exists() or not [p for p in backfills.iterdir() if not p.name.startswith(".lock")]
