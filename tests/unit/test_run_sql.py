"""What a run executes as written (hooks, and the query of an SQL asset without materialization), judged as each
partition renders it: statements that begin or end the run's transaction, raw deletes, and statements that cannot
be classified which the backfill's pre-flight never saw."""

from __future__ import annotations

import duckdb
import pytest

from engine.pipeline.database import Database
from engine.pipeline.judged_sql import judged_argument, judged_shapes, read_judged_argument
from engine.pipeline.materialization import (
    OtherTableChanged,
    QueryWrites,
    RawDeleteRefused,
    TransactionStatementRefused,
    UnjudgedStatementRefused,
    classified_run_sql,
    materialize,
    refuse_unjudged,
)
from engine.pipeline.sql_writes import classify
from tests.unit.test_materialization import DAY_2, FENCED, asset, rows, three_days

QUERY = "SELECT DATE '2024-01-02' AS d, 5 AS v"
AS_WRITTEN = asset(None, type_=None)


@pytest.fixture
def db():
    connection = duckdb.connect(":memory:")
    yield Database(connection.cursor(), lambda sql: sql)
    connection.close()


@pytest.mark.parametrize("fenced", [True, False])
@pytest.mark.parametrize("hook", ["COMMIT", "ROLLBACK", "END", "ABORT", "BEGIN TRANSACTION"])
def test_a_hook_that_ends_the_run_s_transaction_runs_nothing_in_any_run(db, hook, fenced):
    """``COMMIT; DELETE FROM mart.other`` in a post hook: the COMMIT made the partition's rows permanent and the
    DELETE ran outside every transaction, so the fence's rollback undid nothing (the other table emptied, the
    error said "rolled back"). Refused before anything runs, in a backfill's partition or by hand."""
    three_days(db)
    db.execute("CREATE TABLE mart.other AS SELECT range AS n FROM range(4)")
    before = rows(db)
    with pytest.raises(TransactionStatementRefused) as raised:
        materialize(
            db, FENCED, QUERY, DAY_2, full_refresh=False, post_hooks=[f"{hook}; DELETE FROM mart.other"],
            fence_window=fenced,
        )  # fmt: skip
    assert str(raised.value) == (
        f"mart.t: a post hook runs {hook!r}, which would end the transaction the asset runs in (what came before it "
        "could no longer be rolled back) or start another: nothing of this run was written"
    )
    assert (rows(db), len(rows(db, "mart.other"))) == (before, 4)


def test_sql_run_as_written_is_refused_a_transaction_statement_too(db):
    """An asset without materialization whose SQL commits halfway: refused as its SQL, nothing run."""
    db.execute("CREATE SCHEMA mart")
    db.execute("CREATE TABLE mart.other AS SELECT 1 AS n")
    with pytest.raises(TransactionStatementRefused, match=r"^mart\.t: its SQL, run as written, runs 'COMMIT'"):
        materialize(db, AS_WRITTEN, "DELETE FROM mart.other; COMMIT", DAY_2, full_refresh=False)
    assert rows(db, "mart.other") == [(1,)]


def test_a_partition_s_sql_run_as_written_that_deletes_raw_data_runs_nothing(db):
    """An asset without materialization whose SQL deletes from the raw layer in this partition (a macro may on some
    days only): refused before it runs, named as its SQL; by hand (no fence) it is not judged here."""
    db.execute("CREATE SCHEMA raw")
    db.execute("CREATE TABLE raw.rows AS SELECT 1 AS id")
    with pytest.raises(RawDeleteRefused) as raised:
        materialize(db, AS_WRITTEN, "SELECT 1; DELETE FROM raw.rows", DAY_2, full_refresh=False, fence_window=True)
    assert str(raised.value) == (
        "mart.t: this partition's SQL, run as written, runs DELETE on raw.rows, a raw table: source data is never "
        "deleted or rebuilt in a backfill; nothing of this partition was written"
    )
    assert rows(db, "raw.rows") == [(1,)]
    materialize(db, AS_WRITTEN, "DELETE FROM raw.rows", DAY_2, full_refresh=False)
    assert rows(db, "raw.rows") == []


def test_sql_run_as_written_that_reaches_a_raw_table_by_a_bare_name_is_rolled_back(db):
    """``USE raw`` then ``DELETE FROM rows``: the bare name reaches the raw table, which is fingerprinted (every
    raw table of that name), so the partition is rolled back naming it. Other tables it writes are its own
    business (a person approved SQL run as written): deleting from mart.other lands."""
    db.execute("CREATE SCHEMA raw")
    db.execute("CREATE SCHEMA mart")
    db.execute("CREATE TABLE raw.rows AS SELECT range AS id FROM range(3)")
    db.execute("CREATE TABLE mart.rows AS SELECT range AS id FROM range(2)")
    with pytest.raises(OtherTableChanged) as raised:
        materialize(db, AS_WRITTEN, "USE raw; DELETE FROM rows", DAY_2, full_refresh=False, fence_window=True)
    assert str(raised.value) == (
        "the SQL of mart.t changed rows of another table, raw.rows (3 rows before, 0 after): rolled back, nothing of "
        "this partition was written"
    )
    db.execute("USE memory.main")
    assert len(rows(db, "raw.rows")) == 3
    materialize(db, AS_WRITTEN, "DELETE FROM mart.rows", DAY_2, full_refresh=False, fence_window=True)
    assert rows(db, "mart.rows") == []


def test_a_statement_the_pre_flight_did_not_judge_is_refused_and_one_it_judged_runs(db):
    """The pre-flight judged ``CALL load_day('2024-01-08', 8)``: the same call with the tenth's values has its
    shape and runs; PRAGMA import_database, which only the tenth renders, is refused naming where it comes from;
    an approval of one asset's statement does not cover another's."""
    judged = read_judged_argument(
        judged_argument(judged_shapes({"mart.t": {"post": [classify("CALL load_day('d', 8)")]}}))
    )
    tenth = classified_run_sql(db, ["SELECT 1"], ["CALL load_day('2024-01-10', 10)"], None)
    refuse_unjudged(AS_WRITTEN, tenth, judged["mart.t"])
    with pytest.raises(UnjudgedStatementRefused) as raised:
        refuse_unjudged(AS_WRITTEN, tenth, judged.get("mart.other", frozenset()))
    assert "this partition's post hook runs SQL that cannot be classified" in str(raised.value)
    imported = classified_run_sql(db, [], [], "SELECT 1; PRAGMA import_database('d')")
    with pytest.raises(UnjudgedStatementRefused) as raised:
        refuse_unjudged(AS_WRITTEN, imported, judged["mart.t"])
    assert str(raised.value) == (
        "mart.t: this partition's SQL, run as written, runs SQL that cannot be classified, unjudged by the pre-flight "
        "(\"PRAGMA import_database('')\"): nothing of this partition was written (a --continue from here judges it)"
    )


def test_what_the_pre_flight_judged_is_the_unclassified_statements_by_asset():
    """Only statements that cannot be classified are carried, once each by shape, sorted; an asset with none is
    left out; reads and classified writes are judged again in every partition anyway."""
    run_sql = {
        "mid.a": {"pre": ["CALL p(1); SELECT 1", "CALL p(2); CALL q(3)"], "query": ["USE raw; DELETE FROM x"]},
        "mid.b": {"post": ["DELETE FROM raw.x"]},
    }
    shapes = judged_shapes(
        {asset: {phase: [classify(t) for t in texts] for phase, texts in sources.items()} for asset, sources in
         run_sql.items()}
    )  # fmt: skip
    assert shapes == {"mid.a": ["CALL p(0)", "CALL q(0)", "USE raw"]}
    assert judged_argument(shapes) == '{"mid.a":["CALL p(0)","CALL q(0)","USE raw"]}'
    assert judged_argument({"b": [], "a": []}) == '{"a":[],"b":[]}'  # one argument for one judgement, in any order


@pytest.mark.parametrize("text", ["", "x", "[]", '{"a": "CALL p()"}', '{"a": [1]}', "null"])
def test_a_judged_argument_that_is_not_what_a_backfill_writes_is_refused(text):
    """``--judged-sql`` by hand: anything but an object of lists of statements is a ValueError (the command line
    turns it into one line, exit 2)."""
    with pytest.raises(ValueError) as raised:
        read_judged_argument(text)
    assert str(raised.value) == "an object of asset names, each with a list of statements"


@pytest.mark.parametrize("type_", ["table", "view"])
def test_a_materialized_query_that_writes_inside_itself_runs_nothing(db, type_):
    """``WITH d AS (DELETE FROM raw.rows RETURNING *) SELECT …`` as a table's query: ``CREATE TABLE … AS`` ran the
    DELETE and emptied the source. Refused before anything runs, by hand too, naming what it writes; a view (which
    DuckDB would refuse) is refused the same way."""
    db.execute("CREATE SCHEMA raw")
    db.execute("CREATE TABLE raw.rows AS SELECT range AS id FROM range(3)")
    query = "WITH d AS (DELETE FROM raw.rows RETURNING *) SELECT count(*) AS n FROM d"
    with pytest.raises(QueryWrites) as raised:
        materialize(db, asset("create+replace" if type_ == "table" else None, type_=type_), query, DAY_2,
                    full_refresh=False)  # fmt: skip
    assert str(raised.value) == (
        "mart.t: a materialized asset's query only reads, and this one runs DELETE on raw.rows inside it (a WITH "
        "clause's statement): nothing of this run was written"
    )
    assert len(rows(db, "raw.rows")) == 3


def test_an_unjudged_statement_is_shown_by_its_first_50_characters():
    """A long statement is cut, so that the whole reason fits a partition's record (300 characters) with a long
    asset name: what to do next is at its end."""
    run_sql = {"post": [classify("CALL " + "x" * 100 + "()")]}
    with pytest.raises(UnjudgedStatementRefused) as raised:
        refuse_unjudged(AS_WRITTEN, run_sql, frozenset())
    assert f"({'CALL ' + 'x' * 45!r})" in str(raised.value)
    refused = UnjudgedStatementRefused("staging.order_lines_by_region", "post", "CALL " + "x" * 100)
    assert len(f"staging.order_lines_by_region failed: {refused}") <= 300
