"""`default:` merged into an asset's header as Bruin's SetupDefaultsFromPipeline merges it."""

from __future__ import annotations

from engine.pipeline.defaults import with_defaults

DEFAULT = {
    "type": "duckdb.sql",
    "owner": "team",
    "tags": ["a", "b"],
    "depends": ["s.x", {"asset": "s.y"}],
    "parameters": {"region": "eu", "mode": "x"},
    "materialization": {"type": "table", "strategy": "merge", "incremental_key": "day"},
    "columns": [
        {"name": "ID", "type": "integer", "primary_key": True, "checks": [{"name": "not_null"}]},
        {"name": "extra", "type": "varchar"},
    ],
    "custom_checks": [{"name": "Rows", "query": "SELECT 1", "value": 1}],
    "secrets": [{"key": "k1"}, {"key": "k2", "inject_as": "K2"}],
    "interval_modifiers": {"start": "-1d", "end": "1d"},
    "hooks": {"applicable_type": ["duckdb.sql"], "pre": [{"query": "SELECT 1"}], "post": [{"query": "SELECT 2"}]},
    "refresh_restricted": True,
}


def test_the_asset_wins_and_the_default_fills_the_rest():
    """Own values stay; strings and materialization fields fill gaps; lists append what is missing; named
    entries merge by name without regard to case; the asset's header itself is not changed."""
    own = {
        "name": "s.t",
        "owner": "me",
        "tags": ["b", "c"],
        "depends": [{"asset": "s.x"}],
        "parameters": {"mode": "own"},
        "materialization": {"strategy": "append"},
        "columns": [{"name": "id", "checks": [{"name": "unique"}]}],
        "custom_checks": [{"name": "rows", "query": "SELECT 2"}],
        "secrets": [{"key": "k2", "inject_as": "MINE"}],
        "interval_modifiers": {"start": "-2h"},
        "hooks": {"post": [{"query": "SELECT 3"}]},
        "full_refresh_restricted": False,
    }
    merged = with_defaults(own, DEFAULT, python_file=False)
    assert own["tags"] == ["b", "c"] and "type" not in own  # untouched
    assert merged["type"] == "duckdb.sql" and merged["owner"] == "me"
    assert merged["tags"] == ["b", "c", "a"]
    assert merged["depends"] == [{"asset": "s.x"}, {"asset": "s.y"}]
    assert merged["parameters"] == {"mode": "own", "region": "eu"}
    assert merged["materialization"] == {"strategy": "append", "type": "table", "incremental_key": "day"}
    [identity, extra] = merged["columns"]
    assert identity["type"] == "integer" and identity["primary_key"] is True
    assert [c["name"] for c in identity["checks"]] == ["unique", "not_null"] and extra["name"] == "extra"
    assert merged["custom_checks"] == [{"name": "rows", "query": "SELECT 2", "value": 1}]
    assert [s["key"] for s in merged["secrets"]] == ["k2", "k1"] and merged["secrets"][0]["inject_as"] == "MINE"
    assert merged["interval_modifiers"] == {"start": "-2h", "end": "1d"}
    assert merged["hooks"] == {"post": [{"query": "SELECT 3"}], "pre": [{"query": "SELECT 1"}]}
    assert merged["full_refresh_restricted"] is False and "refresh_restricted" not in merged


def test_hooks_reach_sql_assets_of_the_applicable_types_only():
    """A Python asset and an asset of a type applicable_type leaves out inherit no hook; the type default
    never overrides a Python file's own type."""
    python = with_defaults({"name": "s.p"}, DEFAULT, python_file=True)
    assert "hooks" not in python and "type" not in python
    other = with_defaults({"name": "s.q", "type": "bq.sql"}, DEFAULT, python_file=False)
    assert "hooks" not in other
    plain = with_defaults({"name": "s.r"}, DEFAULT, python_file=False)
    assert set(plain["hooks"]) == {"pre", "post"} and plain["refresh_restricted"] is True
    assert with_defaults(plain, {}, python_file=False) is plain
