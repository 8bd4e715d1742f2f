"""The rest of Bruin's pipeline format on real runs: variants, enabled, timeouts, schema prefixes, secrets, macros,
selection details."""

from __future__ import annotations

import json

import pytest
import yaml

from tests.builder import Repo
from tests.conftest import run_backfill
from tests.guard_flags import REASON

DAY = ("--start-date", "2024-01-01", "--end-date", "2024-01-01")


def pipeline_yml(**fields) -> dict:
    return {"name": "p", "default_connections": {"duckdb": "db"}, **fields}


def bruin_yml(repo: Repo, **environment) -> None:
    """Rewrite .bruin.yml with one environment ``dev`` (connection ``db`` plus what is given)."""
    connections = {"duckdb": [{"name": "db", "path": "warehouse.duckdb"}], **environment.pop("connections", {})}
    repo.write(
        ".bruin.yml",
        yaml.safe_dump(
            {
                "default_environment": "dev",
                "environments": {"dev": {"guardrails": "sandbox", "connections": connections, **environment}},
            }
        ),
    )


VARIANTS = pipeline_yml(
    name="{{ var.client }}_pipe",
    variables={"client": {"type": "string", "default": "a"}, "days": {"type": "integer", "default": 1}},
    variants={"alpha": {"client": "alpha", "days": 7}, "beta": {"client": "beta"}},
)


def test_a_variant_sets_variables_and_the_templated_pipeline_name(tmp_path):
    """--variant overlays its values on the defaults; --var sets what the variant leaves; the record names the
    rendered pipeline."""
    repo = Repo(tmp_path / "repo", pipeline=VARIANTS)
    repo.sql("s.t", "SELECT '{{ var.client }}' AS client, {{ var.days }} AS days", materialization={"type": "table"})
    code, record = repo.run_json(*DAY, "--variant", "alpha")
    assert code == 0
    assert record["pipeline"] == "alpha_pipe"
    assert record["options"]["variant"] == "alpha" and record["options"]["variables"] == {"client": "alpha", "days": 7}
    assert repo.query("SELECT * FROM s.t") == [("alpha", 7)]
    repo.run_ok(*DAY, "--variant", "beta", "--var", "days=3")
    assert repo.query("SELECT * FROM s.t") == [("beta", 3)]


def test_a_pipeline_name_bruin_refuses_is_refused_as_written_or_as_rendered(tmp_path, home):
    """Bruin's valid-pipeline-name (critical): letters, digits, _, . and -. `my pipe` ran here with exit 0; so did
    a templated name that renders to `my pipe` with a variable. Both are now one line, exit 2, nothing run."""
    repo = Repo(tmp_path / "repo", pipeline=pipeline_yml(name="my pipe"))
    repo.sql("s.t", "SELECT 1 AS x", materialization={"type": "table"})
    plain = repo.run(*DAY, env=home)
    assert plain.returncode == 2 and "pipeline name 'my pipe' must be letters, digits, _, . and - (as in Bruin)" in (
        plain.stderr
    ), plain.stderr
    repo.write("p/pipeline.yml", yaml.safe_dump({"name": "{{ var.client }}_pipe", "variables": {
        "client": {"type": "string", "default": "a"}}, "default_connections": {"duckdb": "db"}}))  # fmt: skip
    rendered = repo.run(*DAY, "--var", 'client="my"', env=home)
    assert rendered.returncode == 0, rendered.stderr
    spaced = repo.run(*DAY, "--var", 'client="my pipe"', env=home)
    assert spaced.returncode == 2, spaced.stdout + spaced.stderr
    assert "pipeline name 'my pipe_pipe' must be letters, digits, _, . and - (as in Bruin)" in spaced.stderr
    assert "Traceback" not in spaced.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "declares variants (alpha, beta): pick one with --variant"),
        (("--variant", "gamma"), "--variant 'gamma' is not a variant of pipeline"),
        (("--variant", "al pha"), "--variant 'al pha' is not a variant name"),
    ],
)
def test_variant_choice_is_checked(tmp_path, args, message):
    """A pipeline with variants needs one of them, by a valid name."""
    repo = Repo(tmp_path / "repo", pipeline=VARIANTS)
    repo.sql("s.t", "SELECT 1 AS x", materialization={"type": "table"})
    result = repo.run(*DAY, *args)
    assert result.returncode == 2
    assert message in result.stderr and "Traceback" not in result.stderr


def test_variant_means_nothing_without_variants_and_bad_variants_fail_validation(tmp_path):
    """--variant on a pipeline without variants is bad input; a variant naming an undeclared variable or a value
    of the wrong type is a validation error."""
    repo = Repo(tmp_path / "repo")
    repo.sql("s.t", "SELECT 1 AS x", materialization={"type": "table"})
    result = repo.run(*DAY, "--variant", "alpha")
    assert result.returncode == 2 and "declares no variants" in result.stderr
    bad = pipeline_yml(
        variables={"days": {"type": "integer", "default": 1}}, variants={"x": {"nope": 1}, "y": {"days": "seven"}}
    )
    repo.write("p/pipeline.yml", yaml.safe_dump(bad))
    result = repo.run(*DAY, "--variant", "x")
    assert result.returncode == 2
    assert "variant 'x' references unknown variable 'nope'" in result.stderr
    assert "variant 'y': days is not of the declared type integer" in result.stderr


def test_a_backfill_saves_its_variant_and_every_child_runs_it(tmp_path):
    """backfill --variant: a plan input passed to each partition's run, which cannot change on resume."""
    repo = Repo(tmp_path / "repo", pipeline=VARIANTS)
    repo.sql(
        "s.t",
        "SELECT DATE '{{ start_date }}' AS day, '{{ var.client }}' AS client",
        materialization={
            "type": "table",
            "strategy": "time_interval",
            "incremental_key": "day",
            "time_granularity": "date",
        },
    )
    dates = ("--start-date", "2024-01-01", "--end-date", "2024-01-03")
    dry = run_backfill("p", *dates, "--variant", "beta", "--dry-run", cwd=repo.root)
    assert dry.returncode == 0 and "variant" in dry.stdout and "beta" in dry.stdout
    result = run_backfill("p", *dates, "--variant", "beta", *REASON, cwd=repo.root)
    assert result.returncode == 0, result.stdout + result.stderr
    assert repo.query("SELECT day::VARCHAR, client FROM s.t ORDER BY 1") == [
        ("2024-01-01", "beta"),
        ("2024-01-02", "beta"),
        ("2024-01-03", "beta"),
    ]
    listing = run_backfill("list", "--output", "json", cwd=repo.root)
    backfill_id = json.loads(listing.stdout)["backfills"][0]["id"]
    resumed = run_backfill("--continue", backfill_id, "--variant", "alpha", cwd=repo.root)
    assert resumed.returncode == 2 and "--variant cannot change when resuming" in resumed.stderr


def test_a_disabled_asset_is_skipped_and_its_downstream_runs(tmp_path):
    """enabled: false (or a template rendering false) skips the asset, not a failure; its downstream still runs."""
    repo = Repo(tmp_path / "repo", pipeline=pipeline_yml(variables={"on": {"type": "boolean", "default": False}}))
    repo.sql("s.optional", "SELECT 1 AS x", materialization={"type": "table"}, enabled="{{ var.on }}")
    repo.sql("s.off", "SELECT 1 AS x", materialization={"type": "table"}, enabled=False)
    repo.sql("s.after", "SELECT 2 AS y", materialization={"type": "table"}, depends=["s.optional"])
    code, record = repo.run_json(*DAY)
    assert code == 0
    statuses = {a["name"]: a["status"] for a in record["assets"]}
    assert statuses == {"s.optional": "skipped", "s.off": "skipped", "s.after": "succeeded"}
    assert repo.query("SELECT table_name FROM information_schema.tables ORDER BY 1") == [("after",)]
    repo.run_ok(*DAY, "--var", "on=true")
    assert repo.query("SELECT * FROM s.optional") == [(1,)]
    repo.sql("s.bad", "SELECT 1 AS x", enabled="{{ 'maybe' }}")
    code, record = repo.run_json(*DAY)
    bad = next(a for a in record["assets"] if a["name"] == "s.bad")
    assert code == 1 and bad["status"] == "failed" and "expected true or false" in bad["error"]


def test_asset_and_default_timeouts_stop_an_asset_with_a_clear_message(tmp_path):
    """An asset's timeout, else the pipeline's default.timeout, fails a slow asset naming which limit it hit."""
    repo = Repo(tmp_path / "repo", pipeline=pipeline_yml(default={"timeout": "1s"}))
    repo.python("slow_default", "import time\ntime.sleep(30)")
    repo.python("slow_own", "import time\ntime.sleep(30)", timeout=2)
    repo.python("quick", "print('ok')")
    code, record = repo.run_json(*DAY)
    assert code == 1
    errors = {a["name"]: (a["status"], a.get("error")) for a in record["assets"]}
    assert errors["slow_default"] == ("failed", "timed out after 1s (the pipeline's default.timeout)")
    assert errors["slow_own"] == ("failed", "timed out after 2s (the asset's timeout)")
    assert errors["quick"][0] == "succeeded"
    repo.python("wrong", "print(1)", timeout="soon")
    result = repo.run(*DAY)
    assert result.returncode == 2 and "timeout 'soon' must be a positive duration" in result.stderr


def test_schema_prefix_writes_prefixed_schemas_and_reads_prefixed_copies(tmp_path):
    """schema_prefix: assets write to prefixed schemas (this and BRUIN_THIS follow); a source with a prefixed copy
    is read from the copy, one without is read as is."""
    repo = Repo(tmp_path / "repo")
    bruin_yml(repo, schema_prefix="dev_")
    repo.execute(
        "CREATE SCHEMA ext",
        "CREATE SCHEMA dev_ext",
        "CREATE TABLE ext.orders AS SELECT 1 AS n",
        "CREATE TABLE dev_ext.orders AS SELECT 100 AS n",
        "CREATE TABLE ext.rates AS SELECT 2 AS r",
    )
    repo.sql("raw.orders", "SELECT n, '{{ this }}' AS me FROM ext.orders, ext.rates", materialization={"type": "table"})
    repo.sql(
        "mart.totals",
        "SELECT sum(n) AS total FROM raw.orders",
        materialization={"type": "table"},
        depends=["raw.orders"],
        custom_checks=[{"name": "one row", "query": "SELECT count(*) FROM mart.totals", "value": 1}],
    )
    repo.python(
        "mart.report",
        "import os\nprint('this=' + os.environ['BRUIN_THIS'])",
        depends=["mart.totals"],
    )
    result = repo.run_ok(*DAY)
    assert "this=dev_mart.report" in result.stdout
    assert repo.query("SELECT * FROM dev_raw.orders") == [(100, "dev_raw.orders")]
    assert repo.query("SELECT * FROM dev_mart.totals") == [(100,)]
    schemas = {row[0] for row in repo.query("SELECT schema_name FROM information_schema.schemata")}
    assert "raw" not in schemas and "mart" not in schemas


def test_secrets_reach_a_python_asset(tmp_path):
    """secrets: a generic connection injects its value, a DuckDB connection its details as JSON (absolute path);
    default.secrets apply to every asset; an unknown key is a validation error."""
    repo = Repo(tmp_path / "repo", pipeline=pipeline_yml(default={"secrets": [{"key": "TOKEN"}]}))
    bruin_yml(repo, connections={"generic": [{"name": "TOKEN", "value": "s3cr3t"}, {"name": "API", "value": "k"}]})
    repo.python(
        "show",
        "import json, os\n"
        "print('token=' + os.environ['TOKEN'])\n"
        "print('api=' + os.environ['API_KEY'])\n"
        "print('db=' + json.loads(os.environ['db'])['path'])",
        secrets=[{"key": "API", "inject_as": "API_KEY"}, {"key": "db"}],
    )
    result = repo.run_ok(*DAY)
    assert "token=s3cr3t" in result.stdout and "api=k" in result.stdout
    assert f"db={repo.database}" in result.stdout
    repo.python("other", "print(1)", secrets=[{"key": "MISSING"}])
    result = repo.run(*DAY)
    assert result.returncode == 2 and "secret 'MISSING' is not a connection of environment 'dev'" in result.stderr


def test_macros_are_available_to_every_sql_asset(tmp_path):
    """Macros from macros/*.sql (a later file using an earlier one's macro) work in two assets and a check."""
    repo = Repo(tmp_path / "repo")
    repo.write("p/macros/a_base.sql", "{% macro numbers(n) -%}SELECT range AS x FROM range({{ n }}){%- endmacro %}\n")
    repo.write(
        "p/macros/b_more.sql", "{% macro doubled(n) -%}SELECT x * 2 AS x FROM ({{ numbers(n) }}){%- endmacro %}\n"
    )
    repo.sql("s.one", "{{ numbers(3) }}", materialization={"type": "table"})
    repo.sql(
        "s.two",
        "{{ doubled(2) }}",
        materialization={"type": "table"},
        custom_checks=[{"name": "rows", "query": "SELECT count(*) FROM ({{ numbers(2) }})", "value": 2}],
    )
    repo.run_ok(*DAY)
    assert repo.query("SELECT * FROM s.one ORDER BY 1") == [(0,), (1,), (2,)]
    assert repo.query("SELECT * FROM s.two ORDER BY 1") == [(0,), (2,)]


def test_a_macro_file_with_a_syntax_error_fails_validation(tmp_path):
    """A broken macro file is reported with its file and line before anything runs."""
    repo = Repo(tmp_path / "repo")
    repo.write("p/macros/broken.sql", "\n{% macro m() %}SELECT 1\n")
    repo.sql("s.one", "SELECT 1 AS x", materialization={"type": "table"})
    result = repo.run(*DAY)
    assert result.returncode == 2
    assert "macros/broken.sql:2: template syntax" in result.stderr
    assert not repo.database.exists()


def test_path_selector_with_a_directory_selects_everything_under_it(tmp_path):
    """--selector path:DIR (no glob) selects every asset below that directory."""
    repo = Repo(tmp_path / "repo")
    for name in ("raw.a", "raw.b", "mart.c"):
        repo.write(
            f"p/assets/{name.split('.')[0]}/{name.split('.')[1]}.sql", f"/* @bruin\nname: {name}\n@bruin */\nSELECT 1"
        )
    code, record = repo.run_json(*DAY, "--selector", "path:raw")
    assert code == 0
    assert sorted(a["name"] for a in record["assets"]) == ["raw.a", "raw.b"]
    code, record = repo.run_json(*DAY, "--selector", "path:assets/mart/")
    assert sorted(a["name"] for a in record["assets"]) == ["mart.c"]


def test_a_pipeline_without_assets_is_nothing_to_run(tmp_path):
    """Only helper files: backfill run and a backfill both say there is nothing to run and exit 0."""
    repo = Repo(tmp_path / "repo")
    repo.write("p/assets/helper.py", "VALUE = 1\n")
    repo.write("p/assets/snippet.sql", "SELECT 1\n")
    result = repo.run(*DAY)
    assert result.returncode == 0, result.stderr
    assert "nothing to run: pipeline 'p'" in result.stdout and result.stderr == ""
    result = run_backfill("p", "--start-date", "2024-01-01", "--end-date", "2024-01-03", *REASON, cwd=repo.root)
    assert result.returncode == 0 and "nothing to run" in result.stdout
    assert not (repo.root / ".backfill").exists() or not any((repo.root / ".backfill").iterdir())


def test_a_start_date_that_is_not_a_date_is_a_validation_error(tmp_path):
    """start_date of an asset or of the pipeline must be YYYY-MM-DD; the error names the asset."""
    repo = Repo(tmp_path / "repo", pipeline=pipeline_yml(start_date="yesterday"))
    repo.sql("s.t", "SELECT 1", start_date="2024-13-01")
    result = repo.run(*DAY)
    assert result.returncode == 2
    assert "start_date '2024-13-01' of asset 's.t' is not a date: use YYYY-MM-DD" in result.stderr
    assert "start_date 'yesterday' of pipeline 'p' is not a date" in result.stderr


def test_merge_incremental_predicate_limits_the_rows_a_merge_can_match(tmp_path):
    """incremental_predicate joins the merge's match: a target row outside it is not updated, its key is
    inserted again (as Bruin documents)."""
    repo = Repo(tmp_path / "repo", pipeline=pipeline_yml(variables={"v": {"type": "integer", "default": 1}}))
    repo.sql(
        "s.t",
        "SELECT * FROM (VALUES (1, {{ var.v }}), (2, {{ var.v }})) v(id, val)",
        materialization={"type": "table", "strategy": "merge", "incremental_predicate": "target.id > 1"},
        columns=[{"name": "id", "primary_key": True}, {"name": "val", "update_on_merge": True}],
    )
    repo.run_ok(*DAY)
    repo.run_ok(*DAY, "--var", "v=2")
    assert repo.query("SELECT * FROM s.t ORDER BY ALL") == [(1, 1), (1, 2), (2, 2)]


def test_full_refresh_fields_start_date_parameters_and_restriction(tmp_path):
    """--full-refresh keeps the run's window whatever the pipeline's or the asset's start_date says (Bruin moves
    it for ingestr assets only: docs/assets/definition-schema.md); parameters.full_refresh rebuilds on every
    run; full_refresh_restricted keeps an asset's table through --full-refresh."""
    repo = Repo(tmp_path / "repo", pipeline=pipeline_yml(start_date="2023-06-01"))
    append = {"type": "table", "strategy": "append"}
    repo.sql("s.window", "SELECT '{{ start_date }}' AS first, '{{ end_date }}' AS last", materialization=append)
    repo.sql("s.own", "SELECT '{{ start_date }}' AS first", materialization=append, start_date="2023-12-25")
    repo.sql("s.always", "SELECT 1 AS x", materialization=append, parameters={"full_refresh": True})
    repo.sql("s.kept", "SELECT 1 AS x", materialization=append, full_refresh_restricted=True)
    repo.run_ok(*DAY)
    repo.run_ok(*DAY, "--full-refresh", "--reason", "rebuild")
    assert repo.query("SELECT * FROM s.window") == [("2024-01-01", "2024-01-01")]
    assert repo.query("SELECT * FROM s.own") == [("2024-01-01",)]
    assert repo.query("SELECT count(*) FROM s.always") == [(1,)]
    assert repo.query("SELECT count(*) FROM s.kept") == [(2,)]
    repo.run_ok(*DAY)
    assert repo.query("SELECT count(*) FROM s.always") == [(1,)]


def test_ddl_comments_its_columns_and_r_assets_are_reported(tmp_path):
    """ddl writes column descriptions as comments; an R asset is a validation error, not silently skipped."""
    repo = Repo(tmp_path / "repo")
    repo.sql(
        "s.products",
        "",
        materialization={"type": "table", "strategy": "ddl"},
        columns=[{"name": "id", "type": "INTEGER", "description": "the product's id"}],
    )
    repo.run_ok(*DAY)
    assert repo.query("SELECT comment FROM duckdb_columns() WHERE table_name = 'products'") == [("the product's id",)]
    repo.write("p/assets/model.r", "# @bruin\n# name: s.model\n# @bruin\nprint(1)\n")
    result = repo.run(*DAY)
    assert result.returncode == 2 and "model.r:1: R assets are not supported" in result.stderr


def test_a_template_syntax_error_in_an_asset_or_a_hook_fails_planning(tmp_path, home):
    """An unclosed placeholder in an asset's SQL, or a stray tag in a hook, is a validation problem with its file
    and line: backfill run, a backfill and its dry run exit 2, nothing is saved, no snapshot, no partition fails."""
    from tests.backfills import state_dirs
    from tests.conftest import run_backfill

    repo = Repo(tmp_path / "repo")
    table = {"type": "table", "strategy": "time_interval", "incremental_key": "day", "time_granularity": "date"}
    path = repo.sql("s.t", "SELECT 1 AS n,\n  DATE '{{ start_date }' AS day", materialization=table)
    line = path.read_text().splitlines().index("  DATE '{{ start_date }' AS day") + 1
    days = ("--start-date", "2024-01-01", "--end-date", "2024-01-02")
    for args in (("run", "p", *days), ("p", *days, "--dry-run"), ("p", *days, "--reason", "r", "--no-progress")):
        result = run_backfill(*args, cwd=repo.root, env=home)
        assert result.returncode == 2, (args, result.stdout, result.stderr)
        assert f"assets/s.t.sql:{line}: template syntax: unexpected '}}'" in result.stderr, result.stderr
    assert state_dirs(repo.root / "logs" / "backfills") == [] and not repo.database.exists()
    repo.sql("s.t", "SELECT DATE '{{ start_date }}' AS day", materialization=table,
             hooks={"post": [{"query": "{% if true %}DELETE FROM s.t WHERE false"}]})  # fmt: skip
    hooked = run_backfill("p", *days, "--dry-run", cwd=repo.root, env=home)
    assert hooked.returncode == 2 and "assets/s.t.sql: post hook: template syntax:" in hooked.stderr, hooked.stderr
