"""Data Vault loads on a real in-memory DuckDB database: hubs and links insert a hash key once, satellites only
a change, rows missing a required column are skipped, and columns find their roles from ``meta`` or their names
as Bruin documents (materializations/datavault)."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from engine.pipeline.assets import Asset, Materialization
from engine.pipeline.columns import Column
from engine.pipeline.database import Database
from engine.pipeline.datavault import Roles, apply_datavault, datavault_roles


def col(
    name: str,
    type_: str | None = "varchar",
    *,
    key: bool = False,
    role: str | None = None,
    nullable: bool | None = None,
) -> Column:
    return Column(name, type_, key, False, nullable, (), None, {"datavault_role": role} if role else None)


def vault(strategy: str, *columns: Column) -> Asset:
    return Asset(
        "vault.t",
        "duckdb.sql",
        Path("t.sql"),
        "t.sql",
        1,
        materialization=Materialization("table", strategy, None, None),
        columns=columns,
    )


HUB = vault("datavault_hub", col("customer_hk"), col("customer_bk"), col("load_dts", "timestamp"), col("record_source"))
LINK = vault(
    "datavault_link",
    col("order_customer_hk", key=True),
    col("order_hk"),
    col("customer_hk"),
    col("load_datetime", "timestamp"),
    col("record_source"),
)
SAT = vault(
    "datavault_satellite",
    col("customer_hk"),
    col("hashdiff"),
    col("name"),
    col("load_dts", "timestamp"),
    col("record_source"),
)


@pytest.fixture
def db():
    connection = duckdb.connect(":memory:")
    connection.execute("CREATE SCHEMA vault")
    yield Database(connection.cursor(), lambda sql: sql)
    connection.close()


def load(db: Database, asset: Asset, rows: str, names: str, *, full_refresh: bool = False) -> int:
    return apply_datavault(db, asset, f"SELECT * FROM (VALUES {rows}) AS s({names})", full_refresh=full_refresh)


def table(db: Database) -> list[tuple]:
    return [
        tuple(str(v) if v is not None else None for v in row)
        for row in db.execute("SELECT * FROM vault.t ORDER BY ALL").fetchall()
    ]


def test_a_hub_inserts_each_hash_key_once_keeping_its_first_load(db):
    """Within a batch the earliest load of a key wins; a key already in the hub is never inserted again."""
    names = "customer_hk, customer_bk, load_dts, record_source"
    assert (
        load(
            db,
            HUB,
            "('h1', 'c1', TIMESTAMP '2024-01-02', 'crm'), ('h1', 'c1', TIMESTAMP '2024-01-01', 'erp'), "
            "('h2', 'c2', TIMESTAMP '2024-01-01', 'crm')",
            names,
        )
        == 2
    )
    assert (
        load(db, HUB, "('h1', 'c1', TIMESTAMP '2024-02-01', 'crm'), ('h3', 'c3', TIMESTAMP '2024-02-01', 'crm')", names)
        == 1
    )
    assert table(db) == [
        ("h1", "c1", "2024-01-01 00:00:00", "erp"),
        ("h2", "c2", "2024-01-01 00:00:00", "crm"),
        ("h3", "c3", "2024-02-01 00:00:00", "crm"),
    ]


def test_rows_missing_a_required_column_are_skipped(db):
    """A NULL hash key, business key, load time or record source: the row is not loaded."""
    names = "customer_hk, customer_bk, load_dts, record_source"
    inserted = load(
        db,
        HUB,
        "(NULL, 'c0', TIMESTAMP '2024-01-01', 'crm'), ('h1', NULL, TIMESTAMP '2024-01-01', 'crm'), "
        "('h2', 'c2', NULL, 'crm'), ('h3', 'c3', TIMESTAMP '2024-01-01', NULL), "
        "('h4', 'c4', TIMESTAMP '2024-01-01', 'crm')",
        names,
    )
    assert inserted == 1
    assert table(db) == [("h4", "c4", "2024-01-01 00:00:00", "crm")]


def test_the_hub_table_is_created_with_required_columns_and_its_key(db):
    """Required columns are NOT NULL and the hash key is the primary key."""
    load(db, HUB, "('h1', 'c1', TIMESTAMP '2024-01-01', 'crm')", "customer_hk, customer_bk, load_dts, record_source")
    nullable = db.execute(
        "SELECT column_name, is_nullable FROM information_schema.columns WHERE table_name = 't' "
        "ORDER BY ordinal_position"
    ).fetchall()
    assert nullable == [("customer_hk", "NO"), ("customer_bk", "NO"), ("load_dts", "NO"), ("record_source", "NO")]
    with pytest.raises(duckdb.ConstraintException):
        db.execute("INSERT INTO vault.t VALUES ('h1', 'other', TIMESTAMP '2024-03-01', 'x')")


def test_a_link_inserts_each_link_key_once(db):
    """A link's declared key is its hash key; its other ``_hk`` columns are the related keys."""
    names = "order_customer_hk, order_hk, customer_hk, load_datetime, record_source"
    assert (
        load(
            db,
            LINK,
            "('l1', 'o1', 'c1', TIMESTAMP '2024-01-01', 'shop'), "
            "('l1', 'o1', 'c1', TIMESTAMP '2024-01-02', 'shop'), ('l2', 'o2', NULL, TIMESTAMP '2024-01-01', 'shop')",
            names,
        )
        == 1
    )
    assert load(db, LINK, "('l1', 'o1', 'c1', TIMESTAMP '2024-01-03', 'shop')", names) == 0
    assert table(db) == [("l1", "o1", "c1", "2024-01-01 00:00:00", "shop")]


def test_a_satellite_inserts_only_changes(db):
    """A satellite row is inserted when its hashdiff differs from the one before it (in the batch, or the
    latest already loaded); the same state again is not inserted."""
    names = "customer_hk, hashdiff, name, load_dts, record_source"
    assert (
        load(
            db,
            SAT,
            "('h1', 'd1', 'Ann', TIMESTAMP '2024-01-01', 'crm'), "
            "('h1', 'd1', 'Ann', TIMESTAMP '2024-01-02', 'crm'), "
            "('h1', 'd2', 'Anne', TIMESTAMP '2024-01-03', 'crm'), "
            "('h2', 'e1', 'Bo', TIMESTAMP '2024-01-01', 'crm')",
            names,
        )
        == 3
    )
    assert (
        load(
            db,
            SAT,
            "('h1', 'd2', 'Anne', TIMESTAMP '2024-02-01', 'crm'), ('h2', 'e2', 'Bob', TIMESTAMP '2024-02-01', 'crm')",
            names,
        )
        == 1
    )
    assert load(db, SAT, "('h1', 'd1', 'Ann', TIMESTAMP '2024-03-01', 'crm')", names) == 1
    assert table(db) == [
        ("h1", "d1", "Ann", "2024-01-01 00:00:00", "crm"),
        ("h1", "d1", "Ann", "2024-03-01 00:00:00", "crm"),
        ("h1", "d2", "Anne", "2024-01-03 00:00:00", "crm"),
        ("h2", "e1", "Bo", "2024-01-01 00:00:00", "crm"),
        ("h2", "e2", "Bob", "2024-02-01 00:00:00", "crm"),
    ]


def test_a_satellite_reload_of_the_same_rows_inserts_nothing(db):
    """Loading a batch twice is idempotent: every (key, load time) is already there."""
    names = "customer_hk, hashdiff, name, load_dts, record_source"
    batch = "('h1', 'd1', 'Ann', TIMESTAMP '2024-01-01', 'crm'), ('h1', 'd2', 'Anne', TIMESTAMP '2024-01-03', 'crm')"
    assert load(db, SAT, batch, names) == 2
    assert load(db, SAT, batch, names) == 0
    assert len(table(db)) == 2


def test_a_full_refresh_drops_the_vault_table(db):
    """``--full-refresh`` rebuilds the table from the batch alone."""
    names = "customer_hk, customer_bk, load_dts, record_source"
    load(db, HUB, "('h1', 'c1', TIMESTAMP '2024-01-01', 'crm')", names)
    assert load(db, HUB, "('h9', 'c9', TIMESTAMP '2024-05-01', 'crm')", names, full_refresh=True) == 1
    assert table(db) == [("h9", "c9", "2024-05-01 00:00:00", "crm")]


def test_roles_from_names_follow_bruins_rules():
    """Without ``meta``: the hub's one ``_hk`` column and its ``_bk`` columns; a satellite is keyed by its
    parent and load time."""
    assert datavault_roles(HUB) == (
        Roles("customer_hk", ("customer_bk",), "load_dts", "record_source", ("customer_hk",)),
        [],
    )
    assert datavault_roles(SAT) == (
        Roles("customer_hk", ("hashdiff",), "load_dts", "record_source", ("customer_hk", "load_dts")),
        [],
    )
    assert datavault_roles(LINK) == (
        Roles(
            "order_customer_hk", ("order_hk", "customer_hk"), "load_datetime", "record_source", ("order_customer_hk",)
        ),
        [],
    )


def test_meta_roles_win_over_names():
    """``meta.datavault_role`` (any case) names the columns whatever they are called; a satellite's declared
    composite key is kept."""
    hub = vault(
        "datavault_hub",
        col("id", role="HUB_HASH_KEY"),
        col("code", role="business_key"),
        col("at", "timestamp", role="load_datetime"),
        col("src", role="Record_Source"),
    )
    assert datavault_roles(hub) == (Roles("id", ("code",), "at", "src", ("id",)), [])
    sat = vault(
        "datavault_satellite",
        col("p", key=True, role="parent_hash_key"),
        col("d", role="hash_diff"),
        col("t", "timestamp", key=True, role="load_dts"),
        col("s", role="record_source"),
    )
    assert datavault_roles(sat) == (Roles("p", ("d",), "t", "s", ("p", "t")), [])
    loaded_at = vault("datavault_hub", col("a_hk"), col("a_bk"), col("loaded_at", "timestamp"), col("record_source"))
    assert datavault_roles(loaded_at)[0].load == "loaded_at"


def test_a_satellite_declared_key_of_the_parent_alone_adds_the_load_time():
    """A satellite whose primary key is only the parent hash key is keyed by (parent, load) all the same."""
    sat = vault(
        "datavault_satellite",
        col("c_hk", key=True),
        col("hashdiff"),
        col("load_dts", "timestamp"),
        col("record_source"),
    )
    assert datavault_roles(sat)[0].key == ("c_hk", "load_dts")


def test_two_unmarked_hash_keys_are_ambiguous():
    """Two ``_hk`` columns and neither a key nor a role: the hub's hash key is not guessed."""
    hub = vault(
        "datavault_hub", col("a_hk"), col("b_hk"), col("a_bk"), col("load_dts", "timestamp"), col("record_source")
    )
    roles, problems = datavault_roles(hub)
    assert roles is None
    assert problems == ["datavault_hub needs a hub hash key among the declared columns"]


@pytest.mark.parametrize(
    ("asset", "problem"),
    [
        (
            vault("datavault_hub", col("load_dts", "timestamp")),
            "datavault_hub needs a hub hash key, one or more business keys, a record source among the declared columns",
        ),
        (
            vault("datavault_link", col("l_hk"), col("load_dts", "timestamp"), col("record_source")),
            "datavault_link needs one or more related hash keys among the declared columns",
        ),
        (
            vault("datavault_satellite", col("c_hk"), col("load_dts", "timestamp"), col("record_source")),
            "datavault_satellite needs a hashdiff among the declared columns",
        ),
        (
            vault("datavault_satellite", col("c_hk"), col("hashdiff"), col("record_source")),
            "datavault_satellite needs a load datetime among the declared columns",
        ),
    ],
)
def test_missing_roles_are_named_in_one_sentence(asset, problem):
    """Each missing role is listed, in order, in one sentence."""
    assert datavault_roles(asset) == (None, [problem])


def test_an_untyped_column_is_a_problem_and_the_load_refuses(db):
    """A vault table is created from its columns, so each needs a type; the load raises the problems joined."""
    hub = vault("datavault_hub", col("c_hk", None), col("c_bk"), col("load_dts", "timestamp"), col("record_source"))
    assert datavault_roles(hub) == (None, ["column 'c_hk' needs a type (datavault_hub creates the table from columns)"])
    broken = vault("datavault_hub", col("c_hk", None), col("load_dts", "timestamp"))
    with pytest.raises(
        ValueError,
        match=r"^column 'c_hk' needs a type \(datavault_hub creates the table from "
        r"columns\); datavault_hub needs one or more business keys, a record source",
    ):
        apply_datavault(db, broken, "SELECT 1", full_refresh=False)
    assert db.scalar("SELECT count(*) FROM duckdb_tables() WHERE table_name = 't'") == 0


def test_missing_link_and_parent_keys_are_named():
    """A link without its hash key and a satellite without its parent are told which key they lack."""
    link = vault("datavault_link", col("a_hk"), col("b_hk"), col("load_dts", "timestamp"), col("record_source"))
    assert datavault_roles(link) == (None, ["datavault_link needs a link hash key among the declared columns"])
    sat = vault("datavault_satellite", col("hashdiff"), col("load_dts", "timestamp"), col("record_source"))
    assert datavault_roles(sat) == (None, ["datavault_satellite needs a parent hash key among the declared columns"])


def test_a_satellite_finds_hash_diff_and_keeps_a_declared_key():
    """``hash_diff`` is a hashdiff by name; a declared key other than the parent alone is the table's key."""
    sat = vault("datavault_satellite", col("p_hk", key=True), col("hash_diff", key=True), col("load_dts", "timestamp"),
                col("record_source"))  # fmt: skip
    assert datavault_roles(sat) == (
        Roles("p_hk", ("hash_diff",), "load_dts", "record_source", ("p_hk", "hash_diff")),
        [],
    )


def test_only_required_or_non_nullable_columns_are_not_null(db):
    """A descriptive column stays nullable unless declared ``nullable: false``."""
    sat = vault("datavault_satellite", col("customer_hk"), col("hashdiff"), col("name"), col("city", nullable=False),
                col("load_dts", "timestamp"), col("record_source"))  # fmt: skip
    load(db, sat, "('h1', 'd1', NULL, 'Oslo', TIMESTAMP '2024-01-01', 'crm')",
         "customer_hk, hashdiff, name, city, load_dts, record_source")  # fmt: skip
    nullable = dict(
        db.execute("SELECT column_name, is_nullable FROM information_schema.columns WHERE table_name = 't'").fetchall()
    )
    assert nullable == {"customer_hk": "NO", "hashdiff": "NO", "name": "YES", "city": "NO", "load_dts": "NO",
                        "record_source": "NO"}  # fmt: skip
