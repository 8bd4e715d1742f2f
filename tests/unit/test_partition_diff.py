"""``backfill diff``'s reading in-process, over a real snapshot of a real DuckDB warehouse (engine/guardrails/
partition_diff.py): each partition's window of each windowed table the snapshot holds, by key or as multisets, a
table new since the snapshot all added; one table by name; and a refusal, naming what would do, for a table that
is not windowed, a backfill with no snapshot, a command, or a warehouse another process writes."""

from __future__ import annotations

import shutil
import subprocess
import sys

import orjson
import pytest

from engine.base.errors import BadInput
from engine.execute.backfill import state_root_for
from engine.execute.guarding import request_for_new
from engine.guardrails.partition_diff import WarehouseBusy, diff_partitions, partition_window
from engine.guardrails.preflight import run_preflight
from engine.guardrails.request import GuardOptions
from engine.guardrails.table_snapshot import take_snapshot
from engine.pipeline.options import RunOptions
from engine.pipeline.row_changes import SNAPSHOT_INDEX
from engine.spec.backfill_spec import ExecutionOptions
from engine.spec.planning import plan_request
from tests.builder import Repo

HOURLY = {"type": "table", "strategy": "time_interval", "incremental_key": "ts", "time_granularity": "timestamp"}
DAILY = {"type": "table", "strategy": "time_interval", "incremental_key": "day", "time_granularity": "date"}
KEYED = [{"name": "id", "type": "integer", "primary_key": True}, {"name": "day", "type": "date"},
         {"name": "amount", "type": "decimal(6,2)"}]  # fmt: skip
ROWS = (
    "(1, DATE '2024-01-02', 10.5), (2, DATE '2024-01-02', 20), (3, DATE '2024-01-02', 30), (4, DATE '2024-01-03', 40)"
)


def _planned(repo: Repo, command: str | None = None):
    return plan_request(
        target=None if command else str(repo.pipeline_dir), command=command, name=None, start="2024-01-02",
        end="2024-01-03", timezone="UTC", partition="daily", environment=None, config_file=None,
        run_options=RunOptions(), options=ExecutionOptions(), force=False, cwd=repo.root,
    )  # fmt: skip


@pytest.fixture(scope="module")
def changed(tmp_path_factory):
    """A warehouse snapshotted for 2024-01-02..03, then changed on the 2nd as a backfill would: in the keyed and
    the unkeyed table id 2's amount 20 → 25, id 3 gone, id 7 new; a table created since (``mid.fresh``); a whole
    table (no key: not windowed) rebuilt. The 3rd is untouched. Returns the repository, the plan's spec and the
    backfill directory holding the snapshot."""
    root = tmp_path_factory.mktemp("diff")
    repo = Repo(root / "repo", guardrails="standard")
    body = "SELECT id, day, amount FROM raw.src WHERE day BETWEEN '{{ start_date }}' AND '{{ end_date }}'"
    repo.sql("mid.orders", body, materialization=DAILY, columns=KEYED)
    repo.sql("mid.plain", body, materialization=DAILY)
    repo.sql("mid.fresh", body, materialization=DAILY, columns=KEYED)
    repo.sql("mid.whole", "SELECT 1 AS n", materialization={"type": "table"})
    repo.sql("mid.events", "SELECT 1 AS id", materialization=HOURLY, columns=KEYED[:1])
    repo.execute(
        "CREATE SCHEMA raw", "CREATE SCHEMA mid",
        f"CREATE TABLE mid.orders AS SELECT * FROM (VALUES {ROWS}) AS v(id, day, amount)",
        "ALTER TABLE mid.orders ALTER amount TYPE decimal(6,2)",
        "CREATE TABLE mid.plain AS SELECT * FROM mid.orders", "CREATE TABLE mid.whole AS SELECT 1 AS n",
        "CREATE TABLE mid.events AS SELECT * FROM (VALUES (1, TIMESTAMP '2024-01-02 23:59:59.999999', 1), "
        "(2, TIMESTAMP '2024-01-03 00:00:00', 2)) AS v(id, ts, amount)",
    )  # fmt: skip
    planned = _planned(repo)
    directory = root / "backfill"
    directory.mkdir()
    state = state_root_for(planned.spec, None, repo.root).path
    preflight = run_preflight(request_for_new(planned, GuardOptions(), reason="test", root=state, cwd=repo.root))
    try:
        take_snapshot(preflight.facts, directory)
    finally:
        preflight.facts.warehouses.close()
    changes = ("UPDATE {t} SET amount = 25 WHERE id = 2", "DELETE FROM {t} WHERE id = 3",
               "INSERT INTO {t} VALUES (7, DATE '2024-01-02', 70)")  # fmt: skip
    repo.execute(
        *(change.format(t=table) for table in ("mid.orders", "mid.plain") for change in changes),
        "CREATE TABLE mid.fresh AS SELECT * FROM mid.orders WHERE day = DATE '2024-01-02' AND id = 7",
        "CREATE OR REPLACE TABLE mid.whole AS SELECT 2 AS n",
        "UPDATE mid.events SET amount = amount + 10",
    )  # fmt: skip
    return repo, planned.spec, directory


def test_each_partition_lists_each_windowed_table_by_key_or_as_multisets(changed):
    """The 2nd: mid.fresh all added (it did not exist), mid.orders by key id (+7 −3 ~2 with amount's old and new
    value, decimals as text), mid.plain as multisets (the changed row one of each); the 3rd: nothing but
    mid.events; mid.whole (no key) is never listed. mid.events, keyed by a timestamp, changed on both days: each
    window holds its own row to the microsecond (23:59:59.999999 on the 2nd, midnight on the 3rd)."""
    _, spec, directory = changed
    intervals = [spec.plan.interval(0), spec.plan.interval(1)]
    (first, tables), (second, untouched) = diff_partitions(directory, spec, intervals)
    assert (first, second) == tuple(intervals)
    names = ["mid.events", "mid.fresh", "mid.orders", "mid.plain"]
    assert [t.table for t in tables] == [t.table for t in untouched] == names
    (events, fresh, orders, plain), (moved, *untouched) = (t.to_json() for t in tables), untouched
    assert [(e["before"], e["after"], [c["key"] for c in e["changed"]]) for e in (events, moved.to_json())] == [
        (1, 1, [{"id": 1}]),
        (1, 1, [{"id": 2}]),
    ]
    assert (fresh["key"], fresh["before"], fresh["after"], fresh["added_total"], fresh["removed"]) == (
        ["id"],
        0,
        1,
        1,
        [],
    )
    assert fresh["added"] == [{"id": 7, "day": "2024-01-02", "amount": "70.00"}]
    assert orders == {
        "table": "mid.orders", "key": ["id"], "declared_key": ["id"], "key_breaks": None, "before": 3, "after": 3,
        "added_total": 1, "removed_total": 1, "changed_total": 1,
        "added": [{"id": 7, "day": "2024-01-02", "amount": "70.00"}],
        "removed": [{"id": 3, "day": "2024-01-02", "amount": "30.00"}],
        "changed": [{"key": {"id": 2}, "before": {"id": 2, "day": "2024-01-02", "amount": "20.00"},
                     "after": {"id": 2, "day": "2024-01-02", "amount": "25.00"}, "columns": ["amount"]}],
    }  # fmt: skip
    assert (plain["key"], plain["declared_key"], plain["changed_total"], plain["changed"]) == (None, None, None, [])
    assert [r["id"] for r in plain["added"]] == [2, 7] and [r["id"] for r in plain["removed"]] == [2, 3]
    assert [(t.before, t.after, t.counts) for t in untouched] == [
        (0, 0, {"added_total": 0, "removed_total": 0, "changed_total": 0}),
        (1, 1, {"added_total": 0, "removed_total": 0, "changed_total": 0}),
        (1, 1, {"added_total": 0, "removed_total": 0, "changed_total": None}),
    ]


def test_one_table_by_name_whatever_its_case_and_a_limit_on_each_kind(changed):
    """``table`` keeps one table (named in any case); ``limit`` cuts each kind's sample, not its total."""
    _, spec, directory = changed
    [(_, [orders])] = diff_partitions(directory, spec, [spec.plan.interval(0)], table="MID.Orders", limit=1)
    assert orders.table == "mid.orders"
    [(_, [plain])] = diff_partitions(directory, spec, [spec.plan.interval(0)], table="mid.plain", limit=1)
    assert (len(plain.added), plain.counts["added_total"], len(plain.removed), plain.counts["removed_total"]) == (
        1,
        2,
        1,
        2,
    )


def test_a_table_that_is_not_windowed_or_not_there_is_refused_naming_those_that_are(changed):
    """mid.whole is in the snapshot but has no window; mid.nope is nowhere: each a BadInput naming the four."""
    _, spec, directory = changed
    for name in ("mid.whole", "mid.nope"):
        with pytest.raises(BadInput) as refused:
            diff_partitions(directory, spec, [spec.plan.interval(0)], table=name)
        assert str(refused.value) == (
            f"--table {name!r} is not a windowed table of this backfill's snapshot: use one of mid.events, mid.fresh, "
            "mid.orders, mid.plain"
        )


def test_a_snapshot_of_no_windowed_table_names_none(changed, tmp_path):
    """A snapshot holding only the whole table: asking for any table names none to use instead."""
    _, spec, directory = changed
    index = orjson.loads((directory / SNAPSHOT_INDEX).read_bytes())
    for entry in index["files"]:
        entry["tables"] = [t for t in entry["tables"] if t["name"] == "mid.whole"]
        shutil.copy(directory / entry["snapshot"], tmp_path / entry["snapshot"])
    (tmp_path / SNAPSHOT_INDEX).write_bytes(orjson.dumps(index))
    with pytest.raises(BadInput) as refused:
        diff_partitions(tmp_path, spec, [spec.plan.interval(0)], table="mid.orders")
    assert str(refused.value).endswith("snapshot: use one of none")
    assert diff_partitions(tmp_path, spec, [spec.plan.interval(0)]) == [(spec.plan.interval(0), [])]


def test_no_snapshot_or_a_command_is_refused(changed, tmp_path):
    """A backfill directory without snapshot.json, and a command backfill, are BadInput saying why."""
    repo, spec, directory = changed
    with pytest.raises(BadInput) as refused:
        diff_partitions(tmp_path, spec, [spec.plan.interval(0)])
    assert str(refused.value) == (
        f"backfill {tmp_path.name} has no snapshot to compare with (run with --no-snapshot, a command, or nothing "
        "that changes data): see docs/diff.md"
    )
    command = _planned(repo, command="true").spec
    with pytest.raises(BadInput) as refused:
        diff_partitions(directory, command, [command.plan.interval(0)])
    assert str(refused.value) == (
        "backfill diff compares a pipeline's tables with its snapshot: a --command backfill has none"
    )


def _holding(database, *, read_only: bool) -> subprocess.Popen:
    """Another process with the warehouse open (for writing, or only reading), until its stdin closes."""
    holder = subprocess.Popen(
        [sys.executable, "-c", f"import duckdb, sys; c = duckdb.connect({str(database)!r}, read_only={read_only}); "
         "print('open', flush=True); sys.stdin.read()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert holder.stdout.readline().strip() == "open"
    return holder


def test_a_warehouse_another_process_writes_is_busy_not_a_traceback(changed):
    """Another process holds the warehouse open for writing: WarehouseBusy (exit 3) naming the file, saying when
    to try again and quoting DuckDB's first line."""
    repo, spec, directory = changed
    holder = _holding(repo.database, read_only=False)
    try:
        with pytest.raises(WarehouseBusy, match="is open for writing elsewhere") as busy:
            diff_partitions(directory, spec, [spec.plan.interval(0)])
        assert busy.value.exit_code == 3 and str(repo.database) in str(busy.value)
        assert "diff it once that run has ended (" in str(busy.value) and "lock" in str(busy.value).lower()
    finally:
        holder.stdin.close()
        holder.wait(30)


def test_the_diff_only_reads_so_it_runs_beside_another_reader(changed):
    """Another process reads the warehouse (a shared lock a writer could not take): the diff, opening it read-only,
    still answers."""
    repo, spec, directory = changed
    holder = _holding(repo.database, read_only=True)
    try:
        [(_, tables)] = diff_partitions(directory, spec, [spec.plan.interval(0)], table="mid.orders")
        assert tables[0].counts["changed_total"] == 1
    finally:
        holder.stdin.close()
        holder.wait(30)


def test_a_partitions_window_ends_a_microsecond_before_the_next(changed):
    """The window a partition's run sees: its start, its end minus 1 µs (inclusive), in the backfill's zone."""
    _, spec, _ = changed
    interval = spec.plan.interval(1)
    window = partition_window(interval, spec)
    assert (window.start, window.end, window.zone) == (interval.start, interval.end - 1, spec.zone)
