"""What the pre-flight gathers, in-process (issue 22): the level that follows a shared DuckDB file across
environments, the selection's first and last partitions, assets grouped by file, and windows as runs see them."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from zoneinfo import ZoneInfo

import pytest

from engine.guardrails.facts import AssetFacts, Facts, _first_and_last, strictest_on_the_same_files
from engine.guardrails.settings import settings_of_environment
from engine.pipeline.assets import Asset, Materialization
from engine.pipeline.config import Connection, load_config
from engine.pipeline.templating import Window

UTC = ZoneInfo("UTC")
DAY = 86_400_000_000


def config(tmp_path: Path, environments: dict):
    import yaml

    path = tmp_path / ".bruin.yml"
    path.write_text(yaml.safe_dump({"default_environment": "dev", "environments": environments}))
    return load_config(path)


def level_of(loaded, name: str = "dev"):
    settings = settings_of_environment(name, loaded.raw_environments.get(name), loaded.path)
    judged = strictest_on_the_same_files(settings, loaded, loaded.environment(name))
    return judged.level, judged.level_source


def on(level: str, *paths: str) -> dict:
    """An environment at ``level`` with a DuckDB connection to each path."""
    connections = [{"name": f"c{i}", "path": path} for i, path in enumerate(paths)]
    return {"guardrails": level, **({"connections": {"duckdb": connections}} if paths else {})}


def test_the_strictest_level_of_any_environment_on_the_same_file_applies(tmp_path, monkeypatch):
    """sandbox over production's file (spelt another way) is production, naming the environment and file; a
    standard environment on it after that does not lower it; an unreadable environment or another file is
    passed over."""
    monkeypatch.delenv("BACKFILL_TEST_UNSET", raising=False)
    shared = (tmp_path / "shared.duckdb").resolve()
    loaded = config(tmp_path, {
        "dev": on("sandbox", "shared.duckdb"),
        "broken": on("production", "${BACKFILL_TEST_UNSET}/shared.duckdb"),
        "other": on("production", "other.duckdb"),
        "prod": on("production", "sub/../shared.duckdb"),
        "zz": on("standard", "shared.duckdb"),
    })  # fmt: skip
    assert level_of(loaded) == ("production", f"environment 'prod' uses the same DuckDB file {shared}")
    assert level_of(loaded, "zz") == ("production", f"environment 'prod' uses the same DuckDB file {shared}")
    assert level_of(loaded, "other") == ("production", ".bruin.yml")


def test_a_stricter_level_is_taken_from_the_first_file_shared_and_never_lowered(tmp_path):
    """Two files shared: the first by path is named; an environment keeps its level when none sharing a file is
    stricter; one with no DuckDB file keeps its own level."""
    a = (tmp_path / "a.duckdb").resolve()
    loaded = config(tmp_path, {
        "dev": on("sandbox", "b.duckdb", "a.duckdb"),
        "mid": on("standard", "b.duckdb", "a.duckdb"),
        "empty": on("sandbox"),
        "low": on("sandbox", "a.duckdb"),
    })  # fmt: skip
    assert level_of(loaded) == ("standard", f"environment 'mid' uses the same DuckDB file {a}")
    assert level_of(loaded, "mid") == ("standard", ".bruin.yml")
    assert level_of(loaded, "empty") == ("sandbox", ".bruin.yml")
    assert level_of(loaded, "low") == ("standard", f"environment 'mid' uses the same DuckDB file {a}")


@pytest.mark.parametrize(("indices", "expected"), [([], None), ([4], (4, 4)), ([1, 5, 9], (1, 9)), ([0, 2], (0, 2))])
def test_the_first_and_last_selected_partitions(indices, expected):
    """The selection's first and last index, read in one pass; none selected: None."""
    assert _first_and_last(SimpleNamespace(selected=lambda: iter(indices))) == expected


def asset_facts(name: str, connection: Connection | None, *, selected: bool = True, **asset_fields) -> AssetFacts:
    materialization = Materialization("table", "time_interval", "ts", "timestamp")
    asset = Asset(name, "duckdb.sql", Path("t.sql"), "t.sql", 1, materialization=materialization, body="SELECT 1",
                  **asset_fields)  # fmt: skip
    return AssetFacts(asset=asset, selected=selected, strategy="time_interval", uses_interval=True, layer="mid",
                      layer_source="default", connection=connection)  # fmt: skip


def test_assets_are_grouped_by_their_duckdb_file_and_split_by_selection(tmp_path):
    """by_file keeps DuckDB connections with a file, in order, leaving out other kinds and no connection;
    selected and downstream split the assets."""
    one = Connection("duckdb", "one", tmp_path / "one.duckdb", False, None)
    two = Connection("duckdb", "two", tmp_path / "two.duckdb", True, None)
    remote = Connection("postgres", "pg", None, False, None)
    pathless = Connection("duckdb", "bare", None, False, None)
    a, b, c = asset_facts("a", one), asset_facts("b", two, selected=False), asset_facts("c", one)
    d, e = asset_facts("d", remote), asset_facts("e", None)
    f = asset_facts("f", pathless)
    request = SimpleNamespace(spec=SimpleNamespace(target=SimpleNamespace(is_command=False), zone=UTC))
    facts = Facts(request, None, (0, DAY), None, assets={x.asset.name: x for x in (a, b, c, d, e, f)})
    assert facts.by_file([a, b, c, d, e, f]) == {one.path: [a, c], two.path: [b]}
    assert [x.asset.name for x in facts.selected] == ["a", "c", "d", "e", "f"]
    assert [x.asset.name for x in facts.downstream] == ["b"]
    assert not facts.is_command
    assert facts.range_window() == Window(0, DAY - 1, UTC)
    assert a.changes_data and not b.changes_data  # b's connection is read-only


def test_a_window_as_runs_see_it_after_interval_modifiers(tmp_path):
    """The asset's modifiers (else the pipeline's) move each end; none, no pipeline, or modifiers switched
    off: the window as it is."""
    window = Window(10 * DAY, 12 * DAY - 1, UTC)
    options = SimpleNamespace(apply_interval_modifiers=True)
    spec = SimpleNamespace(target=SimpleNamespace(is_command=False), zone=UTC, run_options=options)
    pipeline = SimpleNamespace(name="p", default_interval_modifiers={"start": "-1d"})
    facts = Facts(SimpleNamespace(spec=spec), None, (10 * DAY, 12 * DAY), None, pipeline=pipeline)
    own = asset_facts("a", None, interval_modifiers={"end": "2h"}).asset
    plain = asset_facts("b", None).asset
    assert facts.effective_window(own, window) == Window(10 * DAY, 12 * DAY - 1 + 2 * 3_600_000_000, UTC)
    assert facts.effective_window(plain, window) == Window(9 * DAY, 12 * DAY - 1, UTC)
    pipeline.default_interval_modifiers = None
    assert facts.effective_window(plain, window) == window
    pipeline.default_interval_modifiers = {"start": "-1d"}
    options.apply_interval_modifiers = False
    assert facts.effective_window(plain, window) == window
    options.apply_interval_modifiers = True
    facts.pipeline = None
    assert facts.effective_window(plain, window) == window
