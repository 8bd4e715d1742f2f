"""Running work on one warehouse, across state roots and by hand (#29 item 9): real backfills, real `backfill run`
processes and a real DuckDB file; a new invocation whose work clashes is refused (exit 3) naming what to wait for."""

from __future__ import annotations

import os
import signal
import socket
from pathlib import Path

import duckdb
import psutil
import pytest
import yaml

from tests.backfills import child_command, child_running, records, start_background, state_dirs, wait_for
from tests.builder import WAITER, Repo
from tests.conftest import run_backfill

DAY = ("--start-date", "2024-01-01", "--end-date", "2024-01-01")


def check_row(text: str, name: str) -> str:
    return next(line for line in text.splitlines() if f" {name} " in line)


@pytest.fixture
def two_pipelines(tmp_path: Path, home: dict[str, str]) -> tuple[Repo, dict[str, str]]:
    """Pipeline p: a table on the warehouse and a Python asset on the same connection that waits for LIVE_GO (the
    runner closes the file while it runs, so nobody holds DuckDB's lock then). Pipeline q: another table on the
    same warehouse file."""
    repo = Repo(tmp_path / "repo")
    table = {"type": "table", "strategy": "time_interval", "incremental_key": "day", "time_granularity": "date"}
    repo.sql("p.days", "SELECT DATE '{{ start_date }}' AS day", materialization=table)
    repo.python("p.wait", WAITER, connection="db", depends=["p.days"])
    repo.write("q/pipeline.yml", yaml.safe_dump({"name": "q", "default_connections": {"duckdb": "db"}}))
    header = yaml.safe_dump({"name": "q.other", "type": "duckdb.sql", "materialization": table}, sort_keys=False)
    repo.write("q/assets/other.sql", f"/* @bruin\n{header}@bruin */\nSELECT DATE '{{{{ start_date }}}}' AS day\n")
    env = {**home, "LIVE_STARTED": str(tmp_path / "started"), "LIVE_GO": str(tmp_path / "go")}
    return repo, env


def test_a_backfill_between_duckdb_writes_holds_its_file_for_every_state_root(two_pipelines):
    """While a backfill of p runs (its file not held at that moment), a backfill of q on the same DuckDB file from
    another --state-dir, a `backfill run` of q by hand and a stand-in run of p are refused (exit 3) naming the
    backfill, its PID and host; nothing of q is saved or written. Once p's backfill ends, q's runs."""
    repo, env = two_pipelines
    first = start_background("p", *DAY, "--reason", "first", "--no-progress", "--launcher", "exec", cwd=repo.root,
                             env=env)  # fmt: skip
    try:
        wait_for(lambda: Path(env["LIVE_STARTED"]).exists(), timeout=60)
        [backfill] = state_dirs(repo.root / "logs" / "backfills")
        with duckdb.connect(str(repo.database)) as free:  # nobody holds DuckDB's own lock now
            free.execute("SELECT 1")
        who = f"wait for backfill {backfill.name}, PID {first.pid} on {socket.gethostname()}"
        dry = run_backfill("q", *DAY, "--state-dir", "other", "--dry-run", cwd=repo.root, env=env)
        row = check_row(dry.stdout, "downstream_awareness")
        assert "✗ fail  never" in row and who in row, dry.stdout
        assert f"it writes {repo.database.resolve()}, and DuckDB allows one writer process per file" in row
        refused = run_backfill("q", *DAY, "--state-dir", "other", "--reason", "second", cwd=repo.root, env=env)
        assert refused.returncode == 3, refused.stdout + refused.stderr
        assert state_dirs(repo.root / "other") == []
        by_hand = repo.run(*DAY, env=env, target="q")
        assert by_hand.returncode == 3, by_hand.stdout + by_hand.stderr
        assert who in by_hand.stderr
        stand_in = repo.run(*DAY, "--stand-in", "--status", "succeeded", "--reason", "loaded by hand", env=env)
        assert stand_in.returncode == 3 and f"backfill {backfill.name}" in stand_in.stderr, stand_in.stderr
        with duckdb.connect(str(repo.database), read_only=True) as connection:
            tables = {row[0] for row in connection.execute("SELECT schema_name FROM duckdb_tables()").fetchall()}
        assert tables == {"p"}, "q wrote nothing"
    finally:
        Path(env["LIVE_GO"]).write_text("go")
        first.communicate(timeout=120)
    assert first.returncode == 0
    after = run_backfill("q", *DAY, "--state-dir", "other", "--reason", "second", "--no-progress", cwd=repo.root,
                         env=env)  # fmt: skip
    assert after.returncode == 0, after.stdout + after.stderr
    with duckdb.connect(str(repo.database), read_only=True) as connection:
        assert connection.execute("SELECT CAST(day AS VARCHAR) FROM q.other").fetchall() == [("2024-01-01",)]


def test_a_run_by_hand_holds_its_assets_against_a_new_backfill(two_pipelines):
    """A `backfill run` of p by hand in progress: a backfill of p is refused naming the run, its PID and host."""
    repo, env = two_pipelines
    by_hand = start_background("run", "p", *DAY, cwd=repo.root, env=env)
    try:
        wait_for(lambda: Path(env["LIVE_STARTED"]).exists(), timeout=60)
        refused = run_backfill("p", *DAY, "--reason", "r", "--dry-run", cwd=repo.root, env=env)
        row = check_row(refused.stdout, "downstream_awareness")
        assert f"wait for a `backfill run`, PID {by_hand.pid} on {socket.gethostname()}: it runs p.days, p.wait" in row
    finally:
        Path(env["LIVE_GO"]).write_text("go")
        by_hand.communicate(timeout=120)
    assert by_hand.returncode == 0


def test_a_crashed_executors_surviving_child_still_holds_the_command(tmp_path, home):
    """The same command from two state roots: overlapping days are refused, other days run beside it. After a
    SIGKILL of the executor its child still runs, and holds the entry: an overlapping backfill is still refused;
    once the child is gone, nothing is in the way."""
    go = tmp_path / "go"
    command = child_command("--wait-for", str(go))
    flags = ("--command", command, "--reason", "r", "--reversible", "--guardrails", "sandbox", "--no-progress")
    first = start_background(*flags, "--start-date", "2024-01-01", "--end-date", "2024-01-02", "--state-dir", "a",
                             cwd=tmp_path, env=home)  # fmt: skip
    try:
        backfill = wait_for(lambda: (state_dirs(tmp_path / "a") or [None])[0])
        running = wait_for(lambda: [r for r in records(backfill) if child_running(r)] or None)
        overlapping = run_backfill(*flags, "--start-date", "2024-01-02", "--end-date", "2024-01-03", "--state-dir",
                                   "b", "--dry-run", cwd=tmp_path, env=home)  # fmt: skip
        assert f"wait for backfill {backfill.name}, PID {first.pid}" in check_row(
            overlapping.stdout, "downstream_awareness"
        ), overlapping.stdout
        beside = run_backfill(*flags, "--start-date", "2024-01-05", "--end-date", "2024-01-05", "--state-dir", "c",
                              "--dry-run", cwd=tmp_path, env=home)  # fmt: skip
        assert "✓ pass" in check_row(beside.stdout, "downstream_awareness"), beside.stdout
        child = running[0]["attempts"][-1]["pid"]
        os.kill(first.pid, signal.SIGKILL)
        first.communicate(timeout=60)
        assert psutil.pid_exists(child)
        still = run_backfill(*flags, "--start-date", "2024-01-02", "--end-date", "2024-01-03", "--state-dir", "b",
                             cwd=tmp_path, env=home)  # fmt: skip
        assert still.returncode == 3, still.stdout + still.stderr
    finally:
        go.write_text("go")
    wait_for(lambda: not psutil.pid_exists(child) or psutil.Process(child).status() == psutil.STATUS_ZOMBIE)
    free = run_backfill(*flags, "--start-date", "2024-01-02", "--end-date", "2024-01-03", "--state-dir", "b",
                        "--dry-run", cwd=tmp_path, env=home)  # fmt: skip
    assert "✓ pass" in check_row(free.stdout, "downstream_awareness"), free.stdout
