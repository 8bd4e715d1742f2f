"""The invocation path as a front end other than the command line uses it (the browser's rerun form hands its
own ExecutionOptions to judge_resume): what the flags' parser would refuse is refused here too."""

from __future__ import annotations

import os
import shutil
from dataclasses import replace
from pathlib import Path

import orjson
import pytest

from engine.base.errors import BadInput
from engine.base.settings import Settings
from engine.base.who import requester
from engine.dates.split import SplitUnit
from engine.execute.backfill import create_backfill, load_backfill, state_root_for
from engine.execute.invocation import Invocation, judge_new, judge_resume
from engine.execute.rerun import PartitionSelection
from engine.guardrails.preflight import NeedsApproval
from engine.guardrails.request import GuardOptions
from engine.pipeline.options import RunOptions
from engine.spec.backfill_spec import ExecutionOptions
from engine.spec.planning import plan_request
from engine.store import audit
from engine.store.control import Control, Decision, read_control, write_control
from engine.store.live_work import read_live
from engine.store.locks import FileLock
from engine.store.records import Attempt, PartitionRecord, RecordStatus
from tests.saved_backfills import saved_command_backfill


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"max_parallel": 0}, "--max-parallel 0 is not allowed: use 1 or more"),
        ({"retries": -1}, "--retries -1 is not allowed: use 0 or more"),
        ({"launcher": "nope"}, "--launcher 'nope' is not a launcher"),
        ({"on_failure": "explode"}, "--on-failure 'explode' is not a policy"),
        ({"launcher": "dask", "dask_scheduler": "localhost"}, "--dask-scheduler 'localhost' is not a Dask sched"),
    ],
)
def test_controls_a_form_could_send_are_checked_before_the_takeover(tmp_path, changes, message):
    """Impossible controls from any front end: BadInput, and the backfill is not taken over (its lock free)."""
    prepared = saved_command_backfill(tmp_path, end="2024-01-03")
    loaded = load_backfill(prepared.store.id, "states", tmp_path)
    with pytest.raises(BadInput, match=message):
        judge_resume(loaded, replace(ExecutionOptions(), **changes), PartitionSelection(), reason="r",
                     settings=Settings(), can_ask=True)  # fmt: skip
    lock = FileLock(prepared.store.lock_path)
    assert lock.try_acquire()  # nothing holds it
    lock.release()


def test_an_asset_rerun_must_name_an_asset_of_the_validated_pipeline(tmp_path):
    """--asset of a name the pipeline lacks is refused before the takeover, naming the assets there are."""
    from engine.execute.rerun import AssetRerun

    loaded = saved_pipeline_backfill(tmp_path / "repo")
    selection = PartitionSelection(indices=frozenset({0}))
    with pytest.raises(BadInput) as refused:
        judge_resume(loaded, ExecutionOptions(), selection, reason="r", settings=Settings(), can_ask=True,
                     rerun_asset=AssetRerun("s.nope"))  # fmt: skip
    assert str(refused.value) == "--asset 's.nope' is not an asset of this pipeline: give one of s.t"
    assert FileLock(loaded.store.lock_path).try_acquire()


def saved_pipeline_backfill(root: Path):
    """A backfill of a one-asset pipeline (``s.t``, an append) over three days, saved, nothing run: loaded."""
    from tests.builder import Repo

    repo = Repo(root)
    repo.sql("s.t", "SELECT DATE '{{ start_date }}' AS day", materialization={"type": "table", "strategy": "append"})
    planned = plan_request(
        target=str(repo.pipeline_dir), command=None, name=None, start="2024-01-01", end="2024-01-03",
        timezone="UTC", partition="daily", environment=None, config_file=None, run_options=RunOptions(),
        options=ExecutionOptions(), force=False, cwd=repo.root,
    )  # fmt: skip
    prepared = create_backfill(
        planned, root=state_root_for(planned.spec, "states", repo.root), cwd=repo.root, settings=Settings()
    )
    prepared.release()
    return load_backfill(prepared.store.id, "states", repo.root)


def planned_command(cwd: Path, end: str = "2024-01-03"):
    return plan_request(
        target=None, command="true {start}", name=None, start="2024-01-01", end=end, timezone="UTC",
        partition="daily", environment=None, config_file=None, run_options=RunOptions(),
        options=ExecutionOptions(), force=False, cwd=cwd,
    )  # fmt: skip


@pytest.fixture
def here(tmp_path: Path, monkeypatch) -> Path:
    """A working directory, with this user's state (the live-work registry) and cache (remembered digests) in it."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path


def judged(cwd: Path, level: str, reason: str | None, *, can_ask: bool = False, **dry_run: bool) -> Invocation:
    return judge_new(planned_command(cwd), GuardOptions(level=level), reason=reason, state_dir="states", cwd=cwd,
                     settings=Settings(), can_ask=can_ask, **dry_run)  # fmt: skip


def invocations(store_directory: Path) -> list[dict]:
    return orjson.loads((store_directory / "guardrails.json").read_bytes())["invocations"]


def saved_backfills(cwd: Path) -> list[Path]:
    root = cwd / "states"
    return sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []


def test_an_auto_verdict_with_a_reason_runs_and_is_recorded(here):
    """sandbox: verdict auto, nobody needs asking; started, the backfill is saved with its reason, held (its lock
    taken), and the invocation recorded in guardrails.json with how it was approved."""
    invocation = judged(here, "sandbox", "first load")
    assert invocation.preflight.verdict == "auto" and not invocation.needs_a_person(None)
    approval = invocation.approve(approve=None)
    prepared = invocation.start(approval)
    try:
        assert not FileLock(prepared.store.lock_path).try_acquire()
        [entry] = invocations(prepared.store.directory)
        assert (entry["mode"], entry["reason"], entry["approval"]["how"]) == ("trigger", "first load", "auto")
        assert prepared.reason == "first load" and prepared.hooks is not None
        assert invocation.request.reason == "first load" and entry["approval"]["at"]
        assert orjson.loads((prepared.store.directory / "manifest.json").read_bytes())["reason"] == "first load"
    finally:
        prepared.release()


def test_a_missing_reason_is_asked_for_or_refused_and_nothing_is_saved(here):
    """No reason where nobody can be asked: refused before anything is judged or saved (a dry run needs none).
    Where a person can be asked, one must be: approving without a reason is refused and gives the backfill up;
    a reason given there is the one it runs with, in its request too."""
    with pytest.raises(BadInput) as refused:
        judged(here, "sandbox", None)
    assert str(refused.value) == (
        "--reason is required to run a backfill: say why it runs, e.g. --reason 'schema fix for view_count' (a "
        "--dry-run needs none)"
    )
    assert judged(here, "sandbox", None, dry_run=True).preflight is not None
    asking = judged(here, "sandbox", None, can_ask=True)
    assert asking.needs_a_person(None)
    with pytest.raises(BadInput, match="^--reason is required to run a backfill"):
        asking.approve(approve=None)
    assert saved_backfills(here) == []
    asked = judged(here, "sandbox", None, can_ask=True)
    approval = asked.approve(approve=None, reason="typed at the screen")
    assert (asked.reason, asked.request.reason, approval.reason) == ("typed at the screen",) * 3
    prepared = asked.start(approval)
    assert invocations(prepared.store.directory)[0]["reason"] == "typed at the screen"
    prepared.release()


def test_a_human_only_verdict_is_not_run_on_a_digest_and_is_run_when_typed(here):
    """standard: a command's effect cannot be undone (human-only). ``--approve`` with the whole digest is not
    enough: NeedsApproval, nothing saved, and the digest's parts remembered so a later run can say what changed.
    Typed at a terminal, it runs, recorded as typed."""
    invocation = judged(here, "standard", "r")
    digest = invocation.preflight.digest
    assert invocation.needs_a_person(digest)
    with pytest.raises(NeedsApproval, match=r"^human-only \(plan "):
        invocation.approve(approve=digest)
    assert saved_backfills(here) == []
    assert list((here / "cache").rglob("*")), "the digest's parts were not remembered"
    typed = judged(here, "standard", "r")
    approval = typed.approve(approve=None, typed=True)
    prepared = typed.start(approval)
    assert invocations(prepared.store.directory)[0]["approval"]["how"] == "typed at the terminal"
    prepared.release()


def test_an_approval_verdict_needs_the_digest_s_prefix(here):
    """A verdict of approval needs a person unless ``--approve`` gives a prefix of its digest (in any case)."""
    invocation = judged(here, "sandbox", "r")
    invocation.preflight.verdict = "approval"
    digest = invocation.preflight.digest
    assert invocation.needs_a_person(None) and invocation.needs_a_person("0" * 8)
    assert not invocation.needs_a_person(digest[:8].upper())
    invocation.abandon()


def started_and_released(cwd: Path, reason: str | None = "first load") -> str:
    """A backfill saved through the invocation path (sandbox), given up again before running: its ID."""
    invocation = judged(cwd, "sandbox", reason)
    prepared = invocation.start(invocation.approve(approve=None))
    prepared.release()
    return prepared.store.id


def resumed(cwd: Path, backfill_id: str, reason: str | None, selection=None, *, can_ask: bool = False,
            **kwargs) -> Invocation:  # fmt: skip
    loaded = load_backfill(backfill_id, "states", cwd)
    return judge_resume(loaded, ExecutionOptions(), selection or PartitionSelection(), reason=reason,
                        settings=Settings(), can_ask=can_ask, **kwargs)  # fmt: skip


def test_a_continue_runs_with_the_backfill_s_own_reason_unless_it_reruns_what_succeeded(here):
    """``--continue`` of what did not run yet runs with the saved reason, taken over and judged; running a
    succeeded partition again needs a reason of its own, refused before the takeover where nobody can be asked."""
    backfill_id = started_and_released(here)
    invocation = resumed(here, backfill_id, None)
    assert invocation.reason == "first load" and invocation.preflight is not None
    assert not FileLock(invocation.prepared.store.lock_path).try_acquire()
    invocation.abandon()
    assert lock_is_free(here, backfill_id)
    mark_succeeded(load_backfill(backfill_id, "states", here), 0)
    again = PartitionSelection(indices=frozenset({0}))
    with pytest.raises(BadInput) as refused:
        resumed(here, backfill_id, None, again)
    assert str(refused.value) == (
        f"--reason is required to run succeeded partitions of backfill {backfill_id} again: say why (the backfill's "
        "own reason covered its first run)"
    )
    own = resumed(here, backfill_id, "rerun the first day", again)
    assert own.reason == "rerun the first day"
    assert (own.prepared.selection, own.prepared.reason) == (again, "rerun the first day")  # as taken over
    own.abandon()


def lock_is_free(cwd: Path, backfill_id: str) -> bool:
    lock = FileLock(load_backfill(backfill_id, "states", cwd).store.lock_path)
    free = lock.try_acquire()
    lock.release()
    return free


def mark_succeeded(loaded, index: int) -> None:
    """Partition ``index`` of a saved backfill recorded as succeeded, as a run of it would leave it."""
    interval = loaded.spec.plan.interval(index)
    attempt = Attempt(run_id="r0", status=RecordStatus.SUCCEEDED, started_at="2024-01-01T00:00:00Z", exit_code=0)
    record = PartitionRecord(loaded.spec.ids.of(interval.start, interval.end), index, "", "", interval.start,
                             interval.end, "succeeded", [attempt])  # fmt: skip
    loaded.store.write_record(record, durable=False)


def test_a_backfill_paused_or_ended_by_an_operator_is_held_or_needs_a_reason(here):
    """An operator's pause holds a resume (nothing held, nothing judged); an operator's end lets it go on only
    with a reason of its own."""
    backfill_id = started_and_released(here)
    directory = load_backfill(backfill_id, "states", here).store.directory
    write_control(directory, Control(paused=Decision("paused", "ops@host", "2024-01-01T00:00:00Z", "hold on")))
    paused = resumed(here, backfill_id, None)
    assert paused.paused is not None and paused.paused.reason == "hold on" and paused.preflight is None
    assert lock_is_free(here, backfill_id)
    write_control(directory, Control(ended=Decision("cancelled", "ops@host", "2024-01-01T00:00:00Z", "enough")))
    with pytest.raises(BadInput, match=f"^backfill {backfill_id} was .*; --continue needs its own --reason to go on"):
        resumed(here, backfill_id, None)
    going_on = resumed(here, backfill_id, "it is needed after all")
    assert going_on.paused is None and going_on.preflight is not None
    going_on.abandon()


def test_a_dry_run_of_a_continue_judges_what_it_would_run_and_takes_nothing_over(here):
    """``--continue --dry-run``: the invocation says what it would run — the saved backfill, its working directory,
    the selection, the reason — and is judged, but nothing is taken over; with nothing left to run, nothing is
    judged, and nobody needs asking."""
    backfill_id = started_and_released(here)
    settings = Settings()
    loaded = load_backfill(backfill_id, "states", here)
    selection = PartitionSelection()
    dry = judge_resume(loaded, ExecutionOptions(), selection, reason="look first", settings=settings, can_ask=False,
                       dry_run=True)  # fmt: skip
    assert (dry.mode, dry.loaded, dry.selection, dry.settings, dry.cwd) == ("rerun", loaded, selection, settings, here)
    assert len(dry.planned.spec.plan) == 3 and dry.prepared is None and not dry.whole_partitions
    assert dry.request.reason == "look first" and dry.preflight is not None
    assert lock_is_free(here, backfill_id)
    for index in (0, 1):
        mark_succeeded(load_backfill(backfill_id, "states", here), index)
    assert resumed(here, backfill_id, None, dry_run=True).preflight is not None  # one partition left: judged
    mark_succeeded(load_backfill(backfill_id, "states", here), 2)
    done = resumed(here, backfill_id, None, dry_run=True)
    assert done.preflight is None and done.request is None and not done.needs_a_person(None)
    taken = resumed(here, backfill_id, None)  # not a dry run: taken over, and still nothing judged
    assert taken.preflight is None and taken.approve(approve=None) is None
    taken.abandon()


def test_a_continue_s_reason(here):
    """The reason a ``--continue`` runs with: one given, else the backfill's own, unless it reruns what succeeded
    (then a person is asked for one where one can be, and it is refused where nobody can)."""
    backfill_id = started_and_released(here)
    given = resumed(here, backfill_id, "the source was re-sent", dry_run=True)
    assert given.reason == "the source was re-sent"
    mark_succeeded(load_backfill(backfill_id, "states", here), 0)
    again = PartitionSelection(indices=frozenset({0}))
    asking = resumed(here, backfill_id, None, again, can_ask=True, dry_run=True)
    assert asking.reason is None and asking.needs_a_person(None)


def test_a_backfill_saved_without_a_reason_needs_one_to_go_on(here):
    """A backfill saved before guardrails (no reason in its manifest): a ``--continue`` without one is refused
    where nobody can be asked, naming the backfill; with one, it runs with it."""
    from tests.saved_backfills import saved_command_backfill

    backfill_id = saved_command_backfill(here, end="2024-01-03").store.id
    with pytest.raises(BadInput) as refused:
        resumed(here, backfill_id, None)
    assert str(refused.value) == (
        f"--reason is required: backfill {backfill_id} was saved without one (before guardrails); say why it runs"
    )
    assert lock_is_free(here, backfill_id)
    assert resumed(here, backfill_id, "now with a reason", dry_run=True).reason == "now with a reason"


def test_a_backfill_whose_working_directory_is_gone_is_not_taken_over(here):
    """Its children run where it was started: that directory moved or deleted, the resume is refused before the
    takeover, naming it and the way on."""
    work = here / "work"
    work.mkdir()
    backfill_id = started_and_released(work)
    work.rename(here / "moved")
    store = here / "moved" / "states"
    loaded = load_backfill(backfill_id, str(store), here)
    with pytest.raises(BadInput) as refused:
        judge_resume(loaded, ExecutionOptions(), PartitionSelection(), reason="r", settings=Settings(), can_ask=False)
    assert str(refused.value) == (
        f"backfill {backfill_id} runs its children in {str(work)!r}, which is no longer a directory (moved, renamed "
        "or deleted): a backfill runs where it was started; put the directory back there, or start a new backfill "
        "from where it is now"
    )
    lock = FileLock(loaded.store.lock_path)
    assert lock.try_acquire()
    lock.release()


def test_the_finest_split_is_what_the_splitting_check_allows():
    """A DATE-keyed asset limits a split to whole days (the check's evidence); without the check, or without a
    finest cut in it, any cut down to a second."""
    from types import SimpleNamespace

    from engine.dates.split import SplitUnit
    from engine.execute.invocation import split_finest

    def judged_with(*checks):
        return SimpleNamespace(checks=[SimpleNamespace(name=n, evidence=e) for n, e in checks])

    assert split_finest(judged_with(("range_size", {"finest": "day"}), ("splitting", {"finest": "day"}))) is (
        SplitUnit.DAY
    )
    assert split_finest(judged_with(("splitting", {"finest": "hour"}))) is SplitUnit.HOUR
    assert split_finest(judged_with(("splitting", {}))) is SplitUnit.SECOND
    assert split_finest(judged_with(("range_size", {"finest": "day"}))) is SplitUnit.SECOND


def test_a_started_backfill_is_in_the_live_work_registry_under_its_own_id_and_stays_held(here):
    """Started: the live-work entry names the new backfill and is what its children will hold; the manifest keeps
    the guardrail choices; the invocation, started, no longer gives anything up when abandoned (the front end
    runs it now)."""
    invocation = judged(here, "sandbox", "r")
    prepared = invocation.start(invocation.approve(approve=None))
    try:
        [entry] = read_live(here / "state" / "backfill" / "live")
        assert entry.backfill_id == prepared.store.id and entry.pid == os.getpid()
        assert prepared.takeover.live is not None and prepared.takeover.live.fd in prepared.takeover.inherited_fds()
        manifest = orjson.loads((prepared.store.directory / "manifest.json").read_bytes())
        assert manifest["guardrails"]["options"]["level"] == "sandbox"
        invocation.abandon()
        assert not FileLock(prepared.store.lock_path).try_acquire()  # still held: started, not given up
    finally:
        prepared.release()
    assert read_live(here / "state" / "backfill" / "live") == []


def test_a_start_that_fails_leaves_the_registry_and_saves_nothing(here):
    """The state root turned into a file after the pre-flight: the backfill cannot be saved; the live-work entry
    joined for it is left again, and the error is the one raised."""
    invocation = judged(here, "sandbox", "r")
    shutil.rmtree(here / "states", ignore_errors=True)
    (here / "states").write_text("not a directory")
    approval = invocation.approve(approve=None)
    with pytest.raises(BadInput, match="is not a writable directory"):
        invocation.start(approval)
    assert read_live(here / "state" / "backfill" / "live") == []


def test_a_continue_with_its_own_reason_reopens_a_cancelled_backfill_once_it_starts(here):
    """A backfill cancelled by an operator, resumed with a reason of its own: the REOPEN line is written when the
    resume starts (not when it is judged), saying who asked, which process applied it and why; a resume of a
    backfill nobody ended writes none. Its settings reach the prepared backfill: whole partitions, the finest
    split, the guardrails' hooks."""
    backfill_id = started_and_released(here)
    directory = load_backfill(backfill_id, "states", here).store.directory
    write_control(directory, Control(ended=Decision("cancelled", "ops@host", "2024-01-01T00:00:00Z", "enough")))
    going_on = resumed(here, backfill_id, "needed after all", whole_partitions=True)
    assert audit.read(directory).entries == []
    prepared = going_on.start(going_on.approve(approve=None))
    try:
        [line] = audit.read(directory).entries
        assert (line["action"], line["reason"], line["applied_by"]) == (
            "REOPEN", "needed after all", f"backfill --continue (PID {os.getpid()})"
        )  # fmt: skip
        assert line["requested_by"] == requester()
        assert read_control(directory).ended is None
        assert (prepared.whole_partitions, prepared.split_finest) == (True, SplitUnit.SECOND)
        assert prepared.hooks is not None and prepared.reason == "needed after all"
        [entry] = read_live(here / "state" / "backfill" / "live")
        assert entry.backfill_id == backfill_id
        [_, second] = invocations(directory)
        assert (second["mode"], second["reason"]) == ("rerun", "needed after all")
    finally:
        prepared.release()
    again = resumed(here, backfill_id, None)
    again.start(again.approve(approve=None)).release()
    assert [line["action"] for line in audit.read(directory).entries] == ["REOPEN"]


def test_an_asset_rerun_is_recorded_per_partition_when_it_starts(here):
    """``--continue --asset s.t`` over the first day: when it starts, one RERUN line for that partition names the
    asset, its status then, the reason and who asked; the prepared backfill runs that asset again."""
    from engine.execute.rerun import AssetRerun

    loaded = saved_pipeline_backfill(here / "repo")
    invocation = judge_resume(loaded, ExecutionOptions(), PartitionSelection(indices=frozenset({0})),
                              reason="the fix for day one", settings=Settings(), can_ask=False,
                              rerun_asset=AssetRerun("s.t"))  # fmt: skip
    prepared = invocation.start(invocation.approve(approve=None, typed=True))
    try:
        ignoring, line = audit.read(prepared.store.directory).entries  # an asset rerun does not wait for upstream
        assert ignoring["action"] == "IGNORE_DEPENDENCIES"
        assert (line["action"], line["asset"], line["from_status"], line["reason"], line["requested_by"]) == (
            "RERUN", "s.t", "queued", "the fix for day one", requester()
        )  # fmt: skip
        assert line["partition_id"] == loaded.spec.ids.of(*_bounds(loaded, 0))
        assert prepared.rerun_asset is not None and prepared.rerun_asset.name == "s.t"
    finally:
        prepared.release()


def _bounds(loaded, index: int) -> tuple[int, int]:
    interval = loaded.spec.plan.interval(index)
    return interval.start, interval.end


def test_an_asset_rerun_of_a_command_backfill_means_nothing(here):
    """``--asset`` with a command's backfill: one line, before the takeover."""
    from engine.execute.rerun import AssetRerun

    backfill_id = started_and_released(here)
    with pytest.raises(BadInput) as refused:
        resumed(here, backfill_id, "r", PartitionSelection(indices=frozenset({0})), rerun_asset=AssetRerun("x"))
    assert str(refused.value) == (
        "--asset means nothing for a --command backfill (pipeline partitions only): leave it out"
    )
    assert lock_is_free(here, backfill_id)
