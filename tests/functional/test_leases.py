"""Leases: an executor frozen past its lease is reconciled (its attempts lost, its children stopped) and, once
thawed, stops itself writing nothing; an owner on another host keeps 120 s of grace."""

from __future__ import annotations

import signal
import socket
import time

import orjson

from engine.interventions import requests
from engine.interventions.requests import Request
from engine.store.lease import Lease, write_lease
from engine.store.manifest import now_text
from tests.backfills import (
    alive,
    child_command,
    child_running,
    records,
    rewrite,
    start_background,
    state_dirs,
    wait_for,
)
from tests.conftest import run_backfill
from tests.guard_flags import GUARD

PLAN = ("--command", child_command(), "--start-date", "2024-01-01", "--end-date", "2024-01-04")


def partition_bytes(backfill) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((backfill / "partitions").glob("*.json"))}


def start_two_running(work, home, *plan: str, lease: str = "2"):
    """A backfill with two 60 s children running under a short lease: its executor, state directory, the two
    children's PIDs and the environment."""
    env = {**home, "CHILD_SLEEP": "60", "BACKFILL_LEASE_SECONDS": lease, "BACKFILL_LEASE_RENEW_SECONDS": "1"}
    process = start_background(*GUARD, *(plan or PLAN), "--max-parallel", "2", "--no-progress", cwd=work, env=env)
    backfill = wait_for(lambda: (state_dirs(work / "logs" / "backfills") or [None])[0])

    def two_running():
        pids = [r["attempts"][-1]["pid"] for r in records(backfill) if child_running(r)]
        return pids if len(pids) == 2 else None

    return process, backfill, wait_for(two_running), env


def test_a_frozen_executor_is_reconciled_lost_and_stops_itself_writing_nothing_when_thawed(work, home):
    """SIGSTOP past a 3 s lease: reconcile marks both running attempts lost (partition failed), stops their
    children (verified PIDs), audits RECONCILE_LOST; SIGCONT: the executor exits 1 and writes no record;
    --continue then completes, the lost attempts kept in each partition's history."""
    process, backfill, children, env = start_two_running(work, home, lease="3")
    lease = orjson.loads((backfill / "lease.json").read_bytes())
    assert (lease["host"], lease["pid"]) == (socket.gethostname(), process.pid)
    process.send_signal(signal.SIGSTOP)
    try:
        early = run_backfill("reconcile", backfill.name, cwd=work, env=env)
        assert early.returncode == 0 and "holds its lease until" in early.stdout  # not expired yet: untouched
        time.sleep(3.5)
        settled = run_backfill("reconcile", backfill.name, cwd=work, env=env)
        assert settled.returncode == 0, settled.stderr
        assert "2 running attempts marked lost" in settled.stdout and "it can be resumed" in settled.stdout
        assert not [pid for pid in children if alive(pid)]
        lost = [r for r in records(backfill) if r["attempts"] and r["attempts"][-1]["status"] == "lost"]
        assert len(lost) == 2 and {r["status"] for r in lost} == {"failed"}
        assert all("outcome is uncertain" in r["attempts"][-1]["error"] for r in lost)
        lines = [orjson.loads(x) for x in (backfill / "audit.jsonl").read_bytes().splitlines()]
        assert sorted(x["partition_id"] for x in lines) == sorted(r["id"] for r in lost)
        assert {x["action"] for x in lines} == {"RECONCILE_LOST"}
        before = partition_bytes(backfill)
    finally:
        process.send_signal(signal.SIGCONT)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 1, err
    assert "stopped itself without recording anything" in out
    assert partition_bytes(backfill) == before  # the fenced executor wrote nothing
    done = run_backfill("--continue", backfill.name, cwd=work, env={**env, "CHILD_SLEEP": "0"})
    assert done.returncode == 0, done.stderr
    final = records(backfill)
    assert {r["status"] for r in final} == {"succeeded"}
    assert sorted([a["status"] for a in r["attempts"]] for r in final if len(r["attempts"]) > 1) == [
        ["lost", "succeeded"],
        ["lost", "succeeded"],
    ]


def test_an_owner_on_another_host_keeps_120_seconds_of_grace(work, home):
    """A lease of host 'elsewhere' expired 10 s ago: reconcile leaves its running partition alone and
    --continue is refused (exit 3); expired 130 s ago: reconcile marks the attempt lost."""
    env = {**home, "CHILD_SLEEP": "0"}
    assert run_backfill(*GUARD, *PLAN, cwd=work, env=env).returncode == 0
    [backfill] = state_dirs(work / "logs" / "backfills")
    path = sorted((backfill / "partitions").glob("*.json"))[0]
    record = orjson.loads(path.read_bytes())
    record["status"] = "running"
    record["attempts"][-1].update(status="running", finished_at=None, pid=4242, pid_started=1.0)
    rewrite(path, orjson.dumps(record))
    write_lease(backfill, Lease(7, "elsewhere", 4242, 1.0, time.time() - 10))
    waiting = run_backfill("reconcile", backfill.name, cwd=work, env=env)
    assert waiting.returncode == 0 and "another host gets 120 s more" in waiting.stdout
    assert orjson.loads(path.read_bytes())["status"] == "running"
    refused = run_backfill("--continue", backfill.name, "--reason", "x", cwd=work, env=env)
    assert refused.returncode == 3, refused.stderr
    assert "is owned by executor PID 4242 on elsewhere" in refused.stderr
    write_lease(backfill, Lease(7, "elsewhere", 4242, 1.0, time.time() - 130))
    settled = run_backfill("reconcile", backfill.name, cwd=work, env=env)
    assert settled.returncode == 0 and "1 running attempt marked lost" in settled.stdout
    after = orjson.loads(path.read_bytes())
    assert after["status"] == "failed" and after["attempts"][-1]["status"] == "lost"
    assert orjson.loads((backfill / "lease.json").read_bytes())["epoch"] == 8  # the old owner is fenced out


def test_a_request_goes_to_the_owner_on_another_host_and_is_withdrawn_when_unanswered(work, home):
    """While a lease of host 'elsewhere' runs, pause is not applied here under our lock (our flock cannot see
    that executor): the request waits for it, and, unanswered, is withdrawn — exit 3, nothing changed, no
    request left behind."""
    env = {**home, "CHILD_SLEEP": "0", "BACKFILL_REQUEST_WAIT_SECONDS": "1"}
    assert run_backfill(*GUARD, *PLAN, cwd=work, env=env).returncode == 0
    [backfill] = state_dirs(work / "logs" / "backfills")
    write_lease(backfill, Lease(3, "elsewhere", 4242, 1.0, time.time() + 60))
    paused = run_backfill("pause", backfill.name, "--reason", "migration", cwd=work, env=env)
    assert paused.returncode == 3, paused.stderr
    assert "did not take the request within 1 s: nothing changed" in paused.stderr
    assert not (backfill / "control.json").exists() and not (backfill / "audit.jsonl").exists()
    assert list((backfill / "requests").iterdir()) == []
    bad = run_backfill(
        "pause", backfill.name, "--reason", "m", cwd=work, env={**env, "BACKFILL_REQUEST_WAIT_SECONDS": "0"}
    )
    assert bad.returncode == 2 and "BACKFILL_REQUEST_WAIT_SECONDS '0'" in bad.stderr


def state_bytes(backfill) -> dict[str, bytes]:
    """Every file of the backfill's state directory (records, requests, lease, summary, audit, logs)."""
    return {str(p.relative_to(backfill)): p.read_bytes() for p in sorted(backfill.rglob("*")) if p.is_file()}


def reconcile_past_expiry(backfill, work, env) -> None:
    """With its executor frozen: wait until the lease has expired, then reconcile, both running attempts lost."""
    expires = orjson.loads((backfill / "lease.json").read_bytes())["expires_at"]
    wait_for(lambda: time.time() > expires + 0.1 or None, timeout=30)
    settled = run_backfill("reconcile", backfill.name, cwd=work, env=env)
    assert "2 running attempts marked lost" in settled.stdout, settled.stdout + settled.stderr


def test_a_thawed_executor_past_its_reconciled_lease_changes_not_one_byte_of_its_state(work, home):
    """SIGSTOP, reconcile, a mark request queued for the old owner, SIGCONT: the thawed executor claims no
    request, writes no record, audit line, summary or lease — the state directory is byte-identical — and exits
    1 saying it stopped itself."""
    process, backfill, _, env = start_two_running(work, home)
    process.send_signal(signal.SIGSTOP)
    try:
        reconcile_past_expiry(backfill, work, env)
        queued = Request("mark", "fixed by hand", "ops@elsewhere", now_text(), {"indices": [3], "to": "skipped"})
        requests.submit(backfill, queued)
        before = state_bytes(backfill)
        assert f"requests/{queued.id}.json" in before
    finally:
        process.send_signal(signal.SIGCONT)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 1, err
    assert "stopped itself without recording anything" in out
    after = state_bytes(backfill)
    assert sorted(after) == sorted(before)
    assert [name for name in before if before[name] != after[name]] == []


def test_two_reconciles_at_once_settle_each_lost_attempt_once(work, home):
    """Two `backfill reconcile` started together on a frozen executor whose children ignore SIGTERM (so the
    first spends its 10 s grace stopping them): one RECONCILE_LOST line per attempt, and one lost entry each."""
    plan = ("--command", child_command("--ignore-signals"), *PLAN[2:])
    process, backfill, _, env = start_two_running(work, home, *plan)
    process.send_signal(signal.SIGSTOP)
    try:
        expires = orjson.loads((backfill / "lease.json").read_bytes())["expires_at"]
        wait_for(lambda: time.time() > expires + 0.1 or None, timeout=30)
        both = [start_background("reconcile", backfill.name, cwd=work, env=env) for _ in range(2)]
        outputs = [p.communicate(timeout=90) for p in both]
        assert [p.returncode for p in both] == [0, 0], outputs
    finally:
        process.send_signal(signal.SIGCONT)
    process.communicate(timeout=60)
    said = [out for out, _ in outputs]
    assert sorted("marked lost" in out for out in said) == [False, True], said
    assert any("no executor owns it" in out for out in said), said
    lines = [orjson.loads(x) for x in (backfill / "audit.jsonl").read_bytes().splitlines()]
    assert len([x for x in lines if x["action"] == "RECONCILE_LOST"]) == 2
    lost = [[a["status"] for a in r["attempts"]].count("lost") for r in records(backfill)]
    assert lost == [1, 1]  # the two partitions that ran, each with one lost entry


def test_show_reports_an_expired_lease_and_settles_nothing(work, home):
    """`backfill show` of a frozen executor past its lease: one note naming the owner and `backfill reconcile`;
    the running records, the lease and the audit stay as they were, and the children live on."""
    process, backfill, children, env = start_two_running(work, home)
    process.send_signal(signal.SIGSTOP)
    try:
        expires = orjson.loads((backfill / "lease.json").read_bytes())["expires_at"]
        wait_for(lambda: time.time() > expires + 0.1 or None, timeout=30)
        before = state_bytes(backfill)
        for output in ((), ("--output", "json")):
            shown = run_backfill("show", backfill.name, *output, cwd=work, env=env)
            assert shown.returncode == 0, shown.stderr
            assert f"run `backfill reconcile {backfill.name}`" in shown.stderr
            assert f"executor PID {process.pid}" in shown.stderr
        assert state_bytes(backfill) == before
        assert all(alive(pid) for pid in children)
        assert run_backfill("reconcile", backfill.name, cwd=work, env=env).returncode == 0
    finally:
        process.send_signal(signal.SIGCONT)
    process.communicate(timeout=60)


def test_a_lost_partition_can_be_marked_at_once_past_a_frozen_holder_of_the_lock(work, home):
    """SIGSTOP past the lease, reconcile: the frozen executor still holds .lock, but the lease says it is fenced, so
    a mark of a lost partition is applied at once by the command (not sent to an executor that will never answer);
    thawed, the executor exits 1 and the mark stands."""
    process, backfill, _, env = start_two_running(work, home)
    env = {**env, "BACKFILL_REQUEST_WAIT_SECONDS": "3"}  # the old way: refused after waiting 3 s
    process.send_signal(signal.SIGSTOP)
    try:
        reconcile_past_expiry(backfill, work, env)
        [lost, *_] = [r for r in records(backfill) if r["attempts"] and r["attempts"][-1]["status"] == "lost"]
        marked = run_backfill("mark", backfill.name, lost["id"][:10], "--status", "succeeded", "--rows", "5",
                              "--reason", "loaded by hand", cwd=work, env=env)  # fmt: skip
        assert marked.returncode == 0, marked.stdout + marked.stderr
        assert marked.stdout == "marked 1 partition succeeded\n", marked.stdout
        after_mark = partition_bytes(backfill)
    finally:
        process.send_signal(signal.SIGCONT)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 1, err
    assert partition_bytes(backfill) == after_mark  # the thawed, fenced executor overwrote nothing
    [record] = [r for r in records(backfill) if r["id"] == lost["id"]]
    assert (record["status"], record["attempts"][-1]["kind"], record["attempts"][-1]["rows"]) == (
        "succeeded",
        "mark",
        5,
    )


def test_mark_stale_is_refused_while_the_lease_runs_and_reconciles_then_marks_once_it_expired(work, home):
    """mark --stale on a running partition: refused (exit 3, nothing changes) while its executor's lease runs;
    with the executor frozen past its lease, the expired attempts are reconciled lost and the mark follows."""
    process, backfill, _children, env = start_two_running(work, home, lease="3")
    running = [r for r in records(backfill) if child_running(r)]
    partition = running[0]["id"]
    try:
        before = partition_bytes(backfill)
        live = run_backfill(
            "mark", backfill.name, partition[:12], "--status", "failed", "--stale", "--reason", "host restarted",
            cwd=work, env=env,
        )  # fmt: skip
        assert live.returncode == 3, live.stdout + live.stderr
        assert "--stale refused" in live.stderr and "never overrides a valid lease" in live.stderr
        assert partition_bytes(backfill) == before
        process.send_signal(signal.SIGSTOP)
        lease = orjson.loads((backfill / "lease.json").read_bytes())
        wait_for(lambda: time.time() > lease["expires_at"] + 0.5, timeout=30)
        stale = run_backfill(
            "mark", backfill.name, partition[:12], "--status", "skipped", "--stale", "--reason", "host restarted",
            cwd=work, env=env,
        )  # fmt: skip
        assert stale.returncode == 0, stale.stdout + stale.stderr
        [record] = [r for r in records(backfill) if r["id"] == partition]
        assert [a["status"] for a in record["attempts"]][-2:] == ["lost", "skipped"]
        assert record["attempts"][-1]["kind"] == "mark" and record["status"] == "skipped"
    finally:
        process.send_signal(signal.SIGCONT)
        process.communicate(timeout=60)
