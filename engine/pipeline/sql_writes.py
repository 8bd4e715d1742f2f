"""What SQL statements write, read from their text: the verb and the table of each statement, so that hooks
can be judged like the asset's own strategy. Quotes and comments are scanned (``database.sql_pieces``); a
statement this does not recognise is reported as unclassified, never guessed."""

from __future__ import annotations

import re
from dataclasses import dataclass

from engine.pipeline.database import sql_pieces

# Verbs that may delete or rewrite rows of the table they name; INSERT and COPY … FROM only add.
DELETING = ("DELETE", "UPDATE", "MERGE", "TRUNCATE", "DROP", "CREATE OR REPLACE", "ALTER")
ADDING = ("INSERT", "COPY")
_NAME = r'((?:"(?:[^"]|"")+"|[A-Za-z_][\w$]*)(?:\s*\.\s*(?:"(?:[^"]|"")+"|[A-Za-z_][\w$]*))*)'
_WRITES = [
    ("DELETE", rf"DELETE\s+FROM\s+{_NAME}"),
    ("UPDATE", rf"UPDATE\s+{_NAME}"),
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
_HARMLESS = re.compile(r"(SET|RESET|PRAGMA|CHECKPOINT|BEGIN|COMMIT|ROLLBACK|LOAD|INSTALL)\b", re.IGNORECASE)


@dataclass(frozen=True)
class Write:
    verb: str  # one of DELETING, ADDING or "CREATE"
    table: str  # as written, quotes removed: schema.table

    @property
    def deletes(self) -> bool:
        return self.verb in DELETING


@dataclass(frozen=True)
class Classified:
    writes: tuple[Write, ...]
    unclassified: tuple[str, ...]  # statements neither recognised as a write nor as a read


def classify(sql: str) -> Classified:
    """Every statement of ``sql`` (split on semicolons outside quotes and comments): what it writes."""
    writes, unclassified = [], []
    for statement in _statements(sql):
        for verb, pattern in _WRITES:
            match = re.match(pattern, statement, re.IGNORECASE)
            if match:
                writes.append(Write(verb, _plain(match.group(1))))
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


def _plain(name: str) -> str:
    parts = re.split(r'\s*\.\s*(?=(?:[^"]*"[^"]*")*[^"]*$)', name)
    return ".".join(p[1:-1].replace('""', '"') if p.startswith('"') else p.lower() for p in parts)
