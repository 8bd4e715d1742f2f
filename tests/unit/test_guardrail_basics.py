"""The guardrails' small rules in-process (issue 22): tiers and levels, what an asset does to its table, the
operator's guard options and reason, and the run-by-hand rule. Assets are built by hand."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from engine.base.errors import BadInput, Refused
from engine.guardrails.asset_risk import changes_data, layer_of, strategy_of, time_key, uses_interval
from engine.guardrails.manual_run import check_run_by_hand
from engine.guardrails.request import GuardOptions, check_reason, check_verify_mode
from engine.guardrails.tiers import (
    APPROVAL,
    AUTO,
    FAIL,
    HUMAN_ONLY,
    NEVER,
    NOT_APPLICABLE,
    PASS,
    WARN,
    PreflightCheck,
    apply_level,
    failed,
    highest,
    not_applicable,
    passed,
    rank,
    verdict_of,
    warned,
)
from engine.pipeline.assets import Asset, Materialization


def asset(name="mid.t", kind="duckdb.sql", *, type_="table", strategy=None, key=None, body="SELECT 1", **fields):
    return Asset(
        name, kind, Path("t.sql"), "t.sql", 1, materialization=Materialization(type_, strategy, key, None), body=body,
        **fields,
    )  # fmt: skip


def pipeline(macros: str = "", modifiers=None):
    return SimpleNamespace(name="p", macros=macros, default_interval_modifiers=modifiers)


# ---------------------------------------------------------------- tiers


def test_tiers_rank_in_rising_order_and_the_highest_wins():
    """auto < approval < human-only < never; no tier at all is auto; a verdict is the highest tier demanded."""
    assert [rank(t) for t in (AUTO, APPROVAL, HUMAN_ONLY, NEVER)] == [0, 1, 2, 3]
    assert highest([]) is AUTO
    assert highest(["approval", "auto"]) is APPROVAL
    assert highest(["never", "human-only", "approval"]) is NEVER
    assert verdict_of([passed("a", "ok"), failed("b", HUMAN_ONLY, "no"), failed("c", APPROVAL, "maybe")]) is HUMAN_ONLY
    assert verdict_of([]) is AUTO


def test_check_helpers_set_status_tier_detail_and_evidence():
    """passed, warned, not_applicable and failed build the check they name, evidence kept as given."""
    assert passed("x", "d", n=1) == PreflightCheck("x", PASS, AUTO, "d", {"n": 1})
    assert warned("x", "d", n=2) == PreflightCheck("x", WARN, AUTO, "d", {"n": 2})
    assert not_applicable("x", "d", why="none") == PreflightCheck("x", NOT_APPLICABLE, AUTO, "d", {"why": "none"})
    assert failed("x", NEVER, "d", rows=3) == PreflightCheck("x", FAIL, NEVER, "d", {"rows": 3})


def test_a_check_s_json_names_what_it_demanded_only_when_a_level_changed_it():
    """to_json has name, status, tier, detail and evidence; ``demanded`` only once sandbox lowered the tier."""
    check = failed("size", APPROVAL, "big", hours=9)
    assert check.to_json() == {"name": "size", "status": "fail", "tier": "approval", "detail": "big",
                               "evidence": {"hours": 9}}  # fmt: skip
    [lowered] = apply_level([check], "sandbox")
    assert lowered.to_json()["demanded"] == "approval" and lowered.to_json()["tier"] == "auto"


def test_sandbox_turns_approval_and_human_only_into_warnings_and_leaves_never():
    """Only the sandbox level changes anything; never stays never there; other checks are untouched."""
    checks = [failed("a", APPROVAL, "1"), failed("h", HUMAN_ONLY, "2"), failed("n", NEVER, "3"), passed("p", "4")]
    assert apply_level(checks, "standard") is checks
    assert apply_level(checks, "production") is checks
    sandboxed = apply_level(checks, "sandbox")
    assert [(c.status, c.tier, c.demanded) for c in sandboxed] == [
        (WARN, AUTO, APPROVAL), (WARN, AUTO, HUMAN_ONLY), (FAIL, NEVER, None), (PASS, AUTO, None),
    ]  # fmt: skip
    assert [c.detail for c in sandboxed] == ["1", "2", "3", "4"]


# ---------------------------------------------------------------- asset_risk


def test_the_strategy_of_each_kind_of_asset():
    """A seed rebuilds its table; Python and SQL without a materialization run as written; a view is a view; a
    table without a strategy is rebuilt (Bruin's default)."""
    assert strategy_of(asset(kind="duckdb.seed")) == "create+replace"
    assert strategy_of(asset(kind="duckdb.seed", type_=None)) == "create+replace"
    assert strategy_of(asset(kind="python", type_=None)) == "none"
    assert strategy_of(asset(kind="python", strategy="append")) == "append"
    assert strategy_of(asset(type_="view", strategy="append")) == "view"
    assert strategy_of(asset(type_=None)) == "none"
    assert strategy_of(asset()) == "create+replace"
    assert strategy_of(asset(strategy="merge")) == "merge"


def test_what_changes_data_and_what_places_a_row_in_time():
    """Views and DDL change definitions, not rows; the time key is a table's incremental key only."""
    assert not changes_data(asset(type_="view"))
    assert not changes_data(asset(strategy="ddl"))
    assert changes_data(asset(strategy="append")) and changes_data(asset(type_=None))
    assert time_key(asset(strategy="time_interval", key="day")) == "day"
    assert time_key(asset(type_="view", key="day")) is None


@pytest.mark.parametrize(
    ("name", "tags", "expected"),
    [
        ("raw.events", (), ("raw", "schema raw")),
        ("SOURCE.x", (), ("raw", "schema source")),
        ("landing.x", (), ("raw", "schema landing")),
        ("src.x", (), ("raw", "schema src")),
        ("mart.x", (), ("final", "schema mart")),
        ("Reporting.x", (), ("final", "schema reporting")),
        ("dashboards.x", (), ("final", "schema dashboards")),
        ("staging.x", (), ("mid", "schema staging")),
        ("events", (), ("mid", "no schema")),
        ("warehouse.raw.events", (), ("raw", "schema raw")),  # catalog.schema.table: the schema decides
        ("db.Mart.x", (), ("final", "schema mart")),
        ("raw.staging.x", (), ("mid", "schema staging")),  # a catalog named raw is not the raw schema
        ("raw.events", ("layer:mid",), ("mid", "tag layer:mid")),
        ("mid.x", ("other", "layer:final"), ("final", "tag layer:final")),
        ("mid.x", ("layer:gold",), ("mid", "schema mid")),  # not a layer: the schema decides
    ],
)
def test_the_layer_comes_from_a_tag_or_the_schema(name, tags, expected):
    """A ``layer:`` tag naming a layer wins; else the schema (any case) of the name; else mid."""
    assert layer_of(asset(name, tags=tags)) == expected


def test_whether_an_asset_uses_its_interval():
    """Seeds never; time_interval and interval modifiers always; a script by its BRUIN_*_DATE variables; SQL by
    rendering it for two windows (a comment does not count, a macro does); SQL that cannot render, by its text."""
    plain = pipeline()
    assert not uses_interval(asset(kind="duckdb.seed", body="{{ start_date }}"), plain, {})
    assert uses_interval(asset(strategy="time_interval", key="d", body="SELECT 1"), plain, {})
    assert uses_interval(asset(interval_modifiers={"start": "-1d"}), plain, {})
    assert uses_interval(asset(), pipeline(modifiers={"start": "-1d"}), {})
    assert uses_interval(asset(kind="python", body="os.environ['BRUIN_START_DATE']"), plain, {})
    assert not uses_interval(asset(kind="python", body="print('BRUIN_STARTDATE')"), plain, {})
    assert uses_interval(asset(body="SELECT '{{ end_datetime }}'"), plain, {})
    assert not uses_interval(asset(body="SELECT 1 -- not {{ start_date }} really\n"), plain, {})
    assert not uses_interval(asset(body="SELECT {{ var.n }}"), plain, {"n": 3})
    macro = "{% macro since() %}'{{ start_date }}'{% endmacro %}"
    assert uses_interval(asset(body="SELECT {{ since() }}"), pipeline(macros=macro), {})
    assert uses_interval(asset(body="SELECT {{ start_date | nosuchfilter }}"), plain, {})  # cannot render
    # What the render sees besides the window: the asset's name, the pipeline, the variables, no full refresh.
    later = "{% else %}SELECT '{{ start_date }}'{% endif %}"
    assert not uses_interval(asset(body="{% if this == 'mid.t' %}SELECT 1" + later), plain, {})
    assert not uses_interval(asset(body="{% if pipeline == 'p' %}SELECT 1" + later), plain, {})
    assert not uses_interval(asset(body="{% if var.fixed %}SELECT 1" + later), plain, {"fixed": True})
    assert not uses_interval(asset(body="{% if not full_refresh %}SELECT 1" + later), plain, {})
    assert not uses_interval(asset(body="SELECT {{ nosuchfunction() }}"), plain, {})


# ---------------------------------------------------------------- request


def test_guard_options_round_trip_and_ignore_unknown_keys():
    """Saved options read back as written; keys of a later version are ignored; none saved are the defaults."""
    options = GuardOptions(level="sandbox", allow_long_range=True, reversible=True, snapshot=False, verify="warn",
                           verify_command="check {start}", ignore_dependencies=True)  # fmt: skip
    assert GuardOptions.from_json(options.to_json()) == options
    assert GuardOptions.from_json({**options.to_json(), "future": 1}) == options
    assert GuardOptions.from_json(None) == GuardOptions() == GuardOptions.from_json({})
    assert GuardOptions().to_json() == {
        "level": None, "allow_long_range": False, "reversible": False, "snapshot": True, "verify": "on",
        "verify_command": None, "ignore_dependencies": False,
    }  # fmt: skip


def test_a_reason_is_one_line_of_text_kept_stripped():
    """None stays None; blanks, control characters and novels are one line each naming the flag; tabs pass."""
    assert check_reason(None) is None
    assert check_reason("  fix for n\t ok ") == "fix for n\t ok"
    assert check_reason("x" * 2000) == "x" * 2000
    with pytest.raises(BadInput, match=r"^--why '' is empty: say why"):
        check_reason(" \t", "--why")
    with pytest.raises(BadInput, match=r"^--reason is 2,001 characters long: keep it under 2,000$"):
        check_reason("x" * 2001)
    with pytest.raises(BadInput, match=r"^--reason 'a\\nb' contains control characters"):
        check_reason("a\nb")
    for control in ("\x1f", "\x7f", "\x9b", "\x9f"):  # C0, DEL and C1 (an 8-bit CSI moves a reader's cursor)
        with pytest.raises(BadInput, match="control characters"):
            check_reason(f"a{control}b")
    assert check_reason("a\xa0b é") == "a\xa0b é"  # the first character past C1 is text
    with pytest.raises(BadInput) as long:
        check_reason("x" * 39 + "yz\n")
    assert str(long.value).startswith("--reason '" + "x" * 39 + "y' contains")
    assert check_reason("a b") == "a b"  # a space (32) is text


def test_verify_modes():
    """on, warn and off are accepted as given; anything else is one line."""
    assert [check_verify_mode(m) for m in ("on", "warn", "off")] == ["on", "warn", "off"]
    with pytest.raises(BadInput, match=r"^--verify 'ON' is not a verification mode: use on, warn or off$"):
        check_verify_mode("ON")


# ---------------------------------------------------------------- manual_run


def prepared(*assets: Asset, full_refresh: bool = False):
    return SimpleNamespace(
        pipeline=SimpleNamespace(assets={a.name: a for a in assets}),
        selected={a.name for a in assets},
        request=SimpleNamespace(full_refresh=full_refresh),
    )


def test_a_raw_table_with_a_deleting_strategy_is_never_run_by_hand():
    """delete+insert on raw.events is refused with its strategy; append, views, seeds and mid tables pass."""
    with pytest.raises(Refused) as refused:
        check_run_by_hand(prepared(asset("raw.events", strategy="delete+insert", key="d")), reason=None)
    assert str(refused.value).startswith("never: raw.events (delete+insert) is in the raw layer with a delete-style")
    with pytest.raises(Refused, match=r"^never: raw.a \(create\+replace\), raw.b \(merge\) are in the raw layer"):
        check_run_by_hand(prepared(asset("raw.b", strategy="merge"), asset("raw.a")), reason=None)
    check_run_by_hand(
        prepared(asset("raw.log", strategy="append"), asset("raw.v", type_="view"), asset("raw.s", "duckdb.seed"),
                 asset("mid.t", strategy="delete+insert", key="d")),
        reason=None,
    )  # fmt: skip


def test_a_full_refresh_by_hand_needs_a_reason_and_never_rebuilds_raw():
    """A raw table is never rebuilt by --full-refresh (unless restricted, or not a table); others need a
    reason."""
    with pytest.raises(Refused) as refused:
        check_run_by_hand(prepared(asset("raw.events", strategy="append"), full_refresh=True), reason="r")
    assert str(refused.value).startswith("never: raw.events is in the raw layer and --full-refresh rebuilds it")
    kept = asset("raw.events", strategy="append", full_refresh_restricted=True)
    check_run_by_hand(prepared(kept, full_refresh=True), reason="r")
    check_run_by_hand(prepared(asset("raw.v", type_="view"), asset("raw.s", "duckdb.seed"), full_refresh=True),
                      reason="r")  # fmt: skip
    check_run_by_hand(prepared(asset("raw.q", type_=None, strategy="append"), full_refresh=True), reason="r")
    check_run_by_hand(prepared(asset("raw.schema", strategy="ddl"), full_refresh=True), reason="r")
    both = prepared(asset("raw.b", strategy="append"), asset("raw.a", strategy="append"), full_refresh=True)
    with pytest.raises(Refused, match=r"^never: raw.a, raw.b are in the raw layer and --full-refresh rebuilds it"):
        check_run_by_hand(both, reason="r")
    with pytest.raises(BadInput) as no_reason:
        check_run_by_hand(prepared(asset("mid.t"), full_refresh=True), reason=None)
    assert str(no_reason.value) == (
        "--full-refresh drops and rebuilds the selected tables: give --reason TEXT (it is recorded)"
    )
    check_run_by_hand(prepared(asset("mid.t"), full_refresh=True), reason="rebuild after the fix")
    check_run_by_hand(prepared(asset("mid.t")), reason=None)


# ---------------------------------------------------------------- settings

CONFIG = Path("/repo/.bruin.yml")


def located(text: str):
    """YAML as the configuration reader loads it (with line numbers)."""
    from engine.pipeline.yamlfile import parse_yaml

    return parse_yaml(text, str(CONFIG))


def test_settings_round_trip_through_the_saved_json():
    """What a backfill saves reads back the same; older saves without a source, gates or quotas get defaults."""
    from engine.guardrails.settings import GuardrailSettings, Limits

    settings = GuardrailSettings("production", ".bruin.yml", Limits(max_hours=3.0), "warn", {"db": 5})
    assert GuardrailSettings.from_json(settings.to_json()) == settings
    assert settings.to_json()["limits"]["max_hours"] == 3.0 and settings.to_json()["quotas"] == {"db": 5}
    assert GuardrailSettings.from_json({"level": "sandbox"}) == GuardrailSettings("sandbox", "saved")


def test_command_levels_come_from_the_flag():
    """No --guardrails: standard from the default; a level given is named as from --guardrails; a bad one is one
    line."""
    from engine.guardrails.settings import GuardrailSettings, check_level, settings_for_command

    assert settings_for_command(None) == GuardrailSettings()
    assert settings_for_command("sandbox") == GuardrailSettings("sandbox", "--guardrails")
    with pytest.raises(
        BadInput, match=r"^--level 'lax' is not a guardrail level: use sandbox, standard or production$"
    ):
        check_level("lax", "--level")
    with pytest.raises(BadInput, match=r"^--guardrails 'lax' is not a guardrail level"):
        check_level("lax")


def test_an_environment_s_level_and_where_it_came_from():
    """The key wins and names the file; without it a name containing prod (any case) is production."""
    from engine.guardrails.settings import settings_of_environment

    assert settings_of_environment("dev", None, CONFIG).level_source == "default"
    assert settings_of_environment("PROD", {}, CONFIG).level_source == "its name contains 'prod'"
    explicit = settings_of_environment("prod", {"guardrails": "standard"}, CONFIG)
    assert (explicit.level, explicit.level_source) == ("standard", ".bruin.yml")
    with pytest.raises(BadInput) as bad:
        settings_of_environment("dev", located("x: 1\nguardrails: strict\n"), CONFIG)
    assert str(bad.value) == (
        "/repo/.bruin.yml:2: environment 'dev': guardrails is 'strict': use sandbox, standard or production"
    )
    with pytest.raises(BadInput, match="guardrails is 3"):
        settings_of_environment("dev", {"guardrails": 3}, CONFIG)


def test_limits_are_positive_numbers_each_named_with_its_line():
    """Known limits as numbers (ints become floats); unknown keys, booleans, text, zero, a billion, a fraction of a
    partition and a non-mapping are one line each; verify_low must be below 1 and verify_high above it."""
    from engine.guardrails.settings import settings_of_environment

    limits = settings_of_environment("dev", {"guardrail_limits": {"max_hours": 2, "row_ratio": 0.5}}, CONFIG).limits
    assert (limits.max_hours, limits.row_ratio, limits.max_gib) == (2.0, 0.5, 1)
    assert isinstance(limits.max_hours, float)
    assert settings_of_environment("dev", {"guardrail_limits": {"max_gib": 999_999_999}}, CONFIG).limits.max_gib
    text = "guardrails: standard\nguardrail_limits:\n  max_hours: 1\n  max_days: 3\n"
    with pytest.raises(BadInput) as unknown:
        settings_of_environment("dev", located(text), CONFIG)
    assert str(unknown.value).startswith("/repo/.bruin.yml:4: environment 'dev': guardrail_limits.max_days is not a")
    assert "use approval_days, auto_max_intervals, human_only_days, max_gib" in str(unknown.value)
    with pytest.raises(BadInput) as lined:
        settings_of_environment("dev", located("a: 1\nguardrail_limits:\n  max_gib: 0\n"), CONFIG)
    assert (
        str(lined.value)
        == "/repo/.bruin.yml:3: environment 'dev': guardrail_limits.max_gib is 0: use a positive number"
    )
    with pytest.raises(BadInput) as ordered:
        settings_of_environment("dev", located("a: 1\nb: 2\nguardrail_limits:\n  verify_low: 2\n"), CONFIG)
    assert str(ordered.value).startswith("/repo/.bruin.yml:3: environment 'dev': verify_low must be below 1")
    for value in (True, "2", 0, -1, 1e9):
        with pytest.raises(BadInput, match=rf"guardrail_limits.max_hours is {value!r}: use a positive number"):
            settings_of_environment("dev", {"guardrail_limits": {"max_hours": value}}, CONFIG)
    with pytest.raises(
        BadInput, match=r"guardrail_limits.auto_max_intervals is 1.5: use a whole number of partitions$"
    ):
        settings_of_environment("dev", {"guardrail_limits": {"auto_max_intervals": 1.5}}, CONFIG)
    whole = settings_of_environment("dev", {"guardrail_limits": {"auto_max_intervals": 3.0, "max_hours": 1.5}}, CONFIG)
    assert (whole.limits.auto_max_intervals, whole.limits.max_hours) == (3, 1.5)
    with pytest.raises(BadInput, match=r"^/repo/.bruin.yml:2: environment 'dev': guardrail_limits must be a mapping$"):
        settings_of_environment("dev", located("a: 1\nguardrail_limits: [1]\n"), CONFIG)
    assert settings_of_environment("dev", {"guardrail_limits": None}, CONFIG).limits.max_hours == 1
    for bad in ({"verify_low": 1}, {"verify_high": 1}, {"verify_low": 0.9, "verify_high": 0.95}):
        with pytest.raises(BadInput, match=r"verify_low must be below 1 and verify_high above 1$"):
            settings_of_environment("dev", {"guardrail_limits": bad}, CONFIG)
    edge = settings_of_environment("dev", {"guardrail_limits": {"verify_low": 0.99, "verify_high": 1.01}}, CONFIG)
    assert (edge.limits.verify_low, edge.limits.verify_high) == (0.99, 1.01)


def test_gates_and_quotas():
    """Gates as given (a boolean from YAML 1.1 spellings); quotas per connection, whole numbers ≥ 1, named with the
    connection and line when bad; entries without a quota or not mappings are skipped."""
    from engine.guardrails.settings import settings_of_environment

    assert settings_of_environment("dev", {"dependency_gates": True}, CONFIG).dependency_gates == "enforce"
    assert settings_of_environment("dev", {"dependency_gates": False}, CONFIG).dependency_gates == "off"
    with pytest.raises(BadInput) as gates:
        settings_of_environment("dev", located("a: 1\nb: 2\ndependency_gates: maybe\n"), CONFIG)
    assert (
        str(gates.value)
        == "/repo/.bruin.yml:3: environment 'dev': dependency_gates is 'maybe': use enforce, warn or off"
    )
    raw = {"connections": {"duckdb": ["x", {"name": "b"}, {"name": "a", "daily_run_quota": 1}],
                           "other": [{"name": "c", "daily_run_quota": 500}], "none": None}}  # fmt: skip
    assert settings_of_environment("dev", raw, CONFIG).quotas == {"a": 1, "c": 500}
    text = "connections:\n  duckdb:\n    - name: a\n      daily_run_quota: 0\n"
    with pytest.raises(BadInput) as quota:
        settings_of_environment("dev", located(text), CONFIG)
    assert str(quota.value) == (
        "/repo/.bruin.yml:4: environment 'dev': daily_run_quota of 'a' is 0: use a whole number of runs ≥ 1"
    )
    for value in (True, 2.5, "3"):
        with pytest.raises(BadInput, match=f"daily_run_quota of 'a' is {value!r}"):
            settings_of_environment("dev", {"connections": {"d": [{"name": "a", "daily_run_quota": value}]}}, CONFIG)


# ---------------------------------------------------------------- seasonal


@pytest.mark.parametrize(
    ("unit", "kind", "truncation"),
    [("hourly", "hour", "hour"), ("30m", "hour", None), ("2h", "hour", None), ("daily", "weekday", "day"),
     ("weekly", "all", "week"), ("monthly", "monthday", "month"), ("yearly", "all", "year"), ("24h", "all", None),
     ("48h", "all", None)],
)  # fmt: skip
def test_each_unit_s_bucket_kind_and_truncation(unit, kind, truncation):
    """Below a day: hour of day; daily: weekday; monthly: day of month; else one bucket. Only units whose periods
    are date_trunc's have a truncation."""
    from engine.dates.plan import parse_unit
    from engine.guardrails.seasonal import bucket_kind, truncation_of

    assert bucket_kind(parse_unit(unit)) == kind
    assert truncation_of(parse_unit(unit)) == truncation


def test_buckets_and_their_names():
    """A date has hour 0; names read as the dialogs show them."""
    from datetime import UTC, date, datetime

    from engine.guardrails.seasonal import bucket_name, bucket_of_local

    moment = datetime(2024, 3, 14, 17, 5, tzinfo=UTC)  # a Thursday
    assert [bucket_of_local(moment, k) for k in ("hour", "weekday", "monthday", "all")] == [17, 3, 14, 0]
    assert bucket_of_local(date(2024, 3, 14), "hour") == 0
    assert [bucket_name(b, k) for b, k in ((7, "hour"), (3, "weekday"), (14, "monthday"), (0, "all"))] == [
        "07:00", "Thursday", "day 14 of the month", "every period",
    ]  # fmt: skip


def test_seasonal_bounds_need_three_values_and_admit_their_edges():
    """Fewer than the minimum: None; else low/high times the mean, both edges admitted, rounded in JSON."""
    from engine.guardrails.seasonal import Bounds, seasonal_bounds

    assert seasonal_bounds([10, 20], 0.5, 2.0) is None
    assert seasonal_bounds([10, 20], 0.5, 2.0, minimum=2) == Bounds(15.0, 7.5, 30.0, 2)
    bounds = seasonal_bounds([10, 20, 30], 0.5, 2.0)
    assert bounds == Bounds(20.0, 10.0, 40.0, 3)
    assert bounds.admits(10) and bounds.admits(40) and not bounds.admits(9) and not bounds.admits(41)
    assert Bounds(1 / 3, 1 / 6, 2 / 3, 3).to_json() == {"mean": 0.333, "low": 0.167, "high": 0.667, "values": 3}


def run_of(tmp_path: Path, selected: set[str]):
    """A prepared run by hand of pipeline p whose assets a (on db) → b (on db), c (on other, not DuckDB), d (no
    connection) are ``selected``; window [10, 20]."""
    assets = {name: asset(name) for name in ("a", "b", "c", "d")}
    connections = {"a": "db", "b": "db", "c": "other", "d": None}
    kinds = {"db": SimpleNamespace(kind="duckdb", path=tmp_path / "w.duckdb"),
             "other": SimpleNamespace(kind="postgres", path=None)}  # fmt: skip
    pipeline = SimpleNamespace(
        name="p", directory=tmp_path / "p", assets=assets,
        downstream_of=lambda names: {"b"} - set(names) if "a" in names else set(),
        connection_of=lambda a: connections[a.name],
    )  # fmt: skip
    return SimpleNamespace(
        pipeline=pipeline,
        selected=selected,
        environment=SimpleNamespace(connection=lambda name: kinds[name]),
        window=SimpleNamespace(start=10, end=20),
    )


def test_what_a_run_by_hand_registers_as_live_work(tmp_path):
    """Its pipeline, the assets it runs and those downstream of them, the DuckDB files they open (by real path,
    once), its window end-exclusive, this process."""
    import os
    import socket

    from engine.guardrails.manual_run import live_work_of_run
    from engine.store.live_work import WorkKind

    work = live_work_of_run(run_of(tmp_path, {"c", "a", "d"}))
    assert work.kind is WorkKind.RUN and work.shown == "p"
    assert work.target == "pipeline:" + str((tmp_path / "p").resolve())
    assert (work.assets, work.downstream) == (("a", "c", "d"), ("b",))
    assert work.files == (str((tmp_path / "w.duckdb").resolve()),)
    assert work.windows == ((10, 21),)
    assert (work.pid, work.host) == (os.getpid(), socket.gethostname())
    assert live_work_of_run(run_of(tmp_path, {"b", "a"})).files == (str((tmp_path / "w.duckdb").resolve()),)
    assert live_work_of_run(run_of(tmp_path, {"c"})).files == ()


def test_a_stand_in_is_refused_while_a_backfill_of_its_pipeline_runs(tmp_path, monkeypatch):
    """A backfill of the same pipeline in the registry: never, naming it; a run by hand of it, or a backfill of
    another pipeline, is not in the way."""
    from engine.guardrails.manual_run import check_stand_in
    from engine.store.live_work import LiveWork, WorkKind, join, pipeline_key

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    prepared = run_of(tmp_path, {"a"})
    key = pipeline_key(tmp_path / "p")
    check_stand_in(prepared)
    others = [
        join(LiveWork(kind=WorkKind.RUN, target=key, shown="p", pid=1, host="h")),
        join(LiveWork(kind=WorkKind.BACKFILL, target="pipeline:/elsewhere", shown="q", backfill_id="b0", pid=2,
                      host="h")),
    ]  # fmt: skip
    try:
        check_stand_in(prepared)
        running = join(LiveWork(kind=WorkKind.BACKFILL, target=key, shown="p", backfill_id="b1", pid=3, host="h"))
        try:
            with pytest.raises(Refused) as refused:
                check_stand_in(prepared)
            assert str(refused.value) == (
                "never: backfill b1, PID 3 on h is running this pipeline: a stand-in run is refused while it runs; "
                "wait for it"
            )
        finally:
            running.release()
    finally:
        for registration in others:
            registration.release()
