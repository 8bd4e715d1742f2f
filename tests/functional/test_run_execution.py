"""How ``backfill run`` executes: limits, failures, Python and seed assets, records, timeouts, locks, inputs."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta

import pytest

from tests.backfills import max_overlap
from tests.builder import Repo
from tests.conftest import run_backfill

DAY = ("--start-date", "2024-01-01", "--end-date", "2024-01-01")
SLEEPER = """
import os, time
with open(os.environ["SPANS"], "a") as spans:
    start = time.time()
    time.sleep(0.4)
    spans.write(f"{start} {time.time()}\\n")
"""


def record_spans(record: dict) -> list[tuple[float, float]]:
    parse = datetime.fromisoformat
    return [(parse(a["started_at"]).timestamp(), parse(a["finished_at"]).timestamp()) for a in record["assets"]]


def test_workers_bound_concurrent_assets_as_observed_by_the_assets(tmp_path):
    """With --workers 2, six independent Python assets never run more than two at a time (and do run two)."""
    repo = Repo(tmp_path / "repo")
    for index in range(6):
        repo.python(f"py.sleep{index}", SLEEPER)
    spans_file = tmp_path / "spans.txt"
    repo.run_ok(*DAY, "--workers", "2", env={"SPANS": str(spans_file)})
    spans = [tuple(map(float, line.split())) for line in spans_file.read_text().splitlines()]
    assert len(spans) == 6
    assert max_overlap(spans) == 2


@pytest.mark.parametrize("limit", [1, 2])
def test_connection_limit_bounds_concurrent_assets_on_it(tmp_path, limit):
    """max_concurrent_assets caps the assets running at once on a connection, whatever --workers says."""
    repo = Repo(tmp_path / "repo", max_concurrent_assets=limit)
    for index in range(5):
        repo.sql(
            f"s.heavy{index}", "SELECT sum(hash(i)) AS h FROM range(60000000) t(i)", materialization={"type": "table"}
        )
    code, record = repo.run_json(*DAY, "--workers", "8")
    assert code == 0
    assert max_overlap(record_spans(record)) <= limit


def test_without_a_limit_assets_run_together(tmp_path):
    """The same heavy assets overlap when nothing limits them (so the limit test above means something)."""
    repo = Repo(tmp_path / "repo")
    for index in range(3):
        repo.sql(
            f"s.heavy{index}", "SELECT sum(hash(i)) AS h FROM range(60000000) t(i)", materialization={"type": "table"}
        )
    _, record = repo.run_json(*DAY, "--workers", "8")
    assert max_overlap(record_spans(record)) >= 2


def test_a_failed_asset_stops_only_its_downstream(tmp_path):
    """A failure skips its downstream (upstream_failed) while unrelated assets still run; exit 1."""
    repo = Repo(tmp_path / "repo")
    repo.sql("s.bad", "SELECT * FROM missing_table", materialization={"type": "table"})
    repo.sql("s.child", "SELECT * FROM s.bad", materialization={"type": "table"}, depends=["s.bad"])
    repo.sql("s.grandchild", "SELECT * FROM s.child", materialization={"type": "table"}, depends=["s.child"])
    repo.sql("s.other", "SELECT 1 AS x", materialization={"type": "table"})
    result = repo.run(*DAY)
    assert result.returncode == 1
    statuses = {a["name"]: a["status"] for a in repo.records()[-1]["assets"]}
    assert statuses == {
        "s.bad": "failed",
        "s.child": "upstream_failed",
        "s.grandchild": "upstream_failed",
        "s.other": "succeeded",
    }
    assert "Catalog Error: Table with name missing_table does not exist" in result.stdout
    assert repo.query("SELECT * FROM s.other") == [(1,)]


def test_python_asset_environment_output_and_duckdb(tmp_path):
    """A Python asset gets the BRUIN_* variables and its connection's DuckDB path; its output is the run's."""
    repo = Repo(
        tmp_path / "repo",
        pipeline={
            "name": "p",
            "default_connections": {"duckdb": "db"},
            "variables": {"n": {"type": "integer", "default": 3}},
        },
    )
    repo.python(
        "py.load",
        """
import json, os, duckdb
keys = ["BRUIN_START_DATE", "BRUIN_END_DATE", "BRUIN_START_DATETIME", "BRUIN_END_DATETIME",
        "BRUIN_START_TIMESTAMP", "BRUIN_END_TIMESTAMP", "BRUIN_RUN_ID", "BRUIN_VARS"]
print("hello from python", os.environ["BRUIN_START_DATE"])
with duckdb.connect(os.environ["BRUIN_DUCKDB_PATH"]) as con:
    con.execute("CREATE SCHEMA IF NOT EXISTS py")
    con.execute("CREATE OR REPLACE TABLE py.env (k VARCHAR, v VARCHAR)")
    con.executemany("INSERT INTO py.env VALUES (?, ?)", [(k, os.environ[k]) for k in keys])
""",
        connection="db",
    )
    repo.sql("s.after", "SELECT count(*) AS n FROM py.env", materialization={"type": "table"}, depends=["py.load"])
    result = repo.run_ok(
        "--start-date",
        "2024-02-01T00:00:00",
        "--end-date",
        "2024-02-02",
        "--run-id",
        "r-1",
        "--timezone",
        "Europe/London",
        "--var",
        "n=5",
    )
    assert "[py.load] hello from python 2024-02-01" in result.stdout
    assert dict(repo.query("SELECT * FROM py.env")) == {
        "BRUIN_START_DATE": "2024-02-01",
        "BRUIN_END_DATE": "2024-02-02",
        "BRUIN_START_DATETIME": "2024-02-01T00:00:00",
        "BRUIN_END_DATETIME": "2024-02-02T23:59:59",
        "BRUIN_START_TIMESTAMP": "2024-02-01T00:00:00.000000+00:00",  # London in winter: +00:00, not Z
        "BRUIN_END_TIMESTAMP": "2024-02-02T23:59:59.999999+00:00",
        "BRUIN_RUN_ID": "r-1",
        "BRUIN_VARS": '{"n":5}',
    }
    assert repo.query("SELECT * FROM s.after") == [(8,)]


def test_failing_python_asset(tmp_path):
    """A Python asset exiting non-zero fails, with its last output line as the error."""
    repo = Repo(tmp_path / "repo")
    repo.python("py.fail", "import sys\nprint('about to fail')\nsys.exit(3)")
    result = repo.run(*DAY)
    assert result.returncode == 1
    assert "error: python exited with code 3: about to fail" in result.stdout


def test_seed_asset_loads_csv_with_declared_types_and_checks(tmp_path):
    """A duckdb.seed asset loads its CSV (path relative to the asset file) and runs its checks."""
    repo = Repo(tmp_path / "repo")
    repo.write("p/assets/seeds/prices.csv", "id,price,label\n1,2.50,a\n2,3,b\n")
    repo.write(
        "p/assets/seeds/prices.asset.yml",
        """
name: seed.prices
type: duckdb.seed
parameters:
  path: prices.csv
columns:
  - name: price
    type: decimal(10,2)
    checks: [{name: positive}]
  - name: id
    checks: [{name: unique}]
""",
    )
    code, record = repo.run_json(*DAY)
    assert code == 0 and record["assets"][0]["rows_written"] == 2
    assert [c["name"] for c in record["assets"][0]["checks"]] == ["positive(price)", "unique(id)"]
    assert repo.query("SELECT id, CAST(price AS VARCHAR), label FROM seed.prices ORDER BY id") == [
        (1, "2.50", "a"),
        (2, "3.00", "b"),
    ]


def test_run_record_holds_interval_options_assets_and_backfill_fields(tmp_path):
    """logs/runs/<run-id>.json records what ran, when, with which options, and the backfill it belongs to."""
    repo = Repo(tmp_path / "repo")
    repo.sql(
        "s.t",
        "SELECT 1 AS x UNION ALL SELECT 2",
        materialization={"type": "table"},
        columns=[{"name": "x", "checks": [{"name": "unique"}]}],
    )
    result = repo.run_ok(
        "--start-date",
        "2024-01-01T00:00:00Z",
        "--end-date",
        "2024-01-01T05:59:59.999999Z",
        "--run-id",
        "r-7",
        "--backfill-id",
        "bf-1",
        "--partition-id",
        "p-1",
        "--backfill-total",
        "40",
        "--workers",
        "3",
        env={"BACKFILL_ID": "bf-1", "BACKFILL_RUN_ID": "r-7", "BACKFILL_PARTITION_ID": "p-1"},
    )  # as a backfill starts a partition's run
    path = repo.root / "logs" / "runs" / "r-7.json"
    assert str(path) in result.stdout
    record = json.loads(path.read_text())
    assert record["run_id"] == "r-7" and record["status"] == "succeeded"
    assert record["interval"] == {
        "start": "2024-01-01T00:00:00.000000Z",
        "end": "2024-01-01T05:59:59.999999Z",
        "timezone": "UTC",
        "end_inclusive": True,
    }
    assert record["backfill_id"] == "bf-1" and record["backfill_total"] == 40
    assert record["options"]["workers"] == 3 and record["environment"] == "dev"
    asset = record["assets"][0]
    assert asset["rows_written"] == 2 and asset["checks"][0]["passed"] is True
    assert asset["started_at"] <= asset["finished_at"]


def test_timeouts_stop_sql_and_python_assets(tmp_path):
    """--timeout bounds the whole run, as Bruin's: the asset running when it passes (a DuckDB query or a Python
    process) is stopped and fails, and the one not started yet fails without starting."""
    repo = Repo(tmp_path / "repo")
    repo.sql("s.slow", "SELECT sum(hash(i)) FROM range(100000000000) t(i)", materialization={"type": "table"})
    repo.python("py.slow", "import time\ntime.sleep(60)")
    started = time.monotonic()
    result = repo.run(*DAY, "--timeout", "500ms")
    assert time.monotonic() - started < 30
    assert result.returncode == 1
    assert result.stdout.count("error: timed out after 500ms (--timeout, the whole run's)") == 2
    assert repo.query("SELECT count(*) FROM information_schema.tables WHERE table_name = 'slow'") == [(0,)]


def test_locked_database_is_a_clear_error_and_nothing_runs(tmp_path):
    """A DuckDB file held by another process: exit 1, the file is named, no asset runs."""
    repo = Repo(tmp_path / "repo")
    repo.sql("s.t", "SELECT 1 AS x", materialization={"type": "table"})
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import duckdb, time; c = duckdb.connect({str(repo.database)!r});"
            "print('ready', flush=True); time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "ready"
        result = repo.run(*DAY)
    finally:
        holder.kill()
        holder.wait()
    assert result.returncode == 1
    assert f"DuckDB file {repo.database} (connection 'db') is locked by process {holder.pid}" in result.stdout
    assert repo.records()[-1]["assets"] == []
    assert repo.query("SELECT count(*) FROM information_schema.tables WHERE table_name = 't'") == [(0,)]


@pytest.mark.parametrize(
    ("why", "path", "reason"),
    [
        ("not a DuckDB file", "notes.txt", "not a valid DuckDB database file"),
        ("a directory", "adir", "Is a directory"),
        ("a name too long for a file", "w" * 300 + ".duckdb", "File name too long"),
        ("under a file", "notes.txt/w.duckdb", "File exists"),  # its directory is a file
    ],
    ids=["not-duckdb", "directory", "too-long", "under-a-file"],
)
def test_a_database_file_that_cannot_be_opened_fails_the_run_in_one_line(tmp_path, why, path, reason):
    """A connection whose file DuckDB cannot open (not a database, a directory, too long a name, under a file): the
    run fails naming the file and DuckDB's reason,
    exit 1, its record written, no asset run and no traceback (it was a traceback); a backfill stops on it."""
    repo = Repo(tmp_path / "repo")
    (repo.root / "notes.txt").write_text("some notes\n")
    (repo.root / "adir").mkdir()
    text = (repo.root / ".bruin.yml").read_text().replace("path: warehouse.duckdb", f"path: {path}")
    repo.write(".bruin.yml", text)
    repo.sql("s.t", "SELECT 1 AS x", materialization={"type": "table"})
    result = repo.run(*DAY)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    shown = (repo.root / path).resolve()
    line = next(line for line in result.stdout.splitlines() if "cannot be opened" in line)
    assert f"DuckDB file {shown} (connection 'db') cannot be opened" in line and reason in line, line
    assert repo.records()[-1]["assets"] == []
    assert (repo.root / "notes.txt").read_text() == "some notes\n"
    backfill = run_backfill(str(repo.pipeline_dir), *DAY, "--reason", "r", "--no-progress", cwd=repo.root)
    assert backfill.returncode == 1 and "Traceback" not in backfill.stderr, backfill.stdout + backfill.stderr


def test_environment_inputs_bruin_vars_config_file_and_annotations(tmp_path):
    """BRUIN_VARS sets variables, BRUIN_CONFIG_FILE picks the config, BRUIN_QUERY_ANNOTATIONS comments queries."""
    repo = Repo(
        tmp_path / "repo",
        pipeline={
            "name": "p",
            "default_connections": {"duckdb": "db"},
            "variables": {"v": {"type": "integer", "default": 1}},
        },
    )
    repo.sql(
        "s.t",
        "SELECT {{ var.v }} AS v",
        materialization={"type": "table"},
        hooks={
            "pre": [{"query": "CALL enable_logging('QueryLog')"}],
            "post": [
                {"query": "CREATE OR REPLACE TABLE s.log AS SELECT message FROM duckdb_logs WHERE type = 'QueryLog'"}
            ],
        },
    )
    (repo.root / ".bruin.yml").rename(repo.root / "elsewhere.yml")
    result = repo.run(
        *DAY,
        env={
            "BRUIN_VARS": '{"v": 9}',
            "BRUIN_CONFIG_FILE": "elsewhere.yml",
            "BRUIN_QUERY_ANNOTATIONS": '{"team": "finance"}',
        },
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert repo.query("SELECT * FROM s.t") == [(9,)]
    logged = [m for (m,) in repo.query("SELECT message FROM s.log") if "CREATE OR REPLACE TABLE" in m]
    assert logged and all(m.startswith('/* {"team":"finance"} */') for m in logged)


def test_full_refresh_drops_and_rebuilds_incremental_tables(tmp_path):
    """--full-refresh rebuilds an append table from scratch; full_refresh is true in templates."""
    repo = Repo(tmp_path / "repo")
    repo.sql(
        "s.t",
        "SELECT '{{ full_refresh }}' AS fr, '{{ start_date }}' AS d",
        materialization={"type": "table", "strategy": "append"},
    )
    repo.run_ok("--start-date", "2024-01-01", "--end-date", "2024-01-01")
    repo.run_ok("--start-date", "2024-01-02", "--end-date", "2024-01-02")
    repo.run_ok("--start-date", "2024-01-03", "--end-date", "2024-01-03", "--full-refresh", "--reason", "rebuild")
    assert repo.query("SELECT * FROM s.t") == [("True", "2024-01-03")]


def test_default_window_is_yesterday(tmp_path):
    """Without dates, a run covers yesterday in the zone, whole day."""
    repo = Repo(tmp_path / "repo")
    repo.sql(
        "s.t", "SELECT '{{ start_timestamp }}' AS s, '{{ end_timestamp }}' AS e", materialization={"type": "table"}
    )
    repo.run_ok()
    yesterday = (datetime.now(UTC) - timedelta(days=1)).date().isoformat()
    assert repo.query("SELECT * FROM s.t") == [(f"{yesterday}T00:00:00.000000Z", f"{yesterday}T23:59:59.999999Z")]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--var", "nope=1"), "--var 'nope' is not declared in"),
        (("--var", 'v="text"'), '--var v="text" is not of the declared type integer'),
        (("--var", "v=broken"), "the value 'broken' is not JSON"),
        (("--selector", "tag:none"), "--selector 'tag:none' selects no asset"),
        (("--start-date", "2024-01-02", "--end-date", "2024-01-01"), "is before --start-date"),
        (("--start-date", "2024-01-02"), "give both --start-date and --end-date"),
        (("--timeout", "soon"), "--timeout 'soon' is not a duration"),
        (("--environment", "prod"), "environment 'prod' is not in"),
    ],
)
def test_bad_run_input_is_exit_2_with_one_line(tmp_path, args, message):
    """Bad flags for backfill run: exit 2, one line naming the value, nothing executed."""
    repo = Repo(
        tmp_path / "repo",
        pipeline={
            "name": "p",
            "default_connections": {"duckdb": "db"},
            "variables": {"v": {"type": "integer", "default": 1}},
        },
    )
    repo.sql("s.t", "SELECT 1 AS x", materialization={"type": "table"})
    result = repo.run(*args)
    assert result.returncode == 2
    assert len(result.stderr.splitlines()) == 1 and message in result.stderr, result.stderr
    assert not repo.database.exists()


def test_a_configuration_given_as_bruin_config_file_content_is_refused_not_ignored(tmp_path, home):
    """Bruin reads BRUIN_CONFIG_FILE_CONTENT instead of .bruin.yml: set to a configuration whose warehouse is
    other.duckdb, `backfill run` wrote warehouse.duckdb (the file's) with exit 0. A run by hand and a backfill are
    now refused (exit 2, one line naming the variable and the way on), no warehouse made; without a .bruin.yml the
    line says the variable is not read."""
    repo = Repo(tmp_path / "repo")
    repo.sql("s.t", "SELECT 1 AS v", materialization={"type": "table"})
    content = (repo.root / ".bruin.yml").read_text().replace("warehouse.duckdb", "other.duckdb")
    env = {**home, "BRUIN_CONFIG_FILE_CONTENT": content}
    by_hand = repo.run(*DAY, env=env)
    backfill = run_backfill("p", *DAY, "--reason", "r", cwd=repo.root, env=env)
    for result in (by_hand, backfill):
        assert result.returncode == 2, result.stdout + result.stderr
        assert result.stderr == (
            f"backfill: error: BRUIN_CONFIG_FILE_CONTENT is set: Bruin reads its configuration from it instead of "
            f"{repo.root / '.bruin.yml'}, which backfill does not: write it to a file and pass --config-file FILE, or "
            "unset it\n"
        )
    assert sorted(p.name for p in repo.root.glob("*.duckdb")) == []
    (repo.root / ".bruin.yml").unlink()
    missing = repo.run(*DAY, env=env)
    assert missing.returncode == 2 and missing.stderr.strip().endswith(
        "(BRUIN_CONFIG_FILE_CONTENT is not read: write it to that file)"
    ), missing.stderr
