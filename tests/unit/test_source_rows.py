"""A backfill partition's Python asset against the raw tables of its file, run in-process over a real DuckDB file
and a real script (the command's own tests are in tests/functional/test_source_rows.py)."""

from __future__ import annotations

import pytest

from engine.pipeline.run_types import RunRequest
from engine.pipeline.runner import execute_run, prepare_run
from tests.builder import Repo

SCRIPT = """import duckdb, os
connection = duckdb.connect(os.environ["BRUIN_DUCKDB_PATH"])
connection.execute({statement!r})
connection.close()
"""


def run_partition(tmp_path, statement: str, *, backfill_id: str | None = "bf-1"):
    """One day of a pipeline whose only asset, mid.loader, is a script running ``statement``, beside raw.landing
    of five rows: as a backfill's partition, or by hand (no backfill ID)."""
    repo = Repo(tmp_path / "repo")
    repo.execute("CREATE SCHEMA raw", "CREATE TABLE raw.landing AS SELECT range AS x FROM range(5)")
    repo.python("mid.loader", SCRIPT.format(statement=statement), connection="db")
    request = RunRequest(str(repo.pipeline_dir), "2024-01-08", "2024-01-08", backfill_id=backfill_id)
    result = execute_run(prepare_run(request, cwd=repo.root), lambda line: None)
    return result, repo.query("SELECT count(*) FROM raw.landing")[0][0]


@pytest.mark.parametrize(
    ("statement", "change", "left"),
    [
        ("DELETE FROM raw.landing WHERE x < 2", "5 rows before, 3 after", 3),
        ("UPDATE raw.landing SET x = 9 WHERE x = 0", "the same 5 rows, but their contents changed", 5),
        ("DROP TABLE raw.landing; CREATE TABLE raw.landing AS SELECT 1 AS x", "5 rows before, 1 after", 1),
    ],
)
def test_a_script_that_deletes_or_changes_a_source_row_fails_its_partition(tmp_path, statement, change, left):
    """Deleted, changed, or the table rebuilt with fewer rows: the asset fails with the table and what changed, the
    script's write stays (it cannot be rolled back, and the line says so)."""
    result, rows = run_partition(tmp_path, statement)
    [asset] = result.results
    assert (asset.status, rows) == ("failed", left)
    assert asset.error == (
        f"mid.loader: its script deleted or changed rows of raw.landing, a raw table ({change}): source data is never "
        "deleted or rebuilt in a backfill, and a script's writes cannot be rolled back: restore raw.landing yourself"
    )


@pytest.mark.parametrize("backfill_id", ["bf-1", None])
def test_a_script_that_adds_source_rows_and_a_run_by_hand_pass(tmp_path, backfill_id):
    """A script that appends to raw.landing succeeds in a partition (no row that was there is gone); one that
    deletes succeeds in a run by hand, as Bruin runs it."""
    result, rows = run_partition(tmp_path, "INSERT INTO raw.landing VALUES (5)", backfill_id=backfill_id)
    assert (result.ok, rows) == (True, 6), result.results
    if backfill_id is None:
        result, rows = run_partition(tmp_path / "by-hand", "DELETE FROM raw.landing", backfill_id=None)
        assert (result.ok, rows) == (True, 0), result.results


def test_a_table_a_layer_raw_tag_puts_in_the_raw_layer_is_watched_too(tmp_path):
    """ingest.events is no raw schema's, but the asset that loads it is tagged ``layer:raw``: a script that deletes
    its rows fails its partition, as for raw.landing."""
    repo = Repo(tmp_path / "repo")
    repo.execute("CREATE SCHEMA ingest", "CREATE TABLE ingest.events AS SELECT range AS x FROM range(5)")
    repo.sql("ingest.events", "SELECT 1 AS x", materialization={"type": "table", "strategy": "append"},
             tags=["layer:raw"])  # fmt: skip
    repo.python("mid.loader", SCRIPT.format(statement="DELETE FROM ingest.events"), connection="db",
                depends=["ingest.events"])  # fmt: skip
    request = RunRequest(str(repo.pipeline_dir), "2024-01-08", "2024-01-08", backfill_id="bf-1")
    result = execute_run(prepare_run(request, cwd=repo.root), lambda line: None)
    loader = next(r for r in result.results if r.name == "mid.loader")
    assert loader.status == "failed"
    assert loader.error.startswith("mid.loader: its script deleted or changed rows of ingest.events, a raw table")


def test_the_raw_layer_is_read_from_tags_and_a_prefixed_asset_is_named_both_ways():
    """An asset whose first ``layer:`` tag is raw is in the raw layer (a schema alone is not what this reads; a
    ``layer:mid`` first wins); under the schema prefix ``dev_`` it is named as it writes and as SQL names it."""
    from dataclasses import replace

    from engine.pipeline.source_rows import raw_layer_tables
    from tests.unit.test_materialization import asset

    base = asset(None)
    assets = [
        replace(base, name="dev_ingest.events", tags=("layer:raw",)),
        replace(base, name="dev_Ingest.Other", tags=("nightly", "layer:raw")),
        replace(base, name="dev_mid.x", tags=("layer:mid", "layer:raw")),
        replace(base, name="dev_raw.y"),
    ]
    assert raw_layer_tables(assets, "dev_") == {
        "dev_ingest.events",
        "ingest.events",
        "dev_ingest.other",
        "ingest.other",
    }
    assert raw_layer_tables(assets) == {"dev_ingest.events", "dev_ingest.other"}
