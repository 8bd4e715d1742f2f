"""What SQL statements write, read from their text: the verb and the table of each statement, so that hooks
can be judged like the asset's own strategy. Quotes and comments are scanned (``database.sql_pieces``); a
statement this does not recognise is reported as unclassified, never guessed."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from engine.pipeline.database import sql_pieces, strip_statement

if TYPE_CHECKING:  # DuckDB is imported where a statement is parsed: a command's backfill never loads it (~70 ms)
    import duckdb

    Parser = duckdb.DuckDBPyConnection  # an open connection (or cursor): anything with ``extract_statements``

# Verbs that may delete or rewrite rows of the table they name; INSERT and COPY … FROM only add, but an INSERT
# that replaces the rows it conflicts with rewrites them.
UPSERT = "INSERT … ON CONFLICT DO UPDATE"
# Schemas that hold source data, the raw layer (docs/guardrails.md, layer_risk): never deleted or rebuilt.
RAW_SCHEMAS = ("raw", "source", "src", "landing")
LAYERS = ("raw", "mid", "final")


def layer_tag(tags: tuple[str, ...]) -> str | None:
    """The layer an asset's first ``layer:`` tag names (``layer:raw``), which wins over its schema; None without."""
    for tag in tags:
        if tag.startswith("layer:") and tag[len("layer:") :] in LAYERS:
            return tag[len("layer:") :]
    return None


# A whole schema dropped (its tables with it, CASCADE): a raw table's delete when the schema is raw; any other is
# left unclassified, since its tables are not named to judge or fingerprint.
DROP_SCHEMA = "DROP SCHEMA"
DELETING = (
    "DELETE", "UPDATE", "MERGE", "TRUNCATE", "DROP", DROP_SCHEMA, "CREATE OR REPLACE", "ALTER", "INSERT OR REPLACE",
    UPSERT,
)  # fmt: skip
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
    (DROP_SCHEMA, rf"DROP\s+SCHEMA\s+(?:IF\s+EXISTS\s+)?{_NAME}"),
    ("CREATE OR REPLACE", rf"CREATE\s+OR\s+REPLACE\s+(?:TEMP(?:ORARY)?\s+)?TABLE\s+{_NAME}"),
    ("CREATE", rf"CREATE\s+(?:TEMP(?:ORARY)?\s+)?TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?{_NAME}"),
    ("ALTER", rf"ALTER\s+TABLE\s+(?:IF\s+EXISTS\s+)?{_NAME}"),
    ("COPY", rf"COPY\s+{_NAME}\s+FROM\b"),
]
_READS = re.compile(r"(SELECT|WITH|VALUES|SHOW|DESCRIBE|EXPLAIN|SUMMARIZE|FROM)\b", re.IGNORECASE)
_HARMLESS = re.compile(r"(SET|RESET|PRAGMA|CHECKPOINT|LOAD|INSTALL)\b", re.IGNORECASE)
# Statements that begin or end a transaction: a run holds its asset in one transaction of its own, so a COMMIT in
# a hook would make what came before it permanent and leave what follows outside any rollback.
_TRANSACTION = re.compile(r"(BEGIN|START\s+TRANSACTION|COMMIT|END|ROLLBACK|ABORT)\b", re.IGNORECASE)
# Not harmless after all: SET, RESET and PRAGMA of the search path or schema (the name quoted or not) change what
# an unqualified table name means, and PRAGMA import_database runs the CREATE statements of a directory's
# schema.sql (a CREATE OR REPLACE of a raw table among them).
_NOT_HARMLESS = re.compile(
    r'(?:SET|RESET|PRAGMA)\s+(?:GLOBAL\s+|SESSION\s+|LOCAL\s+)?"?(?:search_path|schema)\b|PRAGMA\s+"?import_database\b',
    re.IGNORECASE,
)
# EXPLAIN ANALYZE runs the statement it explains, written bare or among the options in parentheses; a prepared
# statement runs at each EXECUTE what it prepares (judged where it is prepared: EXECUTE cannot be classified).
_EXPLAIN_ANALYZE = re.compile(r"EXPLAIN\s*(?:ANALY[SZ]E\b|\([^)]*\bANALY[SZ]E\b[^)]*\))\s*", re.IGNORECASE)
_PREPARE = re.compile(r"PREPARE\s+(?:\"(?:[^\"]|\"\")+\"|\w+)\s*(?:\([^)]*\))?\s*AS\s+", re.IGNORECASE)
# The statement a WITH clause leads to: its CTEs read, but the statement after them may write.
_AFTER_WITH = re.compile(r"\b(?:DELETE\s+FROM|UPDATE|INSERT|MERGE\s+INTO)\b", re.IGNORECASE)
# What DuckDB's own parser says each verb is (TRUNCATE is its DELETE); a statement it reads otherwise than
# these patterns did is reported as unclassified rather than trusted.
_PARSED_AS = {
    "DELETE": "DELETE",
    "TRUNCATE": "DELETE",
    "UPDATE": "UPDATE",
    "INSERT": "INSERT",
    "INSERT OR REPLACE": "INSERT",
    UPSERT: "INSERT",
    "MERGE": "MERGE_INTO",
    "DROP": "DROP",
    DROP_SCHEMA: "DROP",
    "CREATE": "CREATE",
    "CREATE OR REPLACE": "CREATE",
    "ALTER": "ALTER",
    "COPY": "COPY",
}
# Statement types that change no table: queries, plain EXPLAIN, settings, extensions, CHECKPOINT.
_PARSED_HARMLESS = frozenset({"SELECT", "EXPLAIN", "SET", "VARIABLE_SET", "PRAGMA", "LOAD", "CALL"})
_DO_UPDATE = re.compile(r"\bON\s+CONFLICT\b.*\bDO\s+UPDATE\b", re.IGNORECASE | re.DOTALL)


# Where SQL a run executes as written comes from: an asset's pre and post hooks, and the query of an SQL asset
# without materialization. Each is judged statement by statement, at the pre-flight and in every partition.
PRE, POST, QUERY = "pre", "post", "query"
RUN_SQL_PHASES = (PRE, POST, QUERY)


def phrase(phase: str, *, partition: bool = False) -> str:
    """How a message names where a statement comes from: "a pre hook", "this partition's post hook", "its SQL, run
    as written,"."""
    whose = "this partition's" if partition else "its" if phase == QUERY else "a"
    return f"{whose} SQL, run as written," if phase == QUERY else f"{whose} {phase} hook"


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
        """Whether it deletes or rewrites rows of a table in a raw schema."""
        return self.deletes and self.schema.lower() in RAW_SCHEMAS

    def deletes_source(self, raw_layer: frozenset[str]) -> bool:
        """Whether it deletes or rewrites rows of source data: a table in a raw schema, or one of ``raw_layer``
        (the ``schema.table`` of the assets a ``layer:raw`` tag puts there, lower-case)."""
        return self.deletes_raw or (self.deletes and self.relation.lower() in raw_layer)

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
    unclassified: tuple[str, ...]  # statements neither recognised as a write nor as a read, quoted text blanked
    transactions: tuple[str, ...] = ()  # statements that begin, commit or roll back a transaction


def classify(sql: str, parser: Parser | None = None) -> Classified:
    """Every statement of ``sql`` (split on semicolons outside quotes and comments): what it writes. ``parser``: an
    open DuckDB connection to parse with (see :func:`_parsed`)."""
    writes, unclassified, transactions = [], [], []
    for statement in _statements(sql):
        if explained := _EXPLAIN_ANALYZE.match(statement) or _PREPARE.match(statement):
            statement = statement[explained.end() :]
        parsed = _parsed_type(statement, parser)
        if parsed == "TRANSACTION" or _TRANSACTION.match(statement):
            transactions.append(statement)
            continue
        write = _write(statement)
        harmless = write is None and bool(
            _READS.match(statement) or (_HARMLESS.match(statement) and not _NOT_HARMLESS.match(statement))
        )
        if parsed is not None:
            # DuckDB's parser is the authority on what a statement is: one these patterns read as another verb,
            # or as a read, is not trusted (a CTE's column named "update" hid the DELETE after it).
            if write is not None and _PARSED_AS[write.verb] != parsed:
                write = None
            harmless = write is None and (parsed == "SELECT" or (harmless and parsed in _PARSED_HARMLESS))
        if write is not None and write.verb == DROP_SCHEMA and not write.deletes_raw:
            write = None  # its tables are not named: judged by a person
        # What it writes inside itself, which DuckDB runs with it: a CTE's DELETE … RETURNING before a SELECT, an
        # INSERT or a CREATE TABLE … AS. A query is read from DuckDB's parse tree, anything else from its text.
        inner = (
            (_nested_writes(statement, parser) if _CTE_BODY.search(statement) else ())
            if parsed == "SELECT"
            else _written_inside(statement)
        )
        writes += ([write] if write is not None else []) + list(inner or ())
        if inner is None or (write is None and not inner and not harmless):
            unclassified.append(statement)
    return Classified(tuple(writes), tuple(unclassified), tuple(transactions))


def shape(statement: str) -> str:
    """A statement as judged once for every partition: quoted text blanked (as :func:`classify` gives it), each
    number outside quoted names a ``0``, runs of white space one space. A macro that renders the day's date or a
    count into a statement renders the same shape on every day; one that renders another statement does not."""
    return " ".join(
        "".join(
            _NUMBER.sub("0", statement[start:stop]) if kind == "code" else statement[start:stop]
            for kind, start, stop in sql_pieces(statement)
        ).split()
    )


_NUMBER = re.compile(r"(?<![\w$.])(?:\d+\.?\d*|\.\d+)(?:e[+-]?\d+)?(?![\w$])", re.IGNORECASE)


def _write(statement: str) -> Write | None:
    """The verb and table of a statement that writes, read from its text, or None."""
    main = statement
    if re.match(r"WITH\b", statement, re.IGNORECASE) and (after := _main_after_with(statement)) is not None:
        main = statement[after:]
    for verb, pattern in _WRITES:
        if match := re.match(pattern, main, re.IGNORECASE):
            parts = _parts(match.group(1))
            if verb == "INSERT" and _DO_UPDATE.search(main):
                verb = UPSERT
            if verb == DROP_SCHEMA:
                parts = (*parts, "*")  # every table in it
            return Write(verb, ".".join(parts), parts)
    return None


# A writing verb that opens a parenthesis (a CTE's body, a CREATE TABLE … AS (…)): where its statement starts.
_NESTED_VERB = re.compile(r"\(\s*(?=(?:DELETE|UPDATE|INSERT|MERGE|TRUNCATE)\b)", re.IGNORECASE)
# A CTE's body that is not a query (DuckDB allows INSERT, UPDATE, DELETE — TRUNCATE is its DELETE — and COPY … TO),
# always in parentheses: a query without one has nothing inside to write, and its parse tree is not read (0.5 ms a
# query). Searched in the text without comments: `(/* why */ DELETE` is such a body too.
_CTE_BODY = re.compile(r"\(\s*(?:DELETE|UPDATE|INSERT|MERGE|COPY|TRUNCATE)\b", re.IGNORECASE)


def _has_cte_body(sql: str) -> bool:
    return any(_CTE_BODY.search(statement) for statement in _statements(sql))


# The query nodes of DuckDB's serialized parse tree that write, by the verb they are judged as (an INSERT that
# replaces or updates the rows it conflicts with rewrites them).
_WRITING_NODES = {"DELETE_QUERY_NODE": "DELETE", "UPDATE_QUERY_NODE": "UPDATE", "INSERT_QUERY_NODE": "INSERT"}
_REWRITING_CONFLICTS = {"REPLACE": "INSERT OR REPLACE", "UPDATE": UPSERT}


def _nested_writes(statement: str, parser: Parser | None) -> tuple[Write, ...] | None:
    """The writes a statement DuckDB parses as a query makes inside itself, from DuckDB's own parse tree
    (``json_serialize_sql``): a CTE's ``DELETE … RETURNING`` runs with the query. None when DuckDB cannot say (the
    tree does not serialize, or holds a query node of a kind not known here)."""
    import duckdb
    import orjson

    try:
        row = (parser if parser is not None else duckdb).execute("SELECT json_serialize_sql(?)", [statement]).fetchone()
        tree = orjson.loads(row[0]) if row else None
    except (duckdb.Error, orjson.JSONDecodeError):
        return None
    if not isinstance(tree, dict) or tree.get("error") is not False:
        return None
    writes: list[Write] = []
    pending: list = [tree]
    while pending:
        node = pending.pop()
        if isinstance(node, list):
            pending += node
            continue
        if not isinstance(node, dict):
            continue
        kind = node.get("type")
        if isinstance(kind, str) and kind.endswith("_QUERY_NODE"):
            if kind not in _WRITING_NODES:
                return None
            writes.append(_node_write(node, _WRITING_NODES[kind]))
        pending += node.values()
    return tuple(writes)


def _written_inside(statement: str) -> tuple[Write, ...] | None:
    """The writes a statement other than a query makes inside parentheses, read from its text: the DELETE of
    ``WITH d AS (DELETE FROM raw.x RETURNING *) INSERT INTO mid.y …`` or of ``CREATE TABLE t AS (WITH d AS (DELETE
    …``. None when a verb there opens nothing these patterns read."""
    inner = [_write(statement[match.end() :]) for match in _NESTED_VERB.finditer(statement)]
    return None if None in inner else tuple(w for w in inner if w is not None)


def _node_write(node: dict, verb: str) -> Write:
    """The verb and table of a writing node of DuckDB's parse tree."""
    table = node.get("table")
    if isinstance(table, dict):  # DELETE and UPDATE: a table reference
        names = (table.get("catalog_name"), table.get("schema_name"), table.get("table_name"))
    else:  # INSERT: its names beside it
        names = (node.get("catalog"), node.get("schema"), table)
        conflict = node.get("on_conflict_info") or {}
        verb = _REWRITING_CONFLICTS.get(conflict.get("action_type"), verb)
    parts = tuple(str(name) for name in names if name)
    return Write(verb, ".".join(parts), parts)


def _main_after_with(statement: str) -> int | None:
    """Where the statement a WITH clause leads to starts: the first writing verb outside the CTEs' parentheses
    and outside quoted names, or None."""
    depth, quoted, depths = 0, False, []
    for char in statement:
        depths.append(depth if not quoted else -1)
        if char == '"':
            quoted = not quoted
        elif not quoted:
            depth += (char == "(") - (char == ")")
    return next((m.start() for m in _AFTER_WITH.finditer(statement) if depths[m.start()] == 0), None)


def after_the_query(query: str, parser: Parser | None = None) -> list[str]:
    """The statements that follow a rendered query's first, by DuckDB's parser (none when it does not parse: running
    it then fails without writing). A materialized asset runs one query; DuckDB would run these after it, unjudged."""
    parsed = _parsed(query, parser) or []
    return [text for statement in parsed[1:] if (text := strip_statement(statement.query))]


def not_one_read(query: str, parser: Parser | None = None) -> str | None:
    """Why a rendered query is not one statement that only reads (a check's), by DuckDB's parser; None when it is,
    or when it does not parse (running it then fails on its own)."""
    parsed = _parsed(query, parser)
    if parsed is None:
        return None
    if len(parsed) != 1:
        return f"it is {len(parsed)} statements"
    kind = _type_name(parsed[0])
    if kind == UNNAMED:
        return "it is a statement DuckDB's Python module cannot name"
    if kind != "SELECT":
        return f"it is {'an' if kind[0] in 'AEIOU' else 'a'} {kind.replace('_', ' ')}"
    nested = _nested_writes(query, parser) if _has_cte_body(query) else ()
    if nested is None:
        return "DuckDB cannot say what it writes"
    return f"it runs {nested[0].verb} on {nested[0].table} inside it" if nested else None


def writes_inside(query: str, parser: Parser | None = None) -> tuple[Write, ...]:
    """What a materialized asset's rendered query (one statement) writes inside itself, by DuckDB's parse tree: a
    CTE's ``DELETE … RETURNING`` runs with the ``CREATE TABLE … AS`` around it. Empty for a query that only
    reads, or one DuckDB cannot parse (running it then fails without writing)."""
    if not _has_cte_body(query):  # nothing inside it can write: no parse (every materialized query of a run)
        return ()
    return classify(query, parser).writes if _parsed_type(query, parser) == "SELECT" else ()


def _parsed_type(statement: str, parser: Parser | None) -> str | None:
    """The statement's type by DuckDB's parser, or None when it does not parse as one statement here (a
    template judged as written, SQL this DuckDB does not know: the patterns alone then judge it)."""
    parsed = _parsed(statement, parser)
    return _type_name(parsed[0]) if parsed is not None and len(parsed) == 1 else None


# A statement DuckDB parses but its Python module has no name for (in 2.0, `UPDATE EXTENSIONS`: "29 is not a valid
# StatementType"): known to be one statement, of no kind this module can judge.
UNNAMED = "UNNAMED"


def _type_name(statement: duckdb.Statement) -> str:
    try:
        return statement.type.name
    except ValueError:
        return UNNAMED


def _parsed(sql: str, parser: Parser | None) -> list[duckdb.Statement] | None:
    """DuckDB's own reading of ``sql``, statement by statement, or None when it does not parse. Parsed by ``parser``
    (a connection the caller has open) when given: DuckDB's module-level parse opens a database of its own, about
    25 ms at its first use in a process — every partition's child, where a connection is at hand anyway."""
    import duckdb

    try:
        return (parser if parser is not None else duckdb).extract_statements(sql)
    except duckdb.Error:
        return None


def _statements(sql: str) -> list[str]:
    """The statements of ``sql``, comments dropped, each starting at its first word (quoted text blanked, so
    a string cannot look like a verb), except the DuckDB file an ATTACH names: which file it opens is what it
    does."""
    statements: list[list[tuple[str, str]]] = [[]]
    for kind, start, stop in sql_pieces(sql):
        text = sql[start:stop]
        if kind != "code":
            statements[-1].append((kind, text))
            continue
        first, *rest = text.split(";")
        statements[-1].append((kind, first))
        statements += [[(kind, part)] for part in rest]
    found = []
    for pieces in statements:
        blanked = "".join(_blanked(kind, text) for kind, text in pieces).strip()
        if _ATTACH.match(blanked) or _COPY.match(blanked):
            named = "".join(text if kind == "quoted" else _blanked(kind, text) for kind, text in pieces).strip()
            if _COPY.match(blanked):
                blanked = _with_guarded_target(blanked, named)
            elif attached_file(named) not in (None, UNKNOWN_FILE):
                blanked = named  # a local DuckDB file's name only: another type's may hold a password (a Postgres DSN)
        if blanked:
            found.append(blanked)
    return found


def _blanked(kind: str, text: str) -> str:
    """A comment as a space; a string emptied, keeping how it is quoted (``''``, ``E''``, ``$$$$``: a target read
    from a plain string is judged, one of another quoting is not, and the two must not share a shape); a quoted
    name kept."""
    if kind == "comment":
        return " "
    if kind != "quoted" or text[0] == '"':
        return text
    return "$$$$" if text[0] == "$" else "''" if text[0] == "'" else text[0] + "''"


# ATTACH opens another database file in the run's connection: whatever the statements after it write there is
# written to that file, under the rules of whichever environment owns it (docs/guardrails.md, the level follows
# the warehouse).
_ATTACH = re.compile(r"ATTACH\b(?:\s+OR\s+REPLACE\b)?(?:\s+DATABASE\b)?(?:\s+IF\s+NOT\s+EXISTS\b)?\s*", re.IGNORECASE)
_READ_ONLY = re.compile(r"\bREAD_ONLY\b(?!\s*(?:=\s*)?(?:false|0)\b)", re.IGNORECASE)
_OTHER_TYPE = re.compile(r"\bTYPE\s*(?:=\s*)?'?(?!duckdb\b)\w+", re.IGNORECASE)
UNKNOWN_FILE = "?"


def attached_file(statement: str) -> str | None:
    """The DuckDB file an ATTACH statement (as ``classify`` reports it) opens for writing, as written (``~`` and a
    relative path are the run's to resolve); ``UNKNOWN_FILE`` when the text does not say which (not a quoted
    literal); None for any other statement, and for an ATTACH that cannot write a local DuckDB file: read-only, of
    another type (SQLite, Postgres), in memory, or a URL."""
    match = _ATTACH.match(statement)
    if match is None:
        return None
    rest = statement[match.end() :]
    literal = re.match(r"'((?:[^']|'')*)'", rest)
    if literal is None:
        return UNKNOWN_FILE
    options = rest[literal.end() :]
    path = literal.group(1).replace("''", "'")
    if path.lower().startswith("duckdb:"):
        path = path[len("duckdb:") :]
    elif re.match(r"[A-Za-z][\w+.-]*:|:memory:", path) or _OTHER_TYPE.search(options):
        return None  # another type's prefix (sqlite:, md:), a URL (s3://, read-only), or :memory:
    if _READ_ONLY.search(options) or not path:
        return None
    return path


# COPY ... TO writes a file, or with PARTITION_BY a directory, which OVERWRITE empties first: aimed at an
# environment's DuckDB file, its write-ahead log or a directory holding it, it destroys that warehouse.
_COPY = re.compile(r"COPY\b", re.IGNORECASE)
_TO_OR_FROM = re.compile(r"[()]|\b(?:TO|FROM)\b", re.IGNORECASE)
_TARGET = re.compile(r"""\s*(?:'((?:[^']|'')*)'|"((?:[^"]|"")*)"|([A-Za-z_]\w*)(?![\w'"]))""")


def copied_to(statement: str) -> str | None:
    """The file or directory a ``COPY … TO`` statement (as ``classify`` reports it) writes, as written (``~`` and a
    relative path are the run's to resolve); ``UNKNOWN_FILE`` when its text does not name it (an expression); None
    for any other statement, a ``COPY … FROM``, standard output, a URL, and a name the report blanked (a file that
    is neither a DuckDB database, a write-ahead log nor a directory: see ``guarded_target``)."""
    found = _copy_target(statement)
    return None if found is None else found[2]


def guarded_target(path: str) -> bool:
    """A COPY target whose name the statement keeps, so that a partition writing another one is refused: a
    directory, a write-ahead log, or a DuckDB database file (which a warehouse is); not a new or exported file,
    whose name changes with each partition."""
    from pathlib import Path

    target = Path(path).expanduser()
    if target.is_dir() or target.name.endswith(".wal"):
        return True
    try:
        with target.open("rb") as file:
            return file.read(12)[8:12] == b"DUCK"
    except OSError:
        return False


def _copy_target(statement: str) -> tuple[int, int, str | None] | None:
    """Where a ``COPY … TO`` statement names its target, and the target (``copied_to``); None when it is no such
    statement."""
    if not _COPY.match(statement):
        return None
    depth = 0
    for kind, start, stop in sql_pieces(statement):
        if kind != "code":
            continue
        for token in _TO_OR_FROM.finditer(statement, start, stop):
            word = token.group(0).upper()
            if word in "()":
                depth += 1 if word == "(" else -1
            elif depth == 0 and word == "FROM":
                return None  # COPY t FROM a file (a write to t, classified), COPY FROM DATABASE (an attached one)
            elif depth == 0:
                target = _TARGET.match(statement, token.end())
                if target is None:
                    return token.end(), token.end(), UNKNOWN_FILE
                literal, quoted, bare = target.groups()
                if bare is not None and bare.upper() == "STDOUT":
                    return None
                path = bare if bare is not None else (quoted or "").replace('""', '"') if literal is None else literal
                path = path.replace("''", "'") if literal is not None else path
                local = path and not re.match(r"[A-Za-z][\w+.-]*:", path)
                return target.start(), target.end(), path if local else None
    return None


def _with_guarded_target(blanked: str, named: str) -> str:
    """``blanked`` with its COPY target's name put back (from ``named``, the same statement unblanked) when the
    target is one a partition must not change (``guarded_target``)."""
    found, where = _copy_target(named), _copy_target(blanked)
    if found is None or where is None or found[2] in (None, UNKNOWN_FILE) or not guarded_target(found[2]):
        return blanked
    return blanked[: where[0]] + named[found[0] : found[1]] + blanked[where[1] :]


def _parts(name: str) -> tuple[str, ...]:
    """A dotted name's parts: quotes removed, unquoted parts lower-cased (as DuckDB folds them)."""
    parts = re.split(r'\s*\.\s*(?=(?:[^"]*"[^"]*")*[^"]*$)', name)
    return tuple(p[1:-1].replace('""', '"') if p.startswith('"') else p.lower() for p in parts)
