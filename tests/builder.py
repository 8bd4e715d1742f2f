"""Throwaway Bruin-format repositories for tests: write assets, run ``backfill run`` for real, query DuckDB."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import duckdb
import yaml

from tests.conftest import run_backfill

# Test pipelines backfill a week or a month of days: auto up to 31 intervals instead of the seed's one, so
# that tests whose subject is not the interval count run unattended (tests/functional/test_guardrails.py
# tests the default of 1 with its own .bruin.yml).
TEST_LIMITS: dict[str, Any] = {"guardrail_limits": {"auto_max_intervals": 31}}


# A Python asset body that says it started (the file LIVE_STARTED names) and then waits for the test's go (the file
# LIVE_GO names): work that runs for as long as a test needs it to, without a guessed duration.
WAITER = """import os, pathlib, time
pathlib.Path(os.environ["LIVE_STARTED"]).write_text("started")
while not os.path.exists(os.environ["LIVE_GO"]):
    time.sleep(0.02)  # the test's event (a file), not a guess at a duration
"""


class Repo:
    """A git-like repository with ``.bruin.yml`` and one pipeline ``p`` on DuckDB connection ``db``
    (``sandbox`` guardrails unless told otherwise: see tests/guard_flags.py)."""

    def __init__(
        self,
        root: Path,
        *,
        max_concurrent_assets: int | None = None,
        pipeline: dict | None = None,
        guardrails: str = "sandbox",
    ) -> None:
        self.root = root
        (root / ".git").mkdir(parents=True)
        connection: dict[str, Any] = {"name": "db", "path": "warehouse.duckdb"}
        if max_concurrent_assets is not None:
            connection["max_concurrent_assets"] = max_concurrent_assets
        environment: dict[str, Any] = {"guardrails": guardrails, "connections": {"duckdb": [connection]}}
        environment.update(TEST_LIMITS)
        self.write(".bruin.yml", yaml.safe_dump({"default_environment": "dev", "environments": {"dev": environment}}))
        self.pipeline_dir = root / "p"
        self.write("p/pipeline.yml", yaml.safe_dump(pipeline or {"name": "p", "default_connections": {"duckdb": "db"}}))
        self.database = root / "warehouse.duckdb"

    def write(self, relative: str, text: str) -> Path:
        path = self.root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return path

    def sql(self, name: str, body: str, **header: Any) -> Path:
        """An SQL asset ``assets/<name>.sql`` with ``name`` and ``type`` filled in."""
        header = {"name": name, "type": "duckdb.sql", **header}
        text = "/* @bruin\n" + yaml.safe_dump(header, sort_keys=False) + "@bruin */\n\n" + body + "\n"
        return self.write(f"p/assets/{name}.sql", text)

    def python(self, name: str, body: str, **header: Any) -> Path:
        header = {"name": name, "type": "python", **header}
        text = '"""@bruin\n' + yaml.safe_dump(header, sort_keys=False) + '@bruin"""\n\n' + body + "\n"
        return self.write(f"p/assets/{name.replace('.', '_')}.py", text)

    def run(self, *args: str, env: dict[str, str] | None = None, target: str = "p") -> subprocess.CompletedProcess[str]:
        return run_backfill("run", target, *args, cwd=self.root, env=env)

    def run_ok(self, *args: str, **kwargs: Any) -> subprocess.CompletedProcess[str]:
        result = self.run(*args, **kwargs)
        assert result.returncode == 0, result.stdout + result.stderr
        return result

    def run_json(self, *args: str, **kwargs: Any) -> tuple[int, dict]:
        result = self.run(*args, "--output", "json", **kwargs)
        assert result.stdout, result.stderr
        return result.returncode, json.loads(result.stdout)

    def query(self, sql: str) -> list[tuple]:
        with duckdb.connect(str(self.database), read_only=True) as connection:
            return connection.execute(sql).fetchall()

    def execute(self, *statements: str) -> None:
        """Change the warehouse directly (a source that moved on between two runs)."""
        with duckdb.connect(str(self.database)) as connection:
            for statement in statements:
                connection.execute(statement)

    def records(self) -> list[dict]:
        """Run records, oldest first."""
        records = [json.loads(p.read_text()) for p in (self.root / "logs" / "runs").glob("*.json")]
        return sorted(records, key=lambda record: record["started_at"])
