"""Bruin pipelines as Bruin runs them (issue 25): nothing Bruin would do differently passes with exit 0.
Each test names the Bruin documentation page it is built from."""

from __future__ import annotations

import json

import pytest
import yaml

from tests.builder import Repo
from tests.conftest import run_backfill

DAY = ("--start-date", "2024-01-01", "--end-date", "2024-01-01")


def test_the_environment_config_block_protects_every_table_from_a_full_refresh(tmp_path, home):
    """docs/secrets/bruinyml.md: `config.full_refresh_restricted` of an environment keeps every table through
    `--full-refresh` (each asset runs its own strategy); keys neither Bruin nor we define are warnings, shown
    once by `backfill run`, kept in its record and listed by a backfill's dry run, and never stop anything."""
    repo = Repo(tmp_path / "repo")
    repo.write(
        ".bruin.yml",
        yaml.safe_dump(
            {
                "default_environment": "dev",
                "telemetry": "off",
                "environments": {
                    "dev": {
                        "guardrails": "sandbox",
                        "config": {"full_refresh_restricted": True, "colour": "blue"},
                        "connections": {"duckdb": [{"name": "db", "path": "warehouse.duckdb"}]},
                        "owner": "data-team",
                    }
                },
            }
        ),
    )
    repo.sql("s.kept", "SELECT 1 AS x", materialization={"type": "table", "strategy": "append"})
    repo.run_ok(*DAY)
    ran = repo.run_ok(*DAY, "--full-refresh", "--reason", "rebuild")
    assert repo.query("SELECT count(*) FROM s.kept") == [(2,)]  # appended to, not dropped and rebuilt
    warnings = [line for line in ran.stdout.splitlines() if line.startswith("warning: ")]
    assert len(warnings) == 3, ran.stdout
    assert (
        "'telemetry' is not a top-level key of .bruin.yml (default_environment, environments): ignored" in (warnings[0])
    )
    assert any("'owner' is not a key of environment 'dev'" in line for line in warnings), warnings
    assert any("'colour' is not a config key of environment 'dev' (full_refresh_restricted)" in w for w in warnings)
    [record] = [r for r in repo.records() if r["options"]["full_refresh"]]
    assert len(record["warnings"]) == 3
    dry = run_backfill("p", *DAY, "--dry-run", cwd=repo.root, env=home)
    assert dry.returncode == 0, dry.stdout + dry.stderr
    assert sum("  warning  " in line and "is not a" in line for line in dry.stdout.splitlines()) == 3, dry.stdout
    dry_json = run_backfill("p", *DAY, "--dry-run", "--output", "json", cwd=repo.root, env=home)
    assert len(json.loads(dry_json.stdout)["preflight"]["pipeline_warnings"]) == 3


SEED_ROWS = [(1, "alpha", 2.5), (2, "beta", None), (3, "gamma", 7.0)]


def _seed(repo: Repo, name: str, path: str, **parameters) -> None:
    lines = "".join(f"  {key}: {value}\n" for key, value in {"path": path, **parameters}.items())
    repo.write(f"p/assets/{name}.asset.yml", f"name: seeds.{name}\ntype: duckdb.seed\nparameters:\n{lines}")


def test_seeds_of_every_format_bruin_reads_load_the_same_rows(tmp_path):
    """docs/assets/seed.md: CSV, Parquet (.parquet, .pq), JSON, JSONL and NDJSON seeds, and a file_type override
    on a file without a known extension, load the same rows (an .jsonl seed once loaded as a one-column CSV);
    declared column types apply to every format, and enforce_schema: false keeps the file's own types."""
    import duckdb

    repo = Repo(tmp_path / "repo")
    assets = repo.pipeline_dir / "assets"
    assets.mkdir(parents=True, exist_ok=True)
    with duckdb.connect() as make:
        make.execute("CREATE TABLE t(id INTEGER, name VARCHAR, amount DOUBLE)")
        make.execute("INSERT INTO t VALUES (1, 'alpha', 2.5), (2, 'beta', NULL), (3, 'gamma', 7.0)")
        for file, options in (
            ("rows.csv", "FORMAT csv, HEADER true"),
            ("rows.parquet", "FORMAT parquet"),
            ("rows.pq", "FORMAT parquet"),
            ("rows.json", "FORMAT json, ARRAY true"),
            ("rows.jsonl", "FORMAT json"),
            ("rows.ndjson", "FORMAT json"),
            ("rows.bin", "FORMAT parquet"),
        ):
            make.execute(f"COPY t TO '{assets / file}' ({options})")
    for name, file in (
        ("csv", "rows.csv"),
        ("parquet", "rows.parquet"),
        ("pq", "rows.pq"),
        ("json", "rows.json"),
        ("jsonl", "rows.jsonl"),
        ("ndjson", "rows.ndjson"),
    ):
        _seed(repo, name, file)
    _seed(repo, "overridden", "rows.bin", file_type="parquet")
    columns = "columns:\n  - name: id\n    type: varchar\n"
    repo.write(
        "p/assets/typed.asset.yml", f"name: seeds.typed\ntype: duckdb.seed\nparameters:\n  path: rows.jsonl\n{columns}"
    )
    repo.write(
        "p/assets/untyped.asset.yml",
        "name: seeds.untyped\ntype: duckdb.seed\nparameters:\n  path: rows.jsonl\n  enforce_schema: false\n" + columns,
    )
    repo.run_ok(*DAY)
    for name in ("csv", "parquet", "pq", "json", "jsonl", "ndjson", "overridden"):
        got = repo.query(f"SELECT id, name, amount FROM seeds.{name} ORDER BY ALL")
        assert got == SEED_ROWS, (name, got)
    assert repo.query("SELECT id FROM seeds.typed ORDER BY ALL") == [("1",), ("2",), ("3",)]
    assert repo.query("SELECT id FROM seeds.untyped ORDER BY ALL") == [(1,), (2,), (3,)]


def test_a_seed_this_duckdb_cannot_read_is_one_line_before_anything_runs(tmp_path):
    """docs/assets/seed.md: Avro and URL seeds need DuckDB's avro and httpfs extensions; without them (no
    network here to install them) the run is refused with one line naming the seed and the way on, exit 2,
    and nothing runs. An unknown file_type is refused the same way, naming what Bruin accepts."""
    import duckdb

    repo = Repo(tmp_path / "repo")
    repo.sql("s.first", "SELECT 1 AS x")
    repo.write("p/assets/events.avro", "not read")
    _seed(repo, "events", "events.avro")
    _seed(repo, "zones", "https://example.invalid/taxi_zone_lookup.csv")
    with duckdb.connect() as probe:
        present = probe.execute(
            "SELECT count(*) FROM duckdb_extensions() WHERE extension_name IN ('avro', 'httpfs') "
            "AND (installed OR loaded)"
        ).fetchone()[0]
    assert present == 0, "this DuckDB has the avro or httpfs extension: the refusal cannot be seen here"
    ran = repo.run(*DAY)
    assert ran.returncode == 2, ran.stdout + ran.stderr
    assert "seed seeds.events: an Avro seed needs DuckDB's avro extension, which is not installed here" in ran.stderr
    assert "seed seeds.zones: an http(s) seed needs DuckDB's httpfs extension" in ran.stderr
    assert "Traceback" not in ran.stderr
    assert not repo.database.exists() or repo.query(
        "SELECT count(*) FROM information_schema.tables WHERE table_name = 'first'"
    ) == [(0,)]
    _seed(repo, "events", "events.avro", file_type="xml")
    ran = repo.run(*DAY)
    assert ran.returncode == 2
    assert "unsupported seed file_type 'xml': use one of csv, parquet, pq, json, jsonl, ndjson, avro" in ran.stderr


def test_assets_are_found_where_and_as_bruin_finds_them(tmp_path):
    """docs/assets/definition-schema.md and pkg/pipeline/comment.go: assets under tasks/ as well as assets/,
    SQL and Python assets declared in inline comments (`-- @bruin.name: …`, `# @bruin.name: …`), and *.task.yml;
    a pipeline whose assets all live there runs them all instead of saying there is nothing to run."""
    repo = Repo(tmp_path / "repo")
    repo.write(
        "p/tasks/stg/events.sql",
        "-- @bruin.name: stg.events\n"
        "-- @bruin.materialization.type: table\n"
        "-- @bruin.columns.id.checks: not_null, unique\n"
        "-- @bruin.columns.id.type: integer\n"
        "-- @bruin.owner: someone@example.com\n"
        "-- a plain comment stays a comment\n"
        "SELECT range AS id FROM range(3)\n",
    )
    repo.write(
        "p/tasks/mart/totals.sql",
        "/* @bruin\nname: mart.totals\nmaterialization:\n  type: table\ndepends: [stg.events]\n@bruin */\n"
        "SELECT count(*) AS n FROM stg.events\n",
    )
    repo.write(
        "p/tasks/report.py",
        "# @bruin.name: mart.report\n# @bruin.depends: mart.totals, stg.events\n# @bruin.connection: db\n"
        "import duckdb, os\n"
        "with duckdb.connect(os.environ['BRUIN_DUCKDB_PATH']) as db:\n"
        "    db.execute('CREATE OR REPLACE TABLE mart.report AS SELECT n * 10 AS n FROM mart.totals')\n",
    )
    repo.write("p/tasks/codes.csv", "code\n7\n")
    repo.write("p/tasks/codes.task.yml", "name: ref.codes\ntype: duckdb.seed\nparameters:\n  path: codes.csv\n")
    repo.write("p/assets/helper.sql", "-- see the @bruin docs for headers\nSELECT 1\n")
    ran = repo.run_ok(*DAY)
    assert repo.query("SELECT * FROM stg.events ORDER BY ALL") == [(0,), (1,), (2,)]
    assert repo.query("SELECT * FROM mart.report") == [(30,)]
    assert repo.query("SELECT * FROM ref.codes") == [(7,)]
    [record] = repo.records()
    assert {a["name"] for a in record["assets"]} == {"stg.events", "mart.totals", "mart.report", "ref.codes"}
    [events] = [a for a in record["assets"] if a["name"] == "stg.events"]
    assert {c["name"] for c in events["checks"]} == {"not_null(id)", "unique(id)"}, events["checks"]
    warnings = [line for line in ran.stdout.splitlines() if line.startswith("warning: ")]
    assert any(
        "events.sql:5: '@bruin.owner: someone@example.com' is not a field of Bruin's inline" in w for w in warnings
    )
    assert any(
        "helper.sql:1: mentions @bruin but has no @bruin header Bruin reads: not an asset" in w for w in warnings
    )


def test_fields_bruin_accepts_are_never_refused(tmp_path, home):
    """docs/assets/definition-schema.md, docs/variables/custom.md and pkg/lint (unknown-asset-fields is a warning):
    asset retries, tier, metadata, owner, column upstreams, a check's retries, a variable of type null and an
    `environments:` block in pipeline.yml run; fields Bruin does not define and retries (which Bruin acts on
    and we do not) are warnings, each shown once, listed by a backfill's dry run and its start, never a stop."""
    repo = Repo(
        tmp_path / "repo",
        pipeline={
            "name": "p",
            "default_connections": {"duckdb": "db"},
            "retries": 2,
            "environments": {"prod": {"schedule": "daily"}},
            "variables": {"maybe": {"type": "null", "default": None}},
        },
    )
    repo.sql(
        "s.t",
        "SELECT 1 AS id, {{ var.maybe is none }} AS nothing",
        materialization={"type": "table"},
        retries=3,
        tier=2,
        metadata={"team": "data"},
        owner="someone@example.com",
        colour="red",
        extends=["Customer"],
        columns=[
            {
                "name": "id",
                "type": "integer",
                "upstreams": [{"table": "raw.x", "column": "id"}],
                "checks": [{"name": "not_null", "retries": 1}],
            }
        ],
    )
    ran = repo.run_ok(*DAY)
    assert repo.query("SELECT * FROM s.t") == [(1, True)]
    warnings = [line for line in ran.stdout.splitlines() if line.startswith("warning: ")]
    expected = [
        "pipeline.yml:3: unknown field 'environments' (ignored)",
        "pipeline.yml:7: retries: an asset is not retried on its own here",
        "s.t.sql:11: unknown field 'colour' (ignored)",
        "s.t.sql:6: retries: an asset is not retried on its own here",
    ]
    for text in expected:
        assert sum(text in line for line in warnings) == 1, (text, warnings)
    assert len(warnings) == len(expected), warnings
    dry = run_backfill("p", *DAY, "--dry-run", cwd=repo.root, env=home)
    assert dry.returncode == 0, dry.stderr
    assert sum(line.startswith("  warning  ") for line in dry.stdout.splitlines()) == len(expected), dry.stdout
    started = run_backfill("p", *DAY, "--reason", "r", "--no-progress", cwd=repo.root, env=home)
    assert started.returncode == 0, started.stdout + started.stderr
    for text in expected:
        assert sum(text in line for line in started.stdout.splitlines()) == 1, (text, started.stdout)


def test_columns_extending_the_glossary_run_as_in_bruin(tmp_path, home):
    """glossary.yml at the repository's root (Bruin's pkg/glossary, pkg/pipeline): a column extending Customer.id
    takes the attribute's name, so its not_null check runs on `id` and fails on a NULL (exit 1); a reference to an
    attribute the glossary lacks (Bruin's valid-entity-references) is refused before anything runs (exit 2), no
    table made. Before, both ran with exit 0: the check ran on no column, the reference was not read."""
    repo = Repo(tmp_path / "repo")
    repo.write("glossary.yml", "entities:\n  Customer:\n    attributes:\n      id:\n        type: integer\n")
    columns = [{"extends": "Customer.id", "checks": [{"name": "not_null"}]}]
    repo.sql("s.customers", "SELECT NULL::INTEGER AS id", materialization={"type": "table"}, columns=columns)
    failed = repo.run(*DAY)
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert "check not_null(id) failed (blocking): 1 row violate it" in failed.stdout
    repo.sql("s.customers", "SELECT 1 AS id", materialization={"type": "table"}, columns=columns)
    repo.run_ok(*DAY)
    repo.sql(
        "s.orders", "SELECT 1 AS n", materialization={"type": "table"}, columns=[{"name": "n", "extends": "Customer.n"}]
    )
    refused = repo.run(*DAY)
    assert refused.returncode == 2
    assert "column extends 'Customer.n': entity 'Customer' has no attribute 'n'" in refused.stderr
    assert repo.query("SELECT count(*) FROM information_schema.tables WHERE table_name = 'orders'") == [(0,)]


def test_a_pipeline_with_other_platforms_runs_its_duckdb_assets_when_they_are_left_out(tmp_path, home):
    """docs/getting-started/concepts.md (a pipeline spans platforms) and pkg/executor/defaults.go: BigQuery and
    ingestr assets in the pipeline do not stop its DuckDB assets from running when the selection leaves them
    out (--exclude-tag, a single-asset target, a selector); selecting one is one error naming it; duckdb.source
    runs nothing and checks nothing."""
    repo = Repo(tmp_path / "repo")
    repo.sql("s.events", "SELECT 1 AS id", materialization={"type": "table"})
    repo.sql("s.totals", "SELECT count(*) AS n FROM s.events", materialization={"type": "table"}, depends=["s.events"])
    repo.sql(
        "bq.report",
        "SELECT * FROM `project.dataset.table` QUALIFY ROW_NUMBER() OVER () = 1",
        type="bq.sql",
        tags=["cloud"],
        materialization={"type": "table", "strategy": "bigquery_only"},
        depends=["s.totals"],
    )
    repo.write(
        "p/assets/ingest.asset.yml",
        "name: raw.ingested\ntype: ingestr\ntags: [cloud]\nparameters:\n  source_connection: pg\n"
        "  source_table: public.users\n",
    )
    repo.write(
        "p/assets/existing.asset.yml",
        "name: s.existing\ntype: duckdb.source\ncolumns:\n  - name: id\n    checks:\n      - name: not_null\n",
    )
    everything = repo.run(*DAY)
    assert everything.returncode == 2, everything.stdout + everything.stderr
    assert "asset bq.report is a bq.sql asset, which this runner cannot run" in everything.stderr
    assert "asset raw.ingested is a ingestr asset, which this runner cannot run" in everything.stderr
    assert not repo.database.exists()  # nothing ran
    ran = repo.run_ok(*DAY, "--exclude-tag", "cloud")
    assert repo.query("SELECT * FROM s.totals") == [(1,)]
    [record] = repo.records()
    statuses = {a["name"]: a["status"] for a in record["assets"]}
    assert statuses == {"s.events": "succeeded", "s.totals": "succeeded", "s.existing": "succeeded"}, statuses
    assert not next(a for a in record["assets"] if a["name"] == "s.existing")["checks"]  # no table, no check run
    assert "warning" not in ran.stdout
    single = run_backfill("run", str(repo.pipeline_dir / "assets" / "s.events.sql"), *DAY, cwd=repo.root, env=home)
    assert single.returncode == 0, single.stdout + single.stderr
    selected = repo.run(*DAY, "--selector", "bq.report")
    assert selected.returncode == 2 and "asset bq.report is a bq.sql asset" in selected.stderr
    backfill = run_backfill(
        "p", *DAY, "--exclude-tag", "cloud", "--reason", "r", "--no-progress", cwd=repo.root, env=home
    )
    assert backfill.returncode == 0, backfill.stdout + backfill.stderr


def test_pipeline_defaults_reach_every_asset_as_bruin_merges_them(tmp_path):
    """docs/pipelines/definition.md, "Default (pipeline-level defaults)", and SetupDefaultsFromPipeline: tags,
    materialization (field by field), columns and their checks, custom checks and parameters from `default:`
    reach every asset, the asset's own values winning; hooks reach SQL assets only (not a seed), and only the
    types `applicable_type` lists."""
    repo = Repo(
        tmp_path / "repo",
        pipeline={
            "name": "p",
            "default_connections": {"duckdb": "db"},
            "default": {
                "tags": ["nightly"],
                "materialization": {"type": "table", "strategy": "append"},
                "columns": [{"name": "id", "checks": [{"name": "not_null"}]}],
                "custom_checks": [{"name": "some rows", "query": "SELECT count(*) > 0 FROM {{ this }}", "value": 1}],
                "parameters": {"region": "eu"},
                "hooks": {
                    "applicable_type": ["duckdb.sql"],
                    "post": [{"query": "INSERT INTO s.audit SELECT '{{ this }}'"}],
                },
                "refresh_restricted": True,
            },
        },
    )
    repo.execute("CREATE SCHEMA s", "CREATE TABLE s.audit (what VARCHAR)")
    repo.sql("s.appended", "SELECT 1 AS id")
    repo.sql("s.replaced", "SELECT 2 AS id", materialization={"strategy": "create+replace"}, tags=["own"])
    repo.write("p/assets/codes.csv", "id\n3\n")
    repo.write("p/assets/codes.asset.yml", "name: s.codes\ntype: duckdb.seed\nparameters:\n  path: codes.csv\n")
    repo.run_ok(*DAY, "--tag", "nightly")
    repo.run_ok(*DAY, "--tag", "nightly", "--full-refresh", "--reason", "r")  # refresh_restricted: appends again
    assert repo.query("SELECT * FROM s.appended") == [(1,), (1,)]  # the default's strategy: append
    assert repo.query("SELECT * FROM s.replaced") == [(2,)]  # its own strategy wins, the default's type fills in
    assert repo.query("SELECT * FROM s.audit ORDER BY ALL") == [("s.appended",)] * 2 + [("s.replaced",)] * 2
    record = repo.records()[-1]
    checks = {a["name"]: sorted(c["name"] for c in a["checks"]) for a in record["assets"]}
    assert checks["s.appended"] == ["not_null(id)", "some rows"], checks
    assert checks["s.codes"] == ["not_null(id)", "some rows"], checks  # checks reach every asset; hooks do not
    pipeline = yaml.safe_load((repo.pipeline_dir / "pipeline.yml").read_text())
    pipeline["default"]["hooks"]["applicable_type"] = ["bq.sql"]
    repo.write("p/pipeline.yml", yaml.safe_dump(pipeline))
    repo.run_ok(*DAY, "--tag", "nightly")
    assert repo.query("SELECT count(*) FROM s.audit") == [(4,)]  # no duckdb.sql asset inherits them now


def test_selection_as_bruin_reads_it(tmp_path):
    """docs/commands/run.md and cmd/run.go: the file: selector method (a file's name or its stem, globs too);
    --only repeatable (`--only main --only checks` runs both; push-metadata is one line); --exclude-tag on a
    single asset needs --downstream and --tag means nothing there (Bruin's messages); an exclude tag no asset
    has is a warning, not silence."""
    repo = Repo(tmp_path / "repo")
    repo.sql(
        "s.orders",
        "SELECT 1 AS id",
        materialization={"type": "table"},
        columns=[{"name": "id", "checks": [{"name": "not_null"}]}],
    )
    repo.sql("s.users", "SELECT 2 AS id", materialization={"type": "table"}, tags=["pii"], depends=["s.orders"])
    repo.run_ok(*DAY, "--selector", "file:s.orders.sql")
    repo.run_ok(*DAY, "--selector", "file:s.ord*")
    assert [sorted(a["name"] for a in r["assets"]) for r in repo.records()] == [["s.orders"], ["s.orders"]]
    both = repo.run_ok(*DAY, "--selector", "s.orders", "--only", "main", "--only", "checks")
    [orders] = repo.records()[-1]["assets"]
    assert orders["rows_written"] == 1 and [c["name"] for c in orders["checks"]] == ["not_null(id)"], both.stdout
    checks_only = repo.run_ok(*DAY, "--selector", "s.orders", "--only", "checks")
    [orders] = repo.records()[-1]["assets"]
    assert orders["rows_written"] is None and orders["checks"], checks_only.stdout
    pushed = repo.run(*DAY, "--only", "push-metadata")
    assert pushed.returncode == 2 and "--only push-metadata means nothing here" in pushed.stderr
    single = str(repo.pipeline_dir / "assets" / "s.orders.sql")
    refused = repo.run(*DAY, "--exclude-tag", "pii", target=single)
    assert refused.returncode == 2
    assert "when running a single asset with '--exclude-tag', you must also use the '--downstream' flag" in (
        refused.stderr
    )
    tagged = repo.run(*DAY, "--tag", "pii", target=single)
    assert tagged.returncode == 2 and "you cannot use the '--tag' flag when running a single asset" in tagged.stderr
    downstream = repo.run_ok(*DAY, "--downstream", "--exclude-tag", "pii", target=single)
    assert [a["name"] for a in repo.records()[-1]["assets"]] == ["s.orders"], downstream.stdout
    missing = repo.run_ok(*DAY, "--exclude-tag", "nosuchtag")
    assert "warning: no assets found with exclude tag 'nosuchtag'; continuing without excluding any assets" in (
        missing.stdout
    )


COMMIT = "0123456789abcdef0123456789abcdef01234567"


def test_bruin_template_variables_filters_and_python_environment(tmp_path):
    """docs/variables/built-in.md and docs/assets/templating/filters.md: every built-in variable (the _nodash
    forms, execution_*, commit_hash, schema_prefix, pipeline, this), the date filters (add_months and add_years
    as Go's AddDate, truncate_*), a seed path rendered as a template, and a Python asset's BRUIN_* environment
    (BRUIN_ASSET, BRUIN_EXECUTION_*, BRUIN_COMMIT_HASH, BRUIN_SCHEMA_PREFIX, BRUIN_VARS_SCHEMA,
    BRUIN_CONNECTION_TYPES)."""
    repo = Repo(
        tmp_path / "repo",
        pipeline={
            "name": "p",
            "default_connections": {"duckdb": "db"},
            "variables": {"region": {"type": "string", "default": "us", "enum": ["us", "eu"]}},
        },
    )
    repo.write(".git/HEAD", "ref: refs/heads/main\n")
    repo.write(".git/refs/heads/main", COMMIT + "\n")
    repo.sql(
        "s.vars",
        "SELECT '{{ start_date_nodash }}' AS s, '{{ end_date_nodash }}' AS e, '{{ execution_date }}' AS x, "
        "'{{ execution_date_nodash }}' AS xn, '{{ execution_timestamp }}' AS xt, '{{ commit_hash }}' AS c, "
        "'{{ schema_prefix }}' AS sp, '{{ pipeline }}' AS p, '{{ this }}' AS t, "
        "'{{ '2024-01-31' | add_months(1) }}' AS m, '{{ '2024-02-29' | add_years(1) }}' AS y, "
        "'{{ '2024-03-20 15:30:45' | truncate_month }}' AS tm, '{{ start_datetime | truncate_hour }}' AS th",
        materialization={"type": "table"},
    )
    repo.write("p/assets/eu.csv", "code\n7\n")
    repo.write(
        "p/assets/codes.asset.yml",
        'name: s.codes\ntype: duckdb.seed\nparameters:\n  path: "{{ var.region }}.csv"\n',
    )
    repo.python(
        "s.env",
        "import duckdb, json, os\n"
        "keys = ['BRUIN_ASSET', 'BRUIN_EXECUTION_DATE', 'BRUIN_COMMIT_HASH', 'BRUIN_SCHEMA_PREFIX',\n"
        "        'BRUIN_VARS_SCHEMA', 'BRUIN_CONNECTION_TYPES']\n"
        "with duckdb.connect(os.environ['BRUIN_DUCKDB_PATH']) as db:\n"
        "    db.execute('CREATE OR REPLACE TABLE s.env (k VARCHAR, v VARCHAR)')\n"
        "    db.executemany('INSERT INTO s.env VALUES (?, ?)', [(k, os.environ.get(k)) for k in keys])\n",
        connection="db",
        secrets=[{"key": "db", "inject_as": "WAREHOUSE"}],
        depends=["s.vars"],
    )
    repo.run_ok("--start-date", "2024-03-05", "--end-date", "2024-03-06", "--var", 'region="eu"')
    [record] = repo.records()
    executed = record["started_at"][:10]
    [row] = repo.query("SELECT * FROM s.vars")
    assert row[:2] == ("20240305", "20240306")
    assert row[2] == executed and row[3] == executed.replace("-", "") and row[4].endswith("Z")
    assert row[5:9] == (COMMIT, "", "p", "s.vars")
    assert row[9:] == ("2024-03-02", "2025-03-01", "2024-03-01 00:00:00", "2024-03-05T00:00:00")
    assert repo.query("SELECT * FROM s.codes") == [(7,)]
    env = dict(repo.query("SELECT * FROM s.env"))
    assert env["BRUIN_ASSET"] == "s.env" and env["BRUIN_EXECUTION_DATE"] == executed
    assert env["BRUIN_COMMIT_HASH"] == COMMIT and env["BRUIN_SCHEMA_PREFIX"] == ""
    assert json.loads(env["BRUIN_VARS_SCHEMA"]) == {"region": {"type": "string", "enum": ["us", "eu"]}}
    assert json.loads(env["BRUIN_CONNECTION_TYPES"]) == {"WAREHOUSE": "duckdb"}
    missing = repo.run("--start-date", "2024-03-05", "--end-date", "2024-03-06")  # region us: no us.csv
    assert missing.returncode == 1
    assert "seed file 'us.csv' (parameters.path '{{ var.region }}.csv') does not exist" in missing.stdout


def test_every_column_check_bruin_documents(tmp_path):
    """docs/quality/available_checks.md: pattern (a regular expression the values must match, NULL ignored) and
    min/max against dates and timestamps as well as numbers pass and fail on real rows, each failure counted."""
    repo = Repo(tmp_path / "repo")
    repo.sql(
        "s.people",
        "SELECT * FROM (VALUES ('Ada', DATE '2024-01-05', TIMESTAMP '2024-01-05 10:00:00', 3), "
        "('bob', DATE '2023-12-31', TIMESTAMP '2024-02-01 00:00:01', 12), (NULL, NULL, NULL, NULL)) "
        "v(name, day, seen, n)",
        materialization={"type": "table"},
        columns=[
            {"name": "name", "checks": [{"name": "pattern", "value": "^[A-Z][a-z]*$", "blocking": False}]},
            {
                "name": "day",
                "checks": [
                    {"name": "min", "value": "2024-01-01", "blocking": False},
                    {"name": "max", "value": "2024-12-31", "blocking": False},
                ],
            },
            {"name": "seen", "checks": [{"name": "max", "value": "2024-02-01 00:00:00", "blocking": False}]},
            {"name": "n", "checks": [{"name": "min", "value": 1}, {"name": "max", "value": 10.5, "blocking": False}]},
        ],
    )
    repo.run_ok(*DAY)
    [asset] = repo.records()[-1]["assets"]
    outcome = {c["name"]: c["passed"] for c in asset["checks"]}
    assert outcome == {
        "pattern(name)": False,
        "min(day)": False,
        "max(day)": True,
        "max(seen)": False,
        "min(n)": True,
        "max(n)": False,
    }, asset["checks"]
    details = {c["name"]: c["detail"] for c in asset["checks"]}
    assert details["pattern(name)"].startswith("1 ") and details["min(day)"].startswith("1 "), details
    bad = Repo(tmp_path / "bad")
    bad.sql("s.x", "SELECT 1 AS n", columns=[{"name": "n", "checks": [{"name": "pattern", "value": 5}]}])
    refused = bad.run(*DAY)
    assert refused.returncode == 2 and "check pattern needs a regular expression (a string value)" in refused.stderr


def test_the_command_line_a_bruin_user_types(tmp_path, home):
    """docs/commands/run.md and cmd/run.go: -e/-env, -t, -x, -r, -f, BRUIN_START_DATE/BRUIN_END_DATE/
    BRUIN_FULL_REFRESH, --query-annotations, --no-color, --no-validation, --no-log-file, --minimal-logs and
    --timeout in whole seconds work with Bruin's meaning; flags that mean nothing here are one line each."""
    repo = Repo(tmp_path / "repo")
    repo.sql(
        "s.days",
        "SELECT '{{ start_date }}' AS first, '{{ end_date }}' AS last",
        materialization={"type": "table", "strategy": "append"},
        tags=["keep"],
    )
    repo.sql("s.other", "SELECT 1 AS x", materialization={"type": "table"}, tags=["drop"])
    repo.sql("s.query", "SELECT current_query() AS q", materialization={"type": "table"}, tags=["keep"])
    env = {**home, "BRUIN_START_DATE": "2024-02-01", "BRUIN_END_DATE": "2024-02-03"}
    ran = repo.run(
        "-env",
        "dev",
        "-t",
        "keep",
        "-x",
        "drop",
        "--no-color",
        "--no-validation",
        "--no-log-file",
        "--minimal-logs",
        "--timeout",
        "3600",
        "--query-annotations",
        '{"team": "data"}',
        "-f",
        env=env,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert not ran.stdout.startswith("run ")  # --minimal-logs: no analysis header
    [record] = repo.records()
    assert sorted(a["name"] for a in record["assets"]) == ["s.days", "s.query"]
    assert record["interval"]["start"].startswith("2024-02-01") and record["options"]["timeout"] == "1h"
    [(query,)] = repo.query("SELECT q FROM s.query")
    assert '"team":"data"' in query, query
    assert repo.query("SELECT * FROM s.days") == [("2024-02-01", "2024-02-03")]
    refreshed = repo.run("-e", "dev", "-t", "keep", "--reason", "rebuild", env={**env, "BRUIN_FULL_REFRESH": "1"})
    assert refreshed.returncode == 0, refreshed.stdout + refreshed.stderr
    assert repo.query("SELECT count(*) FROM s.days") == [(1,)]  # dropped and rebuilt: a full refresh
    backfill = run_backfill(
        "p",
        *DAY,
        "-t",
        "keep",
        "--reason",
        "r",
        "--no-progress",
        cwd=repo.root,
        env={**home, "BRUIN_FULL_REFRESH": "1"},
    )
    assert backfill.returncode == 0, backfill.stdout + backfill.stderr
    assert repo.query("SELECT count(*) FROM s.days") == [(2,)]  # a partition's child ignores the variable
    unreasoned = repo.run("-t", "keep", env={**env, "BRUIN_FULL_REFRESH": "true"})
    assert unreasoned.returncode == 2 and "--reason" in unreasoned.stderr  # a full refresh by hand says why
    for flag, why in (
        ("--push-metadata", "metadata push is a Bruin Cloud feature"),
        ("--sensor-mode=wait", "sensors run only on Bruin's platforms"),
        ("-i", "`backfill` itself is the interactive view"),
        ("--stream", "streaming CDC ingestr assets run only in Bruin"),
    ):
        refused = repo.run(*DAY, flag)
        assert refused.returncode == 2, (flag, refused.stdout + refused.stderr)
        assert refused.stderr.count("\n") == 1 and why in refused.stderr, (flag, refused.stderr)
        assert "unknown option" not in refused.stderr


def test_run_continue_reruns_what_did_not_succeed_in_the_last_run(tmp_path):
    """docs/commands/run.md (--continue) and Scheduler.RestoreState: the last run by hand again, with its interval
    and options, only for the assets that failed or whose upstream failed; succeeded ones are not run again; a
    pipeline whose assets changed is refused; nothing left to rerun says so. Bruin's own form names the dates
    again (``bruin run --start-date S --end-date E --continue``, integration-tests' continue workflow): the run's
    own dates are taken, and what else it was given, given again; anything else — dates, zone, full refresh, interval
    modifiers, workers, timeout — is refused (it would be ignored without a word: the run goes as it was given)."""
    repo = Repo(tmp_path / "repo")
    repo.sql("s.a", "SELECT '{{ start_date }}' AS day", materialization={"type": "table", "strategy": "append"})
    repo.sql(
        "s.b",
        "SELECT CASE WHEN (SELECT count(*) FROM s.fixed) > 0 THEN 1 ELSE error('not yet') END AS ok",
        materialization={"type": "table"},
        depends=["s.a"],
    )
    repo.sql("s.c", "SELECT * FROM s.b", materialization={"type": "table"}, depends=["s.b"])
    repo.execute("CREATE SCHEMA s", "CREATE TABLE s.fixed (x INTEGER)")
    failed = repo.run("--start-date", "2024-05-01", "--end-date", "2024-05-01")
    assert failed.returncode == 1
    repo.execute("INSERT INTO s.fixed VALUES (1)")
    refused = repo.run("--continue", "--tag", "x")
    assert refused.returncode == 2 and "--tag means nothing with --continue" in refused.stderr
    for given, said in (
        (
            ("--start-date", "2024-05-02", "--end-date", "2024-05-02"),
            "--start-date 2024-05-02, --end-date 2024-05-02 where run run-",
        ),
        (("--end-date", "2024-05-03"), "--end-date 2024-05-03 where run run-"),
        (("--timezone", "Asia/Tokyo"), "--timezone Asia/Tokyo where run run-"),
        (("--full-refresh", "--reason", "r"), "--full-refresh where run run-"),
        (("--apply-interval-modifiers",), "--apply-interval-modifiers where run run-"),
        (("--workers", "3"), "--workers 3 where run run-"),
        (("--timeout", "5m"), "--timeout 5m where run run-"),
    ):  # each would be ignored without a word, the run going as it was given
        other = repo.run(*given, "--continue")
        assert other.returncode == 2, (given, other.stdout + other.stderr)
        assert said in other.stderr and other.stderr.count("\n") == 1, (given, other.stderr)
        assert "--continue runs that run again as it was given; leave it out" in other.stderr
    both = repo.run("--end-date", "2024-05-03", "--workers", "3", "--continue")
    assert (
        "was given 2024-05-01T00:00:00.000000Z → 2024-05-01T23:59:59.999999Z, and --workers 3 where it was given "
        "--workers 16: --continue runs that run again as it was given; leave them out" in both.stderr
    ), both.stderr
    continued = repo.run_ok(  # Bruin's form, and what the run was given, given again
        "--start-date", "2024-05-01", "--end-date", "2024-05-01", "--tz", "UTC", "--workers", "16", "--continue"
    )  # fmt: skip
    assert "continuing run run-" in continued.stdout and "s.b, s.c again" in continued.stdout
    last = repo.records()[-1]
    assert sorted(a["name"] for a in last["assets"]) == ["s.b", "s.c"]  # s.a succeeded: not run again
    assert last["interval"]["start"].startswith("2024-05-01")
    assert repo.query("SELECT * FROM s.a") == [("2024-05-01",)]  # appended once only
    assert repo.query("SELECT * FROM s.c") == [(1,)]
    again = repo.run("--continue")
    assert again.returncode == 0 and "nothing to continue: every asset of run" in again.stdout
    (repo.pipeline_dir / "assets" / "s.c.sql").unlink()
    changed = repo.run("--continue")
    assert changed.returncode == 2 and "the pipeline has changed since run" in changed.stderr


def test_a_full_refresh_keeps_the_window_and_ignores_interval_modifiers(tmp_path):
    """docs/pipelines/definition.md ("bruin run … does not read this field"), docs/assets/definition-schema.md
    (an asset's start_date is for ingestr assets) and setApplyIntervalModifiers: a full refresh of a DuckDB
    asset renders the run's own window, and --apply-interval-modifiers with --full-refresh is ignored, saying
    so."""
    repo = Repo(
        tmp_path / "repo", pipeline={"name": "p", "default_connections": {"duckdb": "db"}, "start_date": "2020-01-01"}
    )
    repo.sql(
        "s.window",
        "SELECT '{{ start_date }}' AS first, '{{ end_date }}' AS last",
        materialization={"type": "table"},
        start_date="2023-01-01",
        interval_modifiers={"start": "-1d"},
    )
    ran = repo.run_ok(*DAY, "--full-refresh", "--reason", "rebuild", "--apply-interval-modifiers")
    assert repo.query("SELECT * FROM s.window") == [("2024-01-01", "2024-01-01")]
    assert "warning: --apply-interval-modifiers is ignored when --full-refresh is given (as in Bruin)" in ran.stdout
    repo.run_ok(*DAY, "--apply-interval-modifiers")
    assert repo.query("SELECT * FROM s.window") == [("2023-12-31", "2024-01-01")]  # without it, they apply


def test_a_variants_value_wins_over_var_and_our_stricter_rule_says_it_is_ours(tmp_path):
    """docs/pipelines/variants.md and cmd/const.go (variableOverridesMutator): a --var the chosen variant sets too
    is ignored, with a warning naming it; a --var outside its declaration is refused with a message that says
    the rule is ours and why."""
    repo = Repo(
        tmp_path / "repo",
        pipeline={
            "name": "p",
            "default_connections": {"duckdb": "db"},
            "variables": {"days": {"type": "integer", "default": 1}, "region": {"type": "string", "default": "us"}},
            "variants": {"alpha": {"days": 7}},
        },
    )
    repo.sql("s.v", "SELECT {{ var.days }} AS days, '{{ var.region }}' AS region", materialization={"type": "table"})
    ran = repo.run_ok(*DAY, "--variant", "alpha", "--var", "days=3", "--var", 'region="eu"')
    assert repo.query("SELECT * FROM s.v") == [(7, "eu")]
    assert "warning: --var days is ignored: variant 'alpha' sets it, and a variant's value wins (as in Bruin)" in (
        ran.stdout
    )
    typed = repo.run(*DAY, "--variant", "alpha", "--var", "region=5")
    assert typed.returncode == 2
    assert "a rule of backfill's, stricter than Bruin's" in typed.stderr


def test_a_lakehouse_connection_is_refused_not_read_as_a_plain_file(tmp_path):
    """docs/platforms/duckdb.md (Lakehouse Support): a DuckDB connection with a lakehouse block keeps its tables in
    a catalog; running its assets against the bare file would read and write the wrong tables, so it is one
    line naming the connection, exit 2, and nothing runs."""
    repo = Repo(tmp_path / "repo")
    repo.write(
        ".bruin.yml",
        yaml.safe_dump(
            {
                "default_environment": "dev",
                "environments": {
                    "dev": {
                        "guardrails": "sandbox",
                        "connections": {
                            "duckdb": [
                                {
                                    "name": "db",
                                    "path": "warehouse.duckdb",
                                    "lakehouse": {"format": "ducklake", "catalog": {"type": "duckdb"}},
                                }
                            ]
                        },
                    }
                },
            }
        ),
    )
    repo.sql("s.t", "SELECT 1 AS x", materialization={"type": "table"})
    ran = repo.run(*DAY)
    assert ran.returncode == 2
    assert "connection 'db' is a DuckDB lakehouse (Iceberg or DuckLake), which the embedded runner does not" in (
        ran.stderr
    )
    assert not repo.database.exists()


def test_scd2_history_takes_the_wider_type_of_new_data(tmp_path):
    """assets/materialization.md (SCD2) and pkg/duckdb/materialization.go: Bruin rebuilds the history from the union
    of the table and the new rows, so a value wider than the column's first type (an INTEGER column, then a
    BIGINT value; a DATE key, then a TIMESTAMP) is kept whole, not refused or cut; the history stays right."""
    repo = Repo(tmp_path / "repo")
    header = {
        "materialization": {"type": "table", "strategy": "scd2_by_column"},
        "columns": [{"name": "id", "type": "integer", "primary_key": True}, {"name": "v", "type": "integer"}],
    }
    repo.sql("s.dim", "SELECT 1::INTEGER AS id, 5::INTEGER AS v", **header)
    repo.run_ok(*DAY)
    repo.sql("s.dim", "SELECT 1::INTEGER AS id, 3000000000::BIGINT AS v", **header)
    ran = repo.run(*DAY)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert repo.query("SELECT v, _is_current FROM s.dim ORDER BY v") == [(5, False), (3000000000, True)]
    assert repo.query("SELECT data_type FROM information_schema.columns WHERE column_name = 'v'") == [("BIGINT",)]


def test_a_parameter_template_that_does_not_render_fails_its_asset(tmp_path):
    """variables/built-in.md ("YAML parameters" are templated): a parameter whose template cannot render (an
    undefined variable) fails its asset, naming the parameter, and its downstream does not run."""
    repo = Repo(tmp_path / "repo")
    repo.sql("s.t", "SELECT 1 AS x", materialization={"type": "table"}, parameters={"label": "{{ var.nowhere }}"})
    ran = repo.run(*DAY)
    assert ran.returncode == 1
    assert "parameters.label '{{ var.nowhere }}'" in ran.stdout, ran.stdout
    assert not repo.query("SELECT count(*) FROM information_schema.tables WHERE table_name = 't'")[0][0]


def test_inject_as_takes_any_name_bruin_takes(tmp_path):
    """secrets/overview.md (inject_as): Bruin injects a secret under any name it is given, dashes included; only a
    name no environment can hold ('=' in it) is refused, naming it."""
    repo = Repo(tmp_path / "repo")
    repo.python(
        "s.p",
        "import duckdb, json, os\n"
        "path = json.loads(os.environ['db-details'])['path']\n"
        "with duckdb.connect(os.environ['BRUIN_DUCKDB_PATH']) as db:\n"
        "    db.execute('CREATE SCHEMA IF NOT EXISTS s')\n"
        "    db.execute('CREATE OR REPLACE TABLE s.p AS SELECT ? AS path', [path])\n",
        connection="db",
        secrets=[{"key": "db", "inject_as": "db-details"}],
    )
    repo.run_ok(*DAY)
    assert repo.query("SELECT path FROM s.p") == [(str(repo.database),)]
    repo.python("s.p", "print(1)\n", secrets=[{"key": "db", "inject_as": "a=b"}])
    refused = repo.run(*DAY)
    assert refused.returncode == 2 and "secret inject_as 'a=b' cannot name an environment variable" in refused.stderr


def test_timeout_bounds_the_whole_run_as_bruins(tmp_path):
    """commands/run.md (--timeout: "timeout for the entire pipeline run"): an asset started after others ran is
    stopped when the run's time is up, not after a full --timeout of its own."""
    repo = Repo(tmp_path / "repo")
    repo.python("s.first", "import time\ntime.sleep(1)\n", connection="db")
    repo.python("s.second", "import time\ntime.sleep(60)\n", connection="db", depends=["s.first"])
    ran = repo.run(*DAY, "--timeout", "3")
    assert ran.returncode == 1
    second = next(a for a in repo.records()[-1]["assets"] if a["name"] == "s.second")
    assert second["error"] == "timed out after 3s (--timeout, the whole run's)", second
    # its own share of the run: what the run had left when it started, never a full 3 s of its own
    assert second["duration_seconds"] is None or second["duration_seconds"] < 3, second


def test_hooks_on_a_python_asset_are_refused_as_bruin_refuses_them(tmp_path, home):
    """docs/assets/definition-schema.md: "Hooks are currently supported for SQL assets", and Bruin's lint rule
    script-hooks-unsupported (critical) fails a Python asset that declares them. We ran the script and silently
    never ran its post hook, exit 0. It is now a validation problem naming the file: exit 2 by hand and for a
    backfill, nothing run. Pipeline default hooks still reach SQL assets only, so they never trip it."""
    repo = Repo(tmp_path / "repo")
    repo.write("p/pipeline.yml", yaml.safe_dump({"name": "p", "default_connections": {"duckdb": "db"},
                                                 "default": {"hooks": {"post": [{"query": "SELECT 1"}]}}}))  # fmt: skip
    repo.python("mid.script", "open('ran', 'w').write('yes')")
    repo.run_ok(*DAY)
    [ran] = list(repo.root.rglob("ran"))  # where the script writes
    repo.python("mid.script", "open('ran2', 'w').write('yes')", hooks={"post": [{"query": "DELETE FROM mid.x"}]})
    by_hand = repo.run(*DAY, env=home)
    assert by_hand.returncode == 2, by_hand.stdout + by_hand.stderr
    assert "hooks are supported only for SQL assets (as in Bruin): a Python asset's hooks would never run" in (
        by_hand.stderr
    )
    backfill = run_backfill("p", *DAY, "--reason", "r", "--no-progress", cwd=repo.root, env=home)
    assert backfill.returncode == 2 and "a Python asset's hooks would never run" in backfill.stderr
    assert not ran.with_name("ran2").exists()


LINT_CASES = {
    "duplicate-tags": (
        {"tags": ["daily", "Daily"]}, None, "tag 'Daily' is given twice (as Bruin reads tags, without case)",
    ),
    "duplicate-tags of a column": (
        {"columns": [{"name": "x", "type": "integer", "tags": ["pii", "PII"]}]}, None,
        "column 'x' gives a tag twice (as Bruin reads tags, without case)",
    ),
    "duplicate-column-names": (
        {"columns": [{"name": "x", "type": "integer"}, {"name": "X", "type": "integer"}]}, None,
        "column 'X' is declared twice (as Bruin reads names, without case)",
    ),
    "valid-asset-tier": ({"tier": 9}, None, "tier 9 must be between 1 and 5 (as in Bruin)"),
    "valid-timeout": ({"timeout": "500ms"}, None, "timeout '500ms' must be at least 1s (as in Bruin)"),
    "valid-pipeline-concurrency": ({}, {"concurrency": -1}, "concurrency -1 must be 1 or greater (as in Bruin)"),
    "valid-pipeline-max-active-steps": (
        {}, {"max_active_steps": 0}, "max_active_steps 0 must be a positive number (as in Bruin)",
    ),
    "default-hooks-applicable-types": (
        {}, {"default": {"hooks": {"applicable_type": ["python"], "post": [{"query": "SELECT 1"}]}}},
        "default hooks' applicable_type 'python' is not an SQL asset type: hooks reach SQL assets only (as in Bruin)",
    ),
    "valid-pipeline-schedule": ({}, {"schedule": "sometimes"}, "schedule 'sometimes' is not a cron expression of five"),
    "valid-pipeline-schedule, a day of week 7": (
        {}, {"schedule": "0 3 * * 7"}, "schedule '0 3 * * 7' has day of week '7': outside 0-6 (as Bruin reads it)",
    ),
    "valid-pipeline-notifications": (
        {}, {"notifications": {"slack": [{"channel": "#ops"}, {"channel": "ops"}]}},
        "notifications: slack channel 'ops' is given twice (as Bruin checks them)",
    ),
    "valid-asset-notifications": (
        {"notifications": {"email": [{"recipients": ["ops@example.com", " "]}]}}, None,
        "notifications: an email recipient is blank (as Bruin checks them)",
    ),
    "valid-asset-notifications of a column check": (
        {"columns": [{"name": "x", "type": "integer", "checks": [{"name": "not_null",
                                                                 "notifications": {"discord": [{}]}}]}]}, None,
        "check 'not_null' of column 'x': notifications: every discord entry needs a connection",
    ),
    "valid-column-metadata, a precision of 0": (
        {"columns": [{"name": "x", "type": "decimal", "precision": 0}]}, None,
        "precision 0 of column 'x' must be a positive whole number (as Bruin checks it)",
    ),
    "valid-column-metadata, a scale above the precision": (
        {"columns": [{"name": "x", "type": "decimal", "precision": 5, "scale": 6}]}, None,
        "scale 6 of column 'x' is above its precision 5 (as Bruin checks it)",
    ),
    "valid-materialization, a view's key": (
        {"materialization": {"type": "view", "incremental_key": "x"}}, None,
        "a view takes no incremental_key (as Bruin checks it)",
    ),
    "valid-materialization, a key a rebuild never reads": (
        {"materialization": {"type": "table", "strategy": "create+replace", "incremental_key": "x"}}, None,
        "incremental_key applies only to strategies delete+insert, time_interval, scd2_by_time, scd2_by_column in "
        "Bruin, whose linter refuses it beside create+replace",
    ),
}  # fmt: skip


@pytest.mark.parametrize("rule", list(LINT_CASES))
def test_what_bruin_s_critical_lint_rules_refuse_is_refused(tmp_path, home, rule):
    """pkg/lint/list.go: `bruin run` refuses a pipeline that fails any of its fast critical lint rules. Each of
    these ran here with exit 0: it is now a validation problem naming the file and the value, exit 2, nothing run.
    The values next to them that Bruin takes (tier 0 and 1–5, concurrency 0, a 1s timeout, distinct tags, a cron
    schedule, notifications with their targets, a view without a key, a key beside delete+insert) run."""
    header, pipeline, message = LINT_CASES[rule]
    repo = Repo(tmp_path / "repo")
    repo.write(
        "p/pipeline.yml", yaml.safe_dump({"name": "p", "default_connections": {"duckdb": "db"}, **(pipeline or {})})
    )
    repo.sql("mid.t", "SELECT 1 AS x", **{"materialization": {"type": "table"}, **header})
    refused = repo.run(*DAY, env=home)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert message in refused.stderr and "(nothing was run)" in refused.stderr
    assert not repo.database.exists()  # nothing ran: the warehouse was never opened


def test_the_values_bruin_s_lint_rules_take_run(tmp_path, home):
    """The neighbours of the values refused above, which Bruin runs: tier 0 (unset) and 5, concurrency 0 (one at
    a time), max_active_steps 1, a timeout of exactly 1s, tags that differ, SQL types in applicable_type, a cron
    schedule in a zone, notifications each with its target, a view without a key, a key beside delete+insert and
    beside a table's default strategy (Bruin reads no key there); beside append, where Bruin's linter refuses it
    and our guardrails read it, a warning says so."""
    repo = Repo(tmp_path / "repo")
    default = {"hooks": {"applicable_type": ["duckdb.sql", "bq.sql"], "post": [{"query": "SELECT 1"}]}}
    notifications = {"slack": [{"channel": "#ops"}, {"channel": "data"}], "email": [{"recipients": ["a@x.io"]}]}
    settings = {"concurrency": 0, "max_active_steps": 1, "default": default, "notifications": notifications,
                "schedule": "CRON_TZ=Europe/Paris */15 6-18 1,15 jan-mar MON-fri"}  # fmt: skip
    repo.write("p/pipeline.yml", yaml.safe_dump({"name": "p", "default_connections": {"duckdb": "db"}, **settings}))
    repo.sql("mid.t", "SELECT 1 AS x", materialization={"type": "table"}, tier=5, timeout="1s", tags=["a", "b"],
             columns=[{"name": "x", "type": "integer", "tags": ["p", "q"], "precision": 5, "scale": 5, "length": 1}],
             notifications=notifications)  # fmt: skip
    repo.sql("mid.u", "SELECT 1 AS y", materialization={"type": "table"}, tier=0)
    repo.sql("mid.v", "SELECT 1 AS y", materialization={"type": "view"})
    keyed = {"type": "table", "strategy": "delete+insert", "incremental_key": "d"}
    repo.sql("mid.k", "SELECT DATE '2024-01-03' AS d", materialization=keyed)
    repo.sql("mid.plain", "SELECT DATE '2024-01-03' AS d", materialization={"type": "table", "incremental_key": "d"})
    repo.sql("mid.log", "SELECT DATE '2024-01-03' AS d", materialization={"type": "table", "strategy": "append",
                                                                        "incremental_key": "d"})  # fmt: skip
    ran = repo.run_ok(*DAY, env=home)
    assert (  # our guardrails read the key beside append (which rows a partition owns): said, not refused
        "whose linter refuses it beside append: here it tells the guardrails which rows each partition owns"
    ) in ran.stdout + ran.stderr


@pytest.mark.parametrize("name", ["a.b.c.d", "mid..t", "mid.t."])
def test_a_duckdb_asset_name_bruin_cannot_place_is_refused(tmp_path, home, name):
    """Bruin's asset-name-component-count (critical): a DuckDB asset is table, schema.table or
    catalog.schema.table, no part empty. Each passed validation here (`a.b.c.d` then failed when its run started,
    exit 1); each is now a validation problem, exit 2, nothing run. A Python asset's name is not a table's."""
    repo = Repo(tmp_path / "repo")
    repo.sql(name, "SELECT 1 AS x", materialization={"type": "table"})
    refused = repo.run(*DAY, env=home)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert (
        f"asset name {name!r} must be table, schema.table or catalog.schema.table (as Bruin checks a DuckDB name)"
    ) in refused.stderr
    assert not repo.database.exists()


def test_duckdb_asset_names_of_one_to_three_parts_run(tmp_path, home):
    """The names Bruin takes for DuckDB: `t`, `mid.t`, and a Python asset named in four parts."""
    repo = Repo(tmp_path / "repo")
    repo.sql("t", "SELECT 1 AS x", materialization={"type": "table"})
    repo.sql("mid.u", "SELECT 1 AS x", materialization={"type": "table"})
    repo.python("a.b.c.d", "print('ran')")
    repo.run_ok(*DAY, env=home)


def test_a_yaml_asset_runs_the_file_its_run_names(tmp_path, home):
    """pkg/pipeline/yaml.go: a YAML asset's `run:` names the file that runs, joined to the YAML file's directory.
    `run: days.sql` was refused ("no SQL after its @bruin header") and a Python asset's YAML itself ran as Python
    (NameError, exit 1). Both now run their file: the table holds the run file's rows, the script prints, and a
    backfill of two days runs the same files."""
    repo = Repo(tmp_path / "repo")
    repo.write("p/assets/sql/days.sql", "SELECT DATE '{{ start_date }}' AS day, 7 AS v")
    repo.write("p/assets/sql/days.asset.yml", yaml.safe_dump({
        "name": "mid.days", "type": "duckdb.sql", "run": "days.sql",
        "materialization": {"type": "table", "strategy": "time_interval", "incremental_key": "day",
                            "time_granularity": "date"}}))  # fmt: skip
    repo.write("p/assets/job.py", "import os\nprint('job ran for', os.environ['BRUIN_START_DATE'])\n")
    repo.write("p/assets/job.asset.yml", yaml.safe_dump({"name": "mid.job", "type": "python", "run": "/job.py",
                                                         "depends": ["mid.days"]}))  # fmt: skip
    ran = repo.run_ok(*DAY, env=home)
    assert "job ran for 2024-01-01" in ran.stdout
    assert repo.query("SELECT day::VARCHAR, v FROM mid.days") == [("2024-01-01", 7)]
    two_days = ("--start-date", "2024-01-02", "--end-date", "2024-01-03")
    backfill = run_backfill("p", *two_days, "--reason", "r", "--no-progress", cwd=repo.root, env=home)
    assert backfill.returncode == 0, backfill.stdout + backfill.stderr
    assert repo.query("SELECT day::VARCHAR FROM mid.days ORDER BY day") == [
        ("2024-01-01",), ("2024-01-02",), ("2024-01-03",)
    ]  # fmt: skip


RUN_FILE_CASES = {
    "missing": ({"run": "nope.sql"}, None, "run file 'nope.sql' does not exist"),
    "empty": ({"run": "q.sql"}, "", "run file 'q.sql' is empty (as Bruin checks it)"),
    "a directory": ({"run": "sub"}, None, "run file 'sub' is a directory, not a file"),
    "executable": ({"run": "q.sql"}, "SELECT 1 AS x", "q.sql has execute permission, which Bruin refuses"),
    "not a string": ({"run": ["q.sql"]}, "SELECT 1 AS x", "run ['q.sql'] must name a file beside the asset"),
    "a Python asset without run": ({"type": "python"}, None, "a Python asset defined in YAML needs run: naming"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(RUN_FILE_CASES))
def test_a_run_file_bruin_would_not_run_is_refused(tmp_path, home, case):
    """Bruin's critical valid-executable-file wants a YAML asset's file to exist, be a file, have content and no
    execute permission; a Python asset in YAML without `run:` would run its YAML. Each is exit 2, nothing run."""
    fields, content, message = RUN_FILE_CASES[case]
    repo = Repo(tmp_path / "repo")
    (repo.root / "p" / "assets" / "sub").mkdir(parents=True)
    if content is not None:
        repo.write("p/assets/q.sql", content).chmod(0o755 if case == "executable" else 0o644)
    header = {"name": "mid.t", "type": "duckdb.sql", "materialization": {"type": "table"}, **fields}
    repo.write("p/assets/t.asset.yml", yaml.safe_dump(header))
    refused = repo.run(*DAY, env=home)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert message in refused.stderr
    assert not repo.database.exists()
