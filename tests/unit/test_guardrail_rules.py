"""Guardrail rules that a real pipeline cannot reach (the pipeline would not validate) or that read only
configuration: strategy findings and environment levels."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from engine.base.errors import BadInput
from engine.guardrails.data_checks import _strategy_finding
from engine.guardrails.facts import AssetFacts
from engine.guardrails.record import duration_total
from engine.guardrails.settings import settings_of_environment
from engine.pipeline.assets import Asset, Materialization
from engine.pipeline.columns import Column


def facts_of(strategy: str, *, key: str | None = None, primary: bool = False, uses_interval: bool = True, rows=None):
    columns = (Column("id", "integer", primary, False, None, ()),)
    asset = Asset(
        "mid.t",
        "duckdb.sql",
        Path("t.sql"),
        "t.sql",
        1,
        materialization=Materialization("table", strategy, key, None),
        columns=columns,
    )
    return AssetFacts(
        asset=asset,
        selected=True,
        strategy=strategy,
        uses_interval=uses_interval,
        layer="mid",
        layer_source="schema mid",
        connection=None,
        table_rows=rows,
        rows_in_range=rows if key else None,
    )


@pytest.mark.parametrize(
    ("strategy", "kwargs", "tier"),
    [
        ("merge", {}, "human-only"),  # no primary key: what it overwrites is unclear
        ("merge", {"primary": True}, None),
        ("delete+insert", {}, "human-only"),  # no incremental key
        ("delete+insert", {"key": "day"}, None),
        ("scd2_by_time", {"key": "day"}, "never"),  # a slice per partition closes the other slices' keys
        ("scd2_by_column", {"primary": True, "uses_interval": False}, "rebuilt"),  # the same snapshot each time
        ("datavault_hub", {}, None),  # insert-only, new keys only
        ("datavault_link", {}, None),
        ("datavault_satellite", {}, "auto"),  # out of time order loads unchanged rows again
        ("upsert", {}, "human-only"),
        ("append", {"key": "day", "rows": 3}, "approval"),
        ("append", {"rows": 3}, "human-only"),
        ("time_interval", {"key": "day"}, None),
    ],
)
def test_each_strategy_demands_its_tier(strategy, kwargs, tier):
    """The materialization rules per strategy, including those a validating pipeline never reaches."""
    finding = _strategy_finding(facts_of(strategy, **kwargs), partitions=5)
    assert (finding[0] if isinstance(finding, tuple) else finding) == tier


def test_create_replace_is_never_when_it_uses_the_interval_and_only_repeated_otherwise():
    """Only the last partition would survive a per-partition rebuild; a rebuild that ignores the interval is
    merely repeated; one partition is fine either way."""
    assert _strategy_finding(facts_of("create+replace"), partitions=2)[0] == "never"
    assert _strategy_finding(facts_of("create+replace", uses_interval=False), partitions=2) == "rebuilt"
    assert _strategy_finding(facts_of("truncate+insert"), partitions=1) is None


def test_levels_come_from_the_environment_or_its_name():
    """No key: standard, or production for a name containing prod; an explicit level wins; a bad value names
    the file and line."""
    path = Path("/repo/.bruin.yml")
    assert settings_of_environment("dev", {}, path).level == "standard"
    assert settings_of_environment("prod-eu", {}, path).level == "production"
    assert settings_of_environment("prod-eu", {"guardrails": "sandbox"}, path).level == "sandbox"
    with pytest.raises(BadInput, match="dependency_gates is 'maybe'"):
        settings_of_environment("dev", {"dependency_gates": "maybe"}, path)
    with pytest.raises(BadInput, match="verify_low must be below 1"):
        settings_of_environment("dev", {"guardrail_limits": {"verify_low": 1.5}}, path)


def test_an_asset_refreshed_on_every_run_is_judged_as_rebuilding_its_table():
    """parameters.full_refresh: true drops the table each run, so a sliced backfill would keep only one slice."""
    facts = facts_of("append", key="day")
    facts.asset.always_full_refresh = True
    finding = _strategy_finding(facts, partitions=5)
    assert finding[0] == "never" and "parameters.full_refresh" in finding[1]
    facts.asset.full_refresh_restricted = True
    assert _strategy_finding(facts, partitions=5) is None  # back to append, with nothing in the range yet


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [(4.1, "4.1s"), (872.0, "14m32s"), (0.0, "100ms"), (0.04, "100ms"), (3725.34, "1h2m5.3s"), (59.96, "1m")],
)
def test_the_record_s_total_duration_is_human(seconds, shown):
    """To a tenth of a second in Go's spelling, never a float's tail (4.1 s once printed 4.099999s)."""
    assert duration_total(seconds) == shown


@pytest.mark.parametrize(("text", "gates"), [("off", "off"), ("false", "off"), ("no", "off"), ("Off", "off"),
                                             ("on", "enforce"), ("true", "enforce"), ("'off'", "off"),
                                             ("warn", "warn")])  # fmt: skip
def test_dependency_gates_read_as_yaml_spells_them(text, gates):
    """``dependency_gates: off`` as the docs write it (YAML 1.1 reads it as false) means off; on/true mean
    enforce."""
    raw = yaml.safe_load(f"dependency_gates: {text}\n")
    assert settings_of_environment("dev", raw, Path("/repo/.bruin.yml")).dependency_gates == gates
