"""Every template variable, Bruin's date filters, strict undefined names, and interval modifiers."""

from __future__ import annotations

import pytest

from tests.builder import Repo
from tests.conftest import run_backfill

PIPELINE = {
    "name": "p",
    "default_connections": {"duckdb": "db"},
    "variables": {"region": {"type": "string", "default": "us"}},
}


@pytest.fixture
def repo(tmp_path) -> Repo:
    return Repo(tmp_path / "repo", pipeline=PIPELINE)


def test_every_template_variable(repo):
    """start/end date, datetime and timestamp (zone offset, microseconds), run_id, this, var, pipeline, full_refresh."""
    names = [
        "start_date",
        "end_date",
        "start_datetime",
        "end_datetime",
        "start_timestamp",
        "end_timestamp",
        "run_id",
        "this",
        "pipeline",
        "full_refresh",
    ]
    body = "SELECT " + ", ".join(f"'{{{{ {n} }}}}' AS {n}" for n in names) + ", '{{ var.region }}' AS region"
    repo.sql("s.vars", body, materialization={"type": "table"})
    repo.run_ok(
        "--start-date",
        "2024-03-10T01:30:00.25",
        "--end-date",
        "2024-03-10T05:00:00",
        "--timezone",
        "America/New_York",
        "--run-id",
        "test-run",
        "--var",
        'region="eu"',
    )
    row = repo.query("SELECT * FROM s.vars")[0]
    assert dict(zip([*names, "region"], row, strict=True)) == {
        "start_date": "2024-03-10",
        "end_date": "2024-03-10",
        "start_datetime": "2024-03-10T01:30:00",
        "end_datetime": "2024-03-10T05:00:00",
        "start_timestamp": "2024-03-10T01:30:00.250000-05:00",
        "end_timestamp": "2024-03-10T05:00:00.000000-04:00",
        "run_id": "test-run",
        "this": "s.vars",
        "pipeline": "p",
        "full_refresh": "False",
        "region": "eu",
    }


def test_date_only_end_is_the_whole_last_day(repo):
    """A date end is inclusive: the run ends at 23:59:59.999999 of that day."""
    repo.sql("s.w", "SELECT '{{ end_timestamp }}' AS e", materialization={"type": "table"})
    repo.run_ok("--start-date", "2024-01-01", "--end-date", "2024-01-31")
    assert repo.query("SELECT * FROM s.w") == [("2024-01-31T23:59:59.999999Z",)]


def test_date_filters(repo):
    """add_days, add_hours, date_add and date_format work on the date variables."""
    repo.sql(
        "s.f",
        "SELECT '{{ start_date | add_days(3) }}' AS a, '{{ start_datetime | add_hours(-1) }}' AS b, "
        "'{{ end_timestamp | date_format(\"%H:%M\") }}' AS c, '{{ start_date | date_add(-1) }}' AS d",
        materialization={"type": "table"},
    )
    repo.run_ok("--start-date", "2024-01-01", "--end-date", "2024-01-01")
    assert repo.query("SELECT * FROM s.f") == [("2024-01-04", "2023-12-31T23:00:00", "23:59", "2023-12-31")]


def test_undefined_name_fails_the_asset_naming_it(repo):
    """Templates are strict: an unknown name fails the asset with a clear message, nothing is written."""
    repo.sql("s.typo", "SELECT '{{ start_dat }}' AS x", materialization={"type": "table"})
    result = repo.run("--start-date", "2024-01-01", "--end-date", "2024-01-01")
    assert result.returncode == 1
    assert "'start_dat' is undefined" in result.stdout


def test_interval_modifiers_apply_only_when_asked(repo):
    """Modifiers shift start and end with --apply-interval-modifiers; otherwise a note says they were ignored."""
    repo.sql(
        "s.m",
        "SELECT '{{ start_timestamp }}' AS s, '{{ end_timestamp }}' AS e",
        materialization={"type": "table"},
        interval_modifiers={"start": "-2h", "end": "1d"},
    )
    plain = repo.run_ok("--start-date", "2024-01-10", "--end-date", "2024-01-10")
    assert "interval modifiers are ignored (pass --apply-interval-modifiers" in plain.stdout
    assert repo.query("SELECT * FROM s.m") == [("2024-01-10T00:00:00.000000Z", "2024-01-10T23:59:59.999999Z")]
    repo.run_ok("--start-date", "2024-01-10", "--end-date", "2024-01-10", "--apply-interval-modifiers")
    assert repo.query("SELECT * FROM s.m") == [("2024-01-09T22:00:00.000000Z", "2024-01-11T23:59:59.999999Z")]


def test_pipeline_default_modifiers_and_months(repo):
    """Pipeline-level default modifiers apply to assets without their own; M moves by calendar months."""
    (repo.pipeline_dir / "pipeline.yml").write_text(
        "name: p\ndefault_connections: {duckdb: db}\ndefault:\n  interval_modifiers: {start: -1M}\n"
    )
    repo.sql("s.m", "SELECT '{{ start_date }}' AS s", materialization={"type": "table"})
    repo.run_ok("--start-date", "2024-03-31", "--end-date", "2024-03-31", "--apply-interval-modifiers")
    assert repo.query("SELECT * FROM s.m") == [("2024-02-29",)]


UNSAFE = "template: access to attribute '__init__' of "


@pytest.mark.parametrize(
    ("where", "says"),
    [("query", UNSAFE), ("hook", UNSAFE), ("macro", UNSAFE), ("macro file", "macros/: access to attribute '__init__'")],
)  # fmt: skip
def test_a_template_never_reaches_python_s_internals_not_even_in_a_dry_run(repo, home, tmp_path, where, says):
    """`{{ cycler.__init__.__globals__.os.system(…) }}` ran a shell command when the pre-flight rendered the
    SQL, during a --dry-run (Bruin's gonja has no way into Go's internals). Templates are sandboxed: the dry run
    and the run by hand write nothing outside; the run fails the asset naming the unsafe attribute."""
    marker = tmp_path / "ran"
    escape = f"{{{{ cycler.__init__.__globals__.os.system('touch {marker}') }}}}"
    header: dict = {"materialization": {"type": "table"}}
    body = "SELECT 1 AS x"
    if where == "query":
        body = f"SELECT 1 AS x -- {escape}"
    elif where == "hook":
        header["hooks"] = {"pre": [{"query": f"SELECT 1 -- {escape}"}]}
    elif where == "macro":
        repo.write("p/macros/m.sql", f"{{% macro m() %}}{escape}{{% endmacro %}}")
        body = "SELECT 1 AS x -- {{ m() }}"
    else:  # outside any macro: it runs as the macros are loaded
        repo.write("p/macros/m.sql", f"{escape}{{% macro m() %}}1{{% endmacro %}}")
    repo.sql("s.t", body, **header)
    dry = run_backfill("p", "--start-date", "2024-01-01", "--end-date", "2024-01-01", "--dry-run", cwd=repo.root,
                       env=home)  # fmt: skip
    assert dry.returncode in (0, 3, 4), dry.stdout + dry.stderr
    assert not marker.exists()
    ran = repo.run("--start-date", "2024-01-01", "--end-date", "2024-01-01", env=home)
    assert ran.returncode == 1, ran.stdout + ran.stderr
    assert says in ran.stdout and "is unsafe" in ran.stdout, ran.stdout
    assert not marker.exists()
