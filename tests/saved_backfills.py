"""Saved command backfills made in-process, for tests of what happens to a backfill no executor runs."""

from __future__ import annotations

from pathlib import Path

from engine.base.settings import Settings
from engine.execute.backfill import Prepared, create_backfill, state_root_for
from engine.pipeline.options import RunOptions
from engine.spec.backfill_spec import ExecutionOptions
from engine.spec.planning import plan_request


def saved_command_backfill(tmp_path: Path, *, end: str) -> Prepared:
    """A backfill of `true` over daily partitions from 2024-01-01 to ``end``, saved under ``states`` with
    nothing attempted and its lock released."""
    planned = plan_request(
        target=None, command="true", name=None, start="2024-01-01", end=end, timezone="UTC",
        partition="daily", environment=None, config_file=None, run_options=RunOptions(),
        options=ExecutionOptions(), force=False, cwd=tmp_path,
    )  # fmt: skip
    prepared = create_backfill(
        planned, root=state_root_for(planned.spec, "states", tmp_path), cwd=tmp_path, settings=Settings()
    )
    prepared.release()
    return prepared
