"""What each partition's child is: ``backfill run`` for pipeline targets, or the command template.

Templates are split like a shell would (shlex) and never run through a shell;
placeholders are replaced inside each argument.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import orjson

from engine.dates.formatting import InstantFormatter
from engine.dates.instants import zone_name
from engine.dates.plan import Interval
from engine.execute.launcher import ChildSpec
from engine.execute.rerun import AssetRerun
from engine.pipeline.options import RUN_OPTIONS
from engine.spec.backfill_spec import BackfillSpec
from engine.spec.command_template import split_template, substitute

_CLEARED = ("BRUIN_VARS", "BRUIN_CONFIG_FILE", "BRUIN_QUERY_ANNOTATIONS")


def backfill_program() -> list[str]:
    """The ``backfill`` executable of this installation (same interpreter, same packages)."""
    script = Path(sys.executable).with_name("backfill")
    return [str(script)] if script.exists() else [sys.executable, "-m", "tui"]


class ChildFactory:
    def __init__(
        self,
        spec: BackfillSpec,
        *,
        backfill_id: str,
        working_directory: str,
        workers: int,
        inherit_fds: tuple[int, ...],
        reason: str | None = None,
        rerun_asset: AssetRerun | None = None,
        row_changes_from: str | None = None,
        judged_sql: str | None = None,
        judged_files: str | None = None,
    ) -> None:
        self.spec = spec
        self.row_changes_from = row_changes_from  # the backfill's snapshot.json: pipeline children measure against it
        # a file of the SQL that cannot be classified a pipeline partition may run (engine/pipeline/judged_sql.py)
        self.judged_sql = judged_sql
        self.judged_files = judged_files  # the pipeline's files as judged: each asset's run asks them again
        self.backfill_id = backfill_id
        self.working_directory = working_directory
        self.workers = workers
        self.inherit_fds = inherit_fds
        self.formatter = InstantFormatter(spec.zone)
        self.words = split_template(spec.target.template) if spec.target.is_command else []
        base = {k: v for k, v in os.environ.items() if k not in _CLEARED}
        annotations = spec.run_options.query_annotations
        if annotations and not spec.target.is_command:
            base["BRUIN_QUERY_ANNOTATIONS"] = orjson.dumps(annotations).decode()
        base["BACKFILL_ID"] = backfill_id
        base.pop("BACKFILL_REASON", None)
        if reason is not None:
            base["BACKFILL_REASON"] = reason
        self.base_environment = base
        self.prefix = self._pipeline_prefix(rerun_asset) if not spec.target.is_command else []

    def _pipeline_prefix(self, rerun: AssetRerun | None, assets: tuple[str, ...] | None = None) -> list[str]:
        """``backfill run TARGET`` with the spec's run options. An operator's rerun of one asset (and its
        downstream) replaces the spec's selection of assets; an asset-level resume's ``assets`` (a part of that
        selection) replace its selectors, whose union would widen them: tags, excluded tags, an asset target's
        downstream and the ``--only`` steps still apply, and leave every one of ``assets`` in."""
        spec, options = self.spec, self.spec.run_options
        argv = [*backfill_program(), "run", str(spec.target.path)]
        if spec.environment:
            argv += ["--environment", spec.environment]
        if options.config_file:
            argv += ["--config-file", options.config_file]
        if rerun is not None:
            argv += ["--selector", f"fqn:{rerun.name}" + ("+" if rerun.downstream else "")]
        for name in assets or ():  # one selector each: all in one word, a pipeline of thousands of assets would pass
            argv += ["--selector", f"fqn:{name}"]  # the 128 KiB an argument may hold (several are a union)
        for option in RUN_OPTIONS:
            replaced = rerun is not None or (assets is not None and option.attribute == "selector")
            if not (option.selects and replaced):
                argv += option.child_argv(getattr(options, option.attribute))
        return argv

    def values(self, interval: Interval, partition_id: str, run_id: str) -> dict[str, str]:
        fmt = self.formatter.format
        start = fmt(interval.start, "always")
        end = fmt(interval.end - 1, "always")
        return {
            "start": start,
            "end": end,
            "end_exclusive": fmt(interval.end, "always"),
            "start_date": start[:10],
            "end_date": end[:10],
            "partition_id": partition_id,
            "run_id": run_id,
        }

    def child(
        self,
        interval: Interval,
        partition_id: str,
        run_id: str,
        log_path: Path,
        total: int,
        *,
        assets: tuple[str, ...] | None = None,
    ) -> ChildSpec:
        """``assets``: an asset-level resume runs only these (None: the spec's selection)."""
        values = self.values(interval, partition_id, run_id)
        if self.spec.target.is_command:
            argv = [substitute(word, values) for word in self.words]
        else:
            prefix = self.prefix if assets is None else self._pipeline_prefix(None, assets)
            argv = [
                *prefix,
                "--start-date",
                values["start"],
                "--end-date",
                values["end"],
                "--timezone",
                zone_name(self.spec.zone),
                "--workers",
                str(self.workers),
                "--backfill-id",
                self.backfill_id,
                "--backfill-total",
                str(total),
                "--partition-id",
                partition_id,
                "--run-id",
                run_id,
                *(["--row-changes-from", self.row_changes_from] if self.row_changes_from else []),
                *(["--judged-sql", self.judged_sql] if self.judged_sql else []),
                *(["--judged-files", self.judged_files] if self.judged_files else []),
            ]
        environment = {
            **self.base_environment,
            "BACKFILL_PARTITION_ID": partition_id,
            "BACKFILL_RUN_ID": run_id,
            "BACKFILL_START": values["start"],
            "BACKFILL_END": values["end"],
            "BACKFILL_END_EXCLUSIVE": values["end_exclusive"],
        }
        return ChildSpec(argv, self.working_directory, environment, log_path, self.inherit_fds)
