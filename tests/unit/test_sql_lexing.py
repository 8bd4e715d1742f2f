"""SQL read as DuckDB's lexer reads it: where a string, a name or a comment starts and ends. DuckDB's own statement
split is the oracle: any difference could hide a statement inside what was taken for a string or a comment."""

from __future__ import annotations

import re

import duckdb
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from engine.pipeline.database import sql_pieces
from engine.pipeline.options import RunOptions
from engine.pipeline.run_types import RunRequest
from engine.pipeline.runner import execute_run, prepare_run
from engine.pipeline.schema_prefix import rewrite_references
from engine.pipeline.sql_writes import _statements, classify
from tests.builder import Repo

# Each ran its DELETE with verdict auto, read as one harmless SELECT (or, the nested comment, as a statement that
# cannot be classified whose text was a blank string).
HIDDEN = {
    "dollar quotes": "SELECT $$'$$; DELETE FROM raw.landing; SELECT $$'$$",
    "tagged dollar quotes": "SELECT $t$'$t$; DELETE FROM raw.landing; SELECT $t$'$t$",
    "an escape string": "SELECT E'\\''; DELETE FROM raw.landing; SELECT E'\\''",
    "a lower-case escape string": "SELECT e'\\''; DELETE FROM raw.landing; SELECT e'\\''",
    "a carriage return ending a comment": "SELECT 1; -- note\rDELETE FROM raw.landing",
    "a nested comment": "/* /* */ ' */ DELETE FROM raw.landing; -- '",
    # Forms each lexer rule must go on reading as it does (found by mutation testing of the lexer).
    "a division": "SELECT 4 / 2; DELETE FROM raw.landing",
    "an empty comment": "/**/ DELETE FROM raw.landing",
    "a backslash in a plain string": "SELECT '\\'; DELETE FROM raw.landing; --'",
    "an escaped backslash": "SELECT E'\\\\'; DELETE FROM raw.landing; SELECT 'x'",
    "a doubled quote at a string's end": "SELECT 'a'''; DELETE FROM raw.landing",
    "a doubled quote inside a string": "SELECT 'a''b', ';'; DELETE FROM raw.landing",
    "a doubled quote before an escaped one": "SELECT E'a''\\''; DELETE FROM raw.landing",
}


@pytest.mark.parametrize("sql", HIDDEN.values(), ids=HIDDEN.keys())
def test_a_delete_after_a_string_or_comment_duckdb_closes_elsewhere_is_seen(sql):
    """Each runs ``DELETE FROM raw.landing`` in DuckDB (its rows counted after); the classifier now reads the
    delete of raw data there."""
    connection = duckdb.connect()
    connection.execute("CREATE SCHEMA raw; CREATE TABLE raw.landing AS SELECT range AS x FROM range(5)")
    connection.execute(sql)
    assert connection.execute("SELECT count(*) FROM raw.landing").fetchall() == [(0,)]
    found = classify(sql, connection.cursor())
    assert [(w.verb, w.table, w.deletes_raw) for w in found.writes] == [("DELETE", "raw.landing", True)]
    assert found.unclassified == ()


FRAGMENTS = [
    "SELECT 1", " DELETE FROM raw.landing", ";", " ", "\t", "\n", "\r", "'", "''", '"', "$$", "$t$", "$t", "t$",
    "a$$", "$1", "$", "$é$", "E'", "e'", "E''", " E", "U&'", "\\'", "\\", "--", "/*", "*/", "/**/", "/", "*", "a",
    "x", "1", "é", "(", ")",
]  # fmt: skip
PARSER = duckdb.connect()


@settings(max_examples=1500, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(st.sampled_from(FRAGMENTS), max_size=16).map("".join))
@example(" --x\r DELETE FROM raw.landing")
@example("SELECT $$;$$; DELETE FROM raw.landing")
@example("SELECT a$$, 1; DELETE FROM raw.landing")
@example("/* /* */ */ DELETE FROM raw.landing")
def test_statements_are_split_where_duckdb_splits_them(sql):
    """For SQL made of quotes, dollars, backslashes, comment marks and line ends in any order, whenever DuckDB
    parses it: as many statements as DuckDB's own split, and as many of them deletes."""
    try:
        parsed = PARSER.extract_statements(sql)
    except duckdb.Error:
        return  # it does not run either
    ours = _statements(sql)
    assert len(ours) == len(parsed), ours
    deletes = sum(str(statement.type).endswith(".DELETE") for statement in parsed)
    assert sum(bool(re.match(r"DELETE\b", statement)) for statement in ours) == deletes, ours


def test_a_string_or_comment_left_open_runs_to_the_end():
    """What DuckDB refuses to parse (a string or a comment never closed) is read as running to the end, never as
    code after it."""
    assert list(sql_pieces("SELECT $$a; DELETE")) == [("code", 0, 7), ("quoted", 7, 18)]
    assert list(sql_pieces("SELECT E'a\\'; DELETE")) == [("code", 0, 7), ("quoted", 7, 20)]
    assert list(sql_pieces("SELECT 1 /* /* */ DELETE")) == [("code", 0, 9), ("comment", 9, 24)]


def test_a_schema_prefix_rewrites_names_in_code_and_leaves_strings_alone():
    """Under ``dev_``, ``mart.t`` after a dollar-quoted string (whose text holds a quote) reads the prefixed copy;
    the same words inside the string, or an escape string, stay as written."""
    existing = {("dev_mart", "t")}
    sql = "SELECT $$'mart.t$$, E'\\'mart.t', mart.t FROM mart.t"
    assert rewrite_references(sql, "dev_", existing) == "SELECT $$'mart.t$$, E'\\'mart.t', dev_mart.t FROM dev_mart.t"


def test_an_annotation_with_a_comment_mark_leaves_the_statement_to_run(tmp_path):
    """A query annotation whose value holds ``/*`` (DuckDB's comments nest): the comment around the annotations
    stayed open over every statement, and the asset failed to parse ("unterminated /* comment"); it now runs."""
    repo = Repo(tmp_path / "repo")
    repo.sql("mart.t", "SELECT 42 AS x", materialization={"type": "table"})
    options = RunOptions(query_annotations={"note": "a /* b */ c /*"})
    request = RunRequest(str(repo.pipeline_dir), "2024-01-08", "2024-01-08", options=options)
    result = execute_run(prepare_run(request, cwd=repo.root), lambda line: None)
    assert result.ok, [r.error for r in result.results]
    assert repo.query("SELECT x FROM mart.t") == [(42,)]


def test_the_lexer_s_character_classes_are_the_readable_ones_they_stand_for():
    """Each class written as the ASCII it leaves out matches exactly the characters of its readable form."""
    from engine.pipeline import database

    readable_word = re.compile(r"[\w$\x80-\U0010ffff]")
    readable_tag = re.compile(r"\$(?:[A-Za-z_\x80-\U0010ffff][\w\x80-\U0010ffff]*)?\$")
    samples = [*range(0x300), 0xD7FF, 0xE000, 0xFFFF, 0x10000, 0x10FFFF, *range(0x80, 0x110000, 997)]
    for code in samples:
        char = chr(code)
        assert bool(database._WORD_CHAR.match(char)) == bool(readable_word.match(char)), hex(code)
        for tag in (f"${char}$", f"$a{char}$"):
            assert bool(database._DOLLAR_TAG.fullmatch(tag)) == bool(readable_tag.fullmatch(tag)), (hex(code), tag)
