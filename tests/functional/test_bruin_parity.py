"""Bruin pipelines as Bruin runs them (issue 25): nothing Bruin would do differently passes with exit 0.
Each test names the Bruin documentation page it is built from."""

from __future__ import annotations

import json

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
