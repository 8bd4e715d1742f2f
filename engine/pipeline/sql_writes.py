"""What SQL statements write, read from their text: the verb and the table of each statement, so that hooks
can be judged like the asset's own strategy. Quotes and comments are scanned (``database.sql_pieces``); a
statement this does not recognise is reported as unclassified, never guessed."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from engine.pipeline.database import sql_pieces

# Verbs that may delete or rewrite rows of the table they name; INSERT and COPY … FROM only add, but an INSERT
# that replaces the rows it conflicts with rewrites them.
UPSERT = "INSERT … ON CONFLICT DO UPDATE"
# Schemas that hold source data, the raw layer (docs/guardrails.md, layer_risk): never deleted or rebuilt.
RAW_SCHEMAS = ("raw", "source", "src", "landing")
DELETING = ("DELETE", "UPDATE", "MERGE", "TRUNCATE", "DROP", "CREATE OR REPLACE", "ALTER", "INSERT OR REPLACE", UPSERT)
ADDING = ("INSERT", "COPY")
_NAME = r'((?:"(?:[^"]|"")+"|[A-Za-z_][\w$]*)(?:\s*\.\s*(?:"(?:[^"]|"")+"|[A-Za-z_][\w$]*))*)'
_WRITES = [
    ("DELETE", rf"DELETE\s+FROM\s+{_NAME}"),
    ("UPDATE", rf"UPDATE\s+{_NAME}"),
    ("INSERT OR REPLACE", rf"INSERT\s+OR\s+REPLACE\s+INTO\s+{_NAME}"),
    ("INSERT", rf"INSERT\s+(?:OR\s+\w+\s+)?INTO\s+{_NAME}"),
    ("MERGE", rf"MERGE\s+INTO\s+{_NAME}"),
    ("TRUNCATE", rf"TRUNCATE\s+(?:TABLE\s+)?{_NAME}"),
    ("DROP", rf"DROP\s+TABLE\s+(?:IF\s+EXISTS\s+)?{_NAME}"),
    ("CREATE OR REPLACE", rf"CREATE\s+OR\s+REPLACE\s+(?:TEMP(?:ORARY)?\s+)?TABLE\s+{_NAME}"),
    ("CREATE", rf"CREATE\s+(?:TEMP(?:ORARY)?\s+)?TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?{_NAME}"),
    ("ALTER", rf"ALTER\s+TABLE\s+(?:IF\s+EXISTS\s+)?{_NAME}"),
    ("COPY", rf"COPY\s+{_NAME}\s+FROM\b"),
]
_READS = re.compile(r"(SELECT|WITH|VALUES|SHOW|DESCRIBE|EXPLAIN|SUMMARIZE|FROM)\b", re.IGNORECASE)
# SET and RESET of the search path or schema change what an unqualified table name means: not harmless.
_HARMLESS = re.compile(
    r"(?!(?:SET|RESET)\s+(?:GLOBAL\s+|SESSION\s+|LOCAL\s+)?(?:search_path|schema)\b)"
    r"(SET|RESET|PRAGMA|CHECKPOINT|BEGIN|COMMIT|ROLLBACK|LOAD|INSTALL)\b",
    re.IGNORECASE,
)
# EXPLAIN ANALYZE runs the statement it explains.
_EXPLAIN_ANALYZE = re.compile(r"EXPLAIN\s+ANALY[SZ]E\s+", re.IGNORECASE)
# The statement a WITH clause leads to: its CTEs read, but the statement after them may write.
_AFTER_WITH = re.compile(r"\b(?:DELETE\s+FROM|UPDATE|INSERT|MERGE\s+INTO)\b", re.IGNORECASE)
_DO_UPDATE = re.compile(r"\bON\s+CONFLICT\b.*\bDO\s+UPDATE\b", re.IGNORECASE | re.DOTALL)


@dataclass(frozen=True)
class Write:
    verb: str  # one of DELETING, ADDING or "CREATE"
    table: str  # as written, quotes removed: schema.table (or catalog.schema.table)
    parts: tuple[str, ...] = field(default=(), compare=False)  # the name's parts (a quoted one may hold a dot)

    @property
    def deletes(self) -> bool:
        return self.verb in DELETING

    @property
    def deletes_raw(self) -> bool:
        """Whether it deletes or rewrites rows of a table in the raw layer."""
        return self.deletes and self.schema.lower() in RAW_SCHEMAS

    @property
    def schema(self) -> str:
        """The schema the table is in, as written (``""`` when unqualified); a catalog before it is passed over."""
        parts = self.parts or tuple(self.table.split("."))
        return parts[-2] if len(parts) >= 2 else ""

    @property
    def relation(self) -> str:
        """``schema.table`` (or the table alone), without the catalog, as an asset is named."""
        parts = self.parts or tuple(self.table.split("."))
        return ".".join(parts[-2:])


@dataclass(frozen=True)
class Classified:
    writes: tuple[Write, ...]
    unclassified: tuple[str, ...]  # statements neither recognised as a write nor as a read


def classify(sql: str) -> Classified:
    """Every statement of ``sql`` (split on semicolons outside quotes and comments): what it writes."""
    writes, unclassified = [], []
    for statement in _statements(sql):
        if explained := _EXPLAIN_ANALYZE.match(statement):
            statement = statement[explained.end() :]
        main = statement
        if re.match(r"WITH\b", statement, re.IGNORECASE) and (after := _AFTER_WITH.search(statement)):
            main = statement[after.start() :]
        for verb, pattern in _WRITES:
            match = re.match(pattern, main, re.IGNORECASE)
            if match:
                parts = _parts(match.group(1))
                if verb == "INSERT" and _DO_UPDATE.search(main):
                    verb = UPSERT
                writes.append(Write(verb, ".".join(parts), parts))
                break
        else:
            if not (_READS.match(statement) or _HARMLESS.match(statement)):
                unclassified.append(statement[:80])
    return Classified(tuple(writes), tuple(unclassified))


def _statements(sql: str) -> list[str]:
    """The statements of ``sql``, comments dropped, each starting at its first word (quoted text blanked, so
    a string cannot look like a verb)."""
    code = "".join(
        "''" if kind == "quoted" and sql[start] == "'" else sql[start:stop] if kind != "comment" else " "
        for kind, start, stop in sql_pieces(sql)
    )
    return [part.strip() for part in code.split(";") if part.strip()]


def _parts(name: str) -> tuple[str, ...]:
    """A dotted name's parts: quotes removed, unquoted parts lower-cased (as DuckDB folds them)."""
    parts = re.split(r'\s*\.\s*(?=(?:[^"]*"[^"]*")*[^"]*$)', name)
    return tuple(p[1:-1].replace('""', '"') if p.startswith('"') else p.lower() for p in parts)
