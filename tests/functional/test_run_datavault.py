"""Data Vault materializations on a real DuckDB file: hub, link and satellite over two loads."""

from __future__ import annotations

import pytest

from tests.builder import Repo

DAY = ("--start-date", "2024-01-01", "--end-date", "2024-01-01")
LOAD = {"name": "load_dts", "type": "TIMESTAMP"}
SOURCE = {"name": "record_source", "type": "VARCHAR"}


@pytest.fixture
def repo(tmp_path) -> Repo:
    repo = Repo(tmp_path / "repo", pipeline={"name": "p", "default_connections": {"duckdb": "db"}})
    repo.execute("CREATE SCHEMA stg")
    return repo


def role(column: dict, name: str) -> dict:
    return {**column, "meta": {"datavault_role": name}}


def test_hub_inserts_each_hash_key_once_keeping_its_earliest_row(repo):
    """datavault_hub: the earliest row per hash key, only keys not yet loaded; NULL keys skipped."""
    repo.sql(
        "rdv.hub_customer",
        "SELECT customer_hk, customer_id, load_dts, record_source FROM stg.customers",
        materialization={"type": "table", "strategy": "datavault_hub"},
        columns=[
            role({"name": "customer_hk", "type": "VARCHAR"}, "hash_key"),
            role({"name": "customer_id", "type": "VARCHAR"}, "business_key"),
            LOAD,
            SOURCE,
        ],
    )
    repo.execute(
        "CREATE TABLE stg.customers "
        "(customer_hk VARCHAR, customer_id VARCHAR, load_dts TIMESTAMP, record_source VARCHAR)",
        "INSERT INTO stg.customers VALUES ('h1', 'c1', '2024-01-02', 'crm'), ('h1', 'c1', '2024-01-01', 'erp'), "
        "('h2', 'c2', '2024-01-01', 'crm'), (NULL, 'c9', '2024-01-01', 'crm'), ('h3', NULL, '2024-01-01', 'crm')",
    )
    repo.run_ok(*DAY)
    repo.execute(
        "DELETE FROM stg.customers",
        "INSERT INTO stg.customers VALUES ('h1', 'c1', '2023-12-01', 'late'), ('h4', 'c4', '2024-02-01', 'crm')",
    )
    repo.run_ok(*DAY)
    assert repo.query(
        "SELECT customer_hk, customer_id, load_dts::VARCHAR, record_source FROM rdv.hub_customer ORDER BY 1"
    ) == [
        ("h1", "c1", "2024-01-01 00:00:00", "erp"),
        ("h2", "c2", "2024-01-01 00:00:00", "crm"),
        ("h4", "c4", "2024-02-01 00:00:00", "crm"),
    ]
    keys = repo.query(
        "SELECT constraint_type, constraint_column_names FROM duckdb_constraints() "
        "WHERE table_name = 'hub_customer' AND constraint_type = 'PRIMARY KEY'"
    )
    assert keys == [("PRIMARY KEY", ["customer_hk"])]


def test_link_loads_each_relationship_once(repo):
    """datavault_link: one row per link hash key (the primary key column), related _hk columns required."""
    repo.sql(
        "rdv.link_customer_order",
        "SELECT * FROM stg.orders",
        materialization={"type": "table", "strategy": "datavault_link"},
        columns=[
            {"name": "customer_order_hk", "type": "VARCHAR", "primary_key": True},
            {"name": "customer_hk", "type": "VARCHAR"},
            {"name": "order_hk", "type": "VARCHAR"},
            LOAD,
            SOURCE,
        ],
    )
    repo.execute(
        "CREATE TABLE stg.orders (customer_order_hk VARCHAR, customer_hk VARCHAR, order_hk VARCHAR, "
        "load_dts TIMESTAMP, record_source VARCHAR)",
        "INSERT INTO stg.orders VALUES ('l1', 'h1', 'o1', '2024-01-01', 'shop'), "
        "('l2', 'h1', NULL, '2024-01-01', 'shop')",
    )
    repo.run_ok(*DAY)
    repo.execute("INSERT INTO stg.orders VALUES ('l3', 'h2', 'o3', '2024-01-02', 'shop')")
    repo.run_ok(*DAY)
    assert repo.query("SELECT customer_order_hk, customer_hk, order_hk FROM rdv.link_customer_order ORDER BY 1") == [
        ("l1", "h1", "o1"),
        ("l3", "h2", "o3"),
    ]


def test_satellite_inserts_only_changes(repo):
    """datavault_satellite: rows whose hashdiff differs from the one before (in the batch or the table), never a
    key already loaded."""
    repo.sql(
        "rdv.sat_customer",
        "SELECT * FROM stg.details",
        materialization={"type": "table", "strategy": "datavault_satellite"},
        columns=[
            role({"name": "customer_hk", "type": "VARCHAR"}, "parent_hash_key"),
            {"name": "hashdiff", "type": "VARCHAR"},
            LOAD,
            SOURCE,
            {"name": "email", "type": "VARCHAR"},
        ],
    )
    repo.execute(
        "CREATE TABLE stg.details (customer_hk VARCHAR, hashdiff VARCHAR, load_dts TIMESTAMP, record_source VARCHAR, "
        "email VARCHAR)",
        "INSERT INTO stg.details VALUES ('h1', 'd1', '2024-01-01', 'crm', 'a@x'), "
        "('h1', 'd1', '2024-01-02', 'crm', 'a@x'), ('h1', 'd2', '2024-01-03', 'crm', 'b@x'), "
        "('h2', 'e1', '2024-01-01', 'crm', 'c@x')",
    )
    repo.run_ok(*DAY)
    repo.execute(
        "DELETE FROM stg.details",
        "INSERT INTO stg.details VALUES ('h1', 'd2', '2024-01-04', 'crm', 'b@x'), "
        "('h1', 'd3', '2024-01-05', 'crm', 'c@x'), ('h2', 'e1', '2024-01-01', 'crm', 'changed@x'), "
        "('h2', 'e1', '2024-01-06', 'crm', 'c@x')",
    )
    repo.run_ok(*DAY)
    assert repo.query(
        "SELECT customer_hk, hashdiff, load_dts::DATE::VARCHAR, email FROM rdv.sat_customer ORDER BY 1, 3"
    ) == [
        ("h1", "d1", "2024-01-01", "a@x"),
        ("h1", "d2", "2024-01-03", "b@x"),
        ("h1", "d3", "2024-01-05", "c@x"),
        ("h2", "e1", "2024-01-01", "c@x"),
    ]


def test_datavault_validation_lists_missing_roles(repo):
    """A hub without business keys or record source, or a column without a type, is a validation error."""
    repo.sql(
        "rdv.hub",
        "SELECT 1",
        materialization={"type": "table", "strategy": "datavault_hub"},
        columns=[{"name": "customer_hk", "type": "VARCHAR"}, {"name": "load_dts"}],
    )
    result = repo.run(*DAY)
    assert result.returncode == 2
    assert "column 'load_dts' needs a type" in result.stderr
    assert "datavault_hub needs one or more business keys, a record source" in result.stderr
