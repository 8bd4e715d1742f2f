"""``--dry-run --preview``: the first partition run for real, into a scratch copy, and what it would change.

The pipeline directory and ``.bruin.yml`` are copied into a scratch repository, every DuckDB file of the
environment into scratch files (the configuration copy points at them), and the first partition runs there as a
child ``backfill run`` — its run record, logs and writes all stay in the scratch directory, which is removed
after. Then each table the selected assets write is compared, inside the partition's window (whole, for a table
rebuilt whole), between the scratch copy (after) and the real file attached read-only (before): the same diff as
``backfill diff``. The real warehouse is only ever read. See docs/diff.md.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from engine.base.errors import BadInput
from engine.dates.formatting import InstantFormatter
from engine.dates.plan import Interval
from engine.execute.children import backfill_program
from engine.guardrails.facts import Facts
from engine.guardrails.partition_diff import TableDiff, diff_table
from engine.pipeline.asset_types import AssetKind
from engine.pipeline.materialization import Database, quote_name, window_predicate
from engine.pipeline.options import RUN_OPTIONS, RunOptions
from engine.pipeline.row_changes import SNAPSHOT_ALIAS, attach_snapshot, windowed
from engine.pipeline.templating import Window
from engine.spec.backfill_spec import Planned

PREVIEW_TIMEOUT = 3600.0  # seconds: a preview is one partition; an hour without an end is a hang
LOG_TAIL = 20  # lines of the preview run's output kept to show when it failed


@dataclass
class Preview:
    interval: Interval
    exit_code: int
    seconds: float
    diffs: list[TableDiff] = field(default_factory=list)
    output: list[str] = field(default_factory=list)  # the run's last lines (shown when it failed)
    not_run: dict[str, str] = field(default_factory=dict)  # asset → why the scratch run left it out
    ran: bool = True  # False: every selected asset was left out, nothing ran

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.interval.index,
            "exit_code": self.exit_code,
            "seconds": round(self.seconds, 3),
            "tables": [diff.to_json() for diff in self.diffs],
            "output": self.output if self.exit_code else [],
            "not_run": self.not_run,
            "ran": self.ran,
        }


def uncontained(facts: Facts) -> dict[str, str]:
    """The selected assets whose run a scratch copy cannot hold, and why: a Python asset (its code may write
    anywhere), and SQL the pre-flight could not classify (``COPY … TO '/abs/path'``, ``CALL``). A dry run never
    runs them: the preview leaves them out."""
    found = {}
    for facts_of in facts.selected:
        asset = facts_of.asset
        statements = [s for parsed in facts_of.classified.values() for c in parsed for s in c.unclassified]
        if asset.kind == AssetKind.PYTHON:
            found[asset.name] = "Python code can write outside the scratch copy"
        elif statements:
            found[asset.name] = f"runs SQL that cannot be classified ({statements[0][:60]})"
    return found


def preview_first_partition(planned: Planned, *, limit: int, leave_out: dict[str, str] | None = None) -> Preview:
    """Run the plan's first partition into scratch copies and diff them with the real files. ``leave_out``: the
    assets not to run (:func:`uncontained`), and why; the rest of the selection runs, reading their tables as
    they are."""
    spec, config, environment, checked = planned.spec, planned.config, planned.environment, planned.checked
    if spec.target.is_command or config is None or environment is None or checked is None or not spec.target.path:
        raise BadInput("--preview runs a pipeline's first partition into a scratch copy: a --command has no tables")
    interval = spec.plan.interval(0)
    pipeline = checked.pipeline
    leave_out = {name: why for name, why in (leave_out or {}).items() if name in checked.selected}
    runs = sorted(set(checked.selected) - set(leave_out))
    written = [pipeline.assets[name] for name in runs]
    written = [a for a in written if a.materialization.type == "table" or a.kind == "seed"]
    if not runs:
        return Preview(interval, 0, 0.0, not_run=leave_out, ran=False)
    with tempfile.TemporaryDirectory(prefix="backfill-preview-") as scratch_text:
        scratch = Path(scratch_text)
        repository = scratch / "repository"
        (repository / ".git").mkdir(parents=True)  # its run records go into the scratch repository's logs/
        relative = pipeline.directory.name
        shutil.copytree(pipeline.directory, repository / relative, ignore=shutil.ignore_patterns("logs", ".git"))
        _point_run_files_home(pipeline, repository / relative)
        copies = _copy_databases(environment, scratch / "databases")
        config_copy = repository / ".bruin.yml"
        _write_config(config.path, environment.name, copies, config_copy)
        target = repository / relative / Path(spec.target.path).resolve().relative_to(pipeline.directory)
        run_options = spec.run_options
        if leave_out:  # exactly the rest of the selection, by name, over the whole pipeline
            target = repository / relative
            selection = tuple(f"fqn:{name}" for name in runs)
            run_options = replace(run_options, selector=selection, tags=(), exclude_tags=(), downstream=False)
        began = time.monotonic()
        result = subprocess.run(
            _argv(planned, target, interval, config_copy, run_options),
            cwd=repository,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=PREVIEW_TIMEOUT,
            check=False,
        )
        preview = Preview(interval, result.returncode, time.monotonic() - began, not_run=leave_out)
        preview.output = result.stdout.splitlines()[-LOG_TAIL:]
        if result.returncode == 0:
            window = Window(interval.start, interval.end - 1, spec.zone)
            preview.diffs = _diff(pipeline, written, copies, window, limit)
    return preview


def _point_run_files_home(pipeline, copy: Path) -> None:
    """A YAML asset whose ``run:`` file lies outside the pipeline directory (``../../shared/q.sql``): the copy of
    its YAML names the real file, by a path relative to where the copy is (``run:`` is always joined to the
    YAML's directory), so the scratch pipeline validates and reads the same SQL or script. Only read."""
    for asset in pipeline.assets.values():
        if asset.run_file is None or asset.run_file.is_relative_to(pipeline.directory):
            continue
        yaml_copy = copy / asset.path.relative_to(pipeline.directory)
        data = yaml.safe_load(yaml_copy.read_text(encoding="utf-8"))
        data["run"] = os.path.relpath(asset.run_file, yaml_copy.parent)
        yaml_copy.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")


def _copy_databases(environment, directory: Path) -> dict[str, tuple[Path, Path]]:
    """Connection name → (the real file, its scratch copy). A file not there yet is not copied (the run makes
    it in scratch; before, every table is absent)."""
    directory.mkdir()
    copies = {}
    for number, connection in enumerate(environment.connections):
        if connection.kind != "duckdb" or connection.path is None:
            continue
        copy = directory / f"{number}-{connection.path.name}"
        if connection.path.exists():
            shutil.copyfile(connection.path, copy)
            wal = connection.path.with_name(connection.path.name + ".wal")
            if wal.exists():
                shutil.copyfile(wal, copy.with_name(copy.name + ".wal"))
        copies[connection.name] = (connection.path, copy)
    return copies


def _write_config(original: Path, environment: str, copies: dict[str, tuple[Path, Path]], destination: Path) -> None:
    """``.bruin.yml`` as it is, the environment's DuckDB connections pointing at their scratch copies."""
    data = yaml.safe_load(original.read_text(encoding="utf-8")) or {}
    connections = ((data.get("environments") or {}).get(environment) or {}).get("connections") or {}
    for entry in connections.get("duckdb") or []:
        if isinstance(entry, dict) and entry.get("name") in copies:
            entry["path"] = str(copies[entry["name"]][1])
    destination.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")


def _argv(planned: Planned, target: Path, interval: Interval, config_copy: Path, run_options: RunOptions) -> list[str]:
    spec, environment = planned.spec, planned.environment
    assert environment is not None
    fmt = InstantFormatter(spec.zone).format
    argv = [*backfill_program(), "run", str(target), "--environment", environment.name, "--config-file",
            str(config_copy), "--start-date", fmt(interval.start, "always"), "--end-date",
            fmt(interval.end - 1, "always"), "--timezone", getattr(spec.zone, "key", "UTC"), "--workers",
            str(planned.options.workers), "--run-id", "preview"]  # fmt: skip
    for option in RUN_OPTIONS:
        if option.attribute != "config_file":
            argv += option.child_argv(getattr(run_options, option.attribute))
    return argv


def _diff(pipeline, assets, copies: dict[str, tuple[Path, Path]], window: Window, limit: int) -> list[TableDiff]:
    """Each written table in the scratch copy (after) against the real file attached read-only (before)."""
    import duckdb

    diffs = []
    for name, (real, copy) in copies.items():
        mine = [a for a in assets if pipeline.connection_of(a) == name]
        if not mine or not copy.exists():
            continue
        connection = duckdb.connect(str(copy), read_only=True)
        try:
            db = Database(connection, lambda sql: sql)
            if real.exists():
                attach_snapshot(db, str(real))
            for asset in mine:
                if not db.table_exists(asset.name):
                    continue
                existed = real.exists() and bool(
                    db.scalar(
                        "SELECT count(*) FROM information_schema.tables WHERE table_catalog = ? "
                        "AND table_schema || '.' || table_name = ?",
                        [SNAPSHOT_ALIAS, asset.name if "." in asset.name else f"main.{asset.name}"],
                    )
                )
                predicate = window_predicate(db, asset, window) if windowed(asset) else "true"
                before = f"{SNAPSHOT_ALIAS}.{quote_name(asset.name)}" if existed else None
                diffs.append(diff_table(db, asset, predicate, before, limit))
        finally:
            with contextlib.suppress(duckdb.Error):
                connection.close()
    return diffs
