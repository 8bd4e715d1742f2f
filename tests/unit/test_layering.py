"""House rules enforced in CI: the engine stays UI-free, and the code is ruff-clean."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FORBIDDEN = ("textual", "rich", "tui")


def _tool(name: str) -> list[str]:
    local = Path(sys.executable).with_name(name)
    return [str(local)] if local.exists() else [shutil.which(name) or name]


def test_engine_modules_import_no_ui():
    """No module under engine/ imports textual, rich or tui, at any depth of the file."""
    offenders = []
    for path in sorted((ROOT / "engine").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            offenders += [f"{path.relative_to(ROOT)}:{node.lineno} {n}" for n in names if n.split(".")[0] in FORBIDDEN]
    assert offenders == []


def test_import_linter_contracts_hold():
    """Every import-linter contract in pyproject.toml is kept: no UI in the engine, layers only downward, no cycles."""
    result = subprocess.run([*_tool("lint-imports"), "--no-cache"], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "5 kept, 0 broken" in result.stdout


def test_ruff_is_clean():
    """ruff check reports nothing."""
    result = subprocess.run([*_tool("ruff"), "check", "."], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def _loaded_by(cwd: Path, argv: list[str], prefixes: tuple[str, ...]) -> tuple[str, list[str]]:
    """Run ``backfill ARGV`` in a fresh interpreter: what it printed, and the modules it imported under
    ``prefixes``."""
    script = (
        f"import sys; from tui.cli.main import main; main({argv!r}); "
        f"print('LOADED', *sorted(m for m in sys.modules if m.startswith({prefixes!r})))"
    )
    result = subprocess.run([sys.executable, "-c", script], cwd=cwd, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    printed, loaded = result.stdout.rsplit("LOADED", 1)
    return printed, loaded.split()


def test_backfill_list_loads_neither_the_executor_nor_a_launcher(tmp_path):
    """`backfill list` of a saved backfill reads one summary per backfill: it imports no executor, launcher,
    guardrails, template engine, DuckDB or Textual (each costs its start-up time, which `list` is measured by)."""
    from tests.saved_backfills import saved_command_backfill

    (tmp_path / ".git").mkdir()
    saved = saved_command_backfill(tmp_path, end="2024-01-03")
    heavy = (
        "engine.execute",
        "engine.guardrails",
        "engine.interventions",
        "jinja2",
        "duckdb",
        "textual",
        "distributed",
    )
    listed, loaded = _loaded_by(tmp_path, ["list", "--state-dir", "states"], heavy)
    assert saved.store.id in listed and loaded == []


def test_a_command_target_s_invocation_loads_no_template_engine_yaml_pendulum_or_duckdb(tmp_path):
    """Planning and judging a backfill of a command (`--dry-run`, which runs everything up to the first child)
    imports neither jinja2 nor PyYAML nor pendulum nor DuckDB: no pipeline is read, and each costs start-up time,
    which the dashboard's first frame is measured by."""
    (tmp_path / ".git").mkdir()
    argv = ["--command", "true", "--start-date", "2024-01-01", "--end-date", "2024-01-03", "--reason", "test",
            "--dry-run", "--output", "json", "--state-dir", "states"]  # fmt: skip
    planned, loaded = _loaded_by(tmp_path, argv, ("jinja2", "yaml", "pendulum", "duckdb"))
    assert '"partitions"' in planned and loaded == []


PIPELINE_ONLY = (
    "engine.pipeline.assets",
    "engine.pipeline.columns",
    "engine.pipeline.config",
    "engine.pipeline.duckdb_pool",
    "engine.pipeline.loading",
    "engine.pipeline.materialization",
    "engine.pipeline.sql_writes",
    "engine.pipeline.templating",
    "engine.pipeline.validation",
    "engine.guardrails.asset_risk",
    "engine.guardrails.table_snapshot",
    "engine.guardrails.warehouse",
    "engine.interventions.apply",
)


def test_a_command_backfill_starts_its_executor_without_loading_a_pipeline_module(tmp_path):
    """By the time a backfill of a command starts its executor (planned, judged, saved: what comes before the
    dashboard's first frame), it has imported none of the modules that read a pipeline, its SQL or its warehouse,
    nor the interventions a --continue reopens with: each costs start-up time (issue 28, item 5)."""
    (tmp_path / ".git").mkdir()
    argv = ["--command", "true", "--start-date", "2024-01-01", "--end-date", "2024-01-03", "--reason", "test",
            "--guardrails", "sandbox", "--no-progress", "--state-dir", "states"]  # fmt: skip
    script = (
        "import sys\n"
        "from engine.execute.executor import Executor\n"
        "run = Executor.run\n"
        "def first_run(self):\n"
        f"    print('LOADED', *sorted(m for m in sys.modules if m in {PIPELINE_ONLY!r}), flush=True)\n"
        "    return run(self)\n"
        "Executor.run = first_run\n"
        "from tui.cli.main import main\n"
        f"sys.exit(main({argv!r}))\n"
    )
    result = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    [loaded] = [line.split()[1:] for line in result.stdout.splitlines() if line.startswith("LOADED")]
    assert "3 succeeded" in result.stdout and loaded == []


def test_the_dashboard_of_a_command_backfill_draws_without_loading_a_pipeline_module(tmp_path):
    """The dashboard of a running command backfill, mounted and drawn (its app, screens and widgets, the pause it
    reads from the control file, a partition's row changes), has imported none of the modules that read a
    pipeline, its SQL or its warehouse, nor the request applier: all of it comes before the first frame."""
    script = (
        "import asyncio, sys\n"
        "from pathlib import Path\n"
        "from tests.tui.live import start_live\n"
        "live = start_live(Path(sys.argv[1]), 'sleep 30', '2024-01-01', '2024-01-03', exit_when_succeeded=False)\n"
        "async def drawn():\n"
        "    async with live.app.run_test(size=(100, 30)) as pilot:\n"
        "        await pilot.pause()\n"
        "        assert '2024-01-01' in live.row_text(0), live.row_text(0)\n"
        f"        print('LOADED', *sorted(m for m in sys.modules if m in {PIPELINE_ONLY!r}), flush=True)\n"
        "try:\n"
        "    asyncio.run(drawn())\n"
        "finally:\n"
        "    live.finish()\n"
    )
    result = subprocess.run([sys.executable, "-c", script, str(tmp_path)], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    [loaded] = [line.split()[1:] for line in result.stdout.splitlines() if line.startswith("LOADED")]
    assert loaded == []


def test_a_run_of_sql_assets_loads_nothing_a_python_asset_needs(tmp_path):
    """`backfill run` of a pipeline without Python assets (what each partition's child does) imports neither the
    script's process handling nor psutil: 20 ms of a child's start-up that only a Python asset needs."""
    from tests.builder import Repo

    repo = Repo(tmp_path / "repo")
    repo.sql("one", "SELECT 1 AS x")
    argv = ["run", "p", "--start-date", "2024-01-01", "--end-date", "2024-01-01"]
    ran, loaded = _loaded_by(repo.root, argv, ("engine.pipeline.script_process", "psutil"))
    assert "succeeded" in ran and loaded == []


def test_a_new_command_backfill_runs_to_its_end_without_loading_psutil(tmp_path):
    """A new backfill of a command, its children started, identified, reaped and their groups searched, imports
    no psutil: the boot time and the process listing come from /proc, as psutil reads them on Linux. Its 9 ms of
    import fell in the first launch, on the way to the dashboard's first frame (issue 28, item 5)."""
    (tmp_path / ".git").mkdir()
    argv = ["--command", "true", "--start-date", "2024-01-01", "--end-date", "2024-01-09", "--max-parallel", "4",
            "--reason", "test", "--guardrails", "sandbox", "--no-progress", "--state-dir", "states"]  # fmt: skip
    ran, loaded = _loaded_by(tmp_path, argv, ("psutil",))
    assert "9 succeeded" in ran and loaded == []
