"""Effective parallelism: which connection caps it, and why, in words an operator reads."""

from __future__ import annotations

from pathlib import Path

from engine.pipeline.config import Connection, Environment
from engine.spec.parallelism import Parallelism, effective_parallelism


def duckdb(name: str, *, read_only: bool = False) -> Connection:
    return Connection("duckdb", name, Path(f"/data/{name}.duckdb"), read_only, None)


def limited(name: str, slots: int) -> Connection:
    return Connection("postgres", name, None, False, slots)


def test_without_an_environment_the_request_stands():
    """A command target has no environment: nothing caps the request."""
    assert effective_parallelism(6, 4, None) == Parallelism(6, 6, None, None)


def test_the_first_connection_that_reaches_the_cap_is_named():
    """Two writable DuckDB files both cap at 1: the first is named, in full and in brief."""
    environment = Environment("dev", (duckdb("sales"), duckdb("stock")))
    assert effective_parallelism(4, 2, environment) == Parallelism(
        4,
        1,
        "connection 'sales' is a writable DuckDB file (one writer process at a time)",
        "writable DuckDB 'sales'",
        (1, "writable DuckDB 'sales'"),
    )


def test_the_tightest_limit_wins_and_read_only_files_do_not_cap():
    """A read-only DuckDB file allows many readers; of two limited connections the tighter one caps."""
    environment = Environment("dev", (duckdb("archive", read_only=True), limited("wide", 12), limited("narrow", 6)))
    assert effective_parallelism(8, 3, environment) == Parallelism(
        8,
        2,
        "connection 'narrow' allows 6 concurrent assets and each child may use min(3 workers, 6) = 3",
        "'narrow' max 6 assets",
        (2, "'narrow' max 6 assets"),
    )
    # Not capped: no reason, yet the limit is kept for a --max-parallel raised while it runs.
    assert effective_parallelism(2, 3, environment) == Parallelism(2, 2, None, None, (2, "'narrow' max 6 assets"))


def test_a_limit_equal_to_the_request_does_not_cap_it():
    """Asking for exactly what the connection allows runs that many, with no reason given."""
    environment = Environment("dev", (limited("pool", 4),))
    assert effective_parallelism(4, 1, environment) == Parallelism(4, 4, None, None, (4, "'pool' max 4 assets"))
