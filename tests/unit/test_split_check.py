"""The guardrails judge splitting, and the executor splits only on what the policy names."""

from __future__ import annotations

import signal
from dataclasses import replace
from pathlib import Path

import duckdb
import pytest

from engine.dates.split import SplitUnit
from engine.execute.splitting import trigger_of
from engine.guardrails.preflight_checks import splitting
from engine.pipeline.columns import Column
from engine.spec.backfill_spec import ExecutionOptions
from engine.spec.split_policy import SplitPolicy, SplitTrigger, parse_split_on
from engine.store.split_tree import aggregate
from tests.unit.test_preflight_checks import fact, facts_of

HOUR = 3_600_000_000
SPLIT = ExecutionOptions(split_on=("timeout",), min_partition=HOUR)


def _date_keyed(name: str = "daily_sales"):
    keyed = fact(name)
    column = Column("day", "date", False, False, None, ())
    return replace(keyed, asset=replace(keyed.asset, columns=(column,)))


def outcome(check) -> tuple:
    return check.status, check.tier, check.detail


def test_without_split_on_the_check_does_not_apply():
    """No ``--split-on``: nothing to judge."""
    assert outcome(splitting(facts_of(command=True))) == (
        "n/a",
        "auto",
        "no --split-on: a failed partition is retried whole",
    )


def test_a_command_splits_down_to_the_minimum():
    """A command has no key: a day may split to the second, the minimum permitting; the evidence says so."""
    check = splitting(facts_of(command=True, options=SPLIT))
    assert outcome(check) == ("pass", "auto", "a failing partition splits on timeout, down to 1h")
    assert check.evidence["finest"] == "second"


def test_a_date_keyed_asset_cannot_split_a_day():
    """A daily partition of an asset keyed by a DATE column (declared) cannot split below a day: refused."""
    check = splitting(facts_of(_date_keyed(), options=SPLIT))
    assert outcome(check) == (
        "fail",
        "never",
        "--split-on: daily_sales's incremental key day is a DATE, so a daily partition cannot split below a day: "
        "drop --split-on, or partition weekly or coarser",
    )


def test_a_date_keyed_asset_splits_months_into_days_only():
    """A monthly partition of the same asset may split, never below a day: a warning, and the finest cut a day."""
    check = splitting(facts_of(_date_keyed(), unit="monthly", days=62, options=SPLIT))
    assert check.status == "warn" and check.tier == "auto"
    assert "never below a day: daily_sales's incremental key day is a DATE" in check.detail
    assert check.evidence["finest"] == "day"


def test_a_date_key_is_found_in_the_warehouse_too(tmp_path: Path):
    """Without declared columns, the key's type is read from the table in the DuckDB file."""
    path = tmp_path / "w.duckdb"
    with duckdb.connect(str(path)) as db:
        db.execute("CREATE TABLE daily_sales (day DATE, amount INT)")
    keyed = fact("daily_sales")
    keyed = replace(keyed, connection=replace(keyed.connection, path=path))
    assert splitting(facts_of(keyed, options=SPLIT)).tier == "never"
    with duckdb.connect(str(path)) as db:
        db.execute("DROP TABLE daily_sales")
        db.execute("CREATE TABLE daily_sales (day TIMESTAMP, amount INT)")
    assert splitting(facts_of(keyed, options=SPLIT)).status == "pass"


def test_an_asset_that_ignores_the_interval_does_not_limit_splitting():
    """A DATE-keyed asset that does not use the interval is rebuilt whole anyway: it does not stop a split."""
    ignoring = replace(_date_keyed(), uses_interval=False)
    assert splitting(facts_of(ignoring, options=SPLIT)).status == "pass"


def test_a_minimum_longer_than_half_a_partition_is_refused():
    """``--min-partition 13h`` over days: no half can be that long."""
    check = splitting(facts_of(command=True, options=replace(SPLIT, min_partition=13 * HOUR)))
    assert check.tier == "never" and "cannot split into halves of at least --min-partition 13h" in check.detail


POLICY = SplitPolicy(frozenset({SplitTrigger.TIMEOUT, SplitTrigger.OOM}), None, HOUR)


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ({"timed_out": True}, SplitTrigger.TIMEOUT),
        ({"exit_code": -signal.SIGKILL}, SplitTrigger.OOM),  # the kernel's OOM killer: a SIGKILL we did not send
        ({"error": "MemoryError"}, SplitTrigger.OOM),
        ({"error": "terminate called after throwing an instance of 'std::bad_alloc'"}, SplitTrigger.OOM),
        ({"error": "exit 1: Cannot allocate memory"}, SplitTrigger.OOM),
        ({"exit_code": -signal.SIGKILL, "stopped": True}, None),  # our own SIGKILL (a cancel's grace ran out)
        ({"error": "MemoryError", "stopped": True}, None),  # stopped by an operator: never split
        ({"error": "syntax error"}, None),
        ({"exit_code": 1, "error": "doom"}, None),  # "oom" inside a word is not memory
    ],
)
def test_only_what_the_policy_names_splits(case, expected):
    """A failure splits only for a trigger the policy names; a child we stopped for another reason never does."""
    found = trigger_of(
        POLICY,
        timed_out=case.get("timed_out", False),
        stopped=case.get("stopped", case.get("timed_out", False)),
        exit_code=case.get("exit_code", 1),
        error=case.get("error"),
    )
    assert found == expected


def test_a_pattern_splits_and_a_timeout_outside_the_policy_does_not():
    """``--split-on REGEX`` alone: a matching reason splits; a timeout does not."""
    words, pattern = parse_split_on("too many (rows|columns),? for")
    policy = SplitPolicy(frozenset({SplitTrigger.PATTERN}), pattern, HOUR)
    assert words == () and pattern == "too many (rows|columns),? for"
    assert trigger_of(policy, timed_out=False, stopped=False, exit_code=4, error="too many rows for 24 h") is (
        SplitTrigger.PATTERN
    )
    assert trigger_of(policy, timed_out=True, stopped=True, exit_code=-2, error="timed out after 2s") is None
    assert trigger_of(policy, timed_out=False, stopped=False, exit_code=1, error="MemoryError") is None


def test_split_on_words_then_an_expression_with_commas():
    """Known words first; from the first other item on, commas included, it is one expression."""
    assert parse_split_on("timeout,oom") == (("timeout", "oom"), None)
    assert parse_split_on("oom,x{1,3}") == (("oom",), "x{1,3}")
    assert parse_split_on("none") == ((), None)
    assert parse_split_on("oom,[,]x[,]") == (("oom",), "[,]x[,]")
    assert parse_split_on("timeout, oom") == (("timeout", "oom"), None)


def test_a_split_node_adds_up_its_leaves():
    """Running, then failed, cancelled, queued win over success; all skipped is skipped."""
    assert aggregate(["succeeded", "running", "failed"]) == "running"
    assert aggregate(["succeeded", "failed", "cancelled"]) == "failed"
    assert aggregate(["succeeded", "cancelled", "queued"]) == "cancelled"
    assert aggregate(["succeeded", "queued"]) == "queued"
    assert aggregate(["skipped", "skipped"]) == "skipped"
    assert aggregate(["skipped", "succeeded"]) == "succeeded"


def test_the_finest_cut_reaches_the_executor():
    """What the check found is what the executor's policy uses."""
    assert SPLIT.split_policy(SplitUnit.DAY).finest is SplitUnit.DAY
    assert ExecutionOptions().split_policy() is None
