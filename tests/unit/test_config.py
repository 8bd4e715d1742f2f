"""Configuration discovery, environments, connections and the parallelism cap."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.base.errors import BadInput
from engine.pipeline.config import find_config_file, load_config
from engine.pipeline.repository import resolve_target
from engine.spec.parallelism import effective_parallelism


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def pipeline(root: Path) -> Path:
    write(root / "pipe" / "pipeline.yml", "name: pipe\n")
    write(root / "pipe" / "assets" / "a.sql", "/* @bruin\nname: a\ntype: duckdb.sql\n@bruin */\nselect 1\n")
    return root / "pipe"


CONFIG = """
default_environment: dev
environments:
  dev:
    connections:
      duckdb:
        - name: local
          path: data/dev.duckdb
  reporting:
    connections:
      duckdb:
        - name: ro
          path: ${BACKFILL_TEST_DB}
          read_only: true
      postgres:
        - name: pg
          max_concurrent_assets: 8
"""


def test_config_at_repository_root_wins(tmp_path):
    """The .bruin.yml at the git root is used even when a nearer one exists."""
    (tmp_path / ".git").mkdir()
    root_config = write(tmp_path / ".bruin.yml", CONFIG)
    write(tmp_path / "sub" / ".bruin.yml", CONFIG)
    target = resolve_target(str(pipeline(tmp_path / "sub")))
    assert find_config_file(target, None) == root_config


def test_nearest_parent_config_outside_a_repository(tmp_path):
    """Without a git repository, the nearest parent directory holding .bruin.yml is used."""
    nearest = write(tmp_path / "a" / ".bruin.yml", CONFIG)
    write(tmp_path / ".bruin.yml", CONFIG)
    target = resolve_target(str(pipeline(tmp_path / "a" / "b")))
    assert find_config_file(target, None) == nearest


def test_explicit_config_and_environment_variable(tmp_path, monkeypatch):
    """--config-file wins; BRUIN_CONFIG_FILE is used when no flag is given; a missing file is an error."""
    target = resolve_target(str(pipeline(tmp_path)))
    chosen = write(tmp_path / "elsewhere.yml", CONFIG)
    assert find_config_file(target, str(chosen)) == chosen
    monkeypatch.setenv("BRUIN_CONFIG_FILE", str(chosen))
    assert find_config_file(target, None) == chosen
    with pytest.raises(BadInput, match="--config-file 'nope.yml' is not a file"):
        find_config_file(target, "nope.yml")


def test_missing_config_is_an_error(tmp_path, monkeypatch):
    """No .bruin.yml anywhere: one error saying where to create it."""
    monkeypatch.delenv("BRUIN_CONFIG_FILE", raising=False)
    target = resolve_target(str(pipeline(tmp_path)))
    with pytest.raises(BadInput, match="no .bruin.yml found"):
        find_config_file(target, None)


def test_environments_connections_and_expansion(tmp_path, monkeypatch):
    """Default environment, relative DuckDB paths, ${VAR} expansion and unknown environments."""
    config = load_config(write(tmp_path / ".bruin.yml", CONFIG))
    dev = config.environment(None)
    assert dev.name == "dev"
    assert dev.connections[0].path == (tmp_path / "data" / "dev.duckdb").resolve()
    with pytest.raises(BadInput, match=r"BACKFILL_TEST_DB is not set"):
        config.environment("reporting")
    monkeypatch.setenv("BACKFILL_TEST_DB", str(tmp_path / "ro.duckdb"))
    reporting = config.environment("reporting")
    assert reporting.connection("ro").read_only and reporting.connection("pg").max_concurrent_assets == 8
    with pytest.raises(BadInput, match=r"environment 'staging' is not in .*environments: dev, reporting"):
        config.environment("staging")


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("environments: [1, 2]\n", ":1: 'environments' must map"),
        (
            "environments:\n  dev:\n    connections:\n      duckdb:\n        - path: x.db\n",
            ":5: every duckdb connection needs",
        ),
        ("environments:\n  dev:\n    connections:\n      duckdb:\n        - name: x\n", "needs a 'path'"),
        (
            "environments:\n  dev:\n    connections:\n      pg:\n"
            "        - name: p\n          max_concurrent_assets: 0\n",
            ":6: max_concurrent_assets of 'p' is 0",
        ),
        ("environments:\n  dev: {\n", "invalid YAML"),
    ],
)
def test_bad_configs_name_file_and_line(tmp_path, text, problem):
    """Every configuration problem names the file and, where it can, the line."""
    path = write(tmp_path / ".bruin.yml", text)
    with pytest.raises(BadInput, match=problem) as error:
        load_config(path).environment("dev")
    assert str(path) in str(error.value)


def test_parallelism_cap(tmp_path, monkeypatch):
    """cap = max(1, floor(L / min(W, L))); a writable DuckDB file means one; read-only DuckDB does not cap."""
    monkeypatch.setenv("BACKFILL_TEST_DB", str(tmp_path / "ro.duckdb"))
    config = load_config(write(tmp_path / ".bruin.yml", CONFIG))
    reporting = config.environment("reporting")
    assert effective_parallelism(8, 16, reporting).effective == 1  # 8 // min(16, 8)
    assert effective_parallelism(8, 2, reporting).effective == 4  # 8 // 2
    assert (
        effective_parallelism(3, 2, reporting).effective == 3 and effective_parallelism(3, 2, reporting).reason is None
    )
    capped = effective_parallelism(8, 3, reporting)
    assert capped.effective == 2 and "'pg' allows 8 concurrent assets" in capped.reason
    dev = effective_parallelism(4, 16, config.environment("dev"))
    assert dev.effective == 1 and "writable DuckDB" in dev.reason


def test_targets(tmp_path):
    """A pipeline directory or an asset inside one; anything else is an error naming it."""
    directory = pipeline(tmp_path)
    assert resolve_target(str(directory)).pipeline_dir == directory
    asset = resolve_target(str(directory / "assets" / "a.sql"))
    assert asset.is_asset and asset.pipeline_dir == directory
    for bad, problem in [
        ("missing", "does not exist"),
        (str(tmp_path), "without pipeline.yml"),
        (str(write(tmp_path / "x.txt", "")), "is not an asset file"),
    ]:
        with pytest.raises(BadInput, match=problem):
            resolve_target(bad)
