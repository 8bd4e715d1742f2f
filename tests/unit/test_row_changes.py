"""What a partition changed, in-process on a real DuckDB database: rows are matched by the declared primary key
only where it holds; a key repeated or null on either side is reported and the rows compared as multisets."""

from __future__ import annotations

from datetime import UTC
from pathlib import Path

import duckdb
import pytest

from engine.guardrails.partition_diff import diff_table
from engine.pipeline.assets import Asset, Materialization
from engine.pipeline.columns import Column
from engine.pipeline.database import Database
from engine.pipeline.row_changes import key_breaks, measure
from engine.pipeline.templating import Window
from tui.diff_text import changes_text


def keyed(*keys: str) -> Asset:
    columns = tuple(Column(key, "integer", True, False, None, ()) for key in keys)
    return Asset(
        "orders", "duckdb.sql", Path("orders.sql"), "orders.sql", 1,
        materialization=Materialization("table", "append", None, None), columns=columns,
    )  # fmt: skip


@pytest.fixture
def db():
    connection = duckdb.connect(":memory:")
    yield Database(connection.cursor(), lambda sql: sql)
    connection.close()


def table(db: Database, name: str, rows: str) -> str:
    db.execute(f"CREATE TABLE {name} AS SELECT * FROM (VALUES {rows}) AS v(a, b, amount)")
    return f"(SELECT * FROM {name})"


def test_key_breaks_counts_every_repeat_past_the_first_and_every_null_keyed_row(db):
    """On (a, b): a pair twice, another three times and three rows with part of it null break it 1 + 2 + 3 = 6
    times before; the rows after keep it. A key that holds on both sides, or no key, is None."""
    before = table(db, "before_t", "(1, 1, 0), (1, 2, 0), (1, 2, 5), (2, 2, 0), (2, 2, 0), (2, 2, 1), (3, NULL, 0), "
                   "(3, NULL, 0), (NULL, 4, 0)")  # fmt: skip
    after = table(db, "after_t", "(1, 1, 0), (1, 2, 0), (2, 1, 0)")
    assert key_breaks(db, ["a", "b"], before, after) == {"before": 6, "after": 0}
    assert key_breaks(db, ["a", "b"], after, before) == {"before": 0, "after": 6}
    assert key_breaks(db, ["a", "b"], after, after) is None
    assert key_breaks(db, ["a"], after, after) == {"before": 1, "after": 1}  # a alone repeats 1
    assert key_breaks(db, [], before, after) is None


def test_rows_with_a_null_key_are_compared_as_multisets_not_as_added_and_removed(db):
    """An unchanged row whose key is null matches nothing by key, so a keyed diff called it removed and added
    again; as multisets it is unchanged, and only the real change (amount 2 → 3) shows, as one of each."""
    table(db, "before_t", "(1, 1, 2), (NULL, 1, 7)")
    table(db, "orders", "(1, 1, 3), (NULL, 1, 7)")
    diff = diff_table(db, keyed("a", "b"), "true", "before_t", 20)
    assert (diff.key, diff.declared_key, diff.key_breaks) == (None, ["a", "b"], {"before": 1, "after": 1})
    assert (diff.added, diff.removed, diff.changed) == (
        [{"a": 1, "b": 1, "amount": 3}],
        [{"a": 1, "b": 1, "amount": 2}],
        [],
    )
    assert diff.counts == {"added_total": 1, "removed_total": 1, "changed_total": None}
    assert (diff.before, diff.after) == (2, 2)


def test_a_key_that_holds_still_matches_rows_by_key(db):
    """The same change with the key whole: one changed row, naming the column, and no key breaks."""
    table(db, "before_t", "(1, 1, 2), (2, 1, 7)")
    table(db, "orders", "(1, 1, 3), (2, 1, 7)")
    diff = diff_table(db, keyed("a", "b"), "true", "before_t", 20)
    assert (diff.key, diff.declared_key, diff.key_breaks) == (["a", "b"], ["a", "b"], None)
    assert [change["columns"] for change in diff.changed] == [["amount"]] and not diff.added and not diff.removed


def test_a_column_named_like_an_alias_does_not_hide_a_change_in_another_column(db):
    """Columns named ``a``, ``b`` and ``t`` (the aliases the queries once hashed whole rows by): a change to
    ``amount`` of key 2 is the one changed row, key 1's identical row is not, and the fingerprint moves."""
    db.execute("CREATE TABLE before_t AS SELECT * FROM (VALUES (1, 1, 0, 5), (2, 1, 0, 7)) AS v(a, b, t, amount)")
    db.execute("CREATE TABLE orders AS SELECT * FROM (VALUES (1, 1, 0, 5), (2, 1, 0, 8)) AS v(a, b, t, amount)")
    diff = diff_table(db, keyed("a"), "true", "before_t", 20)
    assert [(change["key"], change["columns"]) for change in diff.changed] == [({"a": 2}, ["amount"])]
    assert diff.counts == {"added_total": 0, "removed_total": 0, "changed_total": 1}
    diff = diff_table(db, keyed("t"), "true", "before_t", 20)  # t repeats: compared as multisets
    assert diff.key_breaks == {"before": 1, "after": 1} and diff.counts["added_total"] == 1


def test_what_a_run_records_sees_a_change_beside_a_column_named_t(db):
    """The run's own measure (``row_changes``) of a day whose only change is ``amount``, in a table that also has a
    column ``t``: its fingerprint moves and the row is changed by key (once hashed as ``hash(t)``, which read the
    column ``t`` alone: "nothing changed"); the next day, untouched, changed nothing."""
    day = Asset(
        "orders", "duckdb.sql", Path("orders.sql"), "orders.sql", 1,
        materialization=Materialization("table", "time_interval", "day", "date"),
        columns=(Column("id", "integer", True, False, None, ()),),
    )  # fmt: skip
    rows = "(1, DATE '2024-01-01', 0, {}), (2, DATE '2024-01-02', 0, 9)"
    db.execute(f"CREATE TABLE before_t AS SELECT * FROM (VALUES {rows.format(5)}) AS v(id, day, t, amount)")
    db.execute(f"CREATE TABLE orders AS SELECT * FROM (VALUES {rows.format(6)}) AS v(id, day, t, amount)")
    db.execute("ATTACH ':memory:' AS backfill_snapshot; CREATE TABLE backfill_snapshot.copy AS FROM before_t")
    first, second = (
        Window(start, start + 86_400_000_000 - 1, UTC) for start in (1_704_067_200_000_000, 1_704_153_600_000_000)
    )
    entry = {"copy": "copy", "existed": True}
    assert measure(db, day, first, entry) == {
        "key": ["id"], "before": 1, "after": 1, "added": 0, "removed": 0, "changed": 1
    }  # fmt: skip
    assert measure(db, day, second, entry)["changed"] == 0


def test_the_details_line_says_when_a_declared_key_did_not_hold():
    """The details pane's line of an attempt: counts by key with ``~changed``; compared as multisets because the
    key repeats, it names the key; a table that could not be measured says so."""
    assert (
        changes_text({"mid.orders": {"key": ["id"], "added": 1, "removed": 0, "changed": 2}}) == "mid.orders +1 -0 ~2"
    )
    broken = {"key": None, "declared_key": ["id", "day"], "key_breaks": {"before": 0, "after": 1}, "added": 3,
              "removed": 2, "changed": None}  # fmt: skip
    assert changes_text({"mid.orders": broken, "x": {"error": "gone"}}) == (
        "mid.orders +3 -2 (key id, day repeated or null), x not measured"
    )
