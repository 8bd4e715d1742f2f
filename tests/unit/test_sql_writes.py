"""What hook statements write, read from their text: verbs and tables through comments, quotes and case, and
anything unrecognised reported instead of guessed."""

from __future__ import annotations

import pytest

from engine.pipeline.sql_writes import (
    UNKNOWN_FILE,
    UPSERT,
    Write,
    after_the_query,
    attached_file,
    classify,
    copied_to,
    not_one_read,
    phrase,
    shape,
    writes_inside,
)


@pytest.mark.parametrize(
    ("sql", "writes"),
    [
        ("DELETE FROM raw.events WHERE day < '2024-01-01'", [Write("DELETE", "raw.events")]),
        ("update Mart.T set a = 1", [Write("UPDATE", "mart.t")]),
        ("INSERT OR REPLACE INTO audit.log VALUES (1)", [Write("INSERT OR REPLACE", "audit.log")]),
        ("INSERT OR IGNORE INTO audit.log VALUES (1)", [Write("INSERT", "audit.log")]),
        ("INSERT INTO raw.e SELECT 1 ON CONFLICT (id) DO UPDATE SET x = 2", [Write(UPSERT, "raw.e")]),
        ("INSERT INTO raw.e SELECT 1 ON CONFLICT DO NOTHING", [Write("INSERT", "raw.e")]),
        ("WITH old AS (SELECT 1) DELETE FROM raw.events", [Write("DELETE", "raw.events")]),
        ("with recursive a as (select last_update from t) update mid.x set n = 1", [Write("UPDATE", "mid.x")]),
        ("EXPLAIN ANALYZE DELETE FROM raw.events", [Write("DELETE", "raw.events")]),
        ("explain analyse truncate raw.events; EXPLAIN DELETE FROM raw.x", [Write("TRUNCATE", "raw.events")]),
        ("EXPLAIN (FORMAT json, ANALYZE) DELETE FROM raw.events", [Write("DELETE", "raw.events")]),
        ("EXPLAIN (FORMAT json) DELETE FROM raw.events", []),
        ('EXPLAIN ("analyze" false) DELETE FROM raw.events', [Write("DELETE", "raw.events")]),  # it still runs
        ('WITH k AS (SELECT 1 AS "update", 2 AS "insert") DELETE FROM raw.events', [Write("DELETE", "raw.events")]),
        ("WITH k AS (SELECT (SELECT 1) AS n) UPDATE raw.events SET n = 1", [Write("UPDATE", "raw.events")]),
        ('WITH "a(" AS (SELECT 1) DELETE FROM raw.events', [Write("DELETE", "raw.events")]),
        ('WITH "update" AS (SELECT 1) DELETE FROM raw.events', [Write("DELETE", "raw.events")]),
        ("WITH k AS (SELECT 1 AS update) DELETE FROM raw.events", [Write("DELETE", "raw.events")]),
        ("/* note */ DELETE FROM raw.events -- tidy", [Write("DELETE", "raw.events")]),
        ("DELETE FROM warehouse.raw.events", [Write("DELETE", "warehouse.raw.events")]),
        ("MERGE INTO mid.x USING y ON true WHEN MATCHED THEN DELETE", [Write("MERGE", "mid.x")]),
        ("TRUNCATE TABLE mid.x; TRUNCATE mid.y", [Write("TRUNCATE", "mid.x"), Write("TRUNCATE", "mid.y")]),
        ("DROP TABLE IF EXISTS mid.x", [Write("DROP", "mid.x")]),
        ("DROP SCHEMA IF EXISTS Raw CASCADE", [Write("DROP SCHEMA", "raw.*")]),  # every table in it
        ('CREATE OR REPLACE TABLE "Odd"."Na""me" AS SELECT 1', [Write("CREATE OR REPLACE", 'Odd.Na"me')]),
        ("CREATE TABLE IF NOT EXISTS mid.x (a INT)", [Write("CREATE", "mid.x")]),
        ("ALTER TABLE mid.x ADD COLUMN b INT", [Write("ALTER", "mid.x")]),
        ("COPY mid.x FROM 'f.csv'", [Write("COPY", "mid.x")]),
        ("-- DELETE FROM raw.x\nSELECT 1 /* DROP TABLE y */", []),
        ("INSERT INTO audit.log SELECT 'DELETE FROM raw.x; DROP TABLE y'", [Write("INSERT", "audit.log")]),
        ("SET threads = 1; PRAGMA x; SELECT 1; WITH a AS (SELECT 1) SELECT * FROM a", []),
    ],
)
def test_writes_are_found_by_verb_and_table(sql, writes):
    """Each statement's verb and table, in order; comments and quoted text never count."""
    classified = classify(sql)
    assert list(classified.writes) == writes
    assert classified.unclassified == ()


def test_what_deletes_and_what_only_adds():
    """DELETE, UPDATE, MERGE, TRUNCATE, DROP, CREATE OR REPLACE and ALTER may lose rows; INSERT, COPY and a
    plain CREATE do not."""
    deleting = [w.deletes for w in classify("DELETE FROM a; UPDATE a SET x=1; MERGE INTO a USING b ON true; "
                                            "TRUNCATE a; DROP TABLE a; CREATE OR REPLACE TABLE a AS SELECT 1; "
                                            "ALTER TABLE a DROP COLUMN x").writes]  # fmt: skip
    assert deleting == [True] * 7
    upserts = classify("INSERT OR REPLACE INTO a VALUES (1); INSERT INTO a VALUES (1) ON CONFLICT DO UPDATE SET x = 1")
    assert [w.deletes for w in upserts.writes] == [True, True]  # they rewrite the rows they conflict with
    adding = classify("INSERT INTO a VALUES (1); COPY a FROM 'f'; CREATE TABLE b (x INT); INSERT OR IGNORE INTO a "
                      "VALUES (1); INSERT INTO a VALUES (1) ON CONFLICT DO NOTHING")  # fmt: skip
    assert [w.deletes for w in adding.writes] == [False] * 5


def test_a_table_s_schema_and_relation_pass_over_its_catalog():
    """``warehouse.raw.events`` is in schema raw (a catalog cannot hide the raw layer), and is the relation
    ``raw.events`` an asset is named by; a quoted part may hold a dot; an unqualified name has no schema."""
    [qualified, quoted, bare] = classify(
        'DELETE FROM Warehouse.RAW.events; DELETE FROM "a.b"."C"; DELETE FROM t'
    ).writes
    assert (qualified.schema, qualified.relation) == ("raw", "raw.events")
    assert (quoted.table, quoted.schema, quoted.relation) == ("a.b.C", "a.b", "a.b.C")
    assert (bare.schema, bare.relation) == ("", "t")
    assert (Write("DELETE", "raw.x").schema, Write("DELETE", "raw.x").relation) == ("raw", "raw.x")  # made by hand


def test_a_search_path_set_by_a_hook_is_not_harmless():
    """``SET search_path`` or ``schema`` changes what an unqualified ``DELETE FROM events`` deletes: the statement is
    reported, so the hook cannot be judged by the names alone; other settings stay harmless."""
    classified = classify("SET search_path = 'raw'; SET SESSION schema = 'raw'; RESET search_path; SET threads = 2")
    assert classified.unclassified == ("SET search_path = ''", "SET SESSION schema = ''", "RESET search_path")
    # DuckDB takes the setting's name quoted, and any setting through PRAGMA: each changes the search path too.
    spelled = classify(
        """SET "search_path" = 'raw'; PRAGMA search_path = 'raw'; pragma Schema = 'raw'; PRAGMA version"""
    )
    assert spelled.unclassified == ("""SET "search_path" = ''""", "PRAGMA search_path = ''", "pragma Schema = ''")
    # import_database runs the CREATE statements of a directory's schema.sql, a CREATE OR REPLACE among them.
    assert classify("PRAGMA import_database('d')").unclassified == ("PRAGMA import_database('')",)


def test_a_statement_nobody_recognises_is_reported():
    """CALL, ATTACH or an unknown verb: unclassified, kept whole (quoted text blanked, except the file an ATTACH
    names: which file it opens is what it does) for its shape to be compared; the report cuts it."""
    classified = classify("CALL refresh(); ATTACH 'x;y.duckdb' AS x; " + "EXPORT DATABASE 'd' " + "x" * 100)
    assert classified.writes == ()
    assert classified.unclassified == ("CALL refresh()", "ATTACH 'x;y.duckdb' AS x", "EXPORT DATABASE '' " + "x" * 100)
    assert shape("ATTACH 'a.duckdb' AS p") != shape("ATTACH 'prod.duckdb' AS p")


@pytest.mark.parametrize(
    ("sql", "file"),
    [
        ("ATTACH 'prod.duckdb' AS p", "prod.duckdb"),
        ("attach database if not exists '/data/it''s.duckdb' as p -- the team's", "/data/it's.duckdb"),
        ("ATTACH OR REPLACE DATABASE 'duckdb:~/w.duckdb' AS p (READ_ONLY false)", "~/w.duckdb"),
        ("ATTACH 'w.duckdb' (TYPE duckdb)", "w.duckdb"),
        ("ATTACH 'w.duckdb' AS p (READ_ONLY)", None),
        ("ATTACH 'w.duckdb' AS p (READ_ONLY true)", None),
        ("ATTACH 'w.db' AS p (TYPE sqlite)", None),
        ("ATTACH 'sqlite:w.db' AS p", None),
        ("ATTACH 'md:' AS p", None),
        ("ATTACH 'MD:shop?motherduck_token=s3cret' AS p", None),
        ("ATTACH 'SQLITE:w.db' AS p", None),
        ("ATTACH /* the live one */ 'prod.duckdb' AS p", "prod.duckdb"),
        ("ATTACH 's3://bucket/w.duckdb' AS p", None),
        ("ATTACH ':memory:' AS p", None),
        ("ATTACH getenv('WAREHOUSE') AS p", UNKNOWN_FILE),
        ("ATTACH $$prod.duckdb$$ AS p", UNKNOWN_FILE),  # a string of another quoting: not read, the strictest level
        ("ATTACH E'prod.duckdb' AS p", UNKNOWN_FILE),
        ("DETACH p", None),
        ("CALL attach_all()", None),
    ],
)  # fmt: skip
def test_the_file_an_attach_opens_for_writing_is_read_from_its_text(sql, file):
    """The DuckDB file an ATTACH opens for writing, as written; unknown when its text does not name it; nothing for
    a read-only one, another type's, an in-memory one or a URL (none can write a local DuckDB file)."""
    [statement] = classify(sql).unclassified
    assert attached_file(statement) == file
    if file is None or file == UNKNOWN_FILE:  # its literals stay blanked: another type's may hold a password
        assert "''" in statement or "'" not in statement, statement


def test_an_attach_of_another_type_keeps_its_connection_string_out_of_reports():
    """A Postgres DSN attached in a hook holds a password: the statement, shown in the report and kept in
    judged-sql.json and guardrails.json, has it blanked as every other quoted text; a DuckDB file's name is kept."""
    [dsn] = classify("ATTACH 'dbname=shop user=ann password=s3cret' AS pg (TYPE postgres)").unclassified
    assert dsn == "ATTACH '' AS pg (TYPE postgres)"
    [file] = classify("ATTACH 'shop.duckdb' AS s").unclassified
    assert file == "ATTACH 'shop.duckdb' AS s"


def test_a_statement_duckdb_parses_but_cannot_name_is_unclassified_not_an_error():
    """`UPDATE EXTENSIONS` parses, but DuckDB 2.0's Python module has no name for its type ("29 is not a valid
    StatementType"): a hook holding it is unclassified and a check holding it refused, not a raised error that
    the pre-flight reported as "could not decide: 29 is not a valid StatementType"."""
    assert classify("UPDATE EXTENSIONS").unclassified == ("UPDATE EXTENSIONS",)
    assert classify("UPDATE EXTENSIONS").writes == ()
    assert not_one_read("UPDATE EXTENSIONS") == "it is a statement DuckDB's Python module cannot name"
    assert writes_inside("UPDATE EXTENSIONS") == ()


@pytest.mark.parametrize("statement", ["BEGIN", "begin transaction", "START TRANSACTION", "COMMIT", "END",
                                       "ROLLBACK", "abort", "EXPLAIN ANALYZE COMMIT"])  # fmt: skip
def test_a_statement_that_begins_or_ends_a_transaction_is_reported_as_one(statement):
    """A COMMIT in a hook made what came before it permanent and left what followed outside every rollback: every
    statement that begins or ends a transaction is reported apart, neither a read nor unclassified."""
    classified = classify(f"SELECT 1; {statement}; DELETE FROM mid.other")
    assert classified.transactions == (statement.removeprefix("EXPLAIN ANALYZE "),)
    assert classified.unclassified == () and classified.writes == (Write("DELETE", "mid.other"),)
    assert classify("SELECT 'commit'; SELECT 1 AS begin").transactions == ()
    # A hook the pre-flight could not render is judged as written: DuckDB cannot parse it, its first word tells.
    assert classify("COMMIT {{ broken").transactions == ("COMMIT {{ broken",)


def test_a_statement_s_shape_is_the_same_on_every_day_and_differs_for_another_statement():
    """What a partition's run compares with what the pre-flight judged: the day's dates and counts rendered into a
    statement give one shape; another verb, table or function gives another. Digits inside names stay."""
    day = "CALL load_day('2024-01-08', 20240108, 1.5e3,   -7)  -- first"
    assert shape(classify(day).unclassified[0]) == "CALL load_day('', 0, 0, -0)"
    tenth = classify("CALL load_day('2024-01-10', 20240110, 2.5E3, -9)").unclassified[0]
    assert shape(tenth) == shape(classify(day).unclassified[0])
    assert shape('CALL t1.p2(x3, "4", .5)') == 'CALL t1.p2(x3, "4", 0)'
    assert shape("PRAGMA import_database('')") != shape("CALL import_database('')")
    assert shape("CALL a(\n1)") == "CALL a( 0)"


def test_where_a_statement_comes_from_is_named_for_the_pre_flight_and_for_a_partition():
    """Messages name a hook by its phase, and the query of an SQL asset run as written as its SQL."""
    assert (phrase("pre"), phrase("post", partition=True)) == ("a pre hook", "this partition's post hook")
    assert (phrase("query"), phrase("query", partition=True)) == (
        "its SQL, run as written,",
        "this partition's SQL, run as written,",
    )


def test_only_a_delete_or_rewrite_in_a_raw_schema_deletes_raw_data():
    """Appending to a raw table or creating one keeps the source; deleting from ``Source.x`` (any case, behind a
    catalog) or rewriting ``landing.y`` loses it; deleting from a mid table does not touch the raw layer."""
    writes = classify("INSERT INTO raw.e VALUES (1); CREATE TABLE src.n (x INT); DELETE FROM db.Source.x; "
                      "UPDATE landing.y SET v = 1; DELETE FROM mid.x").writes  # fmt: skip
    assert [w.deletes_raw for w in writes] == [False, False, True, True, False]


def test_a_statement_duckdb_parses_otherwise_than_its_text_reads_is_not_trusted():
    """A CTE named ``update`` made the DELETE after it read as an UPDATE of a table called ``as``; DuckDB's parser
    says DELETE, so the statement is reported rather than judged by the wrong verb. A parenthesised query, which
    the patterns do not know, is a read because DuckDB parses it as one; a template DuckDB cannot parse is left
    to the patterns."""
    misread = classify("WITH update AS (SELECT 1) DELETE FROM raw.events")
    assert (misread.writes, misread.unclassified) == ((), ("WITH update AS (SELECT 1) DELETE FROM raw.events",))
    assert classify("(SELECT 1) UNION ALL (SELECT 2); CHECKPOINT; PRAGMA version") == classify("")
    assert classify("USE raw").unclassified == ("USE raw",)  # parsed as a SET, but it changes unqualified names
    # A schema other than raw dropped whole: its tables are not named, so neither judged nor fingerprinted.
    assert classify("DROP SCHEMA mid CASCADE").unclassified == ("DROP SCHEMA mid CASCADE",)
    assert classify("DELETE FROM raw.events WHERE day = {{ day }}").writes == (Write("DELETE", "raw.events"),)


def test_the_statements_after_a_query_are_read_by_duckdb_s_parser():
    """What follows a materialized query's first statement (a materialized asset runs one): a semicolon inside a
    string or a trailing comment is not one; SQL DuckDB cannot parse leaves the run to fail on its own."""
    assert after_the_query("SELECT 1 AS x; DELETE FROM raw.landing;\n; SELECT 2") == [
        "DELETE FROM raw.landing",
        "SELECT 2",
    ]
    assert after_the_query("SELECT 'a;b' AS x; -- done") == []
    assert after_the_query("SELECT {{ x }}; DELETE FROM raw.landing") == []


def test_a_check_is_one_query_that_reads():
    """A check's query: one SELECT (a CTE, a trailing semicolon or comment included) reads; two statements, a
    DELETE … RETURNING, an EXPLAIN ANALYZE or a MERGE are named for what they are; unparseable SQL is left to fail
    when it runs."""
    assert [not_one_read(q) for q in ("WITH a AS (SELECT 1) SELECT * FROM a", "SELECT 1; -- done", "SELECT {{")] == [
        None
    ] * 3
    assert not_one_read("DELETE FROM raw.landing; SELECT 0") == "it is 2 statements"
    assert not_one_read("DELETE FROM raw.landing RETURNING 0") == "it is a DELETE"
    assert not_one_read("EXPLAIN ANALYZE DELETE FROM raw.landing") == "it is an EXPLAIN"
    assert not_one_read("MERGE INTO a USING b ON true WHEN MATCHED THEN DELETE") == "it is a MERGE INTO"
    # A SELECT that deletes inside itself: DuckDB runs a CTE's DELETE … RETURNING with the query.
    inside = "WITH d AS (DELETE FROM raw.landing RETURNING *) SELECT count(*) FROM d"
    assert not_one_read(inside) == "it runs DELETE on raw.landing inside it"
    assert not_one_read("WITH d AS (COPY (SELECT 1) TO 'x.csv') SELECT 1") == "DuckDB cannot say what it writes"
    assert not_one_read("WITH d AS (TRUNCATE raw.landing) SELECT 0") == "it runs DELETE on raw.landing inside it"
    commented = "WITH d AS (/* tidy */ DELETE FROM raw.landing RETURNING *) SELECT count(*) FROM d"
    assert not_one_read(commented) == "it runs DELETE on raw.landing inside it"


@pytest.mark.parametrize(
    ("sql", "writes"),
    [
        ("WITH d AS (DELETE FROM raw.landing RETURNING *) SELECT count(*) FROM d", [Write("DELETE", "raw.landing")]),
        ('SELECT 1 UNION ALL (WITH d AS (UPDATE Raw."L" SET x = 1 RETURNING x) SELECT x FROM d)',
         [Write("UPDATE", "Raw.L")]),
        ("SELECT * FROM (WITH d AS (INSERT INTO db.mid.t VALUES (1) RETURNING *) SELECT * FROM d)",
         [Write("INSERT", "db.mid.t")]),
        ("WITH d AS (INSERT OR REPLACE INTO mid.t VALUES (1) RETURNING *) SELECT 1",
         [Write("INSERT OR REPLACE", "mid.t")]),
        ("WITH d AS (INSERT INTO mid.t VALUES (1) ON CONFLICT DO UPDATE SET x = 2 RETURNING *) SELECT 1",
         [Write(UPSERT, "mid.t")]),
        ("WITH a AS (SELECT 1), b AS (SELECT * FROM a) SELECT * FROM b UNION SELECT 2", []),
        ("WITH RECURSIVE r AS (SELECT 1 AS n UNION ALL SELECT n + 1 FROM r WHERE n < 3) SELECT * FROM r", []),
        ("WITH d AS (DELETE FROM memory.raw.l RETURNING *) SELECT 1", [Write("DELETE", "memory.raw.l")]),
        # TRUNCATE is DuckDB's DELETE, a CTE body too: judged a read, it emptied the table.
        ("WITH d AS (TRUNCATE raw.l) SELECT 1", [Write("DELETE", "raw.l")]),
        ("WITH d AS (truncate table raw.l) SELECT 1", [Write("DELETE", "raw.l")]),
        # A comment before the body's verb: classified, but a check or a materialized query passed it as a read.
        ("WITH d AS (/* tidy */ DELETE FROM raw.l RETURNING *) SELECT 1", [Write("DELETE", "raw.l")]),
        ("WITH d AS ( -- tidy\n DELETE FROM raw.l RETURNING *) SELECT 1", [Write("DELETE", "raw.l")]),
    ],
)  # fmt: skip
def test_a_query_that_writes_inside_itself_is_judged_by_what_it_writes(sql, writes):
    """DuckDB runs the DELETE, UPDATE or INSERT of a CTE (``… RETURNING``) with the query around it, at any depth:
    read from DuckDB's own parse tree, each is a write of its table (an INSERT that replaces rows rewrites them),
    so a hook or a materialized query that empties raw.landing this way is judged as the DELETE it runs."""
    assert list(classify(sql).writes) == writes
    assert list(writes_inside(sql)) == writes
    assert classify(sql).unclassified == ()
    # A quoted name holding a dot keeps its parts: raw."l.x" is a table of raw, not of a schema "l".
    [dotted] = classify('WITH d AS (DELETE FROM raw."l.x" RETURNING *) SELECT 1').writes
    assert (dotted.table, dotted.deletes_raw) == ("raw.l.x", True)


def test_a_query_whose_writes_cannot_be_read_is_not_trusted():
    """A CTE DuckDB cannot describe (a COPY … TO inside a query) is reported, never taken for a read; a template
    DuckDB cannot parse is read from its text, the DELETE in its CTE included; a materialized query that does not
    parse writes nothing here (running it fails)."""
    assert classify("WITH d AS (COPY (SELECT 1) TO 'x.csv') SELECT 1").unclassified == (
        "WITH d AS (COPY (SELECT 1) TO '') SELECT 1",
    )
    template = "WITH d AS (DELETE FROM raw.x RETURNING *) SELECT {{ broken"
    assert (classify(template).writes, classify(template).unclassified) == ((Write("DELETE", "raw.x"),), ())
    assert classify("SELECT {{ broken").unclassified == ()
    assert writes_inside("WITH d AS (DELETE FROM raw.x RETURNING *) SELECT {{") == ()
    assert writes_inside("DELETE FROM raw.x") == ()  # not a query: CREATE TABLE … AS fails to parse it, runs nothing


@pytest.mark.parametrize(
    ("sql", "writes"),
    [
        ("WITH d AS (DELETE FROM raw.l RETURNING *) INSERT INTO mid.x SELECT * FROM d",
         [Write("INSERT", "mid.x"), Write("DELETE", "raw.l")]),
        ("CREATE OR REPLACE TABLE mid.y AS (WITH d AS (DELETE FROM raw.l RETURNING *) SELECT * FROM d)",
         [Write("CREATE OR REPLACE", "mid.y"), Write("DELETE", "raw.l")]),
        ("CREATE TEMP TABLE t AS WITH d AS (UPDATE raw.l SET x = 1 RETURNING *) SELECT * FROM d",
         [Write("CREATE", "t"), Write("UPDATE", "raw.l")]),
        ("PREPARE p AS DELETE FROM raw.l WHERE x = $1", [Write("DELETE", "raw.l")]),
        ('PREPARE "p q" (INTEGER) AS TRUNCATE raw.l', [Write("TRUNCATE", "raw.l")]),
        ("INSERT INTO mid.x SELECT coalesce(update_count, 0) FROM t", [Write("INSERT", "mid.x")]),
        ("WITH d AS (TRUNCATE raw.l) INSERT INTO mid.x SELECT 1",
         [Write("INSERT", "mid.x"), Write("TRUNCATE", "raw.l")]),
    ],
)  # fmt: skip
def test_a_statement_that_writes_inside_itself_is_judged_by_every_write(sql, writes):
    """DuckDB runs a CTE's DELETE … RETURNING before the INSERT or CREATE TABLE … AS it leads to: the outer verb
    alone judged ``WITH d AS (DELETE FROM raw.l …) INSERT INTO mid.x …`` an append. Each write inside parentheses
    is read as its own statement; a prepared statement is judged by what each EXECUTE runs; a name that only starts
    with a verb is not one."""
    assert list(classify(sql).writes) == writes
    assert classify(sql).unclassified == ()
    assert classify("EXECUTE p").unclassified == ("EXECUTE p",)
    assert classify("CREATE TABLE t AS SELECT (UPDATE) FROM x").unclassified == (
        "CREATE TABLE t AS SELECT (UPDATE) FROM x",
    )


@pytest.mark.parametrize(
    ("sql", "kept", "target"),
    [
        ("COPY (SELECT 'a;b' AS x) TO 'w.duckdb' (FORMAT csv)", "COPY (SELECT '' AS x) TO 'w.duckdb' (FORMAT csv)",
         "w.duckdb"),
        ("copy t (a, b) to 'w.duckdb.wal'", "copy t (a, b) to 'w.duckdb.wal'", "w.duckdb.wal"),
        ("COPY t TO 'exports' (FORMAT csv, PARTITION_BY (a), OVERWRITE)",
         "COPY t TO 'exports' (FORMAT csv, PARTITION_BY (a), OVERWRITE)", "exports"),
        ("COPY t TO 'day-2024-01-10.csv'", "COPY t TO ''", None),
        ('COPY t TO "w.duckdb"', 'COPY t TO "w.duckdb"', "w.duckdb"),
        ("COPY t TO w", "COPY t TO w", "w"),
        ("COPY t TO ('w' || '.duckdb')", "COPY t TO ('' || '')", UNKNOWN_FILE),
        ("COPY t TO E'w.duckdb'", "COPY t TO E''", UNKNOWN_FILE),
        ("COPY t TO $$w.duckdb$$", "COPY t TO $$$$", UNKNOWN_FILE),
        ("COPY t TO $x$w.duckdb$x$", "COPY t TO $$$$", UNKNOWN_FILE),
        ("COPY t TO e'w.duckdb\\'.wal'", "COPY t TO e''", UNKNOWN_FILE),
        ("COPY t TO 's3://bucket/w.duckdb'", "COPY t TO ''", None),
        ("COPY t TO STDOUT", "COPY t TO STDOUT", None),
        ("COPY FROM DATABASE a TO b", "COPY FROM DATABASE a TO b", None),
        ('COPY "to" TO \'w.duckdb\'', 'COPY "to" TO \'w.duckdb\'', "w.duckdb"),
        ("COPY t TO /* the warehouse */ 'w.duckdb'", "COPY t TO   'w.duckdb'", "w.duckdb"),
        ("COPY t TO 'it''s.duckdb.wal'", "COPY t TO 'it''s.duckdb.wal'", "it's.duckdb.wal"),
        ('COPY t TO "w""x.duckdb"', 'COPY t TO "w""x.duckdb"', 'w"x.duckdb'),
        ('COPY t TO "it\'\'s"', 'COPY t TO "it\'\'s"', "it''s"),
        ('COPY t TO ""', 'COPY t TO ""', None),
        ("COPY t TO 's3://bucket/w.duckdb.wal'", "COPY t TO ''", None),
        ("COPY t TO 'S3://bucket/w.duckdb.wal'", "COPY t TO ''", None),
    ],
)  # fmt: skip
def test_what_a_copy_overwrites_is_read_from_its_text(tmp_path, monkeypatch, sql, kept, target):
    """The file or directory a COPY … TO writes: kept in the statement when it is a DuckDB file, a write-ahead log
    or a directory (a partition aiming elsewhere is refused), blanked when it is an export's own file (each
    partition writes another); unknown for an expression or a string of another quoting (which keeps its quoting in
    the shape: judged as an export's, ``TO 'x.csv'``, it would let a later ``TO $$w.duckdb$$`` through); nothing for
    a URL, standard output or a COPY FROM."""
    import duckdb

    monkeypatch.chdir(tmp_path)
    duckdb.connect("w.duckdb").close()
    (tmp_path / "exports").mkdir()
    [statement] = classify(sql).unclassified
    assert statement == kept
    assert copied_to(statement) == target
