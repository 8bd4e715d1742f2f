"""The invocation path as a front end other than the command line uses it (the browser's rerun form hands its
own ExecutionOptions to judge_resume): what the flags' parser would refuse is refused here too."""

from __future__ import annotations

from dataclasses import replace

import pytest

from engine.base.errors import BadInput
from engine.base.settings import Settings
from engine.execute.backfill import create_backfill, load_backfill, state_root_for
from engine.execute.invocation import judge_resume
from engine.execute.rerun import PartitionSelection
from engine.pipeline.options import RunOptions
from engine.spec.backfill_spec import ExecutionOptions
from engine.spec.planning import plan_request
from engine.store.locks import FileLock
from tests.saved_backfills import saved_command_backfill


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"max_parallel": 0}, "--max-parallel 0 is not allowed: use 1 or more"),
        ({"retries": -1}, "--retries -1 is not allowed: use 0 or more"),
        ({"launcher": "nope"}, "--launcher 'nope' is not a launcher"),
        ({"on_failure": "explode"}, "--on-failure 'explode' is not a policy"),
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
    from tests.builder import Repo

    repo = Repo(tmp_path / "repo")
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
    loaded = load_backfill(prepared.store.id, "states", repo.root)
    selection = PartitionSelection(indices=frozenset({0}))
    with pytest.raises(BadInput) as refused:
        judge_resume(loaded, ExecutionOptions(), selection, reason="r", settings=Settings(), can_ask=True,
                     rerun_asset=AssetRerun("s.nope"))  # fmt: skip
    assert str(refused.value) == "--asset 's.nope' is not an asset of this pipeline: give one of s.t"
    assert FileLock(prepared.store.lock_path).try_acquire()
