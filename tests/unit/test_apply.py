"""Applying interventions in-process over a real state store: marks, a backfill's end, cancel, pause and resume
— each refusal changes nothing, each change is recorded, audited and told to the holder."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field, replace
from pathlib import Path

import orjson
import pytest

from engine.base.processes import process_identity
from engine.interventions.apply import DURABLE_ONE_BY_ONE, CommandHolder, apply, reopen_for_continue
from engine.interventions.requests import Request
from engine.store import audit
from engine.store.control import Control, Decision, read_control, write_control
from engine.store.records import Attempt, PartitionRecord, RecordStatus
from engine.store.status import Status
from tests.backfills import hold_lock, release
from tests.saved_backfills import saved_command_backfill

WHO = "ops@host"


@dataclass
class Holder(CommandHolder):
    """A command's holder that also says which partitions run and remembers what it was told."""

    busy: frozenset[int] = frozenset()
    told: list[tuple] = field(default_factory=list)

    def running(self) -> frozenset[int]:
        return self.busy

    def cancel(self, message: str) -> int:
        self.told.append(("cancel", message))
        return len(self.busy)

    def pause(self, paused: bool, message: str) -> None:
        self.told.append(("pause", paused, message))

    def end(self, status: str, message: str) -> None:
        self.told.append(("end", status, message))


@pytest.fixture
def holder(tmp_path: Path) -> Holder:
    """A saved 100-day backfill of `true`, nothing attempted, held by a command."""
    prepared = saved_command_backfill(tmp_path, end="2024-04-09")
    return Holder(prepared.store, prepared.spec, prepared.board, "test (PID 1)")


def request(action: str, reason: str = "because", **params) -> Request:
    return Request(action, reason, WHO, "2026-12-01T00:00:00Z", params)


def lines(holder: Holder) -> list[dict]:
    return audit.read(holder.store.directory).entries


def record(holder: Holder, index: int) -> dict | None:
    interval = holder.spec.plan.interval(index)
    path = holder.store.record_path(holder.spec.ids.of(interval.start, interval.end))
    return orjson.loads(path.read_bytes()) if path.exists() else None


def test_a_mark_adds_an_entry_to_each_partition_s_history_and_one_audit_line_each(holder):
    """Two partitions marked succeeded: a mark entry (no child) in each record, the board updated, one MARK
    line each with the status before; the answer counts them."""
    result = apply(request("mark", indices=[3, 1], to="succeeded", rows=7), holder)
    assert (result.exit_code, result.message, result.changed) == (0, "marked 2 partitions succeeded", 2)
    for index in (1, 3):
        saved = record(holder, index)
        assert saved["status"] == "succeeded"
        [entry] = saved["attempts"]
        assert entry["kind"] == "mark" and entry["status"] == "succeeded" and entry["rows"] == 7
        assert entry["run_id"] == f"{holder.store.id}-p{index}-m1" and entry["by"] == WHO
        assert entry["error"] == f"marked succeeded by {WHO}: because"
        assert holder.board.status(index) is Status.SUCCEEDED and holder.board.attempts(index) == 1
    assert [(x["action"], x["from_status"], x["to_status"], x["target_count"]) for x in lines(holder)] == [
        ("MARK", "queued", "succeeded", 7)
    ] * 2
    again = apply(request("mark", indices=[1], to="failed"), holder)
    assert again.message == "marked 1 partition failed"
    assert [a["status"] for a in record(holder, 1)["attempts"]] == ["succeeded", "failed"]  # nothing erased
    assert lines(holder)[-1]["previous_message"] == f"marked succeeded by {WHO}: because"


def test_a_mark_of_a_running_partition_is_refused_and_changes_nothing(holder):
    """Running partitions: exit 3 naming them (three, then a count), no record, no audit line."""
    holder.busy = frozenset({0, 1, 2, 3, 4})
    result = apply(request("mark", indices=[4, 3, 2, 1, 0, 9], to="succeeded"), holder)
    plan, ids = holder.spec.plan, holder.spec.ids
    shown = ", ".join(ids.of(plan.interval(i).start, plan.interval(i).end) for i in (0, 1, 2))
    assert result.exit_code == 3
    assert result.message == f"partition {shown} and 2 more of backfill {holder.store.id} is running: cancel the " \
        "backfill first, or wait"  # fmt: skip
    assert record(holder, 9) is None and lines(holder) == []
    one = apply(request("mark", indices=[2], to="failed"), holder)
    assert one.exit_code == 3 and " and " not in one.message.split(" of backfill")[0]


def test_what_cannot_be_marked_and_what_is_marked_already(holder):
    """A status that is not a mark's: exit 2; nothing selected, or everything so already: exit 0, no line."""
    bad = apply(request("mark", indices=[1], to="running"), holder)
    assert (
        bad.exit_code == 2
        and bad.message == "--status 'running' cannot be marked: give one of succeeded, failed, skipped"
    )
    assert apply(request("mark", status_filter=["failed"], to="succeeded"), holder).message == (
        "no partition matches: nothing was marked"
    )
    apply(request("mark", indices=[5], to="skipped"), holder)
    same = apply(request("mark", indices=[5], to="skipped"), holder)
    assert same.message == "every selected partition is skipped already: nothing was marked" and same.changed == 0
    assert len(lines(holder)) == 1
    asset = apply(request("mark", indices=[5], to="skipped", asset="mart.x"), holder)
    assert asset.message == "marked asset mart.x of 1 partition skipped"
    assert record(holder, 5)["status"] == "skipped" and record(holder, 5)["attempts"][-1]["asset"] == "mart.x"
    assert apply(request("unknown"), holder).exit_code == 2


def test_an_asset_mark_keeps_the_partition_s_status(holder):
    """Marking one asset of a failed partition succeeded adds the entry; the partition stays failed."""
    apply(request("mark", indices=[2], to="failed"), holder)
    apply(request("mark", indices=[2], to="succeeded", asset="mart.x"), holder)
    assert record(holder, 2)["status"] == "failed" and holder.board.status(2) is Status.FAILED


def test_a_status_filter_selects_what_has_that_status_now(holder):
    """``status_filter``: every partition whose status is one of those given, at the moment of the mark."""
    apply(request("mark", indices=[1, 4], to="failed"), holder)
    result = apply(request("mark", status_filter=["failed"], to="succeeded"), holder)
    assert result.changed == 2 and {record(holder, i)["status"] for i in (1, 4)} == {"succeeded"}


def test_a_mark_of_many_partitions_is_one_bulk_file(holder):
    """Over DURABLE_ONE_BY_ONE partitions: no record file, one bulk mark every reader merges; the board as for
    a few, and one audit line for the slice of consecutive partitions."""
    indices = list(range(DURABLE_ONE_BY_ONE + 1))
    result = apply(request("mark", indices=indices, to="skipped"), holder)
    assert result.changed == len(indices)
    assert not list(holder.store.partitions.glob("*.json"))
    assert len(list((holder.store.directory / "bulk-marks").iterdir())) == 1
    assert holder.store.read_record(holder.spec.ids.of(*_bounds(holder, 7)), holder.spec.plan,
                                    holder.spec.ids.of).status == "skipped"  # fmt: skip
    assert all(holder.board.status(i) is Status.SKIPPED for i in indices)
    [found] = lines(holder)  # one slice: every partition was queued
    assert (found["partitions"], found["from_status"], found["to_status"]) == (len(indices), "queued", "skipped")
    few = apply(request("mark", indices=list(range(DURABLE_ONE_BY_ONE)), to="failed"), holder)
    assert few.changed == DURABLE_ONE_BY_ONE and len(list(holder.store.partitions.glob("*.json"))) == 64


def _bounds(holder: Holder, index: int) -> tuple[int, int]:
    interval = holder.spec.plan.interval(index)
    return interval.start, interval.end


def test_a_mark_reopens_a_backfill_an_operator_ended(holder):
    """Changing a partition of a cancelled backfill opens it again: control cleared, a REOPEN line that keeps
    what ended it."""
    apply(request("cancel"), holder)
    apply(request("mark", indices=[0], to="succeeded"), holder)
    assert read_control(holder.store.directory).ended is None
    reopen = lines(holder)[-1]
    assert (reopen["action"], reopen["from_status"]) == ("REOPEN", "cancelled")
    assert reopen["previous_message"].startswith(f"cancelled by {WHO} at ")


def test_marking_the_backfill_ends_it_unless_a_child_runs(holder):
    """mark_backfill: a bad status is exit 2; with a child running, exit 3 and nothing written; otherwise the
    end is saved, audited (from open, then from the status before) and told to the holder."""
    assert apply(request("mark_backfill", to="skipped"), holder).message == (
        "--status 'skipped' cannot end a backfill: give succeeded or failed"
    )
    holder.busy = frozenset({3})
    refused = apply(request("mark_backfill", to="failed"), holder)
    assert refused.exit_code == 3 and refused.message.endswith(
        "has a child running: cancel the backfill first, or wait"
    )
    assert read_control(holder.store.directory) == Control() and lines(holder) == [] and holder.told == []
    holder.busy = frozenset()
    done = apply(request("mark_backfill", to="failed"), holder)
    assert done.message == f"backfill {holder.store.id} marked failed; its partitions keep their statuses"
    ended = read_control(holder.store.directory).ended
    assert (ended.status, ended.by, ended.reason) == ("failed", WHO, "because")
    assert holder.told == [("end", "failed", f"marked failed by {WHO}: because")]
    apply(request("mark_backfill", to="succeeded", reason="checked"), holder)
    assert [(x["from_status"], x["to_status"]) for x in lines(holder)] == [("open", "failed"), ("failed", "succeeded")]
    assert lines(holder)[-1]["previous_message"].startswith(f"marked failed by {WHO} at ")


def test_cancel_ends_the_backfill_once_and_stops_what_runs(holder):
    """cancel: saved, audited from open (or running), told to the holder with how many children it stops; a
    second cancel of a stopped backfill is said and changes nothing; one while children run cancels again."""
    holder.busy = frozenset({1, 2})
    first = apply(request("cancel"), holder)
    assert first.message == f"backfill {holder.store.id} cancelled; 2 running children stopped"
    assert holder.told == [("cancel", f"cancelled by {WHO}: because")]
    assert read_control(holder.store.directory).ended.status == "cancelled"
    holder.busy = frozenset({1})
    assert apply(request("cancel"), holder).message.endswith("cancelled; 1 running child stopped")
    holder.busy = frozenset()
    again = apply(request("cancel"), holder)
    assert again.message.startswith(f"backfill {holder.store.id} is cancelled already (cancelled by {WHO} at ")
    assert [x["from_status"] for x in lines(holder)] == ["running", "cancelled"]
    assert len(holder.told) == 2


def test_a_cancel_of_an_idle_backfill_says_so(holder):
    """Nothing running: cancelled, from open, no children mentioned."""
    result = apply(request("cancel"), holder)
    assert result.message == f"backfill {holder.store.id} cancelled"
    assert lines(holder)[0]["from_status"] == "open"


def test_pause_and_resume_are_applied_once_each(holder):
    """pause: saved, audited, told (True), how many children finish; again: 'paused already', nothing more;
    resume: cleared, audited with the pause it undid, told (False); again: 'not paused'."""
    holder.busy = frozenset({0, 1, 2})
    paused = apply(request("pause", reason="migration"), holder)
    assert paused.message == f"backfill {holder.store.id} paused; 3 running children will finish"
    assert read_control(holder.store.directory).paused.reason == "migration"
    again = apply(request("pause", reason="twice"), holder)
    assert again.message.startswith(f"backfill {holder.store.id} is paused already (paused by {WHO} at ")
    assert again.changed == 0 and len(lines(holder)) == 1
    assert holder.told == [("pause", True, f"paused by {WHO}: migration")]
    resumed = apply(request("resume", reason="done"), holder)
    assert resumed.message == f"backfill {holder.store.id} resumed: backfill --continue {holder.store.id} goes on"
    assert read_control(holder.store.directory).paused is None
    assert holder.told[-1] == ("pause", False, "")
    assert [(x["action"], x["from_status"], x["to_status"]) for x in lines(holder)] == [
        ("PAUSE", "open", "paused"),
        ("RESUME", "paused", "open"),
    ]
    assert lines(holder)[-1]["previous_message"].endswith(": migration")
    assert apply(request("resume"), holder).message == f"backfill {holder.store.id} is not paused: nothing to resume"
    holder.busy = frozenset()
    assert apply(request("pause"), holder).message == f"backfill {holder.store.id} paused"


def test_a_continue_with_its_own_reason_reopens_only_an_ended_backfill(holder):
    """reopen_for_continue: a REOPEN line when the backfill was ended, nothing at all otherwise."""
    reopen_for_continue(holder.store, "go on", WHO, "test")
    assert lines(holder) == []
    write_control(holder.store.directory, Control(ended=Decision("succeeded", WHO, "2026-12-01T00:00:00Z", "ok")))
    reopen_for_continue(holder.store, "go on", WHO, "test")
    [line] = lines(holder)
    assert (line["action"], line["from_status"], line["reason"]) == ("REOPEN", "succeeded", "go on")
    assert read_control(holder.store.directory).ended is None


def assert_line(line: dict, holder: Holder, action: str, from_status, to_status, **more) -> None:
    """Every field of an audit line: who asked, when, why, who applied it, what changed."""
    assert (line["action"], line["from_status"], line["to_status"]) == (action, from_status, to_status)
    assert (line["backfill_id"], line["reason"], line["requested_by"]) == (holder.store.id, "because", WHO)
    assert line["requested_at"] == "2026-12-01T00:00:00Z" and line["applied_by"] == holder.applied_by
    assert line["applied_at"][:2] == "20" and line["applied_at"].endswith("Z")
    for key, value in more.items():
        assert line[key] == value, key


def test_every_audit_line_says_who_asked_who_applied_when_and_why(holder):
    """Marks, the backfill's end, cancel, pause, resume and reopen: each line carries every field."""
    apply(request("mark", indices=[2], to="failed", rows=3, asset=None), holder)
    apply(request("mark_backfill", to="failed"), holder)
    apply(request("mark", indices=[2], to="succeeded"), holder)  # reopens the ended backfill
    apply(request("cancel"), holder)
    apply(request("pause"), holder)
    apply(request("resume"), holder)
    found = lines(holder)
    interval = holder.spec.plan.interval(2)
    partition = holder.spec.ids.of(interval.start, interval.end)
    assert_line(found[0], holder, "MARK", "queued", "failed", partition_id=partition, target_count=3, asset=None)
    assert_line(found[1], holder, "MARK", "open", "failed", partition_id=None, previous_message=None)
    assert_line(found[2], holder, "MARK", "failed", "succeeded", partition_id=partition)
    assert_line(found[3], holder, "REOPEN", "failed", None, previous_message=found[3]["previous_message"])
    assert found[3]["previous_message"].startswith(f"marked failed by {WHO} at ")
    assert_line(found[4], holder, "CANCEL", "open", "cancelled", previous_message=None)
    assert_line(found[5], holder, "PAUSE", "open", "paused")
    assert_line(found[6], holder, "RESUME", "paused", "open")
    assert found[6]["previous_message"].startswith(f"paused by {WHO} at ")
    ended = read_control(holder.store.directory).ended
    assert (ended.status, ended.by, ended.reason) == ("cancelled", WHO, "because") and ended.at.endswith("Z")


def test_the_answers_carry_their_exit_code_and_what_changed(holder):
    """Every answer's exit code and count: applied is 0 with what changed (1 for the backfill itself),
    already so is 0 with nothing changed."""
    assert astuple(apply(request("mark", indices=[0], to="failed"), holder)) == (0, "marked 1 partition failed", 1)
    assert astuple(apply(request("mark", indices=[0], to="failed"), holder))[::2] == (0, 0)
    assert astuple(apply(request("mark", status_filter=["skipped"], to="failed"), holder))[::2] == (0, 0)
    assert astuple(apply(request("mark_backfill", to="succeeded"), holder))[::2] == (0, 1)
    assert astuple(apply(request("mark_backfill", to="queued"), holder))[::2] == (2, 0)
    assert astuple(apply(request("cancel"), holder))[::2] == (0, 1)
    assert astuple(apply(request("cancel"), holder))[::2] == (0, 0)
    assert astuple(apply(request("pause"), holder))[::2] == (0, 1)
    assert astuple(apply(request("pause"), holder))[::2] == (0, 0)
    assert astuple(apply(request("resume"), holder))[::2] == (0, 1)
    assert astuple(apply(request("resume"), holder))[::2] == (0, 0)
    holder.busy = frozenset({1})
    assert astuple(apply(request("pause"), holder)) == (
        0,
        f"backfill {holder.store.id} paused; 1 running child will finish",
        1,
    )


def astuple(result) -> tuple:
    return (result.exit_code, result.message, result.changed)


def test_a_mark_entry_is_complete_and_numbered_after_the_history(holder):
    """The entry: when (start = end = now), no duration, generation 0, no launcher; a second mark is m2; a
    partition already so in the middle of the selection is passed over, the others are marked."""
    apply(request("mark", indices=[4], to="failed"), holder)
    result = apply(request("mark", indices=[3, 4, 5], to="failed"), holder)
    assert result.changed == 2 and {record(holder, i)["status"] for i in (3, 5)} == {"failed"}
    apply(request("mark", indices=[4], to="succeeded"), holder)
    saved = record(holder, 4)
    first, second = saved["attempts"]
    assert second["run_id"] == f"{holder.store.id}-p4-m2"
    assert first["started_at"] == first["finished_at"] and first["started_at"].endswith("Z")
    assert (first["duration"], first["generation"], first["launcher"], first["exit_code"]) == (0.0, 0, "none", None)
    interval = holder.spec.plan.interval(4)
    assert (saved["start_us"], saved["end_us"]) == (interval.start, interval.end)
    assert saved["start"] == "2024-01-05T00:00:00Z"


def test_the_status_before_a_mark_is_the_record_s(holder):
    """What the audit says the partition was comes from its record, not from a board that may lag."""
    apply(request("mark", indices=[6], to="failed"), holder)
    holder.board.set(6, Status.QUEUED)
    apply(request("mark", indices=[6], to="succeeded"), holder)
    assert lines(holder)[-1]["from_status"] == "failed"


def test_a_bulk_mark_keeps_who_why_and_what_for_every_partition(holder):
    """A bulk mark read back: the entry's message, who, when, rows and asset, as a mark of one partition."""
    indices = list(range(DURABLE_ONE_BY_ONE + 2))
    apply(request("mark", indices=indices, to="succeeded", rows=5, asset="mart.x"), holder)
    plan, ids = holder.spec.plan, holder.spec.ids
    interval = plan.interval(9)
    read = holder.store.read_record(ids.of(interval.start, interval.end), plan, ids.of)
    [entry] = read.attempts
    assert (entry.kind, entry.status, entry.rows, entry.asset, entry.by) == ("mark", "succeeded", 5, "mart.x", WHO)
    assert entry.error == f"marked succeeded by {WHO}: because" and entry.started_at.endswith("Z")
    assert entry.run_id == f"{holder.store.id}-p9-m1"
    stems = {line["id"].rsplit("-", 1)[0] for line in lines(holder)}
    [bulk] = (holder.store.directory / "bulk-marks").iterdir()
    assert bulk.stem in stems or any(bulk.name.startswith(stem) for stem in stems)


def test_running_partitions_are_named_three_at_a_time(holder):
    """Three running: all named, no count; four: three and '1 more'."""
    plan, ids = holder.spec.plan, holder.spec.ids
    holder.busy = frozenset({0, 1, 2})
    three = apply(request("mark", indices=[0, 1, 2], to="failed"), holder)
    named = ", ".join(ids.of(plan.interval(i).start, plan.interval(i).end) for i in (0, 1, 2))
    assert three.message.startswith(f"partition {named} of backfill")
    holder.busy = frozenset({0, 1, 2, 3})
    four = apply(request("mark", indices=[0, 1, 2, 3], to="failed"), holder)
    shown = ", ".join(ids.of(plan.interval(i).start, plan.interval(i).end) for i in (0, 1, 2))
    assert four.message.startswith(f"partition {shown} and 1 more of backfill")


def test_a_command_holds_partitions_recorded_running_as_running(holder):
    """Without an executor, what the board says is running is: a mark of it is refused."""
    plain = CommandHolder(holder.store, holder.spec, holder.board, "test")
    holder.board.set(8, Status.RUNNING)
    assert plain.running() == frozenset({8})
    assert apply(request("mark", indices=[8], to="failed"), plain).exit_code == 3


def test_what_the_smaller_answers_and_lines_keep(holder):
    """A cancel of a marked backfill keeps the mark it replaced; decisions carry their time; an asset mark of a
    never-attempted partition leaves it queued, names the asset and numbers its lines; a reopen by --continue
    says who asked and who applied it; an unknown request is named."""
    apply(request("mark_backfill", to="failed"), holder)
    assert read_control(holder.store.directory).ended.at.endswith("Z")
    apply(request("cancel"), holder)
    assert lines(holder)[-1]["previous_message"].startswith(f"marked failed by {WHO} at ")
    write_control(holder.store.directory, Control())
    apply(request("pause"), holder)
    assert read_control(holder.store.directory).paused.at.endswith("Z")
    apply(request("resume"), holder)
    apply(request("mark", indices=[10, 11], to="succeeded", asset="mart.x"), holder)
    assert record(holder, 10)["status"] == "queued" and holder.board.status(10) is Status.QUEUED
    marks = lines(holder)[-2:]
    assert [line["asset"] for line in marks] == ["mart.x", "mart.x"]
    assert [line["id"].rsplit("-", 1)[1] for line in marks] == ["0", "1"]
    write_control(holder.store.directory, Control(ended=Decision("failed", WHO, "2026-12-01T00:00:00Z", "x")))
    reopen_for_continue(holder.store, "go on", "someone@else", "backfill --continue (PID 9)")
    reopen = lines(holder)[-1]
    assert (reopen["requested_by"], reopen["applied_by"]) == ("someone@else", "backfill --continue (PID 9)")
    assert reopen["requested_at"].endswith("Z") and reopen["action"] == "REOPEN"
    assert apply(request("unknown"), holder).message == "unknown request 'unknown'"


def test_rows_stated_later_are_added_to_a_success_marked_without_them(holder):
    """Succeeded without rows, then `--rows 12`: a second entry with the rows and a MARK from succeeded to
    succeeded with the previous count (none); other rows correct them; the same rows again change nothing."""
    apply(request("mark", indices=[4], to="succeeded"), holder)
    added = apply(request("mark", indices=[4], to="succeeded", rows=12), holder)
    assert (added.exit_code, added.message, added.changed) == (0, "marked 1 partition succeeded", 1)
    assert [a["rows"] for a in record(holder, 4)["attempts"]] == [None, 12]
    last = lines(holder)[-1]
    assert (last["from_status"], last["to_status"], last["target_count"], last["previous_count"]) == (
        "succeeded",
        "succeeded",
        12,
        None,
    )
    corrected = apply(request("mark", indices=[4], to="succeeded", rows=15), holder)
    assert corrected.changed == 1 and lines(holder)[-1]["previous_count"] == 12
    same = apply(request("mark", indices=[4], to="succeeded", rows=15), holder)
    assert same.changed == 0 and len(lines(holder)) == 3
    apply(request("mark", indices=[4], to="succeeded", rows=99, asset="mart.x"), holder)
    again = apply(request("mark", indices=[4], to="succeeded", rows=15), holder)
    assert again.changed == 0  # an asset's rows are not the partition's


def test_a_rerun_line_keeps_the_status_and_message_the_partition_had(holder, tmp_path):
    """An asset rerun of a partition marked failed: its RERUN line has from_status failed and the mark's message,
    like every other line; a partition never attempted has no message."""
    from engine.execute.backfill import load_backfill
    from engine.execute.guarding import record_asset_rerun

    apply(request("mark", indices=[2], to="failed", reason="bad load"), holder)
    loaded = load_backfill(holder.store.id, str(tmp_path / "states"), tmp_path)
    record_asset_rerun(holder.store, loaded, frozenset({2, 7}), "mart.x", "source resent")
    reruns = [x for x in lines(holder) if x["action"] == "RERUN"]
    assert [(x["from_status"], x["previous_message"], x["asset"]) for x in reruns] == [
        ("failed", f"marked failed by {WHO}: bad load", "mart.x"),
        ("queued", None, "mart.x"),
    ]


@dataclass
class LiveHolder(Holder):
    """A live executor's holder as apply sees it: children run, a parallelism to change, partitions to stop."""

    live: bool = True
    parallel: int = 2
    fail_next_write: bool = False

    def requested_parallel(self) -> int:
        return self.parallel

    def set_parallel(self, value: int) -> str:
        self.told.append(("set", value))
        self.parallel = value
        return f"{value} at once now"

    def stop_partitions(self, indices: list[int], message: str) -> None:
        self.told.append(("stop", indices, message))

    def before_write(self) -> None:
        if self.fail_next_write and self.told:
            raise OSError(28, "No space left on device")


@pytest.fixture
def live(holder: Holder) -> LiveHolder:
    return LiveHolder(holder.store, holder.spec, holder.board, "executor generation 1 (PID 9 on h)")


def test_set_changes_the_live_parallelism_saves_it_and_audits_from_and_to(live):
    """set --max-parallel 5 over 2: told to the executor, saved with who/why, one SET line 2 → 5; the same value
    again changes nothing and writes nothing."""
    result = apply(request("set", reason="idle warehouse", max_parallel=5), live)
    assert (result.exit_code, result.changed) == (0, 1)
    assert result.message == f"backfill {live.store.id}: --max-parallel 2 → 5; 5 at once now"
    assert live.told == [("set", 5)]
    setting = read_control(live.store.directory).max_parallel
    assert (setting.value, setting.by, setting.reason) == (5, WHO, "idle warehouse")
    [line] = lines(live)
    assert (line["action"], line["from_status"], line["to_status"], line["partition_id"]) == (
        "SET",
        "max-parallel 2",
        "max-parallel 5",
        None,
    )
    assert line["applied_by"] == "executor generation 1 (PID 9 on h)" and line["reason"] == "idle warehouse"
    same = apply(request("set", max_parallel=5), live)
    assert (same.exit_code, same.changed) == (0, 0)
    assert same.message == f"backfill {live.store.id} has --max-parallel 5 already: nothing changed"
    assert len(lines(live)) == 1 and live.told == [("set", 5)]


@pytest.mark.parametrize("value", [0, -1, 100_001, True, "4", 2.0, None])
def test_a_set_of_something_that_is_not_a_count_is_bad_input_and_changes_nothing(live, value):
    """Zero, negatives, the absurd, a boolean, text, a float, nothing: exit 2 naming the value; nothing told,
    saved or audited."""
    result = apply(request("set", max_parallel=value), live)
    assert result.exit_code == 2
    assert result.message == f"--max-parallel {value!r} is not allowed: give a whole number from 1 to 100,000"
    assert live.told == [] and read_control(live.store.directory).max_parallel is None and not lines(live)


def test_the_bounds_of_a_set_are_allowed(live):
    """1 and 100,000 are counts like any other."""
    assert apply(request("set", max_parallel=1), live).exit_code == 0
    assert apply(request("set", max_parallel=100_000), live).exit_code == 0
    assert live.told == [("set", 1), ("set", 100_000)]


def test_a_set_that_cannot_be_recorded_puts_the_parallelism_back(live):
    """The control file or the audit line cannot be written: the executor goes back to what it ran before, so
    nothing runs at a value nobody can see."""
    live.fail_next_write = True
    with pytest.raises(OSError):
        apply(request("set", max_parallel=7), live)
    assert live.told == [("set", 7), ("set", 2)] and live.parallel == 2
    assert not lines(live)


def test_a_set_with_no_executor_is_saved_for_the_next_continue(holder):
    """No executor: the value the next --continue starts from (the first invocation's, 1) is the one replaced."""
    result = apply(request("set", max_parallel=3), holder)
    assert result.message == (
        f"backfill {holder.store.id}: --max-parallel 1 → 3; nothing runs now: the next --continue starts from it"
    )
    assert read_control(holder.store.directory).max_parallel.value == 3
    assert apply(request("set", max_parallel=3), holder).changed == 0  # read back from control.json


def partition_id(holder: Holder, index: int) -> str:
    interval = holder.spec.plan.interval(index)
    return holder.spec.ids.of(interval.start, interval.end)


def test_a_stop_of_running_partitions_audits_each_and_tells_the_executor(live):
    """stop [4, 2] while 2 and 4 run: one CANCEL line per partition (running → cancelled), the executor told
    the indices in order with who and why; the answer counts them."""
    live.busy = frozenset({2, 4, 6})
    result = apply(request("stop", reason="corrupt source", indices=[4, 2, 4]), live)
    assert (result.exit_code, result.changed) == (0, 2)
    assert result.message == (
        f"2 partitions of backfill {live.store.id} stopping: recorded cancelled once it has exited; the rest goes "
        "on, and --continue runs it again"
    )
    assert live.told == [("stop", [2, 4], f"stopped 2 partitions by {WHO}: corrupt source")]
    assert [(x["action"], x["partition_id"], x["from_status"], x["to_status"]) for x in lines(live)] == [
        ("CANCEL", partition_id(live, 2), "running", "cancelled"),
        ("CANCEL", partition_id(live, 4), "running", "cancelled"),
    ]
    one = apply(request("stop", reason="r", indices=[6]), live)
    assert one.message.startswith(f"partition {partition_id(live, 6)[:12]} of backfill {live.store.id} stopping")
    assert live.told[-1] == ("stop", [6], f"stopped partition {partition_id(live, 6)[:12]} by {WHO}: r")


def test_a_stop_naming_any_partition_that_does_not_run_is_refused_whole(live):
    """One running, four not: exit 3 naming the first three that do not run with their status and how many more;
    nothing told, nothing audited."""
    live.busy = frozenset({0})
    result = apply(request("stop", indices=[0, 1, 2, 3, 4]), live)
    assert result.exit_code == 3
    named = ", ".join(f"{partition_id(live, i)[:12]} (queued)" for i in (1, 2, 3))
    assert result.message == (
        f"partition {named} and 1 more of backfill {live.store.id} is not running: only a running partition can be "
        "stopped (backfill mark changes one that is not): nothing was stopped"
    )
    assert live.told == [] and not lines(live)
    exactly_three = apply(request("stop", indices=[1, 2, 3]), live)
    assert " and 1 more" not in exactly_three.message and "(queued) of backfill" in exactly_three.message


def test_a_stop_without_a_live_executor_or_without_partitions_is_refused(holder, live):
    """No executor: refused (3), even for a partition still recorded running; no index at all: bad input (2)."""
    holder.busy = frozenset({1})
    idle = apply(request("stop", indices=[1]), holder)
    assert (idle.exit_code, idle.message) == (
        3,
        f"no executor runs backfill {holder.store.id}: no partition of it runs, nothing to stop (one still "
        "recorded running is settled by backfill reconcile or --continue)",
    )
    empty = apply(request("stop", indices=[]), live)
    assert (empty.exit_code, empty.message) == (2, "name the running partitions to stop (--ids)")
    assert apply(request("stop"), live).exit_code == 2
    assert not lines(holder)


def slices(holder: Holder) -> list[tuple]:
    """The audit's MARK lines as (first partition, last partition, count, from status, previous count)."""
    plan, ids = holder.spec.plan, holder.spec.ids
    number = {ids.of(plan.interval(i).start, plan.interval(i).end): i for i in range(len(plan))}
    return [
        (number[x["partition_id"]], number.get(x["last_partition_id"]), x["partitions"], x["from_status"],
         x["previous_count"])
        for x in lines(holder) if x["action"] == "MARK"
    ]  # fmt: skip


def count_reads(holder: Holder, monkeypatch) -> list[str]:
    read: list[str] = []
    real = type(holder.store).read_record
    monkeypatch.setattr(
        type(holder.store), "read_record", lambda self, pid, *a: (read.append(pid), real(self, pid, *a))[1]
    )
    return read


def test_a_bulk_mark_reads_no_record_and_audits_one_line_per_slice(holder, monkeypatch):
    """Partitions 10-19 and 50 failed, 30-34 succeeded (one by one, so with records); a mark of all 100 succeeded
    reads no record, leaves 30-34 alone, and audits six slices (numbered, one stem) of consecutive partitions that
    were in one status, 50 alone in its own; each
    mark entry is numbered after the partition's history, so every record read back ends with it."""
    apply(request("mark", indices=list(range(10, 20)), to="failed"), holder)
    apply(request("mark", indices=list(range(30, 35)), to="succeeded", rows=5), holder)
    apply(request("mark", indices=[50], to="failed"), holder)
    before = len(lines(holder))
    read = count_reads(holder, monkeypatch)
    result = apply(request("mark", indices=list(range(100)), to="succeeded"), holder)
    assert result.changed == 95 and read == []
    assert slices(holder)[before:] == [
        (0, 9, 10, "queued", None), (10, 19, 10, "failed", None), (20, 29, 10, "queued", None),
        (35, 49, 15, "queued", None), (50, 50, 1, "failed", None), (51, 99, 49, "queued", None),
    ]  # fmt: skip
    made = lines(holder)[before:]
    assert [line["id"].rsplit("-", 1)[1] for line in made] == ["0", "1", "2", "3", "4", "5"]
    assert len({line["id"].rsplit("-", 1)[0] for line in made}) == 1
    monkeypatch.undo()
    plan, ids = holder.spec.plan, holder.spec.ids
    for index, entries in ((0, 1), (15, 2), (32, 1), (99, 1)):
        interval = plan.interval(index)
        merged = holder.store.read_record(ids.of(interval.start, interval.end), plan, ids.of)
        assert len(merged.attempts) == entries and merged.status == "succeeded"
        assert merged.attempts[-1].run_id == f"{holder.store.id}-p{index}-m{entries}"


def test_a_bulk_mark_with_rows_reads_only_what_states_rows_and_slices_by_them(holder, monkeypatch):
    """Every partition succeeded already (30-34 with 5 rows): a mark of 0-69 with --rows 7 reads the records of
    those already succeeded (for the rows they stated) and nothing else, and its slices split where the previous
    count changes. The same mark again changes nothing; an asset's mark keeps the rows each partition stated."""
    apply(request("mark", indices=list(range(100)), to="succeeded"), holder)
    apply(request("mark", indices=list(range(30, 35)), to="succeeded", rows=5), holder)
    before = len(lines(holder))
    read = count_reads(holder, monkeypatch)
    result = apply(request("mark", indices=list(range(70)), to="succeeded", rows=7), holder)
    assert result.changed == 70 and len(read) == 70
    assert slices(holder)[before:] == [
        (0, 29, 30, "succeeded", None), (30, 34, 5, "succeeded", 5), (35, 69, 35, "succeeded", None)
    ]  # fmt: skip
    again = apply(request("mark", indices=list(range(70)), to="succeeded", rows=7), holder)
    assert again.changed == 0 and len(lines(holder)) == before + 3
    asset = apply(request("mark", indices=list(range(72)), to="succeeded", asset="mart.x"), holder)
    assert asset.changed == 72 and slices(holder)[-2:] == [(0, 69, 70, "succeeded", 7), (70, 71, 2, "succeeded", None)]
    assert {(line["asset"], line["target_count"]) for line in lines(holder)[-2:]} == {("mart.x", None)}
    assert {(line["asset"], line["target_count"]) for line in lines(holder)[before : before + 3]} == {(None, 7)}


def left_running(pid: int, started: float | None, birth: str | None, status=RecordStatus.RUNNING) -> PartitionRecord:
    """The record an executor that is gone left: partition 0, its one attempt naming the child ``pid``."""
    attempt = Attempt(
        run_id="r-p0-a1",
        status=status,
        started_at="2026-12-01T00:00:00Z",
        pid=pid,
        pid_started=started,
        pid_birth=birth,
    )
    return PartitionRecord(
        id="ab", index=0, start="s", end="e", start_us=0, end_us=1, status="running", attempts=[attempt]
    )


def test_a_command_s_cancel_stops_only_the_live_children_its_records_name(tmp_path):
    """With no live executor, cancel stops each child a record names while it still is that process (PID, start
    time and birth), and counts it; a record whose PID now names another process (reused), or whose attempt is
    not running, is left alone and not counted."""
    prepared = saved_command_backfill(tmp_path, end="2024-01-02")
    children = [subprocess.Popen(["sleep", "60"], start_new_session=True) for _ in range(3)]
    try:
        identities = [(child.pid, *process_identity(child.pid)) for child in children]
        ours, reused, finished = identities
        records = (
            left_running(*ours),
            left_running(reused[0], reused[1] - 5.0, "other-boot:1"),  # the PID of another, later process
            left_running(*finished, status=RecordStatus.SUCCEEDED),
        )
        holder = CommandHolder(prepared.store, prepared.spec, prepared.board, "test", left_running=records)
        assert holder.cancel("cancelled by me") == 1
        assert children[0].wait(timeout=30) < 0
        assert children[1].poll() is None and children[2].poll() is None
        nothing = replace(holder, left_running=())
        assert nothing.cancel("again") == 0
    finally:
        for child in children:
            child.kill()
            child.wait()


def test_a_command_s_cancel_finds_a_child_by_its_environment_and_settles_what_was_left_running(tmp_path):
    """An attempt left ``starting`` names no child: cancel finds it by ``BACKFILL_ID`` and stops it, then settles
    the record as an executor's cancel reads (``cancelled: by …``), the partition cancelled on the board too. While
    another child holds ``.children.lock``, nothing is settled; nor is an attempt that ran on Dask."""
    import os

    prepared = saved_command_backfill(tmp_path, end="2024-01-03")
    store = prepared.store
    interval = prepared.spec.plan.interval(0)

    partition_id = prepared.spec.ids.of(interval.start, interval.end)

    def read() -> PartitionRecord:
        return store.read_record(partition_id, prepared.spec.plan, prepared.spec.ids.of)

    def starting(run_id: str) -> PartitionRecord:
        attempt = Attempt(run_id=run_id, status=RecordStatus.STARTING, started_at="2026-12-01T00:00:00Z")
        record = PartitionRecord(id=partition_id, index=0, start="s", end="e", start_us=interval.start,
                                 end_us=interval.end, status="running", attempts=[attempt])  # fmt: skip
        store.write_record(record, durable=False)
        prepared.board.set(0, Status.RUNNING)
        return record

    holding = hold_lock(store.children_lock_path, env={})
    try:
        held = CommandHolder(store, prepared.spec, prepared.board, "test", left_running=(starting("r-held"),))
        result = apply(request("cancel", "runaway"), held)
        assert (result.exit_code, result.changed, result.message) == (1, 1, (
            f"backfill {store.id} cancelled, but a child of an earlier executor still runs and was not found (it holds "
            f".children.lock): find processes with BACKFILL_ID={store.id} in their environment and stop them"
        ))  # fmt: skip
        assert [a.status for a in read().attempts] == [RecordStatus.STARTING]
        # A live executor's own children hold the lock: its cancel is not failed for them.
        live = Holder(store, prepared.spec, prepared.board, "test", live=True, busy=frozenset({0}))
        assert apply(request("cancel", "again"), live).exit_code == 0
    finally:
        release(holding)
    environment = {**os.environ, "BACKFILL_ID": store.id, "BACKFILL_RUN_ID": "r-found"}
    child = subprocess.Popen(["sleep", "60"], env=environment, start_new_session=True)
    try:
        holder = CommandHolder(store, prepared.spec, prepared.board, "test", left_running=(starting("r-found"),))
        assert holder.cancel("cancelled by ops@host: runaway") == 1
        assert child.wait(timeout=30) == -15
        (attempt,) = read().attempts
        assert (attempt.status, attempt.error) == (RecordStatus.CANCELLED, "cancelled: by ops@host: runaway")
        assert read().status == "cancelled" and prepared.board.status(0) == Status.CANCELLED
    finally:
        child.kill()
        child.wait()
    # An attempt on a Dask worker is the takeover's to settle (its child may live on another machine); an earlier
    # Dask attempt that ended is not.
    on_dask = starting("r-dask")
    on_dask.attempts[0].launcher = "dask"
    store.write_record(on_dask, durable=False)
    dask_holder = CommandHolder(store, prepared.spec, prepared.board, "test", left_running=(on_dask,))
    assert apply(request("cancel", "again"), dask_holder).message == (
        f"backfill {store.id} cancelled; 1 partition ran on a Dask cluster, where its child may still run: stop it "
        f"there, or `backfill --continue {store.id}` stops it as it takes over"
    )
    assert [a.status for a in read().attempts] == [RecordStatus.STARTING]
    after_dask = starting("r-local")
    ended = Attempt(run_id="r-dask", status=RecordStatus.FAILED, started_at="2026-12-01T00:00:00Z", launcher="dask")
    after_dask.attempts.insert(0, ended)
    store.write_record(after_dask, durable=False)
    interval = prepared.spec.plan.interval(1)  # a second partition, behind the Dask one: settled all the same
    second_id = prepared.spec.ids.of(interval.start, interval.end)
    second = PartitionRecord(id=second_id, index=1, start="s", end="e", start_us=interval.start, end_us=interval.end,
                             status="running", attempts=[Attempt(run_id="r-two", status=RecordStatus.STARTING,
                                                                 started_at="2026-12-01T00:00:00Z")])  # fmt: skip
    store.write_record(second, durable=False)
    both = CommandHolder(store, prepared.spec, prepared.board, "test", left_running=(on_dask, second))
    both.cancel("cancelled by me")
    assert both.left_on_dask == 1
    settled = store.read_record(second_id, prepared.spec.plan, prepared.spec.ids.of).attempts
    unknown = "cancelled: by me; its executor had died while starting it: whether its child ran is unknown"
    assert [(a.status, a.error) for a in settled] == [(RecordStatus.LOST, unknown)]
    CommandHolder(store, prepared.spec, prepared.board, "test", left_running=(after_dask,)).cancel("cancelled by me")
    assert [a.status for a in read().attempts] == [RecordStatus.FAILED, RecordStatus.LOST]


def test_a_command_s_cancel_stops_the_child_a_split_partition_s_half_names(tmp_path):
    """A partition that split: its own record names no child, its running half does. The half's child (no
    ``BACKFILL_ID`` in its environment, so found by its record alone) is stopped, and the half is settled."""
    from engine.store.records import SplitChild

    prepared = saved_command_backfill(tmp_path, end="2024-01-02")
    store, interval = prepared.store, prepared.spec.plan.interval(0)
    partition_id = prepared.spec.ids.of(interval.start, interval.end)
    middle = (interval.start + interval.end) // 2
    halves = [SplitChild(f"{partition_id[:8]}-h{n}", "s", "e", start, end)
              for n, (start, end) in enumerate([(interval.start, middle), (middle, interval.end)])]  # fmt: skip
    parent = PartitionRecord(id=partition_id, index=0, start="s", end="e", start_us=interval.start,
                             end_us=interval.end, status="running", attempts=[], children=halves)  # fmt: skip
    store.write_record(parent, durable=False)
    child = subprocess.Popen(["sleep", "60"], start_new_session=True, env={})
    try:
        started, birth = process_identity(child.pid)
        attempt = Attempt(run_id="r-h0", status=RecordStatus.RUNNING, started_at="2026-12-01T00:00:00Z",
                          pid=child.pid, pid_started=started, pid_birth=birth)  # fmt: skip
        first = halves[0]
        half = PartitionRecord(id=first.id, index=0, start="s", end="e", start_us=first.start_us, end_us=first.end_us,
                               status="running", attempts=[attempt], parent=partition_id)  # fmt: skip
        store.write_record(half, durable=False)
        holder = CommandHolder(store, prepared.spec, prepared.board, "test", left_running=(parent,))
        assert holder.cancel("cancelled by ops@host: runaway") == 1
        assert child.wait(timeout=30) == -15
        settled = orjson.loads(store.half_path(halves[0].id).read_bytes())
        assert [a["status"] for a in settled["attempts"]] == ["cancelled"]
    finally:
        child.kill()
        child.wait()
