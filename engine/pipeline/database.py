"""One DuckDB cursor as the runner uses it: quoting, annotated statements that stop when the asset is stopped,
and one transaction around everything an asset changes."""

from __future__ import annotations

import contextlib
import re
import threading
from collections.abc import Callable, Iterator
from typing import Any


def quote_identifier(part: str) -> str:
    return '"' + part.replace('"', '""') + '"'


def quote_name(name: str) -> str:
    """``raw.orders`` → ``"raw"."orders"``."""
    return ".".join(quote_identifier(part) for part in name.split("."))


def schema_of(name: str) -> str:
    """The schema of a name as Bruin writes it for DuckDB — ``table``, ``schema.table`` or ``catalog.schema.table``
    — as written (``""`` when unqualified): what places an asset in a layer, whatever catalog is named before it."""
    parts = name.split(".")
    return parts[-2] if len(parts) > 1 else ""


def relation_of(name: str) -> str:
    """``schema.table`` (or the table alone) of a name, its catalog left out: how one table is compared with another
    however it is written (``warehouse.raw.landing`` is ``raw.landing`` in the warehouse's own file)."""
    return ".".join(name.split(".")[-2:])


def _quoted_schema(name: str) -> str | None:
    parts = name.split(".")
    return ".".join(quote_identifier(p) for p in parts[:-1]) if len(parts) > 1 else None


def _table_parts(name: str) -> tuple[str, str]:
    return schema_of(name) or "main", name.split(".")[-1]


def strip_statement(sql: str) -> str:
    """The query without what may follow its last token: whitespace, semicolons and comments. It gets
    wrapped (``SELECT count(*) FROM (…)``, ``MERGE … USING (…)``), where a trailing ``-- comment`` would
    swallow the closing parenthesis. Quotes and comments are scanned, so ``'--'`` in a string stays."""
    end = 0
    for kind, start, stop in sql_pieces(sql):
        if kind == "quoted":
            end = stop
        elif kind == "code":
            text = sql[start:stop].rstrip("; \t\r\n\f\v")
            if text:
                end = start + len(text)
    return sql[:end].strip()


def without_comments(sql: str) -> str:
    """The SQL with every ``--`` and ``/* */`` comment replaced by a space (quoted text kept as written)."""
    return "".join(" " if kind == "comment" else sql[start:stop] for kind, start, stop in sql_pieces(sql))


# Where DuckDB's lexer (PostgreSQL's) starts a token: a letter, digit, ``_`` or ``$`` before a quote or ``$`` makes it
# part of an identifier (``a$$b``), not the start of a string. Every character past ASCII counts as a letter. Each
# class is written as the ASCII it leaves out: ``[\w$\x80-\U0010ffff]`` takes 4 ms to compile, and this module is
# imported by every partition's run (tests/unit/test_sql_lexing.py checks the two forms agree).
_NOT_WORD = r"\x00-\x23\x25-\x2f\x3a-\x40\x5b-\x5e\x60\x7b-\x7f"  # ASCII but letters, digits, _ and $
_NOT_TAG_START = r"\x00-\x40\x5b-\x5e\x60\x7b-\x7f"  # ASCII but letters and _
_NOT_TAG_REST = r"\x00-\x2f\x3a-\x40\x5b-\x5e\x60\x7b-\x7f"  # ASCII but letters, digits and _
_WORD_CHAR = re.compile(f"[^{_NOT_WORD}]")
_LINE_END = re.compile(r"[\n\r]")  # a carriage return alone ends a -- comment too
_DOLLAR_TAG = re.compile(f"\\$(?:[^{_NOT_TAG_START}][^{_NOT_TAG_REST}]*)?\\$")


def sql_pieces(sql: str) -> Iterator[tuple[str, int, int]]:
    """``(kind, start, stop)`` for each run of code, quoted text or comment, read as DuckDB's lexer reads them: a
    string in single quotes (a doubled quote escapes), an escape string ``E'…'`` (a backslash escapes too), a
    dollar-quoted string ``$$…$$`` or ``$tag$…$tag$``, a name in double quotes, a ``--`` comment to the end of the
    line (a carriage return ends it too), and ``/* */`` comments, which nest. A reading that differed would hide a
    statement inside what it took for a string: ``SELECT $$'$$; DELETE FROM raw.landing; SELECT $$'$$`` runs the
    DELETE."""
    i, n, code = 0, len(sql), 0
    while i < n:
        char = sql[i]
        starts_token = i == 0 or not _WORD_CHAR.match(sql[i - 1])
        if char == "-" and sql.startswith("--", i):
            line_end = _LINE_END.search(sql, i)
            stop = n if line_end is None else line_end.start()
        elif char == "/" and sql.startswith("/*", i):
            stop = _comment_end(sql, i)
        elif char in "'\"":
            stop = _quote_end(sql, i + 1, char, backslash=False)
        elif char in "eE" and sql.startswith("'", i + 1) and starts_token:
            stop = _quote_end(sql, i + 2, "'", backslash=True)
        elif char == "$" and starts_token and (tag := _DOLLAR_TAG.match(sql, i)) is not None:
            close = sql.find(tag.group(), tag.end())
            stop = n if close < 0 else close + len(tag.group())
        else:
            i += 1
            continue
        if code < i:
            yield "code", code, i
        yield ("comment" if char in "-/" else "quoted"), i, stop
        i = code = stop
    if code < n:
        yield "code", code, n


def _quote_end(sql: str, i: int, quote: str, *, backslash: bool) -> int:
    """Just past the quote that closes a string (or name) whose text starts at ``i``; the end when none does."""
    n = len(sql)
    while i < n:
        if backslash and sql[i] == "\\":
            i += 2
        elif sql[i] != quote:
            i += 1
        elif sql.startswith(quote, i + 1):
            i += 2
        else:
            return i + 1
    return n


def _comment_end(sql: str, i: int) -> int:
    """Just past the ``*/`` that closes the comment opened at ``i``, comments inside it nesting; the end when none
    does."""
    depth, i, n = 0, i, len(sql)
    while i < n:
        if sql.startswith("/*", i):
            depth, i = depth + 1, i + 2
        elif sql.startswith("*/", i):
            depth, i = depth - 1, i + 2
            if depth == 0:
                return i
        else:
            i += 1
    return n


class RunStopped(Exception):
    """The asset was stopped (cancel, timeout): no further statement runs, and nothing is committed."""


class Database:
    """Runs statements on one DuckDB cursor, prefixing the query annotation comment.

    ``stopped`` says why the asset was stopped, if it was: an interrupt that lands between two statements
    (where DuckDB has nothing to interrupt) must still keep the next one, and the COMMIT, from running.
    """

    def __init__(
        self, cursor: Any, annotate: Callable[[str], str], stopped: Callable[[], str | None] = lambda: None
    ) -> None:
        self.cursor = cursor
        self.annotate = annotate
        self.stopped = stopped

    def raise_if_stopped(self) -> None:
        reason = self.stopped()
        if reason is not None:
            raise RunStopped(reason)

    def execute(self, sql: str, parameters: list[Any] | None = None) -> Any:
        self.raise_if_stopped()
        return self.cursor.execute(self.annotate(sql), parameters or [])

    def scalar(self, sql: str, parameters: list[Any] | None = None) -> Any:
        row = self.execute(sql, parameters).fetchone()
        return row[0] if row else None

    def count(self, sql: str, parameters: list[Any] | None = None) -> int:
        """Run a statement that reports an affected-row count."""
        value = self.scalar(sql, parameters)
        return int(value) if value is not None else 0

    def table_exists(self, name: str) -> bool:
        schema, table = _table_parts(name)
        return bool(
            self.scalar(
                "SELECT count(*) FROM information_schema.tables WHERE table_schema = ? AND table_name = ?",
                [schema, table],
            )
        )

    def column_type(self, name: str, column: str) -> str | None:
        schema, table = _table_parts(name)
        return self.scalar(
            "SELECT data_type FROM information_schema.columns "
            "WHERE table_schema = ? AND table_name = ? AND column_name = ?",
            [schema, table, column],
        )


_SCHEMA_LOCK = threading.Lock()


def ensure_schema(db: Database, name: str) -> None:
    """Create the schema of ``schema.table`` if missing, one thread at a time (concurrent
    CREATE SCHEMA statements in DuckDB transactions conflict with each other)."""
    schema = _quoted_schema(name)
    if schema:
        with _SCHEMA_LOCK:
            db.execute(f"CREATE SCHEMA IF NOT EXISTS {schema}")


def run_in_transaction(db: Database, work: Callable[[], Any]) -> Any:
    """``work()`` between BEGIN and COMMIT; ROLLBACK and re-raise on any failure."""
    db.cursor.execute("BEGIN TRANSACTION")
    try:
        result = work()
        db.raise_if_stopped()
        db.cursor.execute("COMMIT")
        return result
    except BaseException:
        with contextlib.suppress(Exception):
            db.cursor.execute("ROLLBACK")
        raise
