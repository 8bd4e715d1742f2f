"""What hook statements write, read from their text: verbs and tables through comments, quotes and case, and
anything unrecognised reported instead of guessed."""

from __future__ import annotations

import pytest

from engine.pipeline.sql_writes import Write, classify


@pytest.mark.parametrize(
    ("sql", "writes"),
    [
        ("DELETE FROM raw.events WHERE day < '2024-01-01'", [Write("DELETE", "raw.events")]),
        ("update Mart.T set a = 1", [Write("UPDATE", "mart.t")]),
        ("INSERT OR REPLACE INTO audit.log VALUES (1)", [Write("INSERT", "audit.log")]),
        ("MERGE INTO mid.x USING y ON true WHEN MATCHED THEN DELETE", [Write("MERGE", "mid.x")]),
        ("TRUNCATE TABLE mid.x; TRUNCATE mid.y", [Write("TRUNCATE", "mid.x"), Write("TRUNCATE", "mid.y")]),
        ("DROP TABLE IF EXISTS mid.x", [Write("DROP", "mid.x")]),
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
    adding = classify("INSERT INTO a VALUES (1); COPY a FROM 'f'; CREATE TABLE b (x INT)")
    assert [w.deletes for w in adding.writes] == [False, False, False]


def test_a_statement_nobody_recognises_is_reported():
    """CALL, ATTACH or an unknown verb: unclassified, its first 80 characters kept for the report."""
    classified = classify("CALL refresh(); ATTACH 'x.duckdb' AS x; " + "EXPORT DATABASE 'd' " + "x" * 100)
    assert classified.writes == ()
    assert classified.unclassified[:2] == ("CALL refresh()", "ATTACH '' AS x")
    assert len(classified.unclassified[2]) == 80
