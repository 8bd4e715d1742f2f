"""The crash campaign kept as a test: random stops of a real executor, then resumes, until the backfill is done.

Each trial plans a few days of children that hold a per-partition ``flock`` (a second live child of the same
partition writes ``OVERLAP``) and append a ledger line when their work is done. At a random moment the executor
gets SIGKILL (its children left alive as orphans, sometimes with ``.children.lock`` deleted too), SIGTERM or
SIGINT; ``--continue`` follows, itself sometimes stopped the same way, until one runs to its end. Then:

- no partition ever had two live children (no ``OVERLAP``); in the split trials, where every day times out
  whole and splits (docs/splitting.md), no two live children ever covered one hour of data — a partition and
  its half, or two copies of one half;
- every partition is ``succeeded``, and each success is true: its attempt's PID is in the ledger;
- every child that started has an attempt record (its run ID, written in a second ledger the moment it starts,
  is an attempt of its partition): the attempt is written before the child starts (issue 24), and a takeover
  settles one left ``starting``;
- no child of any executor is left alive, and no temporary file is left in the store;
- after every stop, what a reader gets through the record index (``partitions.idx``, and the reasons of failed and
  cancelled partitions through ``reasons.log``) is what the files say: a kill between a record and its index row
  loses nothing.

Every launcher is tried: a ``--command`` target (each attempt its own process), a pipeline whose Python asset
does the same work under the warm runners, the command on a local Dask cluster of two workers, and a command whose
days all split. Successes are
judged by run ID (under ``warm`` an attempt's PID is its runner's), and by PID too where it is the child's.

The default suite runs ``CI_TRIALS`` trials per launcher; the long campaign is marked slow and runs outside it:
``pytest -m slow tests/campaigns`` (``BACKFILL_CAMPAIGN_TRIALS`` sets its size per launcher, 100 by default).
A failing trial prints its seed; ``BACKFILL_CAMPAIGN_SEED`` replays it.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import time
from pathlib import Path

import orjson
import psutil
import pytest

from tests.backfills import child_command, records, start_background, state_dirs
from tests.builder import Repo
from tests.conftest import run_backfill
from tests.guard_flags import GUARD

CI_TRIALS = {"command": 4, "warm": 3, "dask-local:2": 3, "split": 2}  # twelve in all
SLOW_TRIALS = int(os.environ.get("BACKFILL_CAMPAIGN_TRIALS", "100"))
LAUNCHERS = list(CI_TRIALS)

# The Python asset of the warm trials: the work tests/child.py does for a command (--began, --exclusive-dir,
# --spans), in a pipeline asset.
ASSET = """import fcntl, json, os, time
from pathlib import Path

work = Path(os.environ["CAMPAIGN_WORK"])
run_id = os.environ["BACKFILL_RUN_ID"]
with open(work / "began.jsonl", "a") as began:
    began.write(json.dumps({"run_id": run_id, "pid": os.getpid()}) + "\\n")
handle = open(work / "locks" / (os.environ["BACKFILL_PARTITION_ID"] + ".lock"), "w")
try:
    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
except BlockingIOError:
    with open(work / "locks" / "OVERLAP", "a") as overlap:
        overlap.write(run_id + "\\n")
    raise SystemExit(99)
time.sleep(float(os.environ["CHILD_SLEEP"]))
with open(work / "ledger.jsonl", "a") as ledger:
    ledger.write(json.dumps({"pid": os.getpid(), "env": {"BACKFILL_RUN_ID": run_id}}) + "\\n")
"""
STOPS = ["SIGKILL", "SIGKILL", "SIGKILL and delete .children.lock", "SIGTERM", "SIGINT"]


def ledger_runs(ledger: Path) -> dict[str, int]:
    """Run ID → PID of every child that finished its work."""
    if not ledger.exists():
        return {}
    entries = [json.loads(line) for line in ledger.read_text().splitlines() if line.strip()]
    return {entry["env"]["BACKFILL_RUN_ID"]: entry["pid"] for entry in entries}


def children_of_backfill(backfill_id: str) -> list[psutil.Process]:
    """Live processes whose environment names this backfill: every child, orphaned or not."""
    found = []
    for process in psutil.process_iter():
        try:
            if process.environ().get("BACKFILL_ID") == backfill_id and process.status() != psutil.STATUS_ZOMBIE:
                found.append(process)
        except psutil.Error:
            continue
    return found


def stop_at_random(
    process: subprocess.Popen[str], work: Path, rng: random.Random, how: str, seed: int, earlier: set[int]
) -> None:
    """Wait a random moment, then stop the executor the way ``how`` says and reap it. ``earlier``: children of
    executors killed before this one started (this one may be stopped before its takeover stops them)."""
    time.sleep(rng.uniform(0.05, 1.5))
    signum = {"SIGTERM": signal.SIGTERM, "SIGINT": signal.SIGINT}.get(how, signal.SIGKILL)
    if process.poll() is None:
        os.kill(process.pid, signum)
    process.communicate(timeout=120)
    stores = [p for p in (work / "logs" / "backfills").glob("*/") if not p.name.startswith(".")]
    assert all((store / "manifest.json").exists() for store in stores), f"seed {seed}: a store without manifest"
    if not how.startswith("SIGKILL"):  # a stop, not a kill: no half-built store is left behind either
        assert not list((work / "logs" / "backfills").glob(".building-*")), f"seed {seed}: a build left"
    for backfill in state_dirs(work / "logs" / "backfills"):
        if signum != signal.SIGKILL:  # a stop, not a kill: every child it started was waited for
            outlived = {child.pid for child in children_of_backfill(backfill.name)} - earlier
            assert not outlived, f"seed {seed}: children {outlived} outlived {how}"
        elif how.endswith("delete .children.lock"):
            (backfill / ".children.lock").unlink(missing_ok=True)


def assert_index_agrees(backfill: Path, context: str) -> None:
    """A reader through the record index sees every partition's status and attempt count as the files say, and
    every failed or cancelled partition's reason (read through reasons.log) as its record holds it."""
    from engine.store.failure_groups import failed_reasons
    from engine.store.manifest import spec_of
    from engine.store.state_store import StateStore
    from engine.store.status import Status

    spec = spec_of(StateStore(backfill).read_manifest())
    reader = StateStore(backfill)
    board, running = reader.load_board(spec.plan, spec.ids.of)
    truth, truly = StateStore(backfill).load_board(spec.plan, spec.ids.of, visit=lambda _record: None)
    seen = [(board.status(i), board.attempts(i)) for i in range(board.size)]
    assert seen == [(truth.status(i), truth.attempts(i)) for i in range(truth.size)], context
    assert sorted(r.index for r in running) == sorted(r.index for r in truly), context
    for status in (Status.FAILED, Status.CANCELLED):
        expected = []
        for index in range(truth.size):
            if truth.status(index) is status:
                interval = spec.plan.interval(index)
                record = reader.read_record(spec.ids.of(interval.start, interval.end), spec.plan, spec.ids.of)
                expected.append((index, record.reason))  # a split partition's: its failed leaf's
        assert list(failed_reasons(spec, reader, board, status)) == expected, context


def run_trial(seed: int, root: Path, home: dict[str, str], launcher: str = "command") -> None:
    rng = random.Random(seed)
    work = root / f"trial-{launcher.replace(':', '')}-{seed}"
    locks, ledger, began = work / "locks", work / "ledger.jsonl", work / "began.jsonl"
    days = rng.randint(4, 12)
    parallel = str(rng.randint(1, 4))
    dates = ["--start-date", "2024-01-01", "--end-date", f"2024-01-{days:02d}"]
    env = {
        **home,
        "CHILD_SLEEP": f"{rng.uniform(0.05, 0.8):.2f}",
        "BACKFILL_STOP_GRACE": "5",
        "CAMPAIGN_WORK": str(work),
    }
    if launcher == "warm":
        repo = Repo(work)
        repo.python("campaign.work", ASSET)
        plan = ["p", *dates, "--launcher", "warm"]
    elif launcher == "split":  # every day hangs whole and times out: it splits, and its 12-hour halves run
        (work / ".git").mkdir(parents=True)
        command = child_command(
            "--began", str(began), "--exclusive-hours", str(locks), "--spans", str(ledger), "--hang-longer-than", "12"
        )
        plan = ["--command", command, *dates, "--timeout", "1s", "--split-on", "timeout", "--min-partition", "6h"]
    else:
        (work / ".git").mkdir(parents=True)
        command = child_command("--began", str(began), "--exclusive-dir", str(locks), "--spans", str(ledger))
        plan = ["--command", command, *dates, *(["--launcher", launcher] if launcher != "command" else [])]
    locks.mkdir()

    first = start_background(*GUARD, *plan, "--max-parallel", parallel, cwd=work, env=env)
    how = rng.choice(STOPS)
    stop_at_random(first, work, rng, how, seed, set())
    found = state_dirs(work / "logs" / "backfills")
    if not found:  # stopped before the store was made: nothing to resume, nothing may run
        assert not list(locks.glob("*.lock")), f"seed {seed}: children ran without a store"
        return
    [backfill] = found
    stops = [how]
    assert_index_agrees(backfill, f"{launcher}, seed {seed}, after {stops}")
    while rng.random() < 0.5 and len(stops) < 4:  # the resume is stopped too, sometimes more than once
        how = rng.choice(STOPS)
        earlier = {child.pid for child in children_of_backfill(backfill.name)}
        resume = start_background("--continue", backfill.name, cwd=work, env=env)
        stop_at_random(resume, work, rng, how, seed, earlier)
        stops.append(how)
        assert_index_agrees(backfill, f"{launcher}, seed {seed}, after {stops}")
    final = run_backfill("--continue", backfill.name, cwd=work, env=env, timeout=300)
    context = f"{launcher}, seed {seed}, {days} days × {parallel}, stops {stops}:\n{final.stdout}\n{final.stderr}"
    assert final.returncode == 0, context
    assert not (locks / "OVERLAP").exists(), f"two live children of one partition: {context}"
    finished = records(backfill)
    assert [r["status"] for r in finished] == ["succeeded"] * days, context
    done = ledger_runs(ledger)
    halves = [orjson.loads(p.read_bytes()) for p in (backfill / "splits").glob("*.json")]
    if launcher == "split":  # every day split; what ran to success is its halves
        assert all(r["children"] for r in finished), context
        # At least two halves a day: on a loaded machine a half can time out too, and split again (seen in CI).
        assert len(halves) >= 2 * days and all(h["status"] == "succeeded" for h in halves), context
    for record in [r for r in finished + halves if not r.get("children")]:
        last = record["attempts"][-1]
        assert last["run_id"] in done, f"a success nobody did, partition {record['index']}: {context}"
        if launcher != "warm":  # under warm the PID recorded is the runner's
            assert last["pid"] == done[last["run_id"]], f"a success naming another process: {context}"
    recorded = {a["run_id"]: a["status"] for r in finished + halves for a in r["attempts"]}
    started = [json.loads(line)["run_id"] for line in began.read_text().splitlines()] if began.exists() else []
    unrecorded = [run_id for run_id in started if run_id not in recorded]
    assert not unrecorded, f"children ran without an attempt record: {unrecorded}: {context}"
    assert "starting" not in recorded.values(), f"an attempt left starting: {context}"
    assert "running" not in recorded.values(), f"an attempt left running (a half's, unsettled): {context}"
    leftovers = children_of_backfill(backfill.name)
    assert not leftovers, f"children left alive: {leftovers}: {context}"
    assert not [p for p in backfill.rglob("*") if ".tmp" in p.name], context
    assert_index_agrees(backfill, context)


def trial_seeds(count: int) -> list[int]:
    if "BACKFILL_CAMPAIGN_SEED" in os.environ:
        return [int(os.environ["BACKFILL_CAMPAIGN_SEED"])]
    base = random.SystemRandom().randrange(1 << 30)
    return [base + i for i in range(count)]


@pytest.mark.parametrize("launcher", LAUNCHERS)
def test_random_stops_and_resumes_never_overlap_lose_or_leave_work_behind(tmp_path, home, launcher):
    """A few trials per launcher (ten in all) of random SIGKILL/SIGTERM/SIGINT and resumes: no overlap, every
    success true, every child that started recorded, no child left."""
    for seed in trial_seeds(CI_TRIALS[launcher]):
        run_trial(seed, tmp_path, home, launcher)


@pytest.mark.slow
@pytest.mark.timeout(max(300, 30 * SLOW_TRIALS))  # a hundred trials outlast the suite's 300 s a test, by design
@pytest.mark.parametrize("launcher", LAUNCHERS)
def test_the_long_kill_campaign(tmp_path, home, launcher):
    """The same trials by the hundred per launcher (BACKFILL_CAMPAIGN_TRIALS, 100 by default): outside the default
    suite."""
    for seed in trial_seeds(SLOW_TRIALS):
        run_trial(seed, tmp_path, home, launcher)
