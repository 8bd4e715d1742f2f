"""manifest.json in-process: a saved backfill's manifest holds its inputs and gives back the same plan; every
field of the wrong type, missing or from another version is unreadable state naming the field, never a
traceback; the first invocation's controls come back with their defaults for older stores."""

from __future__ import annotations

import re

import orjson
import pytest

from engine.base.errors import StateUnreadable
from engine.spec.backfill_spec import ExecutionOptions
from engine.store.manifest import MANIFEST_FORMAT, initial_options, manifest_of, now_text, spec_of
from tests.saved_backfills import saved_command_backfill


@pytest.fixture
def saved(tmp_path):
    prepared = saved_command_backfill(tmp_path, end="2024-01-05")
    return prepared, orjson.loads((prepared.store.directory / "manifest.json").read_bytes())


def test_the_manifest_holds_the_inputs_and_gives_back_the_same_plan(saved):
    """Format, ID, instants as text and microseconds, zone, unit, count, the command and the first controls;
    spec_of rebuilds an equal spec."""
    prepared, manifest = saved
    spec = prepared.spec
    assert manifest["format"] == MANIFEST_FORMAT == 1 and manifest["id"] == prepared.store.id
    assert (manifest["start"], manifest["end"]) == ("2024-01-01T00:00:00.000000Z", "2024-01-06T00:00:00.000000Z")
    assert (manifest["start_us"], manifest["end_us"]) == (spec.start, spec.end)
    assert (manifest["timezone"], manifest["partition"], manifest["partition_count"]) == ("UTC", "daily", 5)
    assert manifest["command_template"] == "true" and manifest["environment"] is None
    assert manifest["run_options"] == spec.run_options.to_json() and manifest["variables"] == {}
    assert manifest["config_file"] is None and manifest["query_annotations"] is None
    assert manifest["initial_execution"] == prepared.options.to_json()
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", manifest["created_at"])
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", now_text())
    rebuilt = spec_of(manifest)
    assert rebuilt == spec and len(rebuilt.plan) == 5
    fresh = manifest_of(spec, backfill_id="x", working_directory="/w", options=ExecutionOptions(max_parallel=3))
    assert fresh["id"] == "x" and fresh["working_directory"] == "/w" and fresh["initial_execution"]["max_parallel"] == 3


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("target", "cmd", "target is 'cmd', not a dict"),
        ("timezone", 5, "timezone is 5, not a str"),
        ("partition", None, "partition is None, not a str"),
        ("run_options", [], "run_options is [], not a dict"),
        ("start_us", "1", "start_us is '1', not whole microseconds"),
        ("end_us", True, "end_us is True, not whole microseconds"),
        ("guardrails", [], "guardrails is [], not a dict"),
        ("reason", "", "reason is '', not a str"),
        ("working_directory", 3, "working_directory is 3, not a str"),
        ("timezone", "Mars/Base", "Mars/Base"),
        ("partition", "fortnightly", "fortnightly"),
        ("partition_count", 6, "plans 6 partitions but this version of backfill plans 5 from the same inputs"),
    ],
)
def test_a_damaged_field_is_unreadable_state_naming_it(saved, field, value, message):
    """Each field of the wrong type or value: StateUnreadable naming the backfill and the field."""
    prepared, manifest = saved
    manifest[field] = value
    with pytest.raises(StateUnreadable) as refused:
        spec_of(manifest)
    assert message in str(refused.value) and repr(prepared.store.id) in str(refused.value)


def test_a_missing_field_is_incomplete(saved):
    """A manifest without its environment (or a target missing its kind) is incomplete, naming what is missing."""
    _, manifest = saved
    del manifest["environment"]
    with pytest.raises(StateUnreadable, match="is incomplete: 'environment'"):
        spec_of(manifest)


def test_the_first_controls_come_back_with_defaults_for_older_stores(saved):
    """The saved controls as written; a store from before a control existed gets its default; none saved at all
    is every default."""
    prepared, manifest = saved
    assert initial_options(manifest) == prepared.options
    manifest["initial_execution"] = {}
    assert initial_options(manifest) == ExecutionOptions(
        max_parallel=1, workers=16, retries=0, on_failure="stop", reverse=False, timeout=None, launcher="exec"
    )
    del manifest["initial_execution"]
    assert initial_options(manifest).launcher == "exec"


@pytest.mark.parametrize(
    "saved_controls, message",
    [
        ([1], "initial_execution is not a mapping"),
        ({"max_parallel": "2"}, "initial_execution.max_parallel is '2', not a int"),
        ({"retries": True}, "initial_execution.retries is True, not a int"),
        ({"reverse": 1}, "initial_execution.reverse is 1, not a bool"),
        ({"on_failure": 3}, "initial_execution.on_failure is 3, not a str"),
        ({"launcher": None}, "initial_execution.launcher is None, not a str"),
        ({"timeout": "1h"}, "initial_execution.timeout is '1h', not a int"),
        ({"dask_scheduler": 7}, "initial_execution.dask_scheduler is 7, not a str"),
    ],
)
def test_damaged_controls_are_refused_before_anything_is_launched(saved, saved_controls, message):
    """A control of the wrong type is unreadable state naming it (timeout and dask_scheduler may be null)."""
    prepared, manifest = saved
    manifest["initial_execution"] = saved_controls
    with pytest.raises(StateUnreadable) as refused:
        initial_options(manifest)
    assert message in str(refused.value) and repr(prepared.store.id) in str(refused.value)


def test_older_manifests_without_a_count_and_saved_workers_are_read(saved):
    """A manifest from before partition_count was saved plans from its inputs alone; saved workers are the ones
    read back, not the default."""
    _, manifest = saved
    del manifest["partition_count"]
    assert len(spec_of(manifest).plan) == 5
    manifest["initial_execution"]["workers"] = 4
    assert initial_options(manifest).workers == 4
