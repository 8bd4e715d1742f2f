"""The asset-level resume's plan, in-process: records and run records built by hand (issue 23 item 11)."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from engine.execute.asset_resume import AssetPlan, AssetResume
from engine.store.records import Attempt, PartitionRecord

# a → b, c → d; every digest "v1" unless a test changes one.
DOWNSTREAM = {"a": ["b"], "c": ["d"]}
DIGESTS = {"a": "v1", "b": "v1", "c": "v1", "d": "v1"}


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    return tmp_path / "runs"


def run_record(runs: Path, run_id: str, **statuses: str) -> None:
    """A run record whose assets ended as given ("succeeded", …), each with digest v1 ("old": no digest)."""
    runs.mkdir(exist_ok=True)
    assets = []
    for name, status in statuses.items():
        entry = {"name": name, "status": status.removesuffix("/old"), "digest": "v1"}
        if status.endswith("/old"):
            del entry["digest"]
        assets.append(entry)
    (runs / f"{run_id}.json").write_bytes(orjson.dumps({"run_id": run_id, "assets": assets}))


def attempt(run_id: str, status: str = "failed", **fields) -> Attempt:
    return Attempt(run_id=run_id, status=status, started_at="2024-01-01T00:00:00Z", **fields)


def mark(run_id: str, status: str, asset: str | None = None) -> Attempt:
    return attempt(run_id, status, kind="mark", asset=asset)


def record(*attempts: Attempt) -> PartitionRecord:
    return PartitionRecord("p0", 0, "s", "e", 0, 1, "failed", list(attempts))


def planner(runs: Path, digests: dict[str, str] = DIGESTS) -> AssetResume:
    return AssetResume(runs, digests, DOWNSTREAM)


def test_nothing_attempted_runs_the_whole_selection(runs):
    """No record, or one without attempts: the whole partition runs."""
    assert planner(runs).plan(None) is None
    assert planner(runs).plan(record()) is None


def test_a_failed_asset_runs_again_with_its_downstream_and_the_rest_is_carried(runs):
    """c failed, d upstream_failed: c and d run; a and b are taken from the failed attempt."""
    run_record(runs, "r1", a="succeeded", b="succeeded", c="failed", d="upstream_failed")
    assert planner(runs).plan(record(attempt("r1"))) == AssetPlan(("c", "d"), {"a": "r1", "b": "r1"})


def test_skipped_assets_hold_and_missing_ones_run(runs):
    """A skipped asset (disabled) holds like a success; one the run record does not list (the child stopped
    before it) runs again."""
    run_record(runs, "r1", a="skipped", b="succeeded", c="succeeded")
    assert planner(runs).plan(record(attempt("r1"))) == AssetPlan(("d",), {"a": "r1", "b": "r1", "c": "r1"})


def test_a_changed_definition_runs_again_with_everything_downstream(runs):
    """a's digest differs from its run record's: a and b (downstream of a) run again with c and d, so nothing is
    carried and the whole partition runs; b's change alone keeps a carried."""
    run_record(runs, "r1", a="succeeded", b="succeeded", c="failed", d="upstream_failed")
    assert planner(runs, {**DIGESTS, "a": "v2"}).plan(record(attempt("r1"))) is None
    assert planner(runs, {**DIGESTS, "b": "v2"}).plan(record(attempt("r1"))) == AssetPlan(("b", "c", "d"), {"a": "r1"})


def test_a_run_record_without_digests_carries_nothing(runs):
    """A run record of an older version states no definition: nothing it ran can be carried."""
    run_record(runs, "r1", a="succeeded/old", b="succeeded/old", c="failed", d="upstream_failed")
    assert planner(runs).plan(record(attempt("r1"))) is None


def test_carried_assets_keep_their_first_source_across_attempts(runs):
    """The second attempt carried a and b from the first and failed at c again: the third still takes a and b
    from the first attempt, whose run record ran them."""
    run_record(runs, "r1", a="succeeded", b="succeeded", c="failed", d="upstream_failed")
    run_record(runs, "r2", c="failed", d="upstream_failed")
    second = attempt("r2", assets=["c", "d"], carried={"a": "r1", "b": "r1"})
    assert planner(runs).plan(record(attempt("r1"), second)) == AssetPlan(("c", "d"), {"a": "r1", "b": "r1"})


def test_a_whole_run_after_a_resume_forgets_what_it_did_not_carry(runs):
    """A whole run (no carried assets) after a partial one holds only what its own run record says."""
    run_record(runs, "r1", a="succeeded", b="succeeded", c="failed", d="upstream_failed")
    run_record(runs, "r2", a="failed", b="upstream_failed", c="succeeded", d="succeeded")
    assert planner(runs).plan(record(attempt("r1"), attempt("r2"))) == AssetPlan(("a", "b"), {"c": "r2", "d": "r2"})


def test_asset_marks_hold_or_release_an_asset(runs):
    """An asset marked succeeded holds from the mark; one marked failed runs again with its downstream."""
    run_record(runs, "r1", a="succeeded", b="succeeded", c="failed", d="upstream_failed")
    marked = record(attempt("r1"), mark("m2", "succeeded", "c"))
    assert planner(runs).plan(marked) == AssetPlan(("d",), {"a": "r1", "b": "r1", "c": "m2"})
    unmarked = record(attempt("r1"), mark("m2", "succeeded", "c"), mark("m3", "failed", "a"))
    assert planner(runs).plan(unmarked) == AssetPlan(("a", "b", "d"), {"c": "m2"})
    skipped = record(attempt("r1"), mark("m2", "skipped", "c"))
    assert planner(runs).plan(skipped) == AssetPlan(("d",), {"a": "r1", "b": "r1", "c": "m2"})


def test_a_mark_of_the_whole_partition_forgets_every_asset(runs):
    """A partition marked (no --asset) is the operator's word on all of it: the next attempt runs everything."""
    run_record(runs, "r1", a="succeeded", b="succeeded", c="failed", d="upstream_failed")
    assert planner(runs).plan(record(attempt("r1"), mark("m2", "failed"))) is None
    assert planner(runs).plan(record(attempt("r1"), mark("m2", "succeeded"), mark("m3", "succeeded", "c"))) == (
        AssetPlan(("a", "b", "d"), {"c": "m3"})
    )


def test_an_attempt_without_a_readable_run_record_forgets_every_asset(runs):
    """A child killed before writing its run record (or a torn one) leaves nothing known to hold."""
    run_record(runs, "r1", a="succeeded", b="succeeded", c="failed", d="upstream_failed")
    assert planner(runs).plan(record(attempt("r1"), attempt("r2"))) is None
    (runs / "r2.json").write_text("{torn")
    assert planner(runs).plan(record(attempt("r1"), attempt("r2"))) is None
    (runs / "r2.json").write_text("[1, 2]")
    assert planner(runs).plan(record(attempt("r1"), attempt("r2"))) is None
    (runs / "r2.json").write_bytes(orjson.dumps({"assets": {"a": 1}}))
    assert planner(runs).plan(record(attempt("r1"), attempt("r2"))) is None


def test_an_operator_rerun_updates_what_held_before(runs):
    """An ``--asset`` rerun ran c alone (and failed): a and b still hold from the first attempt."""
    run_record(runs, "r1", a="succeeded", b="succeeded", c="succeeded", d="succeeded")
    run_record(runs, "r2", c="failed")
    rerun = attempt("r2", kind="rerun", asset="c")
    assert planner(runs).plan(record(attempt("r1", "succeeded"), rerun)) == AssetPlan(
        ("c", "d"), {"a": "r1", "b": "r1"}
    )


def test_when_everything_held_the_whole_partition_runs(runs):
    """Every asset succeeded but the partition did not (its verification failed): nothing is left to choose
    from, so the whole partition runs; an asset outside today's selection is never carried."""
    run_record(runs, "r1", a="succeeded", b="succeeded", c="succeeded", d="succeeded", x="succeeded")
    assert planner(runs).plan(record(attempt("r1"))) is None
    selected = {"a": "v1", "c": "v1", "d": "v1"}
    run_record(runs, "r2", a="succeeded", c="failed", x="succeeded")
    plan = AssetResume(runs, selected, DOWNSTREAM).plan(record(attempt("r2")))
    assert plan == AssetPlan(("c", "d"), {"a": "r2"})


def test_entries_without_a_name_are_ignored(runs):
    """A run record entry with no string name is no asset."""
    runs.mkdir()
    entries = [{"name": 3, "status": "succeeded"}, "x", {"name": "a", "status": "succeeded", "digest": "v1"}]
    (runs / "r1.json").write_bytes(orjson.dumps({"assets": entries}))
    assert planner(runs).plan(record(attempt("r1"))) == AssetPlan(("b", "c", "d"), {"a": "r1"})


def test_a_whole_run_whose_record_lacks_an_asset_does_not_carry_it_from_before(runs):
    """A whole run (nothing carried) stopped before a and b, whose run record lists only c and d: a and b no longer
    hold from the first attempt (the whole run may have started to rewrite them), so they run again."""
    run_record(runs, "r1", a="succeeded", b="succeeded", c="failed", d="upstream_failed")
    run_record(runs, "r2", c="succeeded", d="succeeded")
    assert planner(runs).plan(record(attempt("r1"), attempt("r2"))) == AssetPlan(("a", "b"), {"c": "r2", "d": "r2"})


def test_an_asset_marked_failed_that_never_held_changes_nothing(runs):
    """``mark --asset c --status failed`` after c failed: it did not hold, and still does not."""
    run_record(runs, "r1", a="succeeded", b="succeeded", c="failed", d="upstream_failed")
    assert planner(runs).plan(record(attempt("r1"), mark("m2", "failed", "c"))) == (
        AssetPlan(("c", "d"), {"a": "r1", "b": "r1"})
    )


def test_attempts_after_a_mark_still_count(runs):
    """c marked succeeded, then an attempt ran d alone and it succeeded (the partition failed in verification):
    every asset holds, so the whole partition runs, not d again."""
    run_record(runs, "r1", a="succeeded", b="succeeded", c="failed", d="upstream_failed")
    run_record(runs, "r3", d="succeeded")
    third = attempt("r3", assets=["d"], carried={"a": "r1", "b": "r1", "c": "m2"})
    assert planner(runs).plan(record(attempt("r1"), mark("m2", "succeeded", "c"), third)) is None


def test_everything_downstream_of_a_changed_asset_runs_and_nothing_unselected(runs):
    """a → b → e, and b → x where x is not selected: a changed, so a, b and e (two levels down) run again, c and d
    are carried, and x, outside the selection, is neither run nor carried."""
    run_record(runs, "r1", a="succeeded", b="succeeded", e="succeeded", c="succeeded", d="failed")
    digests = {"a": "v2", "b": "v1", "e": "v1", "c": "v1", "d": "v1"}
    resume = AssetResume(runs, digests, {"a": ["b"], "b": ["e", "x"], "c": ["d"]})
    assert resume.plan(record(attempt("r1"))) == AssetPlan(("a", "b", "d", "e"), {"c": "r1"})


def test_an_attempt_after_one_without_a_run_record_still_counts(runs):
    """The first attempt's child was killed before it wrote a run record; the second ran the whole partition and
    failed at c: a and b hold from the second."""
    run_record(runs, "r2", a="succeeded", b="succeeded", c="failed", d="upstream_failed")
    assert planner(runs).plan(record(attempt("r1"), attempt("r2"))) == AssetPlan(("c", "d"), {"a": "r2", "b": "r2"})
