"""The one invocation path, counted from inside the parent: the real `backfill` command runs in this process
(its children are real processes, its warehouse a real DuckDB file), and every pipeline validation and every
DuckDB connection the parent makes is counted."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import duckdb
import pytest

# Imported before any test runs, so that each binds the real check_pipeline, which the fixture then replaces
# in every module holding it (a module first imported under the fixture would keep that test's counter).
import engine.execute.invocation
import engine.pipeline.runner  # noqa: F401
import engine.pipeline.validation as validation
import tui.cli.backfill_command
import tui.cli.resume  # noqa: F401
from tui.cli.main import main

DAYS = ("--start-date", "2024-01-01", "--end-date", "2024-01-03")
LATER = ("--start-date", "2024-01-04", "--end-date", "2024-01-06")


@pytest.fixture
def counted(monkeypatch, shop: Path, home: dict[str, str]):
    """Run ``backfill ARGS`` in-process from the example repository; the counts of validations and of DuckDB
    connections (by resolved file) made by this process."""
    for name, value in home.items():
        monkeypatch.setenv(name, value)
    monkeypatch.chdir(shop)
    validations: list[str] = []
    connections: Counter[str] = Counter()
    original_check, original_connect = validation.check_pipeline, duckdb.connect

    def check_pipeline(target, *args, **kwargs):
        validations.append(str(target.pipeline_dir))
        return original_check(target, *args, **kwargs)

    def connect(database=":memory:", *args, **kwargs):
        connections[str(Path(database).resolve()) if database != ":memory:" else database] += 1
        return original_connect(database, *args, **kwargs)

    # Every module that imported check_pipeline by name gets the counting one.
    for module in list(sys.modules.values()):
        if getattr(module, "check_pipeline", None) is original_check:
            monkeypatch.setattr(module, "check_pipeline", check_pipeline)
    monkeypatch.setattr(validation, "check_pipeline", check_pipeline)
    monkeypatch.setattr(duckdb, "connect", connect)

    def run(*args: str) -> tuple[int, list[str], Counter[str]]:
        validations.clear()
        connections.clear()
        code = main(list(args))
        return code, list(validations), Counter(connections)

    return run


def test_a_new_backfill_validates_its_pipeline_once_and_opens_its_warehouse_once_before_and_once_after(
    counted, shop: Path
):
    """A new backfill of the example (pre-flight, baselines, snapshot, three partitions, the record): one
    validation in the parent; one connection to the warehouse before the first child and one for the record.
    The first backfill finds no warehouse file: only the record opens it."""
    warehouse = shop / "warehouse.duckdb"
    code, validations, connections = counted("pipeline", *DAYS, "--reason", "first", "--launcher", "exec")
    assert code == 0
    assert len(validations) == 1
    assert connections[str(warehouse.resolve())] == 1, connections
    code, validations, connections = counted("pipeline", *LATER, "--reason", "counted", "--launcher", "exec")
    assert code == 0
    assert len(validations) == 1
    assert connections[str(warehouse.resolve())] == 2, connections
    rows = duckdb.connect(str(warehouse), read_only=True).sql(
        "SELECT count(DISTINCT order_date) FROM mart.daily_revenue WHERE order_date BETWEEN '2024-01-01' AND "
        "'2024-01-06'"
    )
    assert rows.fetchall() == [(6,)]  # both runs happened: the counts are of real backfills


def test_a_resume_validates_once_and_opens_its_warehouse_once_before_and_once_after(counted, shop: Path):
    """``--continue --rerun all`` re-plans, takes over, judges and runs: one validation, two connections."""
    code, _, _ = counted("pipeline", *DAYS, "--reason", "first", "--launcher", "exec")
    assert code == 0
    [backfill] = sorted((shop / "logs" / "backfills").iterdir())
    code, validations, connections = counted(
        "--continue", backfill.name, "--rerun", "all", "--reason", "again", "--launcher", "exec"
    )
    assert code == 0
    assert len(validations) == 1
    assert connections[str((shop / "warehouse.duckdb").resolve())] == 2, connections


def test_a_dry_run_opens_the_warehouse_once_and_writes_nothing(counted, shop: Path):
    """The pre-flight of a dry run reads each warehouse through one read-only connection and saves nothing."""
    code, _, _ = counted("pipeline", *DAYS, "--reason", "first", "--launcher", "exec")
    assert code == 0
    before = (shop / "warehouse.duckdb").read_bytes()
    code, validations, connections = counted("pipeline", *LATER, "--dry-run")
    assert code == 0
    assert len(validations) == 1
    assert connections[str((shop / "warehouse.duckdb").resolve())] == 1, connections
    assert (shop / "warehouse.duckdb").read_bytes() == before
