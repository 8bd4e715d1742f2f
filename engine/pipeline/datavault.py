"""Raw Data Vault loads on DuckDB: ``datavault_hub``, ``datavault_link`` and ``datavault_satellite``, as Bruin
documents them.

The query computes the hash keys and the hashdiff; a load only decides which rows
are new. Every load is insert-only: a hub or link row is inserted once per hash
key, a satellite row only when it carries a change. Columns get their roles from
``meta.datavault_role`` or, failing that, from Bruin's naming rules.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from engine.pipeline.assets import Asset
from engine.pipeline.columns import Column
from engine.pipeline.database import Database, quote_identifier, quote_name

DATAVAULT_STRATEGIES = ("datavault_hub", "datavault_link", "datavault_satellite")

_ROLE_NAMES = {
    "hub_hash": {"hash_key", "hub_hash_key"},
    "link_hash": {"link_hash_key", "hash_key"},
    "parent_hash": {"parent_hash_key", "hub_hash_key", "hash_key"},
    "related": {"hub_hash_key", "parent_hash_key", "foreign_hash_key"},
    "business_key": {"business_key"},
    "hashdiff": {"hashdiff", "hash_diff"},
    "load": {"load_datetime", "load_dts"},
    "record_source": {"record_source"},
}


@dataclass(frozen=True)
class Roles:
    """Which declared column plays which part; ``key`` is the table's primary key."""

    hash_key: str
    others: tuple[str, ...]  # business keys (hub), related hash keys (link), hashdiff (satellite)
    load: str
    record_source: str
    key: tuple[str, ...]

    @property
    def required(self) -> tuple[str, ...]:
        """Columns that must not be NULL: a source row with NULL in any of them is skipped."""
        return (self.hash_key, *self.others, self.load, self.record_source)


def _role(column: Column) -> str:
    value = (column.meta or {}).get("datavault_role")
    return str(value).lower() if value is not None else ""


def _hash_key(columns: Sequence[Column], roles: set[str]) -> str | None:
    explicit = [c.name for c in columns if _role(c) in roles]
    if explicit:
        return explicit[0]
    keys = [c.name for c in columns if c.primary_key]
    if keys:
        return keys[0]
    suffixed = [c.name for c in columns if c.name.lower().endswith("_hk")]
    return suffixed[0] if len(suffixed) == 1 else None


def _named(columns: Sequence[Column], roles: set[str], names: set[str]) -> str | None:
    return next((c.name for c in columns if _role(c) in roles), None) or next(
        (c.name for c in columns if c.name.lower() in names), None
    )


def datavault_roles(asset: Asset) -> tuple[Roles | None, list[str]]:
    """The roles of the asset's columns, or what is missing (each problem one sentence)."""
    strategy = asset.materialization.strategy or ""
    columns = asset.columns
    problems = [
        f"column {c.name!r} needs a type ({strategy} creates the table from columns)" for c in columns if not c.type
    ]
    load = _named(columns, _ROLE_NAMES["load"], {"load_dts", "load_datetime", "loaded_at"})
    source = _named(columns, _ROLE_NAMES["record_source"], {"record_source"})
    if strategy == "datavault_hub":
        hash_key = _hash_key(columns, _ROLE_NAMES["hub_hash"])
        others = [c.name for c in columns if _role(c) == "business_key" or c.name.lower().endswith("_bk")]
        what = ("a hub hash key", "one or more business keys")
    elif strategy == "datavault_link":
        hash_key = _hash_key(columns, _ROLE_NAMES["link_hash"])
        others = [
            c.name
            for c in columns
            if c.name != hash_key and (_role(c) in _ROLE_NAMES["related"] or c.name.lower().endswith("_hk"))
        ]
        what = ("a link hash key", "one or more related hash keys")
    else:
        hash_key = _hash_key(columns, _ROLE_NAMES["parent_hash"])
        hashdiff = _named(columns, _ROLE_NAMES["hashdiff"], {"hashdiff", "hash_diff"})
        others = [hashdiff] if hashdiff else []
        what = ("a parent hash key", "a hashdiff")
    missing = [
        text
        for text, found in (
            (what[0], hash_key),
            (what[1], others),
            ("a load datetime", load),
            ("a record source", source),
        )
        if not found
    ]
    if missing:
        problems.append(f"{strategy} needs " + ", ".join(missing) + " among the declared columns")
    if problems or hash_key is None or load is None or source is None:
        return None, problems
    others = list(dict.fromkeys(o for o in others if o != hash_key))
    key: tuple[str, ...] = (hash_key,)
    if strategy == "datavault_satellite":
        declared = tuple(c.name for c in columns if c.primary_key)
        key = declared if declared and declared != (hash_key,) else (hash_key, load)
    return Roles(hash_key, tuple(others), load, source, key), []


def apply_datavault(db: Database, asset: Asset, query: str, *, full_refresh: bool) -> int:
    """Load the query's rows into the hub, link or satellite; the number of rows inserted."""
    roles, problems = datavault_roles(asset)
    if roles is None:
        raise ValueError("; ".join(problems))
    target = quote_name(asset.name)
    if full_refresh:
        db.execute(f"DROP TABLE IF EXISTS {target}")
    db.execute(f"CREATE TABLE IF NOT EXISTS {target} ({_definitions(asset, roles)})")
    q = quote_identifier
    declared = ", ".join(q(c.name) for c in asset.columns)
    present = " AND ".join(f"{q(c)} IS NOT NULL" for c in roles.required)
    source = f"(SELECT {declared} FROM ({query}) WHERE {present})"
    in_target = " AND ".join(f"t.{q(c)} = b.{q(c)}" for c in roles.key)
    order = ", ".join([q(roles.load), *(q(c.name) for c in asset.columns if c.name != roles.load)])
    if asset.materialization.strategy != "datavault_satellite":
        first = f"row_number() OVER (PARTITION BY {q(roles.hash_key)} ORDER BY {order})"
        return db.count(
            f"INSERT INTO {target} ({declared}) SELECT {declared} FROM "
            f"(SELECT *, {first} AS __n FROM {source}) AS b "
            f"WHERE __n = 1 AND NOT EXISTS (SELECT 1 FROM {target} AS t WHERE {in_target})"
        )
    parent, hashdiff, load = q(roles.hash_key), q(roles.others[0]), q(roles.load)
    one_per_key = f"row_number() OVER (PARTITION BY {', '.join(q(c) for c in roles.key)} ORDER BY {order})"
    latest = (
        f"(SELECT {parent} AS __latest_parent, {hashdiff} AS __latest_hashdiff FROM "
        f"(SELECT *, row_number() OVER (PARTITION BY {parent} ORDER BY {load} DESC) AS __n FROM {target}) "
        "WHERE __n = 1)"
    )
    return db.count(
        f"INSERT INTO {target} ({declared}) SELECT {declared} FROM ("
        f"SELECT *, lag({hashdiff}) OVER (PARTITION BY {parent} ORDER BY {load}) AS __before "
        f"FROM (SELECT *, {one_per_key} AS __n FROM {source}) WHERE __n = 1) AS b "
        f"LEFT JOIN {latest} AS l ON l.__latest_parent = b.{parent} "
        f"WHERE b.{hashdiff} IS DISTINCT FROM coalesce(b.__before, l.__latest_hashdiff) "
        f"AND NOT EXISTS (SELECT 1 FROM {target} AS t WHERE {in_target})"
    )


def _definitions(asset: Asset, roles: Roles) -> str:
    parts = []
    for column in asset.columns:
        definition = f"{quote_identifier(column.name)} {column.type}"
        if column.name in roles.required or column.nullable is False:
            definition += " NOT NULL"
        parts.append(definition)
    parts.append("PRIMARY KEY (" + ", ".join(quote_identifier(c) for c in roles.key) + ")")
    return ", ".join(parts)
