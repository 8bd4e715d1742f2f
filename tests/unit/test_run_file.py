"""A YAML asset's ``run:`` file (engine/pipeline/asset_files.py): what runs, what the asset's digest covers."""

from __future__ import annotations

from pathlib import Path

from engine.guardrails.digest import read_trees
from engine.pipeline.asset_files import read_asset
from engine.pipeline.problems import Problems


def _asset(directory: Path, sql: str):
    (directory / "days.sql").write_text(sql)
    (directory / "days.asset.yml").write_text("name: mid.days\ntype: duckdb.sql\nrun: days.sql\n")
    problems = Problems()
    asset = read_asset(directory / "days.asset.yml", directory, problems)
    assert asset is not None and not problems.items, problems.items
    return asset


def test_the_run_file_is_the_body_the_script_and_part_of_the_digest(tmp_path):
    """The SQL is the run file's, which is the asset's script and one of its own files; editing only the run file
    changes the asset's digest, so an asset-level resume does not carry a success over another query."""
    first = _asset(tmp_path, "SELECT 1 AS x")
    assert (first.body, first.script, first.own_files) == (
        "SELECT 1 AS x", tmp_path / "days.sql", (tmp_path / "days.asset.yml", tmp_path / "days.sql")
    )  # fmt: skip
    assert _asset(tmp_path, "SELECT 2 AS x").digest != first.digest
    assert _asset(tmp_path, "SELECT 1 AS x").digest == first.digest


def test_the_modules_beside_a_python_run_file_are_read_trees(tmp_path):
    """A Python asset whose YAML names ``scripts/job.py``: the modules beside the script (first on its
    ``sys.path``) are what the digest and the watch cover, not those beside its YAML."""
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "job.py").write_text("import helper\n")
    (tmp_path / "assets").mkdir()
    (tmp_path / "assets" / "job.asset.yml").write_text("name: mid.job\ntype: python\nrun: ../scripts/job.py\n")
    problems = Problems()
    asset = read_asset(tmp_path / "assets" / "job.asset.yml", tmp_path, problems)
    assert asset is not None and not problems.items, problems.items
    assert read_trees(tmp_path, [asset]) == [(tmp_path / "macros", "**/*.sql"), (tmp_path / "scripts", "**/*.py")]
