"""Pausing a whole pipeline (#23 item 10, seed interventions.txt): real backfills, a real `backfill run`, real
requests to a live executor; a paused pipeline starts nothing and says who paused it and why, with exit 0."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.backfills import records, start_background, state_dirs, wait_for
from tests.builder import WAITER, Repo
from tests.conftest import run_backfill


@pytest.fixture
def waiting(tmp_path: Path, home: dict[str, str]) -> tuple[Repo, dict[str, str]]:
    """Pipeline p: a day table and a Python asset after it that waits for LIVE_GO."""
    repo = Repo(tmp_path / "repo")
    table = {"type": "table", "strategy": "time_interval", "incremental_key": "day", "time_granularity": "date"}
    repo.sql("p.days", "SELECT DATE '{{ start_date }}' AS day", materialization=table)
    repo.python("p.wait", WAITER, depends=["p.days"])
    env = {**home, "LIVE_STARTED": str(tmp_path / "started"), "LIVE_GO": str(tmp_path / "go")}
    return repo, env


def test_a_paused_pipeline_starts_nothing_until_resumed(waiting):
    """pause --target pauses the running backfill (its child finishes, exit 22) and stops a new backfill, a
    --continue and a run by hand, each exit 0 naming who paused it and why; list shows the pause; resume --target
    lets the paused backfill go on and --continue completes it; both are in the audit log and the history."""
    repo, env = waiting
    days = ("--start-date", "2024-01-01", "--end-date", "2024-01-02")
    first = start_background("p", *days, "--reason", "first", "--max-parallel", "1", "--launcher", "exec",
                             "--no-progress", cwd=repo.root, env=env)  # fmt: skip
    try:
        wait_for(lambda: Path(env["LIVE_STARTED"]).exists(), timeout=60)
        [backfill] = state_dirs(repo.root / "logs" / "backfills")
        paused = run_backfill("pause", "--target", "p", "--reason", "source outage", cwd=repo.root, env=env)
        assert paused.returncode == 0, paused.stdout + paused.stderr
        assert f"paused pipeline p ({repo.pipeline_dir.resolve()})" in paused.stdout
        assert f"  backfill {backfill.name} paused" in paused.stdout, paused.stdout
        said = f"pipeline p ({repo.pipeline_dir.resolve()}) is paused by "
        new = run_backfill("p", "--start-date", "2024-01-05", "--end-date", "2024-01-05", "--reason", "second",
                           "--state-dir", "elsewhere", cwd=repo.root, env=env)  # fmt: skip
        assert new.returncode == 0 and said in new.stdout and ": source outage; nothing ran" in new.stdout, new.stdout
        assert state_dirs(repo.root / "elsewhere") == []
        runs_before = len(list((repo.root / "logs" / "runs").glob("*.json")))
        by_hand = repo.run("--start-date", "2024-01-05", "--end-date", "2024-01-05", env=env)
        assert by_hand.returncode == 0 and said in by_hand.stdout, by_hand.stdout + by_hand.stderr
        assert len(list((repo.root / "logs" / "runs").glob("*.json"))) == runs_before
        listed = json.loads(run_backfill("list", "--output", "json", cwd=repo.root, env=env).stdout)
        [target] = listed["paused_targets"]
        assert (target["name"], target["paused"]["reason"]) == ("p", "source outage")
        text = run_backfill("list", cwd=repo.root, env=env).stdout
        assert f"paused: {said}" in text
    finally:
        Path(env["LIVE_GO"]).write_text("go")
        first.communicate(timeout=120)
    assert first.returncode == 22, "its running child finished, nothing more started"
    assert [r["status"] for r in records(backfill)] == ["succeeded"]  # the second day never started
    held = run_backfill("--continue", backfill.name, "--no-progress", cwd=repo.root, env=env)
    assert held.returncode == 0 and "is paused by" in held.stdout and "source outage; nothing" in held.stdout
    resumed = run_backfill("resume", "--target", str(repo.pipeline_dir), "--reason", "source back", cwd=repo.root,
                           env=env)  # fmt: skip
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert f"  backfill {backfill.name} resumed" in resumed.stdout, resumed.stdout
    done = run_backfill("--continue", backfill.name, "--no-progress", cwd=repo.root, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert [r["status"] for r in records(backfill)] == ["succeeded", "succeeded"]
    audit = run_backfill("audit", "--output", "json", cwd=repo.root, env=env)
    lines = [json.loads(line) for line in audit.stdout.splitlines()]
    assert [(x["action"], x["reason"]) for x in lines] == [("PAUSE", "source outage"), ("RESUME", "source back")]
    assert listed_history(repo, env) == [("pause", "source outage"), ("resume", "source back")]


def listed_history(repo: Repo, env: dict[str, str]) -> list[tuple[str, str]]:
    """The pause file's history, as kept in the user's state directory."""
    [path] = (Path(env["XDG_STATE_HOME"]) / "backfill" / "paused-targets").glob("*.json")
    return [(entry["action"], entry["reason"]) for entry in json.loads(path.read_text())["history"]]


def test_target_pause_bad_input_and_refusals(waiting):
    """Both an ID and --target, --state-dir with --target, no reason: exit 2; pausing twice, or resuming a pipeline
    that is not paused: exit 3, and nothing changes. A --continue of a backfill the pause did not hold (it was not
    running) is held by the pipeline's pause: exit 0, nothing runs again."""
    repo, env = waiting
    Path(env["LIVE_GO"]).write_text("go")
    done = run_backfill("p", "--start-date", "2024-01-01", "--end-date", "2024-01-01", "--reason", "r",
                        "--no-progress", cwd=repo.root, env=env)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    [backfill] = state_dirs(repo.root / "logs" / "backfills")
    both = run_backfill("pause", "20240101-000000-abcdef", "--target", "p", "--reason", "r", cwd=repo.root, env=env)
    assert both.returncode == 2 and "give a backfill ID or --target PATH, not both" in both.stderr
    rooted = run_backfill("pause", "--target", "p", "--state-dir", "s", "--reason", "r", cwd=repo.root, env=env)
    assert rooted.returncode == 2 and "--state-dir means nothing with --target" in rooted.stderr
    bare = run_backfill("pause", "--target", "p", cwd=repo.root, env=env)
    assert bare.returncode == 2 and "--reason is required to pause a pipeline" in bare.stderr
    nothing = run_backfill("resume", "--target", "p", "--reason", "r", cwd=repo.root, env=env)
    assert nothing.returncode == 3 and "is not paused: nothing to resume" in nothing.stderr
    assert run_backfill("pause", "--target", "p", "--reason", "r", cwd=repo.root, env=env).returncode == 0
    again = run_backfill("pause", "--target", "p", "--reason", "again", cwd=repo.root, env=env)
    assert again.returncode == 3 and "it is paused already" in again.stderr
    assert listed_history(repo, env) == [("pause", "r")]
    # Standard guardrails: without the pause, both would be held for a person (a Python asset is human-only, exit
    # 4); paused, nothing is judged, taken over or saved: exit 0 naming the pause.
    environment = {"guardrails": "standard", "connections": {"duckdb": [{"name": "db", "path": "warehouse.duckdb"}]}}
    repo.write(".bruin.yml", yaml.safe_dump({"default_environment": "dev", "environments": {"dev": environment}}))
    state = {p: p.read_bytes() for p in backfill.rglob("*") if p.is_file()}
    rerun = run_backfill("--continue", backfill.name, "--rerun", "all", "--reason", "again", "--no-progress",
                         cwd=repo.root, env=env)  # fmt: skip
    assert rerun.returncode == 0 and "pipeline p (" in rerun.stdout and "is paused by" in rerun.stdout, rerun.stdout
    assert {p: p.read_bytes() for p in backfill.rglob("*") if p.is_file()} == state
    new = run_backfill("p", "--start-date", "2024-01-03", "--end-date", "2024-01-03", "--reason", "r",
                       "--no-progress", cwd=repo.root, env=env)  # fmt: skip
    assert new.returncode == 0 and "is paused by" in new.stdout, new.stdout + new.stderr
    assert len(state_dirs(repo.root / "logs" / "backfills")) == 1
