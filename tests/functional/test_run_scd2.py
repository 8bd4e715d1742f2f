"""SCD2 materializations on a real DuckDB file: three successive loads, exact tables with validity columns."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest

from tests.builder import Repo

DAY = ("--start-date", "2024-01-01", "--end-date", "2024-01-01")
OPEN = "9999-12-31 23:59:59"
VALIDITY = (
    "strftime(timezone('UTC', _valid_from), '%Y-%m-%d %H:%M:%S.%f') AS f, "
    "strftime(timezone('UTC', _valid_until), '%Y-%m-%d %H:%M:%S') AS u, "
    "strftime(timezone('UTC', _valid_until), '%Y-%m-%d %H:%M:%S.%f') AS u_exact, _is_current"
)


@pytest.fixture
def repo(tmp_path) -> Repo:
    return Repo(tmp_path / "repo", pipeline={"name": "p", "default_connections": {"duckdb": "db"}})


class Clock:
    """Labels each run's CURRENT_TIMESTAMP: a time between a run's start and end is that run."""

    def __init__(self) -> None:
        self.runs: list[tuple[str, str, str]] = []

    def run(self, repo: Repo, label: str) -> None:
        before = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
        repo.run_ok(*DAY)
        after = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
        self.runs.append((label, before, after))
        time.sleep(0.01)

    def label(self, exact: str) -> str:
        return next((name for name, low, high in self.runs if low <= exact <= high), exact)


def history(repo: Repo, columns: str, clock: Clock | None = None) -> list[tuple]:
    rows = repo.query(f"SELECT {columns}, {VALIDITY} FROM dim.items ORDER BY ALL")
    shown = []
    for *values, valid_from, until, until_exact, current in rows:
        if clock is not None:
            valid_from = clock.label(valid_from)
            until = until if until == OPEN or until_exact.endswith(".000000") else clock.label(until_exact)
        valid_from = valid_from.removesuffix(".000000")
        shown.append((*values, valid_from, until, current))
    return sorted(shown, key=str)


def scd2_by_time(repo: Repo) -> None:
    repo.sql(
        "dim.items",
        "SELECT id, name, stock, dt FROM src.items",
        materialization={"type": "table", "strategy": "scd2_by_time", "incremental_key": "dt"},
        columns=[
            {"name": "id", "type": "INTEGER", "primary_key": True},
            {"name": "name", "type": "VARCHAR"},
            {"name": "stock", "type": "INTEGER"},
            {"name": "dt", "type": "DATE"},
        ],
    )


def test_scd2_by_time_over_three_loads(repo):
    """scd2_by_time: newer key times make new versions (chained within a batch), gone keys close, reruns change
    nothing."""
    scd2_by_time(repo)
    clock = Clock()
    repo.execute(
        "CREATE SCHEMA src",
        "CREATE TABLE src.items (id INTEGER, name VARCHAR, stock INTEGER, dt DATE)",
        "INSERT INTO src.items VALUES (1, 'Laptop', 100, '2025-04-02'), (2, 'Phone', 150, '2025-04-02'), "
        "(3, 'Headphones', 175, '2025-04-02'), (4, 'Monitor', 25, '2025-04-02')",
    )
    clock.run(repo, "load1")
    assert history(repo, "id, name, stock, dt::VARCHAR", clock) == sorted(
        [
            (1, "Laptop", 100, "2025-04-02", "2025-04-02 00:00:00", OPEN, True),
            (2, "Phone", 150, "2025-04-02", "2025-04-02 00:00:00", OPEN, True),
            (3, "Headphones", 175, "2025-04-02", "2025-04-02 00:00:00", OPEN, True),
            (4, "Monitor", 25, "2025-04-02", "2025-04-02 00:00:00", OPEN, True),
        ],
        key=str,
    )
    # Load 2: Headphones restocked later, Monitor gone, PS5 new.
    repo.execute(
        "UPDATE src.items SET stock = 900, dt = '2025-06-02' WHERE id = 3",
        "DELETE FROM src.items WHERE id = 4",
        "INSERT INTO src.items VALUES (5, 'PS5', 25, '2025-06-02')",
    )
    clock.run(repo, "load2")
    # Load 3: two versions of Headphones in one batch, Phone gone, PS5 changed without a later time (ignored).
    repo.execute(
        "DELETE FROM src.items WHERE id IN (2, 3)",
        "INSERT INTO src.items VALUES (3, 'Headphones', 950, '2025-07-01'), (3, 'Headphones', 960, '2025-07-05')",
        "UPDATE src.items SET stock = 99 WHERE id = 5",
    )
    clock.run(repo, "load3")
    expected = sorted(
        [
            (1, "Laptop", 100, "2025-04-02 00:00:00", OPEN, True),
            (2, "Phone", 150, "2025-04-02 00:00:00", "load3", False),
            (3, "Headphones", 175, "2025-04-02 00:00:00", "2025-06-02 00:00:00", False),
            (3, "Headphones", 900, "2025-06-02 00:00:00", "2025-07-01 00:00:00", False),
            (3, "Headphones", 950, "2025-07-01 00:00:00", "2025-07-05 00:00:00", False),
            (3, "Headphones", 960, "2025-07-05 00:00:00", OPEN, True),
            (4, "Monitor", 25, "2025-04-02 00:00:00", "load2", False),
            (5, "PS5", 25, "2025-06-02 00:00:00", OPEN, True),
        ],
        key=str,
    )
    assert history(repo, "id, name, stock", clock) == expected
    clock.run(repo, "rerun")
    assert history(repo, "id, name, stock", clock) == expected


def test_scd2_by_time_full_refresh_replaces_the_history_with_the_source(repo):
    """--full-refresh drops the history and loads the current source as the only versions."""
    scd2_by_time(repo)
    repo.execute(
        "CREATE SCHEMA src",
        "CREATE TABLE src.items AS SELECT 1 AS id, 'a' AS name, 1 AS stock, DATE '2025-01-01' AS dt",
    )
    repo.run_ok(*DAY)
    repo.execute("UPDATE src.items SET stock = 2, dt = '2025-02-01'")
    repo.run_ok(*DAY)
    assert len(repo.query("SELECT * FROM dim.items")) == 2
    repo.run_ok(*DAY, "--full-refresh", "--reason", "rebuild")
    assert history(repo, "id, stock") == [(1, 2, "2025-02-01 00:00:00", OPEN, True)]


def by_column(repo: Repo, **materialization) -> None:
    repo.sql(
        "dim.items",
        "SELECT * FROM src.items",
        materialization={"type": "table", "strategy": "scd2_by_column", **materialization},
        columns=[{"name": "id", "type": "INTEGER", "primary_key": True}, {"name": "name", "type": "VARCHAR"}],
    )


def test_scd2_by_column_over_three_loads(repo):
    """scd2_by_column: changed (NULL-safe) or new rows make versions starting at the run, gone keys close at the run,
    a returning key starts a new version."""
    by_column(repo)
    clock = Clock()
    repo.execute(
        "CREATE SCHEMA src",
        "CREATE TABLE src.items (id INTEGER, name VARCHAR, price DECIMAL(6, 2))",
        "INSERT INTO src.items VALUES (1, 'Mouse', 29.99), (2, 'Cable', 12.99), (3, 'Keyboard', 89.99)",
    )
    clock.run(repo, "load1")
    repo.execute(
        "UPDATE src.items SET price = 39.99 WHERE id = 1",
        "DELETE FROM src.items WHERE id = 3",
        "INSERT INTO src.items VALUES (4, 'Monitor', 199.99)",
    )
    clock.run(repo, "load2")
    repo.execute("UPDATE src.items SET name = NULL WHERE id = 2", "INSERT INTO src.items VALUES (3, 'Keyboard', 79.99)")
    clock.run(repo, "load3")
    expected = sorted(
        [
            (1, "Mouse", "29.99", "load1", "load2", False),
            (1, "Mouse", "39.99", "load2", OPEN, True),
            (2, "Cable", "12.99", "load1", "load3", False),
            (2, None, "12.99", "load3", OPEN, True),
            (3, "Keyboard", "89.99", "load1", "load2", False),
            (3, "Keyboard", "79.99", "load3", OPEN, True),
            (4, "Monitor", "199.99", "load2", OPEN, True),
        ],
        key=str,
    )
    assert history(repo, "id, name, price::VARCHAR", clock) == expected
    clock.run(repo, "rerun")
    assert history(repo, "id, name, price::VARCHAR", clock) == expected


def test_scd2_by_column_with_incremental_key_uses_business_times(repo):
    """With incremental_key, versions start (and the replaced ones end) at the key's time, read as UTC."""
    by_column(repo, incremental_key="updated_at")
    repo.execute(
        "CREATE SCHEMA src",
        "CREATE TABLE src.items (id INTEGER, name VARCHAR, updated_at TIMESTAMP)",
        "INSERT INTO src.items VALUES (1, 'a', '2024-01-15 10:30:00'), (2, 'b', '2024-01-14 14:00:00')",
    )
    repo.run_ok(*DAY)
    repo.execute("UPDATE src.items SET name = 'a2', updated_at = '2024-02-01 08:00:00.000001' WHERE id = 1")
    repo.run_ok(*DAY)
    repo.execute("UPDATE src.items SET updated_at = '2024-03-01 00:00:00' WHERE id = 2")  # time only: no change
    repo.run_ok(*DAY)
    rows = repo.query(
        "SELECT id, name, strftime(timezone('UTC', _valid_from), '%Y-%m-%d %H:%M:%S.%f'), "
        "strftime(timezone('UTC', _valid_until), '%Y-%m-%d %H:%M:%S.%f'), _is_current FROM dim.items ORDER BY ALL"
    )
    assert rows == [
        (1, "a", "2024-01-15 10:30:00.000000", "2024-02-01 08:00:00.000001", False),
        (1, "a2", "2024-02-01 08:00:00.000001", "9999-12-31 23:59:59.000000", True),
        (2, "b", "2024-01-14 14:00:00.000000", "9999-12-31 23:59:59.000000", True),
    ]
    types = dict(repo.query("SELECT column_name, data_type FROM information_schema.columns WHERE table_name = 'items'"))
    assert types["_valid_from"] == types["_valid_until"] == "TIMESTAMP WITH TIME ZONE"


def test_scd2_refuses_a_batch_that_would_corrupt_the_history(repo):
    """A repeated primary key, or a change dated before the version it replaces, fails the asset and changes
    nothing."""
    by_column(repo, incremental_key="updated_at")
    repo.execute(
        "CREATE SCHEMA src",
        "CREATE TABLE src.items (id INTEGER, name VARCHAR, updated_at TIMESTAMP)",
        "INSERT INTO src.items VALUES (1, 'a', '2024-01-15 10:30:00')",
    )
    repo.run_ok(*DAY)
    before = repo.query("SELECT * FROM dim.items")
    repo.execute("UPDATE src.items SET name = 'old', updated_at = '2023-12-01'")
    result = repo.run(*DAY)
    assert result.returncode != 0
    assert "history only moves forward" in result.stdout + result.stderr
    repo.execute(
        "UPDATE src.items SET updated_at = '2024-06-01'", "INSERT INTO src.items VALUES (1, 'dup', '2024-06-01')"
    )
    result = repo.run(*DAY)
    assert result.returncode != 0
    assert "appear more than once" in result.stdout + result.stderr
    assert repo.query("SELECT * FROM dim.items") == before


def test_scd2_validation_names_the_rules(repo):
    """No primary key, a reserved column, or scd2_by_time without incremental_key are validation errors."""
    repo.sql(
        "dim.items",
        "SELECT 1 AS id",
        materialization={"type": "table", "strategy": "scd2_by_time"},
        columns=[{"name": "id", "type": "INTEGER"}, {"name": "_is_current", "type": "BOOLEAN"}],
    )
    result = repo.run(*DAY)
    assert result.returncode == 2, result.stderr
    assert "needs columns marked primary_key" in result.stderr
    assert "needs materialization.incremental_key" in result.stderr
    assert "_is_current is reserved" in result.stderr
