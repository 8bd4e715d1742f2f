"""Schema-based environments (``schema_prefix`` in ``.bruin.yml``), as Bruin documents them.

In such an environment every asset writes to its schema with the prefix
(``mart.orders`` → ``dev_mart.orders``), and a query reads a prefixed table
instead of the original wherever the prefixed copy exists, so a developer can
override some sources without copying all of them.
"""

from __future__ import annotations

import re

from engine.pipeline.database import Database, sql_pieces

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
    for begin, end in ((start, stop) for kind, start, stop in sql_pieces(sql) if kind == "code"):
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
