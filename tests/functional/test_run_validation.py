"""Validation before anything runs: every problem listed with its file and line, exit 2, nothing executed."""

from __future__ import annotations

from tests.builder import Repo

DAY = ("--start-date", "2024-01-01", "--end-date", "2024-01-01")


def problems_of(repo: Repo) -> list[str]:
    result = repo.run(*DAY)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    assert not repo.database.exists(), "nothing may run when validation fails"
    return result.stderr.splitlines()


def test_every_problem_is_listed_with_file_and_line(tmp_path):
    """Unknown type, missing dependency, duplicate name and a cycle are all reported together, and an unknown
    field among them as the warning Bruin's linter gives (never an error on its own)."""
    repo = Repo(tmp_path / "repo")
    a = repo.write("p/assets/a.sql", "/* @bruin\nname: s.a\ntype: snowflake.sql\n@bruin */\nselect 1\n")
    b = repo.write("p/assets/b.sql", "/* @bruin\nname: s.b\nmaterialisation:\n  type: table\n@bruin */\nselect 1\n")
    c = repo.write("p/assets/c.sql", "/* @bruin\nname: s.c\ndepends:\n  - s.nowhere\n@bruin */\nselect 1\n")
    d = repo.write("p/assets/d.sql", "/* @bruin\nname: s.c\n@bruin */\nselect 1\n")
    e = repo.write("p/assets/e.sql", "/* @bruin\nname: s.e\ndepends: [s.f]\n@bruin */\nselect 1\n")
    repo.write("p/assets/f.sql", "/* @bruin\nname: s.f\ndepends: [s.e]\n@bruin */\nselect 1\n")
    lines = problems_of(repo)
    assert lines[0] == "backfill: error: 4 problems in pipeline 'p' (nothing was run):"
    assert (
        f"  {a}:3: unknown asset type 'snowflake.sql': Bruin defines no such type (this runner runs duckdb.sql, "
        "duckdb.seed, python, duckdb.source, empty)" in lines
    )
    assert f"  warning: {b}:3: unknown field 'materialisation' (ignored)" in lines
    assert f"  {c}:4: dependency 's.nowhere' is not an asset of this pipeline" in lines
    assert f"  {d}:1: duplicate asset name 's.c' (also defined in {c})" in lines
    assert f"  {e}:3: dependency cycle: s.e -> s.f -> s.e" in lines


def test_bad_yaml_names_the_line_in_the_file(tmp_path):
    """A YAML error inside a header is reported at its line in the asset file (not the header)."""
    repo = Repo(tmp_path / "repo")
    path = repo.write("p/assets/a.sql", "-- a comment\n/* @bruin\nname: s.a\ntags: [one\n@bruin */\nselect 1\n")
    lines = problems_of(repo)
    assert any(line.startswith(f"  {path}:5: invalid YAML") for line in lines), lines


def test_materialization_and_check_problems(tmp_path):
    """Strategy requirements, unknown checks, check values and seed files are validated with lines."""
    repo = Repo(tmp_path / "repo")
    merge = repo.write(
        "p/assets/m.sql",
        "/* @bruin\nname: s.m\nmaterialization:\n  type: table\n  strategy: merge\n@bruin */\nselect 1\n",
    )
    interval = repo.write(
        "p/assets/t.sql",
        "/* @bruin\nname: s.t\nmaterialization:\n  type: table\n"
        "  strategy: time_interval\n  incremental_key: d\n@bruin */\nselect 1\n",
    )
    checks = repo.write(
        "p/assets/c.sql",
        "/* @bruin\nname: s.c\ncolumns:\n  - name: x\n    checks:\n"
        "      - name: is_even\n      - name: min\n@bruin */\nselect 1\n",
    )
    seed = repo.write("p/assets/s.asset.yml", "name: s.s\ntype: duckdb.seed\nparameters:\n  path: gone.csv\n")
    lines = problems_of(repo)
    assert f"  {merge}:5: strategy merge needs columns marked primary_key: true" in lines
    assert f"  {interval}:5: strategy time_interval needs time_granularity: date or timestamp" in lines
    assert any(line.startswith(f"  {checks}:6: unknown check 'is_even'") for line in lines)
    assert f"  {checks}:7: check min needs a value" in lines
    assert f"  {seed}:4: seed file 'gone.csv' does not exist" in lines


def test_pipeline_and_connection_problems(tmp_path):
    """pipeline.yml fields, variable declarations and undefined connections are reported with lines."""
    repo = Repo(tmp_path / "repo")
    pipeline = repo.write("p/pipeline.yml", "name: p\nschedul: daily\nvariables:\n  n:\n    type: integer\n")
    asset = repo.write("p/assets/a.sql", "/* @bruin\nname: s.a\nconnection: elsewhere\n@bruin */\nselect 1\n")
    lines = problems_of(repo)
    assert f"  warning: {pipeline}:2: unknown field 'schedul' (ignored)" in lines
    assert f"  {pipeline}:4: variable 'n' needs a default" in lines
    repo.write("p/pipeline.yml", "name: p\n")
    lines = problems_of(repo)
    assert any(
        line.startswith(f"  {asset}:1: connection 'elsewhere' is not defined in environment 'dev'") for line in lines
    ), lines


def test_a_field_of_the_wrong_kind_is_a_problem_with_its_line_not_a_crash(tmp_path):
    """Tags that are a number or a string, a variable's type (its items' too) or an asset's type that is a list or a
    mapping, a variable's enum that is no list or bound that is no number, and a
    column's checks that are not a list are each listed with file and line (each was a TypeError traceback, or, for
    a string of tags, read as one tag per character, and an empty string as no tags); so is a seed's path too long
    to look up (an internal error)."""
    repo = Repo(tmp_path / "repo")
    pipeline = repo.write(
        "p/pipeline.yml",
        "name: p\ndefault_connections:\n  duckdb: db\ntags: 1.5\nvariables:\n  n:\n    type: [integer]\n"
        "    default: 1\n  names:\n    type: array\n    items:\n      type: {a: 1}\n    default: [x]\n"
        "  m:\n    type: integer\n    enum: 3\n    default: 3\n  k:\n    type: integer\n    minimum: low\n"
        "    default: 3\nvariants:\n  eu:\n    k: 4\n    names: [y]\n",
    )
    typed = repo.write("p/assets/a.sql", "/* @bruin\nname: s.a\ntype: {duckdb: sql}\n@bruin */\nselect 1\n")
    tagged = repo.write("p/assets/b.sql", "/* @bruin\nname: s.b\ntags: daily\n@bruin */\nselect 1\n")
    untagged = repo.write("p/assets/d.sql", "/* @bruin\nname: s.d\ntags: ''\n@bruin */\nselect 1\n")
    checked = repo.write(
        "p/assets/c.sql",
        "/* @bruin\nname: s.c\ncolumns:\n  - name: x\n    checks: true\n  - name: y\n    checks: not_null\n"
        "  - name: z\n    tags: key\n@bruin */\nselect 1 AS x, 2 AS y, 3 AS z\n",
    )
    seed_text = f"name: s.seed\ntype: duckdb.seed\nparameters:\n  path: {'x' * 300}.csv\n"
    seed = repo.write("p/assets/s.asset.yml", seed_text)
    lines = problems_of(repo)
    assert f"  {pipeline}:4: tags must be a list of strings" in lines, lines
    assert f"  {pipeline}:6: variable 'n' has unknown type ['integer']" in lines, lines
    assert f"  {pipeline}:9: variable 'names' declares items whose declaration has unknown type {{'a': 1}}" in lines
    assert f"  {pipeline}:14: variable 'm' declares enum 3, which is not a list" in lines, lines
    assert f"  {pipeline}:18: variable 'k' declares minimum \"low\", which is not a number" in lines, lines
    unknown = (
        f"  {typed}:3: unknown asset type {{'duckdb': 'sql'}}: Bruin defines no such type (this runner runs "
        "duckdb.sql, duckdb.seed, python, duckdb.source, empty)"
    )
    assert unknown in lines, lines
    assert f"  {tagged}:3: tags must be a list of strings" in lines, lines
    assert f"  {untagged}:3: tags must be a list of strings" in lines, lines
    assert f"  {checked}:5: the checks of column 'x' must be a list" in lines, lines
    assert f"  {checked}:7: the checks of column 'y' must be a list" in lines, lines
    assert f"  {checked}:9: the tags of column 'z' must be a list of strings" in lines, lines
    assert f"  {seed}:4: seed file '{'x' * 77}...' cannot be looked up (File name too long)" in lines, lines
