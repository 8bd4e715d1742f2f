"""What the pre-flight gathers, in-process (issue 22): the level that follows a shared DuckDB file across
environments, the selection's first and last partitions, assets grouped by file, and windows as runs see them."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from zoneinfo import ZoneInfo

import pytest

from engine.guardrails.facts import AssetFacts, Facts, _first_and_last, strictest_on_the_same_files
from engine.guardrails.settings import settings_of_environment
from engine.pipeline.assets import Asset, Materialization
from engine.pipeline.columns import Column
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
    templated = {"start": "{{ '-1d' if pipeline == 'p' and run_id == 'preflight' and not full_refresh else '0' }}",
                 "end": "{{ var.reach }}"}  # fmt: skip
    facts.variables = {"reach": "1h"}
    moved = facts.effective_window(asset_facts("t", None, interval_modifiers=templated).asset, window)
    assert moved == Window(9 * DAY, 12 * DAY - 1 + 3_600_000_000, UTC)  # rendered with the run's own context
    facts.pipeline = None
    assert facts.effective_window(plain, window) == window


PARIS = ZoneInfo("Europe/Paris")
MARCH_31 = 1_711_839_600_000_000  # 2024-03-31 00:00 in Paris (the day clocks go forward: 23 hours)


def first_partition_facts(*, modifiers=None, macros: str = "", apply: bool = True, variables=None) -> Facts:
    """Facts of a daily backfill in Paris whose first partition is 31 March 2024, built by hand."""
    from engine.dates.plan import Interval

    options = SimpleNamespace(apply_interval_modifiers=apply)
    spec = SimpleNamespace(target=SimpleNamespace(is_command=False), zone=PARIS, run_options=options)
    pipeline = SimpleNamespace(name="p", macros=macros, default_interval_modifiers=modifiers)
    end = MARCH_31 + 23 * 3_600_000_000
    first = Interval(0, MARCH_31, end)
    return Facts(SimpleNamespace(spec=spec), None, (MARCH_31, end), first, pipeline=pipeline,
                 variables=variables if variables is not None else {"region": "eu"})  # fmt: skip


def sql_asset(body: str = "SELECT 1", *, body_line: int = 1, hooks=None, **fields) -> Asset:
    materialization = fields.pop("materialization", Materialization("table", "time_interval", "ts", "timestamp"))
    return Asset("mid.t", "duckdb.sql", Path("t.sql"), "t.sql", 1, materialization=materialization, body=body,
                 body_line=body_line, hooks=hooks or {}, **fields)  # fmt: skip


def test_the_first_partition_s_context_is_the_run_s_own(monkeypatch):
    """The first partition's window in the backfill's zone (its end one microsecond before the next), the
    pre-flight's run ID, the pipeline, its variables, no full refresh, and ``this``."""
    from engine.guardrails.facts import _first_context

    context, window = _first_context(first_partition_facts(), sql_asset())
    assert window == Window(MARCH_31, MARCH_31 + 23 * 3_600_000_000 - 1, PARIS)
    assert (context["start_date"], context["end_date"]) == ("2024-03-31", "2024-03-31")
    assert context["start_datetime"] == "2024-03-31T00:00:00" and context["end_datetime"] == "2024-03-31T23:59:59"
    assert context["end_timestamp"].startswith("2024-03-31T23:59:59.999999")
    assert (context["run_id"], context["pipeline"], context["var"]) == ("preflight", "p", {"region": "eu"})
    assert context["full_refresh"] is False and context["this"] == "mid.t"


def test_modifiers_move_the_first_window_and_macros_see_it_moved():
    """The asset's modifiers, else the pipeline's, move the window and its variables; macros render with the
    moved window; modifiers switched off leave it."""
    from engine.guardrails.facts import _first_context

    macros = "{% macro since() %}{{ start_date }}/{{ var.region }}{% endmacro %}"
    facts = first_partition_facts(modifiers={"start": "-1d"}, macros=macros)
    context, window = _first_context(facts, sql_asset())
    assert window.start == MARCH_31 - DAY and context["start_date"] == "2024-03-30"
    assert str(context["since"]()) == "2024-03-30/eu"
    own, _ = _first_context(facts, sql_asset(interval_modifiers={"start": "-2d"}))
    assert own["start_date"] == "2024-03-29"
    off = first_partition_facts(modifiers={"start": "-1d"}, apply=False)
    assert _first_context(off, sql_asset())[0]["start_date"] == "2024-03-31"
    assert "since" not in _first_context(first_partition_facts(), sql_asset())[0]


def test_the_sample_query_is_rendered_stripped_and_its_errors_name_the_file_s_line():
    """The body rendered with the first partition's context, its trailing semicolon and comment stripped; a
    template error names the line in the asset's file, counted from where the body starts."""
    from engine.guardrails.facts import _sample_query
    from engine.pipeline.templating import TemplateProblem

    facts = first_partition_facts()
    query, window = _sample_query(facts, sql_asset("SELECT '{{ start_date }}', '{{ var.region }}'; -- done"))
    assert query == "SELECT '2024-03-31', 'eu'" and window.start == MARCH_31
    with pytest.raises(TemplateProblem, match=r"^line 12: template syntax"):
        _sample_query(facts, sql_asset("SELECT\n1,\n{{ broken(", body_line=10))


def test_hooks_are_rendered_as_the_first_run_renders_them_or_kept_as_written():
    """Pre and post hooks rendered with the first partition's context (macros included); one that cannot be
    rendered is kept as written, and so is every hook when the context itself cannot be built."""
    from engine.guardrails.facts import _rendered_run_sql

    hooks = {"pre": ["DELETE FROM raw.x WHERE d = '{{ start_date }}'", "{{ nope( }}"], "post": ["SELECT {{ one() }}"]}
    facts = first_partition_facts(macros="{% macro one() %}1{% endmacro %}")
    assert _rendered_run_sql(facts, sql_asset(hooks=hooks)) == {
        "pre": ["DELETE FROM raw.x WHERE d = '2024-03-31'", "{{ nope( }}"], "post": ["SELECT 1"],
    }  # fmt: skip
    assert _rendered_run_sql(facts, sql_asset()) == {}
    broken = first_partition_facts(macros="{% macro one( %}")  # the macros fail: nothing can be rendered here
    assert _rendered_run_sql(broken, sql_asset(hooks=hooks)) == hooks
    broken.first = None  # no partition selected: as written
    assert _rendered_run_sql(broken, sql_asset(hooks={"post": ["SELECT {{ start_date }}"]})) == {
        "post": ["SELECT {{ start_date }}"]
    }


def test_the_sql_of_an_asset_without_materialization_is_judged_with_its_hooks():
    """An SQL asset without materialization runs its query as written: it is rendered for the first partition
    beside the hooks, under "query"; a materialized asset's query is not (it is sampled, not run)."""
    from engine.guardrails.facts import _rendered_run_sql

    facts, unmaterialized = first_partition_facts(), Materialization(None, None, None, None)
    as_written = sql_asset("DELETE FROM raw.x WHERE d = '{{ start_date }}'", materialization=unmaterialized)
    assert _rendered_run_sql(facts, as_written) == {"query": ["DELETE FROM raw.x WHERE d = '2024-03-31'"]}
    hooked = sql_asset("SELECT 1", hooks={"pre": ["SELECT 2"]}, materialization=unmaterialized)
    assert _rendered_run_sql(facts, hooked) == {"pre": ["SELECT 2"], "query": ["SELECT 1"]}
    assert _rendered_run_sql(facts, sql_asset("DELETE FROM raw.x")) == {}


def test_an_error_is_kept_as_its_first_line_or_its_type():
    """What could not be read is said in one line of at most 300 characters; an empty message gives the type."""
    from engine.guardrails.facts import _first_line

    assert _first_line(ValueError("  first\nsecond  ")) == "first"
    assert _first_line(ValueError("   ")) == "ValueError"
    assert _first_line(OSError("x" * 400)) == "x" * 300


def with_variables(base: Path):
    """p with variables on=false and region=eu: mid.flag enabled by {{ var.on }}, mid.regional reading the window
    only for region us, and mid.daily (ten rows a day) run over 2023-12-01..2024-01-07; then five hand-written
    run records of mid.daily: one without it, one counting rows in its interval, one only rows written, a
    failed one and one of no length."""
    import orjson

    from engine.pipeline.repository import logs_root
    from tests.builder import Repo
    from tests.functional.test_guardrails import redeclare_daily
    from tests.unit.test_preflight_inprocess import run_in_process

    variables = {"on": {"type": "boolean", "default": False}, "region": {"type": "string", "default": "eu"}}
    repo = Repo(base / "repo", guardrails="standard",
                pipeline={"name": "p", "default_connections": {"duckdb": "db"}, "variables": variables})  # fmt: skip
    repo.sql("raw.events", "SELECT 1 AS x", materialization={"type": "view"})
    redeclare_daily(repo)
    repo.sql("mid.flag", "SELECT 1 AS x", enabled="{{ var.on }}", materialization={"type": "table"})
    repo.sql("mid.regional", "{% if var.region == 'us' %}SELECT '{{ start_date }}' AS d{% else %}SELECT 1 AS d"
             "{% endif %}", materialization={"type": "table"},
             hooks={"post": [{"query": "SELECT '{{ start_date }}/{{ var.region }}'"}]})  # fmt: skip
    run_in_process(repo, "2023-12-01", "2024-01-07")
    runs = logs_root(repo.root) / "runs"

    def record(run_id: str, started: str, days: int, **daily) -> None:
        """A run of ``days`` days from 1 June 2023 holding mid.daily with ``daily``'s fields (none: without it)."""
        interval = {"start": "2023-06-01T00:00:00Z", "end": f"2023-06-{days:02d}T23:59:59.999999Z"}
        entries = [{"name": "mid.daily", "status": "succeeded", **daily}] if daily else []
        data = {"run_id": run_id, "pipeline": "p", "target": str(repo.pipeline_dir), "status": "succeeded",
                "started_at": started, "interval": interval, "assets": entries}  # fmt: skip
        (runs / f"{run_id}.json").write_bytes(orjson.dumps(data))

    no_length = {"start": "2023-06-01T00:00:00Z", "end": "2023-05-31T23:59:59.999999Z"}
    record("h0", "2023-07-01T00:00:00Z", 1)  # mid.daily not in it
    record("h1", "2023-07-02T00:00:00Z", 7, rows_in_interval=70, rows_written=700)
    record("h2", "2023-07-03T00:00:00Z", 1, rows_written=30)
    record("h3", "2023-07-04T00:00:00Z", 1, rows_written=99, status="failed")
    record("h4", "2023-07-05T00:00:00Z", 1, rows_written=5, interval=no_length)
    return repo


def test_assets_are_judged_with_the_pipeline_s_variables_and_past_rows_are_per_partition(tmp_path):
    """The pipeline's variables decide what is enabled and what reads the window; each succeeded past run of
    mid.daily gives its rows per daily partition (rows in its interval first, else rows written), in run order,
    leaving out runs without it, failed ones and runs of no length."""
    from tests.unit.test_preflight_inprocess import built, preflight

    repo = built(("facts with variables",), with_variables)
    facts = preflight(repo, "2024-01-08", "2024-01-12").facts
    assert facts.variables == {"on": False, "region": "eu"}
    assert facts.assets["mid.flag"].selected is False and facts.assets["mid.daily"].selected
    assert facts.assets["mid.regional"].uses_interval is False and facts.assets["mid.daily"].uses_interval
    assert facts.assets["mid.daily"].past_rows == [10, 30, 10]
    assert facts.assets["mid.regional"].connection.name == "db"
    assert facts.assets["mid.regional"].run_sql == {"post": ["SELECT '2024-01-08/eu'"]}  # as the first run renders it


def test_an_enabled_template_that_reads_more_than_the_variables_counts_as_enabled():
    """Before any run only ``var`` is known: a template of it alone decides (false: the asset is not judged); one
    that also reads the window counts as enabled, even behind ``is defined`` or ``default`` (which read false
    without a window and true in a later partition), and so does one that does not parse."""
    from engine.pipeline.assets import enabled_by

    def enabled(value) -> bool:
        return enabled_by(asset_facts("mid.a", None, enabled=value).asset, {"on": False})

    assert [enabled(v) for v in (True, False, "{{ var.on }}", "{{ not var.on }}")] == [True, False, False, True]
    assert enabled("{{ start_date is defined and start_date > '2024-01-09' }}")
    assert enabled("{{ var.on or (start_date | default('')) > '2024-01-09' }}")
    assert enabled("{{ start_date > '2024-01-09' }}") and enabled("{{ broken(")


def test_each_file_is_looked_into_once_and_one_that_cannot_be_opened_is_a_question_left_open(tmp_path):
    """Tables (and seeds) get their rows and rows in range; views and tables not made yet are left alone; a
    file that is no database leaves size_and_duration undecided, a held one row_count_sanity, and the other
    files are still read, each size kept under its own path."""
    import duckdb

    from engine.guardrails.facts import _look_into_warehouses
    from tests.duckdb_writer import writing

    good, broken, held = tmp_path / "good.duckdb", tmp_path / "broken.duckdb", tmp_path / "held.duckdb"
    with duckdb.connect(str(good)) as connection:
        connection.execute("CREATE TABLE main.t AS SELECT TIMESTAMP '2024-01-01' + i * INTERVAL 1 HOUR AS ts "
                           "FROM range(48) r(i)")  # fmt: skip
        connection.execute("CREATE TABLE main.s AS SELECT 1 AS x")
        connection.execute("CREATE TABLE main.nokey AS SELECT 1 AS x")
    broken.write_bytes(b"not a database" * 100)
    duckdb.connect(str(held)).close()

    def on(path: Path, name: str) -> AssetFacts:
        return asset_facts(name, Connection("duckdb", "db", path, False, None))

    table, seed, view = on(good, "main.t"), on(good, "main.s"), on(good, "main.v")
    seed.asset = replace(seed.asset, type="duckdb.seed", materialization=Materialization(None, None, None, None))
    view.asset.materialization = Materialization("view", None, "ts", None)
    nokey = on(good, "main.nokey")
    nokey.asset.materialization = Materialization("table", "create+replace", None, None)
    missing = on(good, "main.later")
    unreadable, waiting = on(broken, "main.t"), on(held, "main.t")
    options = SimpleNamespace(apply_interval_modifiers=True)
    spec = SimpleNamespace(target=SimpleNamespace(is_command=False), zone=UTC, run_options=options)
    pipeline = SimpleNamespace(name="p", default_interval_modifiers={"start": "-1d"}, macros="")
    jan_2 = 1_704_153_600_000_000
    facts = Facts(SimpleNamespace(spec=spec), None, (jan_2, jan_2 + DAY // 2), None, pipeline=pipeline,
                  assets={a.asset.name + str(i): a for i, a in enumerate(
                      (unreadable, waiting, table, seed, view, nokey, missing))})  # fmt: skip
    with writing(str(held)) as writer:
        _look_into_warehouses(facts)
    facts.warehouses.close()
    assert (table.table_rows, table.rows_in_range) == (48, 36)  # the day before (modifier) and half of this one
    assert (seed.table_rows, seed.rows_in_range) == (1, None)
    assert (view.table_rows, view.rows_in_range) == (None, None)
    assert (nokey.table_rows, nokey.rows_in_range) == (1, None)
    assert (missing.table_rows, missing.rows_in_range) == (None, None)
    assert list(facts.database_bytes) == [str(good)] and facts.database_bytes[str(good)] == good.stat().st_size
    assert facts.errors["size_and_duration"].startswith(f"cannot open {broken}: ")
    assert facts.errors["row_count_sanity"] == f"{held} is held by process {writer.pid}"
    assert waiting.sample_error == f"{held} is held by process {writer.pid}" and [h.path for h in facts.held] == [held]
    assert "materialization" not in facts.errors


def test_a_table_that_cannot_be_read_leaves_the_materialization_undecided(tmp_path):
    """A table whose key column is gone: its rows are known, its rows in range are not, and the materialization
    check is left undecided, naming the table and the error's first line."""
    import duckdb

    from engine.guardrails.facts import _look_into_warehouses

    path = tmp_path / "w.duckdb"
    with duckdb.connect(str(path)) as connection:
        connection.execute("CREATE TABLE main.t AS SELECT 1 AS x")
    table = asset_facts("main.t", Connection("duckdb", "db", path, False, None))
    options = SimpleNamespace(apply_interval_modifiers=False)
    spec = SimpleNamespace(target=SimpleNamespace(is_command=False), zone=UTC, run_options=options)
    facts = Facts(SimpleNamespace(spec=spec), None, (0, DAY), None, assets={"main.t": table})
    _look_into_warehouses(facts)
    facts.warehouses.close()
    assert table.table_rows == 1 and table.rows_in_range is None
    assert facts.errors["materialization"].startswith("cannot read table main.t: Binder Error: ")
    assert "\n" not in facts.errors["materialization"]


def test_saved_backfills_of_the_state_root_bring_their_marks_and_our_own_is_left_out(tmp_path):
    """A saved backfill of the pipeline whose partition was marked succeeded with rows for mid.latest: the
    pre-flight lists it among the earlier backfills and counts its mark as a past run of mid.latest; judged as
    that backfill itself (a resume), it is neither."""
    from engine.base.settings import Settings
    from engine.execute.backfill import create_backfill, state_root_for
    from engine.execute.guarding import request_for_new
    from engine.guardrails.facts import gather
    from engine.guardrails.request import GuardOptions
    from engine.pipeline.options import RunOptions
    from engine.spec.backfill_spec import ExecutionOptions
    from engine.spec.planning import plan_request
    from engine.store import audit
    from engine.store.records import Attempt
    from tests.unit.test_history import record_of
    from tests.unit.test_preflight_inprocess import three_assets

    repo = three_assets(tmp_path)
    planned = plan_request(
        target=str(repo.pipeline_dir), command=None, name=None, start="2024-01-08", end="2024-01-09",
        timezone="UTC", partition="daily", environment=None, config_file=None, run_options=RunOptions(),
        options=ExecutionOptions(), force=False, cwd=repo.root,
    )  # fmt: skip
    root = state_root_for(planned.spec, None, repo.root)
    saved = create_backfill(planned, root=root, cwd=repo.root, settings=Settings())
    saved.release()
    mark = Attempt(run_id="m1", status="succeeded", started_at="t", finished_at="2024-01-10T00:00:00Z",
                   kind="mark", rows=7, asset="mid.latest")  # fmt: skip
    marked = record_of(saved, 0, mark)
    line = audit.entry(action="MARK", partition_id=marked.id, asset="mid.latest", to_status="succeeded",
                       target_count=7)  # fmt: skip
    audit.append(saved.store.directory, [line])
    request = request_for_new(planned, GuardOptions(), reason="test", root=root.path, cwd=repo.root)
    facts = gather(request)
    facts.warehouses.close()
    assert [b.id for b in facts.backfills] == [saved.store.id]
    marks = [run for run in facts.history.runs if run.run_id == "mark:m1"]
    assert [(sorted(run.assets), run.ran, run.backfill_id) for run in marks] == [
        (["mid.latest"], False, saved.store.id)
    ]
    itself = gather(replace(request, backfill_id=saved.store.id))
    itself.warehouses.close()
    assert itself.backfills == [] and not [run for run in itself.history.runs if run.run_id.startswith("mark:")]


def test_the_first_partition_s_sample_is_counted_against_its_window_and_the_table(tmp_path):
    """Only selected SQL assets are sampled: the query's rows, those outside the first window for a windowed
    strategy with a key, and those the table already holds for an append to a table with rows; a query that
    fails is its first line, a file not made yet says so, a query followed by more statements is not run (the
    statements are kept for the materialization check), and a comparison that fails leaves the materialization
    undecided, naming the asset."""
    import duckdb

    from engine.dates.plan import Interval
    from engine.guardrails.facts import _look_into_warehouses, _render_query

    path, later = tmp_path / "w.duckdb", tmp_path / "later.duckdb"
    with duckdb.connect(str(path)) as connection:
        connection.execute("CREATE TABLE main.t AS SELECT TIMESTAMP '2024-01-01' + i * INTERVAL 1 DAY AS ts "
                           "FROM range(3) r(i)")  # fmt: skip
        connection.execute("CREATE TABLE main.empty (ts TIMESTAMP)")
    link = Connection("duckdb", "db", path, False, None)
    three_days = "SELECT TIMESTAMP '2024-01-01' + i * INTERVAL 1 DAY AS ts FROM range(3) r(i)"

    def sql(name: str, body: str, strategy: str = "time_interval", *, key: str | None = "ts", on=link,
            selected: bool = True, type_: str = "duckdb.sql") -> AssetFacts:  # fmt: skip
        made = asset_facts(name, on, selected=selected)
        made.asset = replace(made.asset, type=type_, body=body,
                             materialization=Materialization("table", strategy, key, "timestamp"))  # fmt: skip
        made.strategy = strategy
        return made

    liar = sql("main.t", three_days)
    appender = sql("main.t", "SELECT TIMESTAMP '2024-01-02' AS ts UNION ALL SELECT TIMESTAMP '2024-01-09'", "append")
    onto_empty = sql("main.empty", three_days, "append", key=None)
    unkeyed = sql("main.t", three_days, "delete+insert", key=None)
    merged = sql("main.t", three_days, "merge")
    downstream = sql("main.t", three_days, selected=False)
    script = sql("main.t", three_days, type_="python")
    broken = sql("main.t", "SELECT * FROM nowhere\nWHERE 1")
    unmade = sql("main.t", three_days, on=Connection("duckdb", "db", later, False, None))
    wrong_key = sql("main.t", "SELECT 1 AS other", key="ts")
    keyed = sql("main.t", "SELECT NULL::TIMESTAMP AS ts FROM range(2) UNION ALL " + three_days, "merge")
    keyed.asset = replace(keyed.asset, columns=(Column("ts", "timestamp", True, False, None, (), None),))
    trailing = sql("main.t", three_days + ";\nDELETE FROM main.t; -- tidy")
    untemplatable = sql("main.t", "SELECT {{ nowhere( }}")
    as_written = sql("main.t", "SELECT 1; SELECT 2")
    as_written.asset = replace(as_written.asset, materialization=Materialization(None, None, None, None))
    options = SimpleNamespace(apply_interval_modifiers=False)
    spec = SimpleNamespace(target=SimpleNamespace(is_command=False), zone=UTC, run_options=options)
    pipeline = SimpleNamespace(name="p", default_interval_modifiers=None, macros="")
    jan_1 = 1_704_067_200_000_000
    everyone = (liar, appender, onto_empty, unkeyed, merged, downstream, script, broken, unmade, wrong_key, keyed,
                trailing, untemplatable, as_written)  # fmt: skip
    facts = Facts(SimpleNamespace(spec=spec), None, (jan_1, jan_1 + DAY), Interval(0, jan_1, jan_1 + DAY),
                  pipeline=pipeline, assets={str(i): a for i, a in enumerate(everyone)})  # fmt: skip
    for selected in facts.selected:
        _render_query(facts, selected)
    _look_into_warehouses(facts)
    facts.warehouses.close()
    assert (liar.sample_rows, liar.sample_outside, liar.sample_existing) == (3, 2, None)
    assert (appender.sample_rows, appender.sample_outside, appender.sample_existing) == (2, None, 1)
    assert (onto_empty.sample_rows, onto_empty.sample_existing) == (3, None)  # nothing in the table to repeat
    assert (unkeyed.sample_rows, unkeyed.sample_outside) == (3, None)
    assert (merged.sample_rows, merged.sample_outside, merged.sample_existing) == (3, None, None)
    assert (downstream.sample_rows, downstream.sample_error) == (None, None)
    assert (script.sample_rows, script.sample_error) == (None, None)
    assert broken.sample_rows is None and broken.sample_error.startswith("Catalog Error: Table with name nowhere")
    assert "\n" not in broken.sample_error
    assert (unmade.sample_rows, unmade.sample_error) == (None, f"{later} does not exist yet")
    assert wrong_key.sample_rows == 1 and wrong_key.sample_outside is None
    assert wrong_key.sample_missing == ["ts"]  # the run would refuse to write ts as NULL
    assert liar.sample_missing == appender.sample_missing == merged.sample_missing == []  # merge names its columns
    assert (keyed.sample_rows, keyed.sample_repeated_keys) == (5, 2)  # two NULL keys match as the merge matches
    assert merged.sample_repeated_keys is None and liar.sample_repeated_keys is None  # no key; not a merge
    assert (trailing.after_query, trailing.sample_rows) == (["DELETE FROM main.t"], None)  # never sampled: refused
    assert trailing.sample_error == "the query is more than one statement"
    assert liar.after_query == [] and liar.rendered[0] == three_days
    assert script.rendered is None and downstream.rendered is None  # rendered only for selected SQL assets
    assert (as_written.rendered, as_written.after_query) == (None, [])  # SQL run as written may be several statements
    assert untemplatable.rendered is None and untemplatable.sample_error == untemplatable.render_error
    assert untemplatable.render_error == "line 1: template syntax: unexpected '}', expected ')'"
    assert facts.errors["materialization"].startswith("cannot compare main.t's sample: Binder Error")
    assert list(facts.errors) == ["materialization"]


def test_a_seed_is_counted_as_its_run_reads_it_against_the_table_it_rebuilds(tmp_path):
    """A selected seed over a table with rows: the file's rows (read as its run reads them) are the sample, the
    whole table what the rebuild deletes; a file that cannot be read leaves the materialization undecided, naming
    the seed; a seed read through an extension (a URL) and a seed with no table yet are not counted."""
    import duckdb

    from engine.dates.plan import Interval
    from engine.guardrails.facts import _look_into_warehouses

    path = tmp_path / "w.duckdb"
    with duckdb.connect(str(path)) as connection:
        connection.execute("CREATE TABLE main.codes AS SELECT range AS code FROM range(3)")
        connection.execute("CREATE TABLE main.remote AS SELECT range AS code FROM range(3)")
        connection.execute("CREATE TABLE main.dated AS SELECT range AS code FROM range(3)")
    (tmp_path / "one.csv").write_text("code\n7\n")
    link = Connection("duckdb", "db", path, False, None)

    def seed(name: str, **fields) -> AssetFacts:
        made = asset_facts(name, link)
        made.asset = replace(made.asset, type="duckdb.seed", path=tmp_path / "c.asset.yml",
                             materialization=Materialization("table", None, None, None), **fields)  # fmt: skip
        made.strategy = "create+replace"
        return made

    short = seed("main.codes", seed_path=tmp_path / "one.csv")
    broken = seed("main.codes", seed_path=tmp_path / "gone.csv")
    remote = seed("main.remote", seed_url="https://example.invalid/codes.csv")
    (tmp_path / "2024-01-01.csv").write_text("code\n1\n2\n")
    templated = seed("main.dated", seed_template="{{ start_date }}.csv")  # rendered for the first partition
    unmade = seed("main.other", seed_path=tmp_path / "one.csv")
    options = SimpleNamespace(apply_interval_modifiers=False)
    spec = SimpleNamespace(target=SimpleNamespace(is_command=False), zone=UTC, run_options=options)
    pipeline = SimpleNamespace(name="p", default_interval_modifiers=None, macros="")
    jan_1 = 1_704_067_200_000_000
    seeds = {str(i): a for i, a in enumerate((short, remote, broken, unmade, templated))}  # the first error is kept
    facts = Facts(SimpleNamespace(spec=spec), None, (jan_1, jan_1 + DAY), Interval(0, jan_1, jan_1 + DAY),
                  pipeline=pipeline, assets=seeds)  # fmt: skip
    _look_into_warehouses(facts)
    facts.warehouses.close()
    assert (short.sample_rows, short.replaced_rows, short.table_rows) == (1, 3, 3)
    assert (broken.sample_rows, broken.replaced_rows) == (None, None)
    assert facts.errors["materialization"].startswith("cannot count main.codes's seed file: IO Error")
    assert (remote.sample_rows, remote.replaced_rows) == (None, None)
    assert (unmade.table_rows, unmade.sample_rows) == (None, None)
    assert (templated.sample_rows, templated.replaced_rows) == (2, 3)


def test_equal_levels_keep_their_own_source_and_a_level_may_come_from_a_neighbour_s_name(tmp_path):
    """Another environment on the same file at the same level changes nothing, not even where the level came
    from; one without a guardrails key whose name says prod makes it production."""
    loaded = config(tmp_path, {"dev": on("standard", "a.duckdb"), "peer": on("standard", "a.duckdb"),
                               "prod-eu": {"connections": {"duckdb": [{"name": "c", "path": "b.duckdb"}]}},
                               "qa": on("sandbox", "b.duckdb")})  # fmt: skip
    assert level_of(loaded) == ("standard", ".bruin.yml")
    shared = (tmp_path / "b.duckdb").resolve()
    assert level_of(loaded, "qa") == ("production", f"environment 'prod-eu' uses the same DuckDB file {shared}")


def test_live_work_names_what_this_invocation_runs(tmp_path):
    """A pipeline's entry: its directory's key, the selected assets and the downstream ones sorted, their DuckDB
    files by real path, the range, this process; a command's: the command's key in its working directory. An
    explicit backfill ID (a takeover's) wins over the request's."""
    import os
    import socket

    from engine.store.live_work import LiveWork, WorkKind, command_key, pipeline_key

    path = tmp_path / "w.duckdb"
    link = Connection("duckdb", "db", tmp_path / "sub" / ".." / "w.duckdb", False, None)
    request = SimpleNamespace(spec=SimpleNamespace(target=SimpleNamespace(is_command=False)), backfill_id="B1",
                              state_root=tmp_path / "states", working_directory=tmp_path)  # fmt: skip
    pipeline = SimpleNamespace(name="p", directory=tmp_path / "p")
    assets = {"b": asset_facts("mid.b", link), "a": asset_facts("mid.a", None),
              "d": asset_facts("mid.d", link, selected=False),
              "c": asset_facts("mid.c", link, selected=False)}  # fmt: skip
    facts = Facts(request, None, (5, 9), None, pipeline=pipeline, assets=assets)
    here = {"pid": os.getpid(), "host": socket.gethostname()}
    assert facts.live_work() == LiveWork(
        kind=WorkKind.BACKFILL, target=pipeline_key(tmp_path / "p"), shown="p", backfill_id="B1",
        state_dir=str(tmp_path / "states"), assets=("mid.a", "mid.b"), downstream=("mid.c", "mid.d"),
        files=(str(path),), windows=((5, 9),), **here,
    )  # fmt: skip
    assert facts.live_work("B2").backfill_id == "B2"
    target = SimpleNamespace(is_command=True, identity={"template": "load {start}"}, name="load")
    request.spec = SimpleNamespace(target=target)
    command = Facts(request, None, (5, 9), None)
    assert command.live_work() == LiveWork(
        kind=WorkKind.BACKFILL, target=command_key({"template": "load {start}"}, str(tmp_path)), shown="load",
        backfill_id="B1", state_dir=str(tmp_path / "states"), windows=((5, 9),), **here,
    )  # fmt: skip


def test_a_command_s_facts_come_from_its_selection_and_its_earlier_backfills(tmp_path):
    """The span and first partition from the bounds or, without them, from the selection itself; the earlier
    backfills of the state root with their partitions as the command's history; our own backfill left out."""
    from engine.execute.guarding import request_for_new
    from engine.guardrails.facts import gather
    from engine.guardrails.request import GuardOptions
    from engine.store.records import Attempt
    from tests.saved_backfills import saved_command_backfill
    from tests.unit.test_history import record_of

    saved = saved_command_backfill(tmp_path, end="2024-01-03")
    record_of(saved, 0, Attempt(run_id="r1", status="succeeded", started_at="t", duration=2.0))
    planned = SimpleNamespace(spec=saved.spec, options=saved.options, parallelism=SimpleNamespace(effective=1),
                              config=None, environment=None, checked=None)  # fmt: skip
    root = saved.store.directory.parent
    request = request_for_new(planned, GuardOptions(), reason="test", root=root, cwd=tmp_path)
    plan = saved.spec.plan
    facts = gather(request)
    assert (facts.span, facts.first) == ((plan.interval(0).start, plan.interval(2).end), plan.interval(0))
    assert [b.id for b in facts.backfills] == [saved.store.id]
    assert [(run.run_id, run.duration) for run in facts.history.runs] == [("r1", 2.0)]
    chosen = gather(replace(request, bounds=None, selected=lambda: iter([1, 2])))
    assert (chosen.span, chosen.first) == ((plan.interval(1).start, plan.interval(2).end), plan.interval(1))
    nothing = gather(replace(request, bounds=None, selected=lambda: iter(())))
    assert (nothing.span, nothing.first) == ((plan.start, plan.start), None)
    itself = gather(replace(request, backfill_id=saved.store.id))
    assert itself.backfills == [] and itself.history.runs == []


def test_a_pipeline_s_level_comes_from_its_environment_s_name(tmp_path):
    """An environment without a guardrails key named prod-…: the pre-flight's settings are production, saying
    why."""
    import yaml

    from engine.execute.backfill import state_root_for
    from engine.execute.guarding import request_for_new
    from engine.guardrails.facts import gather
    from engine.guardrails.request import GuardOptions
    from engine.pipeline.options import RunOptions
    from engine.spec.backfill_spec import ExecutionOptions
    from engine.spec.planning import plan_request
    from tests.unit.test_preflight_inprocess import three_assets

    repo = three_assets(tmp_path)
    path = repo.root / ".bruin.yml"
    loaded = yaml.safe_load(path.read_text())
    environment = loaded["environments"].pop("dev")
    environment.pop("guardrails")
    path.write_text(yaml.safe_dump({"default_environment": "prod-eu", "environments": {"prod-eu": environment}}))
    planned = plan_request(
        target=str(repo.pipeline_dir), command=None, name=None, start="2024-01-08", end="2024-01-08",
        timezone="UTC", partition="daily", environment=None, config_file=None, run_options=RunOptions(),
        options=ExecutionOptions(), force=True, cwd=repo.root,
    )  # fmt: skip
    root = state_root_for(planned.spec, None, repo.root).path
    facts = gather(request_for_new(planned, GuardOptions(), reason="test", root=root, cwd=repo.root))
    facts.warehouses.close()
    assert (facts.settings.level, facts.settings.level_source) == ("production", "its name contains 'prod'")
