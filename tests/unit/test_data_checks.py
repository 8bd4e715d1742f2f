"""The pre-flight's checks of what a run does to data, over facts built by hand (issue 22): each strategy's
finding in the materialization check, the hooks, a date key under partitions shorter than a day, the way back
(the snapshot and its cost) and the raw layer — every status, tier, line and piece of evidence."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from zoneinfo import ZoneInfo

import orjson
import pytest

from engine.guardrails.asset_risk import rebuilds_table
from engine.guardrails.data_checks import (
    layer_risk,
    listed,
    materialization,
    reversibility,
    size_text,
    snapshot_cost,
)
from engine.guardrails.facts import AssetFacts, Facts
from engine.guardrails.history import History, PastRun
from engine.guardrails.request import GuardOptions
from engine.guardrails.table_snapshot import SNAPSHOT_INDEX
from engine.guardrails.tiers import PreflightCheck
from engine.pipeline.assets import Asset, Materialization
from engine.pipeline.columns import Column
from engine.pipeline.config import Connection

DAY = 86_400_000_000
HOUR = 3_600_000_000
DAILY = SimpleNamespace(name="daily", is_calendar=True, step=DAY)


def fact(name: str, strategy: str = "time_interval", *, key: str | None = "day", granularity: str | None = None,
         selected: bool = True, uses_interval: bool = True, layer: str = "mid", table_rows=None, rows_in_range=None,
         sample_outside=None, hooks=None, read_only: bool = False, kind: str = "duckdb.sql") -> AssetFacts:  # fmt: skip
    type_ = "view" if strategy == "view" else "table"
    materialization = Materialization(type_, None if strategy == "view" else strategy, key, granularity)
    asset = Asset(name, kind, Path("t.sql"), "t.sql", 1, materialization=materialization, body="SELECT 1")
    connection = Connection("duckdb", "db", Path("/w.duckdb"), read_only, None)
    return AssetFacts(asset=asset, selected=selected, strategy=strategy, uses_interval=uses_interval, layer=layer,
                      layer_source="schema", connection=connection, table_rows=table_rows,
                      rows_in_range=rows_in_range, sample_outside=sample_outside, run_sql=hooks or {})  # fmt: skip


def facts_of(*assets: AssetFacts, partitions: int = 5, unit=DAILY, first_start: int = 0, command: bool = False,
             guard: GuardOptions | None = None, history: History | None = None, backfills=(),
             database_bytes=None) -> Facts:  # fmt: skip
    from engine.dates.plan import Interval

    target = SimpleNamespace(is_command=command, template="load {start}")
    spec = SimpleNamespace(target=target, zone=ZoneInfo("UTC"), unit=unit)
    request = SimpleNamespace(spec=spec, selected_count=partitions, guard=guard or GuardOptions())
    first = Interval(0, first_start, first_start + unit.step)
    return Facts(request, None, (first_start, first_start + partitions * unit.step), first,
                 assets={a.asset.name: a for a in assets}, history=history or History(), backfills=list(backfills),
                 database_bytes=database_bytes or {})  # fmt: skip


def judged(check: PreflightCheck) -> tuple[str, str, str]:
    """The check's status, tier and line, after asserting it reports under its own name."""
    assert check.name in ("materialization", "reversibility", "layer_risk")
    return str(check.status), str(check.tier), check.detail


# ---------------------------------------------------------------- materialization


def test_a_command_s_effect_on_data_is_not_judged():
    """A command: n/a for materialization and the raw layer."""
    assert judged(materialization(facts_of(command=True))) == (
        "n/a", "auto", "a command's effect on data is not known to backfill",
    )  # fmt: skip
    assert judged(layer_risk(facts_of(command=True))) == ("n/a", "auto", "a command's tables are not known to backfill")


def test_safe_strategies_pass_naming_each_once_with_every_asset_in_the_evidence():
    """Two time_interval assets and a view, one downstream: passed, the strategies named once and sorted; the
    evidence lists every asset (downstream too) with its strategy and whether it is selected."""
    facts = facts_of(fact("mid.a"), fact("mid.b"), fact("mid.v", "view", key=None), fact("mid.down", selected=False))
    check = materialization(facts)
    assert judged(check) == ("pass", "auto", "strategies safe per partition: time_interval, view")
    assert check.evidence == {
        "assets": {
            "mid.a": {"strategy": "time_interval", "selected": True},
            "mid.b": {"strategy": "time_interval", "selected": True},
            "mid.v": {"strategy": "view", "selected": True},
            "mid.down": {"strategy": "time_interval", "selected": False},
        },
        "partitions": 5,
        "findings": [],
    }


def test_a_table_rebuilt_by_each_partition_warns_how_many_times():
    """create+replace that ignores the interval: warned, rebuilt once per partition; over one partition:
    nothing to say."""
    facts = facts_of(fact("mid.r", "create+replace", key=None, uses_interval=False))
    check = materialization(facts)
    assert judged(check) == (
        "warn", "auto", "mid.r rebuilt 5 times (they ignore the interval): run once or select out",
    )  # fmt: skip
    assert check.evidence["findings"] == ["mid.r rebuilt 5 times (they ignore the interval): run once or select out"]
    single = materialization(facts_of(fact("mid.r", "create+replace", key=None, uses_interval=False), partitions=1))
    assert judged(single) == ("pass", "auto", "strategies safe per partition: create+replace")


def test_the_highest_tier_wins_and_only_its_findings_are_said():
    """A query that lies about its window (never) beside an append over rows in the range (approval): never,
    saying only the never finding; the evidence keeps every finding and the counts behind them."""
    liar = fact("mid.liar", sample_outside=1234)
    appender = fact("mid.app", "append", rows_in_range=40, table_rows=90)
    check = materialization(facts_of(liar, appender))
    lie = "mid.liar: the query returns 1,234 rows outside the partition's window; time_interval would duplicate them"
    assert judged(check) == ("fail", "never", lie)
    assert check.evidence["findings"] == [lie, "mid.app (append) would duplicate 40 rows already in the range"]
    assert check.evidence["assets"]["mid.liar"] == {
        "strategy": "time_interval", "selected": True, "sample_rows_outside_window": 1234,
    }  # fmt: skip
    assert check.evidence["assets"]["mid.app"] == {"strategy": "append", "selected": True, "rows_in_range": 40}
    two = materialization(
        facts_of(fact("mid.a1", "append", rows_in_range=1), fact("mid.a2", "append", rows_in_range=2))
    )
    assert judged(two) == (
        "fail", "approval",
        "mid.a1 (append) would duplicate 1 rows already in the range; mid.a2 (append) would duplicate 2 rows "
        "already in the range",
    )  # fmt: skip


def test_a_query_without_columns_of_its_table_is_never_run():
    """The table's columns the first partition's query no longer returns: the run would refuse them rather than
    write NULL, so the backfill is refused up front, every column named, with the list in the evidence; an asset
    not selected raises nothing."""
    lost = fact("mid.lost")
    lost.sample_missing = ["amount", "note"]
    check = materialization(facts_of(lost))
    assert judged(check) == (
        "fail", "never",
        "mid.lost (time_interval): the first partition's query returns no columns amount, note of the table; every "
        "run would fail rather than write NULL there (return it from the query, or drop it from the table)",
    )  # fmt: skip
    assert check.evidence["assets"]["mid.lost"]["sample_missing_columns"] == ["amount", "note"]
    lost.selected = False
    assert judged(materialization(facts_of(lost, fact("mid.a"))))[0] == "pass"
    one = fact("mid.one")
    one.sample_missing = ["amount"]
    assert judged(materialization(facts_of(one)))[2].startswith(
        "mid.one (time_interval): the first partition's query returns no column amount of the table; "
    )


def test_a_materialized_query_followed_by_more_statements_is_never_run():
    """The first partition's query followed by more statements: every run would refuse it, so the backfill is
    refused up front, naming how many and the first, with every one in the evidence; not selected, nothing."""
    trailing = fact("mid.view", "view")
    trailing.after_query = ["DELETE FROM raw.landing", "SELECT 2"]
    check = materialization(facts_of(trailing))
    assert judged(check) == (
        "fail", "never",
        "mid.view (view): the first partition's query is followed by 2 more statements ('DELETE FROM raw.landing'); "
        "a materialized asset runs one query, so every run would fail (move them into a hook, or set "
        "materialization to none)",
    )  # fmt: skip
    assert check.evidence["assets"]["mid.view"]["statements_after_query"] == ["DELETE FROM raw.landing", "SELECT 2"]
    trailing.after_query = ["SELECT 2"]
    assert "is followed by 1 more statement ('SELECT 2');" in judged(materialization(facts_of(trailing)))[2]
    trailing.after_query = ["DELETE FROM raw.landing WHERE " + "x" * 100]  # shown cut at 80 characters
    assert f"statement ('DELETE FROM raw.landing WHERE {'x' * 50}');" in judged(materialization(facts_of(trailing)))[2]
    trailing.selected = False
    assert judged(materialization(facts_of(trailing, fact("mid.a"))))[0] == "pass"


def test_a_merge_whose_sample_repeats_a_key_needs_approval():
    """A merge's first partition repeating its primary key: approval, naming the key's columns and the count,
    which the evidence keeps; none repeated: nothing said."""
    merged = fact("mart.m", "merge", key=None)
    merged.asset = replace(merged.asset, columns=(Column("day", "date", True, False, None, (), None),
                                                  Column("shop", "int", True, False, None, (), None)))  # fmt: skip
    merged.sample_repeated_keys = 1234
    check = materialization(facts_of(merged, partitions=1))
    assert judged(check) == (
        "fail", "approval",
        "mart.m (merge): the first partition's query returns 1,234 rows that share their primary key (day, shop) "
        "with another; the merge would insert each of a new key (repeating it in the table) and update a row from "
        "any one of them",
    )  # fmt: skip
    assert check.evidence["assets"]["mart.m"]["sample_rows_repeating_a_key"] == 1234
    merged.sample_repeated_keys = 0
    assert judged(materialization(facts_of(merged, partitions=1)))[0] == "pass"


def test_a_finding_on_an_asset_not_selected_is_not_made():
    """Downstream assets are not run by the selection: their strategy and samples raise nothing."""
    facts = facts_of(fact("mid.a"), fact("mid.liar", sample_outside=9, selected=False),
                     fact("mid.app", "append", rows_in_range=4, selected=False))  # fmt: skip
    assert judged(materialization(facts))[0] == "pass"


@pytest.mark.parametrize(
    ("unit", "first_start", "finding"),
    [
        (DAILY, 0, False),  # calendar days: whole days
        (SimpleNamespace(name="48h", is_calendar=False, step=2 * DAY), 0, False),  # from midnight: whole days
        (SimpleNamespace(name="48h", is_calendar=False, step=2 * DAY), HOUR, True),  # from 01:00: not
        (SimpleNamespace(name="6h", is_calendar=False, step=6 * HOUR), 0, True),
    ],
)
def test_a_date_key_under_partitions_of_part_days_is_never(unit, first_start, finding):
    """time_granularity: date with partitions that are not whole local days: each partition would replace
    whole days, deleting what the other partitions of its day wrote."""
    keyed = fact("mid.d", key="day", granularity="date")
    check = materialization(facts_of(keyed, unit=unit, first_start=first_start))
    if finding:
        assert judged(check) == (
            "fail", "never",
            f"mid.d: {unit.name} partitions over a date key (time_granularity: date): each partition would replace "
            "whole days, deleting the rows the other partitions of its day wrote",
        )  # fmt: skip
    else:
        assert judged(check)[0] == "pass"
    timestamp_keyed = fact("mid.t", key="ts", granularity="timestamp")
    assert judged(materialization(facts_of(timestamp_keyed, unit=unit, first_start=first_start)))[0] == "pass"
    appended = fact("mid.a", "append", key="day", granularity="date")
    assert judged(materialization(facts_of(appended, unit=unit, first_start=first_start)))[0] == "pass"


def test_hooks_that_delete_raw_data_are_never_and_unclassified_ones_human_only():
    """A pre hook deleting from a raw table: never; a post hook that cannot be classified: human-only; a hook
    deleting from a mid table or reading a raw one: nothing."""
    hooks = {"pre": ["DELETE FROM raw.events WHERE d < '2024-01-01'", "DELETE FROM mid.x", "SELECT * FROM raw.y"],
             "post": ["VACUUM ANALYZE weird stuff"]}  # fmt: skip
    check = materialization(facts_of(fact("mid.h", hooks=hooks)))
    deleting = "mid.h: a pre hook runs DELETE on raw.events, a raw table: source data is never deleted or rebuilt"
    assert judged(check) == ("fail", "never", deleting)
    assert check.evidence["findings"][1].startswith("mid.h: a post hook runs SQL that cannot be classified: 'VACUUM")
    unclassified = materialization(facts_of(fact("mid.h", hooks={"post": ["VACUUM ANALYZE weird stuff"]})))
    assert judged(unclassified)[:2] == ("fail", "human-only")
    unqualified = materialization(facts_of(fact("mid.h", hooks={"pre": ["DELETE FROM events"]})))
    assert judged(unqualified)[0] == "pass"
    named_raw = materialization(facts_of(fact("mid.h", hooks={"pre": ["DELETE FROM raw"]})))
    assert judged(named_raw)[0] == "pass"  # a table called raw, in no schema: not the raw layer


@pytest.mark.parametrize(
    ("strategy", "key", "why"),
    [
        ("merge", None, "merge without incremental_key"),
        ("scd2_by_column", None, "scd2_by_column"),
        ("datavault_satellite", None, "datavault_satellite"),
        ("ddl", None, "ddl"),
        ("delete+insert", "day", None),  # fenced: a change outside the window is rolled back
        ("time_interval", "day", None),
        ("create+replace", None, None),  # rebuilt whole by every run anyway
        ("truncate+insert", None, None),
        ("view", None, None),
    ],
)
def test_a_hook_rewriting_its_own_unfenced_table_needs_a_person(strategy, key, why):
    """A hook that deletes or rewrites the asset's own table (named in any case) is human-only where no window
    fence would roll back what it changes outside the partition; fenced, rebuilt or a view: nothing."""
    hooks = {"post": ["UPDATE MID.H SET n = 0 WHERE day < '2024-01-01'"]}
    check = materialization(facts_of(fact("Mid.h", strategy, key=key, hooks=hooks), partitions=1))
    if why is None:
        assert judged(check)[0] in ("pass", "warn"), check.detail
        return
    assert judged(check)[:2] == ("fail", "human-only")
    assert check.evidence["findings"][-1] == (
        f"Mid.h: a post hook runs UPDATE on mid.h, its own table, which no window fences ({why}): what it removes "
        "is not bounded to the partition"
    )


def test_a_hook_rewriting_its_own_table_by_a_name_without_the_catalog_is_still_its_own():
    """``warehouse.mid.h`` (merge, unfenced) whose hook deletes from ``mid.h``: the same table, human-only (it was
    taken for another table, and the pre-flight passed a hook emptying the asset's own table)."""
    hooks = {"post": ["DELETE FROM mid.h WHERE true"]}
    check = materialization(facts_of(fact("warehouse.mid.h", "merge", key=None, hooks=hooks), partitions=1))
    assert judged(check)[:2] == ("fail", "human-only"), check.detail
    assert any("its own table, which no window fences" in f for f in check.evidence["findings"]), check.evidence


# ---------------------------------------------------------------- reversibility and the snapshot's cost


def past(status: str) -> PastRun:
    return PastRun("r", status, 0, 1.0, None, "b1", 0, DAY, {})


def test_a_command_is_reversible_only_when_the_operator_says_so_and_it_has_worked():
    """A command: human-only without --reversible; with it but never succeeded: human-only (untried); with a
    success: passed, stated by the operator."""
    plain = facts_of(command=True)
    assert judged(reversibility(plain)) == (
        "fail", "human-only", "no restore path known for a command: pass --reversible only if you can undo it",
    )  # fmt: skip
    stated = GuardOptions(reversible=True)
    untried = reversibility(facts_of(command=True, guard=stated, history=History(runs=[past("failed")])))
    assert judged(untried) == (
        "fail", "human-only",
        "--reversible, but this command has never succeeded here, so how to undo it is untried: run one partition "
        "first",
    )  # fmt: skip
    assert untried.evidence == {"stated_by": "operator"}
    tried = reversibility(
        facts_of(command=True, guard=stated, history=History(runs=[past("failed"), past("succeeded")]))
    )
    assert judged(tried) == ("pass", "auto", "stated reversible by the operator (--reversible)")
    assert tried.evidence == {"stated_by": "operator"}


def test_views_and_read_only_connections_need_no_way_back_and_no_snapshot_is_human_only():
    """Nothing selected changes data (a view, a read-only connection, a downstream table): passed; a table
    without a snapshot: human-only, naming the tables."""
    nothing = facts_of(fact("mid.v", "view", key=None), fact("mid.ro", read_only=True), fact("mid.d", selected=False))
    assert judged(reversibility(nothing)) == ("pass", "auto", "nothing selected changes data (views and DDL only)")
    no_snapshot = facts_of(fact("mid.b"), fact("mid.a"), fact("mid.v", "view", key=None),
                           guard=GuardOptions(snapshot=False))  # fmt: skip
    assert judged(reversibility(no_snapshot)) == (
        "fail",
        "human-only",
        "--no-snapshot: no restore path for mid.a, mid.b",
    )


def test_the_snapshot_s_cost_is_the_rows_it_copies_and_their_share_of_the_files():
    """time_interval copies the rows in range, other strategies the whole table; views, read-only, downstream
    and tables not yet made copy nothing; bytes are the copied rows' share of every table's rows."""
    assets = (
        fact("mid.t", table_rows=1000, rows_in_range=100),
        fact("mid.w", "create+replace", key=None, table_rows=300, rows_in_range=7),
        fact("mid.n", table_rows=None),
        fact("mid.ro", table_rows=50, read_only=True),
        fact("mid.down", table_rows=650, selected=False),
        fact("mid.none", "time_interval", table_rows=20, rows_in_range=None),
    )
    facts = facts_of(*assets, database_bytes={"/a.duckdb": 1_500_000, "/b.duckdb": 500_000})
    cost = snapshot_cost(facts)
    assert cost == {
        "rows": 100 + 300 + 20,
        "bytes": int(2_000_000 * 420 / (1000 + 300 + 50 + 650 + 20)),
        "seconds": 0.0,
        "rows_per_second": 2_000_000,
        "rate_from": "the default (no snapshot timed yet)",
    }
    check = reversibility(facts)
    assert judged(check) == (
        "pass", "auto",
        f"a snapshot of 4 tables is taken before the first partition (~420 rows, ~{size_text(cost['bytes'])}, "
        "~under 1 s)",
    )  # fmt: skip
    assert check.evidence == cost
    assert snapshot_cost(facts_of(fact("mid.n", table_rows=None)))["bytes"] == 0  # no table anywhere


def test_the_rate_comes_from_the_latest_timed_snapshots(tmp_path):
    """Earlier backfills' snapshots that copied 10,000 rows or more set the rate (their median); the time shown
    is the rows over it; one table is singular."""
    backfills = []
    for name, rows, seconds in (("b3", 100_000, 4.0), ("b2", 30_000, 2.0), ("b1", 500, 0.001)):
        directory = tmp_path / name
        directory.mkdir()
        (directory / SNAPSHOT_INDEX).write_bytes(orjson.dumps({"rows": rows, "seconds": seconds}))
        backfills.append(SimpleNamespace(directory=directory))
    facts = facts_of(fact("mid.big", "create+replace", key=None, table_rows=400_000), backfills=backfills)
    cost = snapshot_cost(facts)
    assert (cost["rows_per_second"], cost["seconds"]) == (20_000, 20.0)
    assert cost["rate_from"] == "the latest snapshots in this state root"
    assert judged(reversibility(facts))[2] == (
        f"a snapshot of 1 table is taken before the first partition (~400,000 rows, ~{size_text(cost['bytes'])}, ~20 s)"
    )


@pytest.mark.parametrize(
    ("value", "shown"),
    [(0, "0 B"), (1023, "1023 B"), (1024, "1.0 KiB"), (1536 * 1024, "1.5 MiB"), (3 * 1024**3, "3.0 GiB"),
     (5000 * 1024**3, "5000.0 GiB")],
)  # fmt: skip
def test_sizes_are_shown_in_the_largest_unit_under_1024(value, shown):
    """Bytes in B, KiB, MiB or GiB (never more), one decimal past bytes."""
    assert size_text(value) == shown


def test_long_lists_of_names_are_cut_at_eight():
    """Names sorted; past eight, the rest counted."""
    assert listed(["b", "a"]) == "a, b"
    names = [f"n{i}" for i in range(10)]
    assert listed(reversed(names)) == "n0, n1, n2, n3, n4, n5, n6, n7 and 2 more"
    assert listed(names[:8]) == "n0, n1, n2, n3, n4, n5, n6, n7"
    assert listed(names[:9]) == "n0, n1, n2, n3, n4, n5, n6, n7 and 1 more"


# ---------------------------------------------------------------- the raw layer


def test_the_raw_layer_is_never_deleted_and_appending_to_it_needs_approval():
    """A raw asset with a deleting strategy: never; a raw append: approval; raw views and mid tables: passed;
    the evidence names every selected asset's layer and where it came from."""
    deleting = facts_of(fact("raw.a", layer="raw"), fact("raw.b", "append", layer="raw"), fact("mid.c"))
    check = layer_risk(deleting)
    assert judged(check) == (
        "fail", "never", "raw.a: raw layer with a delete-style strategy (source data is never deleted or rebuilt)",
    )  # fmt: skip
    assert check.evidence == {"layers": {name: {"layer": layer, "from": "schema"} for name, layer in (
        ("raw.a", "raw"), ("raw.b", "raw"), ("mid.c", "mid"))}}  # fmt: skip
    appending = layer_risk(facts_of(fact("raw.b", "append", layer="raw"), fact("raw.v", "view", key=None, layer="raw")))
    assert judged(appending) == ("fail", "approval", "raw.b: appends to the raw layer")
    assert appending.evidence == {"layers": {"raw.b": {"layer": "raw", "from": "schema"},
                                             "raw.v": {"layer": "raw", "from": "schema"}}}  # fmt: skip
    fine = layer_risk(
        facts_of(fact("raw.v", "view", key=None, layer="raw"), fact("raw.x", layer="raw", selected=False))
    )
    assert judged(fine) == ("pass", "auto", "no raw asset is deleted or rebuilt")
    assert fine.evidence == {"layers": {"raw.v": {"layer": "raw", "from": "schema"}}}


@pytest.mark.parametrize(("seconds", "shown"), [(0.0, "under 1 s"), (0.99, "under 1 s"), (1.0, "1 s"), (12.6, "13 s")])
def test_the_snapshot_s_time_is_whole_seconds_or_under_one(seconds, shown):
    """Under a second is said so; from one second on, whole seconds."""
    from engine.guardrails.data_checks import _seconds

    assert _seconds(seconds) == shown


# ---------------------------------------------------------------- strategies at their edges


def test_an_asset_refreshed_every_run_is_judged_by_its_strategy_when_it_is_a_view_or_sql_as_written():
    """parameters.full_refresh on a view or on SQL run as written rebuilds no table: the view passes, the SQL
    as written is human-only for what it is (SQL or a script), never for a rebuild."""
    view = fact("mid.v", "view", key=None)
    view.asset.always_full_refresh = True
    assert judged(materialization(facts_of(view))) == ("pass", "auto", "strategies safe per partition: view")
    written = fact("mid.w", "none", key=None)
    written.asset.always_full_refresh = True
    assert judged(materialization(facts_of(written))) == (
        "fail", "human-only", "mid.w runs its SQL as written: its effect on data cannot be judged",
    )  # fmt: skip
    script = fact("mid.s", "none", key=None, kind="python")
    assert judged(materialization(facts_of(script))) == (
        "fail", "human-only", "mid.s runs its script as written: its effect on data cannot be judged",
    )  # fmt: skip
    # Nor do the pre-flight's facts take either for a table rebuilt whole (its snapshot's scope, its checks).
    assert not rebuilds_table(view.asset, "view") and not rebuilds_table(written.asset, "none")


def test_an_append_names_the_rows_it_would_duplicate_or_the_rows_it_cannot_place():
    """Rows the sample finds already in the table: approval with their count; rows and no incremental_key:
    human-only with the table's count; a key and no rows in the range: nothing; an empty table: nothing."""
    existing = fact("mid.a", "append", key="loaded_on")
    existing.sample_existing = 1200
    assert judged(materialization(facts_of(existing))) == (
        "fail", "approval",
        "mid.a (append): the first partition's query returns 1,200 rows the table already holds; appending would "
        "duplicate them",
    )  # fmt: skip
    unkeyed = fact("mid.a", "append", key=None, table_rows=12_345)
    assert judged(materialization(facts_of(unkeyed))) == (
        "fail", "human-only",
        "mid.a (append) has 12,345 rows and no incremental_key: cannot tell which are in the range",
    )  # fmt: skip
    assert judged(materialization(facts_of(fact("mid.a", "append", key=None, table_rows=0))))[0] == "pass"
    assert judged(materialization(facts_of(fact("mid.a", "append", key="day", table_rows=50))))[0] == "pass"


def test_history_strategies_close_keys_only_over_two_partitions_or_more():
    """scd2_by_time over one partition: fine; over two: never, with its reason; a satellite over one partition
    says nothing, over two it asks for time order."""
    scd2 = fact("mid.h", "scd2_by_time")
    assert judged(materialization(facts_of(scd2, partitions=1)))[0] == "pass"
    assert judged(materialization(facts_of(scd2, partitions=2))) == (
        "fail", "never",
        "mid.h (scd2_by_time) treats each run's rows as the whole source: every partition would close the history "
        "of the keys outside its slice",
    )  # fmt: skip
    satellite = fact("mid.s", "datavault_satellite", key=None)
    assert judged(materialization(facts_of(satellite, partitions=1)))[0] == "pass"
    assert judged(materialization(facts_of(satellite, partitions=2))) == (
        "warn", "auto",
        "mid.s (datavault_satellite) compares each row with the latest one loaded: run the partitions in time order "
        "(--max-parallel 1) or some unchanged rows are loaded again",
    )  # fmt: skip


def test_a_date_key_under_delete_insert_is_judged_as_under_time_interval():
    """delete+insert deletes whole days for a date key too: under 6-hour partitions, never."""
    six_hours = SimpleNamespace(name="6h", is_calendar=False, step=6 * HOUR)
    keyed = fact("mid.d", "delete+insert", key="day", granularity="date")
    assert judged(materialization(facts_of(keyed, unit=six_hours)))[:2] == ("fail", "never")


def test_whole_days_are_local_days_of_the_backfill_s_zone():
    """48-hour partitions from local midnight in Asia/Kolkata (18:30 UTC) are whole days there; from UTC
    midnight they are not."""
    from engine.dates.plan import Interval

    two_days = SimpleNamespace(name="48h", is_calendar=False, step=2 * DAY)
    keyed = fact("mid.d", key="day", granularity="date")
    local_midnight = 18 * HOUR + 30 * 60_000_000
    facts = facts_of(keyed, unit=two_days, first_start=local_midnight)
    facts.request.spec.zone = ZoneInfo("Asia/Kolkata")
    assert judged(materialization(facts))[0] == "pass"
    facts.first = Interval(0, 0, 2 * DAY)
    assert judged(materialization(facts))[:2] == ("fail", "never")


def test_delete_insert_snapshots_only_the_rows_in_its_range_and_the_time_keeps_one_decimal(tmp_path):
    """delete+insert, like time_interval, copies the rows in range; the time is rounded to a tenth of a
    second."""
    directory = tmp_path / "b1"
    directory.mkdir()
    (directory / SNAPSHOT_INDEX).write_bytes(orjson.dumps({"rows": 30_000, "seconds": 1.0}))
    partial = fact("mid.d", "delete+insert", table_rows=90_000, rows_in_range=7_000)
    cost = snapshot_cost(facts_of(partial, backfills=[SimpleNamespace(directory=directory)]))
    assert (cost["rows"], cost["rows_per_second"], cost["seconds"]) == (7_000, 30_000, 0.2)


def test_a_run_that_puts_back_fewer_than_verify_low_of_the_rows_it_deletes_needs_approval():
    """Per strategy, what the first partition's run deletes against what its query returns: below ``verify_low``
    (0.4 here) of them, approval naming both counts and what is deleted, with both in the evidence; exactly at the
    floor, or nothing deleted, or no sample, no finding."""

    def judge(strategy: str, replaced, sample, partitions: int = 1, key: str | None = "day"):
        return judge_asset(fact("mid.t", strategy, key=key, table_rows=500), replaced, sample, partitions)

    def judge_asset(asset: AssetFacts, replaced, sample, partitions: int = 1):
        asset.replaced_rows, asset.sample_rows = replaced, sample
        facts = facts_of(asset, partitions=partitions)
        facts.settings = SimpleNamespace(limits=SimpleNamespace(verify_low=0.4))
        return materialization(facts)

    check = judge("time_interval", 10, 3)
    assert judged(check) == ("fail", "approval", "mid.t (time_interval): the first partition's query returns 3 rows "
                             "where its run deletes 10 (the rows in its window) — fewer than 40% of them")  # fmt: skip
    entry = check.evidence["assets"]["mid.t"]
    assert (entry["rows_replaced"], entry["sample_rows"]) == (10, 3)
    assert judged(judge("delete+insert", 1_000, 0))[2] == (
        "mid.t (delete+insert): the first partition's query returns 0 rows where its run deletes 1,000 (the rows of "
        "the day values it returns) — fewer than 40% of them"
    )
    assert judged(judge("truncate+insert", 10, 3, key=None))[2] == (
        "mid.t (truncate+insert): the first partition's query returns 3 rows where its run deletes 10 (the whole "
        "table) — fewer than 40% of them"
    )
    asset = fact("mid.t", "time_interval", table_rows=500)
    asset.asset.always_full_refresh = True  # parameters.full_refresh: every run rebuilds it whole
    assert judged(judge_asset(asset, 500, 10))[2] == (
        "mid.t (time_interval, parameters.full_refresh): the first partition's query returns 10 rows where its run "
        "deletes 500 (the whole table) — fewer than 40% of them"
    )
    seed = fact("ref.codes", "create+replace", key=None, table_rows=5, kind="duckdb.seed")
    assert judged(judge_asset(seed, 5, 0))[2] == (
        "ref.codes (create+replace): its seed file holds 0 rows where its run deletes 5 (the whole table) — fewer "
        "than 40% of them"
    )
    for replaced, sample in ((10, 4), (0, 0), (None, 0), (10, None)):
        check = judge("time_interval", replaced, sample)
        assert str(check.tier) == "auto" and "rows_replaced" not in check.evidence["assets"]["mid.t"], (
            replaced,
            sample,
        )
