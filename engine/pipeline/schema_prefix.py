"""Schema-based environments (``schema_prefix`` in ``.bruin.yml``), as Bruin documents them.

In such an environment every asset writes to its schema with the prefix
(``mart.orders`` → ``dev_mart.orders``), and a query reads a prefixed table
instead of the original wherever the prefixed copy exists, so a developer can
override some sources without copying all of them.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from engine.pipeline.database import Database

_REFERENCE = re.compile(
    r"(?<![\w$.\"])([A-Za-z_][A-Za-z0-9_$]*)\.([A-Za-z_][A-Za-z0-9_$]*)(?![\w$]|\s*\.|\s*\()", re.ASCII
)


def prefixed_name(name: str, prefix: str | None) -> str:
    """``schema.table`` with the prefix on its schema; a name without a schema has none to prefix."""
    if not prefix:
        return name
    parts = name.split(".")
    if len(parts) < 2:
        return name
    parts[-2] = prefix + parts[-2]
    return ".".join(parts)


def _code_spans(sql: str) -> Iterator[tuple[int, int]]:
    """The stretches of ``sql`` outside string literals, quoted identifiers and comments."""
    start, i, length = 0, 0, len(sql)
    while i < length:
        two = sql[i : i + 2]
        if sql[i] in "'\"":
            yield start, i
            quote, i = sql[i], i + 1
            while i < length:
                if sql[i] == quote and sql[i + 1 : i + 2] == quote:
                    i += 2
                elif sql[i] == quote:
                    break
                else:
                    i += 1
            i += 1
            start = i
        elif two == "--":
            yield start, i
            end = sql.find("\n", i)
            i = length if end < 0 else end
            start = i
        elif two == "/*":
            yield start, i
            end = sql.find("*/", i + 2)
            i = length if end < 0 else end + 2
            start = i
        else:
            i += 1
    yield start, length


def existing_tables(db: Database) -> set[tuple[str, str]]:
    """Every (schema, table) of the database, lowercase: what a prefixed reference may point to."""
    return {
        (str(schema).lower(), str(table).lower())
        for schema, table in db.execute("SELECT table_schema, table_name FROM information_schema.tables").fetchall()
    }


def rewrite_references(sql: str, prefix: str, existing: set[tuple[str, str]]) -> str:
    """``schema.table`` references (unquoted, two parts) that have a prefixed copy in ``existing`` read the copy."""
    pieces: list[str] = []
    position = 0
    for begin, end in _code_spans(sql):
        pieces.append(sql[position:begin])  # the literal or comment before this span, unchanged
        pieces.append(_rewrite_span(sql[begin:end], prefix, existing))
        position = end
    pieces.append(sql[position:])
    return "".join(pieces)


def _rewrite_span(code: str, prefix: str, existing: set[tuple[str, str]]) -> str:
    def replace(match: re.Match[str]) -> str:
        schema, table = match.group(1), match.group(2)
        if (prefix.lower() + schema.lower(), table.lower()) in existing:
            return f"{prefix}{schema}.{table}"
        return match.group(0)

    return _REFERENCE.sub(replace, code)
