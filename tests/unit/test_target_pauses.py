"""A pipeline's pause record: pause and resume once each, every one kept, damage refused; and a pause that lands
between an invocation's pre-flight and its start still stops it."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from engine.base.errors import Refused, StateUnreadable
from engine.store.control import Decision
from engine.store.target_pauses import (
    TargetPaused,
    check_not_paused,
    note_paused_backfills,
    pause_target,
    paused_targets,
    read_pause,
    resume_target,
)


def test_pause_then_resume_keeps_both_with_who_and_why(tmp_path):
    """The pause in force, the backfills it held, and the history of both steps."""
    target, directory = tmp_path / "p", tmp_path / "pauses"
    target.mkdir()
    pause_target(target, "p", Decision("paused", "ann@h", "t1", "outage"), directory)
    note_paused_backfills(target, [{"id": "b1", "state_dir": "/s"}], directory)
    record = read_pause(target, directory)
    assert record.paused == Decision("paused", "ann@h", "t1", "outage")
    assert record.paused_backfills == [{"id": "b1", "state_dir": "/s"}]
    assert [t.name for t in paused_targets(directory)] == ["p"]
    with pytest.raises(TargetPaused, match=r"^pipeline p \(.*\) is paused by ann@h at t1: outage; nothing ran"):
        check_not_paused(target, directory)
    before = resume_target(target, "p", "bob@h", "t2", "back", directory)
    assert before.paused_backfills == [{"id": "b1", "state_dir": "/s"}]
    after = read_pause(target, directory)
    assert after.paused is None and after.paused_backfills == []
    assert after.history == [
        {"action": "pause", "by": "ann@h", "at": "t1", "reason": "outage"},
        {"action": "resume", "by": "bob@h", "at": "t2", "reason": "back"},
    ]
    assert paused_targets(directory) == []
    check_not_paused(target, directory)  # nothing raised


def test_the_same_step_twice_is_refused_and_writes_nothing(tmp_path):
    """Pausing a paused pipeline, or resuming one that is not paused: Refused, the record as it was."""
    target, directory = tmp_path / "p", tmp_path / "pauses"
    target.mkdir()
    with pytest.raises(Refused, match="is not paused: nothing to resume"):
        resume_target(target, "p", "bob@h", "t0", "why", directory)
    assert not directory.exists() or list(directory.glob("*.json")) == []
    pause_target(target, "p", Decision("paused", "ann@h", "t1", "outage"), directory)
    with pytest.raises(Refused, match="it is paused already"):
        pause_target(target, "p", Decision("paused", "carl@h", "t2", "again"), directory)
    assert [e["reason"] for e in read_pause(target, directory).history] == ["outage"]


def test_a_damaged_pause_file_is_refused_where_it_decides_and_skipped_where_it_lists(tmp_path):
    """A pause that cannot be read never lets a run through silently (StateUnreadable, exit 5); listing passes
    it over."""
    target, directory = tmp_path / "p", tmp_path / "pauses"
    target.mkdir()
    pause_target(target, "p", Decision("paused", "ann@h", "t1", "outage"), directory)
    [path] = directory.glob("*.json")
    path.write_text('{"format": 1, "target": "x", "paused": "yes"}')
    with pytest.raises(StateUnreadable, match="damaged"):
        check_not_paused(target, directory)
    path.write_text("{")
    with pytest.raises(StateUnreadable, match="cannot be read"):
        check_not_paused(target, directory)
    assert paused_targets(directory) == []


def test_a_pause_after_the_preflight_stops_the_start(tmp_path, monkeypatch):
    """Judged while the pipeline ran freely, paused before it starts: start() stops it (TargetPaused), nothing is
    saved and it holds no place in the live-work registry."""
    from engine.base.settings import Settings
    from engine.execute.invocation import judge_new
    from engine.guardrails.request import GuardOptions
    from engine.pipeline.options import RunOptions
    from engine.spec.backfill_spec import ExecutionOptions
    from engine.spec.planning import plan_request
    from engine.store.live_work import read_live
    from tests.builder import Repo

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    repo = Repo(tmp_path / "repo")
    table = {"type": "table", "strategy": "time_interval", "incremental_key": "day", "time_granularity": "date"}
    repo.sql("s.t", "SELECT DATE '{{ start_date }}' AS day", materialization=table)
    planned = plan_request(
        target=str(repo.pipeline_dir), command=None, name=None, start="2024-01-01", end="2024-01-01",
        timezone="UTC", partition="daily", environment=None, config_file=None, run_options=RunOptions(),
        options=ExecutionOptions(), force=False, cwd=repo.root,
    )  # fmt: skip
    invocation = judge_new(
        planned, GuardOptions(), reason="r", state_dir="states", cwd=repo.root, settings=Settings(), can_ask=False
    )
    pause_target(repo.pipeline_dir, "p", Decision("paused", "ann@h", "t1", "outage"))
    with pytest.raises(TargetPaused), invocation:
        invocation.start(invocation.approve(approve=None, typed=True))
    assert not (repo.root / "states").exists() or list((repo.root / "states").iterdir()) == []
    assert read_live() == []


def test_every_paused_target_is_listed_by_name(tmp_path: Path):
    """Two paused pipelines, one resumed: only the paused ones, by name."""
    directory = tmp_path / "pauses"
    for name in ("b", "a", "c"):
        (tmp_path / name).mkdir()
        pause_target(tmp_path / name, name, Decision("paused", "ann@h", "t", "why"), directory)
    resume_target(tmp_path / "c", "c", "ann@h", "t", "ok", directory)
    assert [t.name for t in paused_targets(directory)] == ["a", "b"]


def test_a_pause_file_of_an_older_or_other_shape(tmp_path: Path):
    """A record without a name or paused backfills reads with empty ones; another format, or not an object, is
    damage naming the file; the target is kept as text."""
    import hashlib

    from engine.store.target_pauses import TargetPause, read_pause

    target = tmp_path / "p"
    target.mkdir()
    path = tmp_path / "pauses" / (hashlib.sha256(str(target.resolve()).encode()).hexdigest()[:24] + ".json")
    path.parent.mkdir()
    path.write_bytes(orjson.dumps({"format": 1, "target": 5, "paused": None}))
    assert read_pause(target, path.parent) == TargetPause("5")
    for bad in ({"format": 2, "target": "x"}, [1], {"format": 1}):
        path.write_bytes(orjson.dumps(bad))
        with pytest.raises(StateUnreadable, match=f"^{path} is damaged"):
            read_pause(target, path.parent)
    path.write_bytes(orjson.dumps({"format": 1, "target": "t", "paused_backfills": [{"id": 1, "state_dir": 2}]}))
    assert read_pause(target, path.parent).paused_backfills == [{"id": "1", "state_dir": "2"}]
