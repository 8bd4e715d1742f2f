"""The guardrails' history in-process (issue 22, engine/guardrails/history.py): instants, spans, run records of
a pipeline, earlier backfills of a command, and partitions marked succeeded with rows."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from engine.guardrails.history import (
    AssetRun,
    History,
    PastRun,
    command_history,
    earlier_backfills,
    instant_of,
    marked_runs,
    merge_spans,
    missing_spans,
    read_run_history,
)
from engine.store import audit
from engine.store.records import Attempt, PartitionRecord
from tests.saved_backfills import saved_command_backfill

DAY = 86_400_000_000


def test_instants_with_any_offset():
    """Z and ±hh:mm offsets, microseconds kept, before the epoch too."""
    assert instant_of("1970-01-02T00:00:00Z") == DAY
    assert instant_of("1970-01-02T02:00:00+02:00") == DAY
    assert instant_of("1970-01-01T00:00:00.000001Z") == 1
    assert instant_of("1969-12-31T00:00:00-00:30") == -DAY + 1_800_000_000


def test_spans_merge_and_leave_gaps():
    """Overlapping and touching spans merge; what a range misses is listed, cut to the range."""
    assert merge_spans([(5, 8), (0, 2), (2, 3), (7, 10), (12, 13)]) == [(0, 3), (5, 10), (12, 13)]
    assert merge_spans([]) == []
    covered = [(0, 3), (5, 10), (12, 13)]
    assert missing_spans(0, 15, covered) == [(3, 5), (10, 12), (13, 15)]
    assert missing_spans(1, 4, covered) == [(3, 4)]
    assert missing_spans(6, 9, covered) == []
    assert missing_spans(10, 12, covered) == [(10, 12)]
    assert missing_spans(20, 30, covered) == [(20, 30)]
    assert missing_spans(-5, 1, covered) == [(-5, 0)]
    assert missing_spans(4, 11, [(0, 3), (5, 10), (10, 11)]) == [(4, 5)]
    assert missing_spans(0, 5, [(0, 2), (1, 3)]) == [(3, 5)]


def past(run_id: str, status: str, duration: float, assets: dict[str, AssetRun], *, ran: bool = True) -> PastRun:
    return PastRun(run_id, status, 0, duration, None, None, 0, DAY, assets, ran=ran)


def test_what_a_history_says_of_its_assets():
    """Succeeded assets of runs that ran (not stand-ins); coverage merged over succeeded assets only; the median
    duration of succeeded runs that ran (a stand-in's zero once pulled it down)."""
    ok, bad = AssetRun("succeeded", 0, DAY, 10), AssetRun("failed", DAY, 2 * DAY, None)
    history = History(
        [
            past("r1", "succeeded", 4.0, {"a": ok, "b": bad}),
            past("r2", "failed", 100.0, {"a": AssetRun("succeeded", DAY, 2 * DAY, 1)}),
            past("s", "succeeded", 0.0, {"c": ok}, ran=False),
            past("mark:m1", "succeeded", 0.0, {"a": ok}, ran=False),
            past("r3", "succeeded", 2.0, {}),
            past("r4", "succeeded", 9.0, {}),
        ]
    )
    assert history.succeeded_assets() == {"a"}
    assert history.coverage("a") == [(0, 2 * DAY)]
    assert history.coverage("b") == [] and history.coverage("c") == [(0, DAY)]
    assert history.median_duration() == 4.0
    assert History().median_duration() is None


def run_record(runs: Path, run_id: str, **fields) -> None:
    data = {
        "run_id": run_id, "status": "succeeded", "pipeline": "p", "target": "/repo/p/pipeline.yml",
        "environment": "dev", "backfill_id": None, "started_at": "2024-01-02T00:00:00Z", "duration_seconds": 1.5,
        "interval": {"start": "2024-01-01T00:00:00Z", "end": "2024-01-01T23:59:59.999999Z"},
        "assets": [{"name": "a", "status": "succeeded", "rows_in_interval": 10, "rows_written": 12}],
    }  # fmt: skip
    runs.mkdir(exist_ok=True)
    (runs / f"{run_id}.json").write_bytes(orjson.dumps({**data, **fields}))


def test_run_records_of_one_pipeline_are_read_in_start_order(tmp_path):
    """Records of the pipeline (by name and a target inside its directory) in order of start; another
    pipeline's, a file that is not JSON, and records of other names are passed over or listed unreadable; an
    asset's own interval (modifiers) wins over the run's; a stand-in did not run."""
    runs = tmp_path / "runs"
    run_record(runs, "late", started_at="2024-01-03T00:00:00Z", backfill_id="B1")
    shifted = {"start": "2023-12-31T00:00:00Z", "end": "2023-12-31T23:59:59.999999Z"}
    run_record(runs, "early", started_at="2024-01-01T00:00:00Z", stand_in=True,
               assets=[{"name": "a", "status": "succeeded", "interval": shifted}])  # fmt: skip
    run_record(runs, "other", pipeline="q")
    run_record(runs, "elsewhere", target="/other/p/pipeline.yml")
    run_record(runs, "nostart", started_at=None, duration_seconds=None)
    (runs / "torn.json").write_text("{")
    (runs / "broken.json").write_bytes(orjson.dumps({"pipeline": "p", "target": "/repo/p/x", "interval": {}}))
    (runs / "notes.txt").write_text("not a record")
    history = read_run_history(runs, "p", Path("/repo/p"))
    assert [r.run_id for r in history.runs] == ["nostart", "early", "late"]
    assert sorted(Path(p).name for p in history.unreadable) == ["broken.json", "torn.json"]
    nostart, early, late = history.runs
    assert (nostart.started_at, nostart.duration) == (0, 0.0)
    assert late == PastRun("late", "succeeded", instant_of("2024-01-03T00:00:00Z"), 1.5, "dev", "B1",
                           instant_of("2024-01-01T00:00:00Z"), instant_of("2024-01-02T00:00:00Z"),
                           {"a": AssetRun("succeeded", instant_of("2024-01-01T00:00:00Z"),
                                          instant_of("2024-01-02T00:00:00Z"), 10, 12)})  # fmt: skip
    assert early.ran is False and early.assets["a"].start == instant_of("2023-12-31T00:00:00Z")
    assert read_run_history(tmp_path / "none", "p", Path("/repo/p")) == History()


def record_of(prepared, index: int, *attempts: Attempt, status: str = "succeeded") -> PartitionRecord:
    spec = prepared.spec
    interval = spec.plan.interval(index)
    record = PartitionRecord(spec.ids.of(interval.start, interval.end), index, "s", "e", interval.start,
                             interval.end, status, list(attempts))  # fmt: skip
    prepared.store.write_record(record, durable=False)
    return record


def test_earlier_backfills_newest_first_without_the_excluded_or_unreadable(tmp_path):
    """Every saved backfill of the root with its identity and span, newest first; ours excluded; a damaged
    manifest passed over."""
    first = saved_command_backfill(tmp_path / "one", end="2024-01-02")
    root = first.store.directory.parent
    second = saved_command_backfill(tmp_path / "two", end="2024-01-03")
    (second.store.directory).rename(root / second.store.id)
    found = earlier_backfills(root)
    ids = sorted([first.store.id, second.store.id], reverse=True)
    assert [b.id for b in found] == ids
    by_id = {b.id: b for b in found}
    mine = by_id[first.store.id]
    assert (mine.target_identity, mine.target_path, mine.environment) == (first.spec.target.identity, None, None)
    assert (mine.start, mine.end, mine.directory) == (first.spec.start, first.spec.end, first.store.directory)
    assert mine.run_options == first.spec.run_options.to_json()
    assert [b.id for b in earlier_backfills(root, exclude=first.store.id)] == [second.store.id]
    (root / second.store.id / "manifest.json").write_text("{")
    assert [b.id for b in earlier_backfills(root)] == [first.store.id]


def test_a_command_s_history_is_its_earlier_backfills_partitions(tmp_path):
    """Partitions of backfills of the same command, with their last attempt's run ID and duration and their
    span; another command's are passed over; an unreadable record is listed; the limit stops the reading."""
    saved = saved_command_backfill(tmp_path, end="2024-01-03")
    attempt = Attempt(run_id="r1", status="succeeded", started_at="t", duration=2.5)
    record_of(saved, 0, Attempt(run_id="r0", status="failed", started_at="t"), attempt)
    record_of(saved, 2, Attempt(run_id="r2", status="failed", started_at="t"), status="failed")
    backfills = earlier_backfills(saved.store.directory.parent)
    identity = saved.spec.target.identity
    history = command_history(backfills, identity)
    zero, two = saved.spec.plan.interval(0), saved.spec.plan.interval(2)
    assert {(r.started_at, r.environment) for r in history.runs} == {(0, None)}
    assert all(r.assets == {} for r in history.runs)
    assert sorted((r.run_id, r.status, r.duration, r.start, r.end, r.backfill_id) for r in history.runs) == [
        ("r1", "succeeded", 2.5, zero.start, zero.end, saved.store.id),
        ("r2", "failed", 0.0, two.start, two.end, saved.store.id),
    ]
    assert command_history(backfills, {"other": 1}).runs == []
    older = {"status": "succeeded", "start": "2024-01-02T00:00:00Z", "end": "2024-01-03T00:00:00Z",
             "attempts": [{"run_id": "old", "status": "succeeded"}]}  # fmt: skip
    (saved.store.partitions / "00-older.json").write_bytes(orjson.dumps(older))  # a record without start_us/end_us
    found = {r.run_id: r for r in command_history(backfills, identity).runs}
    assert (found["old"].start, found["old"].end) == (instant_of(older["start"]), instant_of(older["end"]))
    (saved.store.partitions / "00-older.json").unlink()
    assert len(command_history(backfills, identity, limit=1).runs) == 1
    (saved.store.partitions / "zz.json").write_text("{")
    assert [Path(p).name for p in command_history(backfills, identity).unreadable] == ["zz.json"]


def test_partitions_marked_succeeded_with_rows_stand_for_runs(tmp_path):
    """A MARK to succeeded with rows whose mark is still the record's latest word: a past run of the asset (or,
    for the whole partition, of the assets the backfill's runs ran) that did not run; a mark without rows, a
    later failed one, or another pipeline's backfill gives nothing."""
    saved = saved_command_backfill(tmp_path, end="2024-01-03")
    backfills = earlier_backfills(saved.store.directory.parent)
    backfill = backfills[0]
    pipeline_dir = tmp_path / "p"
    backfill = type(backfill)(**{**backfill.__dict__, "target_path": str(pipeline_dir / "pipeline.yml")})
    mark = Attempt(run_id="m1", status="succeeded", started_at="t", finished_at="2024-01-05T00:00:00Z",
                   kind="mark", rows=7, asset="a")  # fmt: skip
    whole = Attempt(run_id="m2", status="succeeded", started_at="t", finished_at="2024-01-05T00:00:00Z",
                    kind="mark", rows=3)  # fmt: skip
    zero = record_of(saved, 0, mark)
    one = record_of(saved, 1, whole)
    record_of(saved, 2, Attempt(run_id="m3", status="succeeded", started_at="t", kind="mark", rows=None, asset="a"))
    lines = [
        audit.entry(action="MARK", partition_id=zero.id, asset="a", to_status="succeeded", target_count=7),
        audit.entry(action="MARK", partition_id=one.id, to_status="succeeded", target_count=3),
        audit.entry(action="MARK", partition_id=record_of(saved, 2).id, asset="a", to_status="succeeded"),
        audit.entry(action="MARK", partition_id=zero.id, asset="a", to_status="failed", target_count=7),
        audit.entry(action="CANCEL", partition_id=zero.id, to_status="succeeded", target_count=1),
    ]
    audit.append(saved.store.directory, lines)
    ran = History([PastRun("r", "succeeded", 0, 1.0, None, backfill.id, 0, DAY, {"b": AssetRun("succeeded", 0, 1, 1)})])
    found = marked_runs([backfill], ran, pipeline_dir)
    assert sorted((r.run_id, sorted(r.assets), r.ran) for r in found) == [
        ("mark:m1", ["a"], False),
        ("mark:m2", ["b"], False),
    ]
    first = next(r for r in found if r.run_id == "mark:m1")
    assert first.assets["a"] == AssetRun("succeeded", zero.start_us, zero.end_us, 7, 7)
    assert (first.duration, first.environment, first.start, first.end) == (0.0, None, zero.start_us, zero.end_us)
    assert (first.started_at, first.status, first.backfill_id) == (
        instant_of("2024-01-05T00:00:00Z"), "succeeded", backfill.id,
    )  # fmt: skip
    assert marked_runs([backfill], History(), tmp_path / "other") == []
    record_of(saved, 0, mark, Attempt(run_id="m4", status="failed", started_at="t", kind="mark", asset="a"))
    assert [r.run_id for r in marked_runs([backfill], ran, pipeline_dir)] == ["mark:m2"]


@pytest.mark.parametrize("damage", ["manifest", "record"])
def test_an_unreadable_neighbour_gives_no_marks(tmp_path, damage):
    """A backfill whose manifest or marked record cannot be read proves nothing."""
    saved = saved_command_backfill(tmp_path, end="2024-01-02")
    backfill = earlier_backfills(saved.store.directory.parent)[0]
    backfill = type(backfill)(**{**backfill.__dict__, "target_path": str(tmp_path / "p" / "pipeline.yml")})
    mark = Attempt(run_id="m1", status="succeeded", started_at="t", kind="mark", rows=7, asset="a")
    zero = record_of(saved, 0, mark)
    line = audit.entry(action="MARK", partition_id=zero.id, asset="a", to_status="succeeded", target_count=7)
    audit.append(saved.store.directory, [line])
    if damage == "manifest":
        (saved.store.directory / "manifest.json").write_text("{")
    else:
        (saved.store.partitions / f"{zero.id}.json").write_text("{")
    assert marked_runs([backfill], History(), tmp_path / "p") == []


def test_partitions_of_a_bulk_mark_with_rows_stand_for_runs_though_the_audit_holds_one_slice(tmp_path):
    """A mark of 70 partitions succeeded with rows (one bulk mark, one audit line for the slice): every one of the
    70 is a past run of the asset with those rows; the slice's line alone names only its first partition."""
    from engine.interventions.apply import CommandHolder, apply
    from engine.interventions.requests import Request

    saved = saved_command_backfill(tmp_path, end="2024-04-09")
    backfill = earlier_backfills(saved.store.directory.parent)[0]
    pipeline_dir = tmp_path / "p"
    backfill = type(backfill)(**{**backfill.__dict__, "target_path": str(pipeline_dir / "pipeline.yml")})
    holder = CommandHolder(saved.store, saved.spec, saved.board, "test")
    marked = Request("mark", "loaded by hand", "ops", "2026-12-01T00:00:00Z",
                     {"indices": list(range(5, 75)), "to": "succeeded", "rows": 7, "asset": "a"})  # fmt: skip
    assert apply(marked, holder).changed == 70
    assert [line["partitions"] for line in audit.read(saved.store.directory).entries] == [70]
    found = marked_runs([backfill], History(), pipeline_dir)
    plan = saved.spec.plan
    assert sorted(run.start for run in found) == [plan.interval(index).start for index in range(5, 75)]
    assert {(tuple(run.assets), run.assets["a"].rows_in_interval) for run in found} == {(("a",), 7)}
