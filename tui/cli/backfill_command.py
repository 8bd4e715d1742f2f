"""``backfill TARGET ...`` and ``backfill --command ...``: plan, then dry-run or execute."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from engine.base.errors import BadInput
from engine.spec.backfill_spec import ExecutionOptions, Planned
from engine.spec.partitions import PartitionDescriber
from engine.spec.planning import plan_request
from tui.cli.arguments import UsageError, backfill_parser, run_options_from, timeout_arg
from tui.cli.plan_output import header_lines, options_json, page_bounds, page_rows, summary_json, write_json, write_text


def backfill_command(argv: list[str]) -> int:
    args = backfill_parser().parse_args(argv)
    _check_combinations(args)
    if args.resume is not None:
        from tui.cli.resume import resume_command

        return resume_command(args)
    planned = _plan_new(args)
    if args.dry_run:
        return print_dry_run(planned, args)
    from tui.cli.execute import execute_new

    return execute_new(planned, args)


PIPELINE_ONLY = (
    ("--environment", "environment"),
    ("--config-file", "config_file"),
    ("--selector", "selector"),
    ("--tag", "tag"),
    ("--exclude-tag", "exclude_tag"),
    ("--downstream", "downstream"),
    ("--only", "only"),
    ("--var", "var"),
    ("--apply-interval-modifiers", "apply_interval_modifiers"),
    ("--workers", "workers"),
    ("--launcher", "launcher"),
)


def _check_combinations(args: argparse.Namespace) -> None:
    if args.command is not None:
        given = [flag for flag, attribute in PIPELINE_ONLY if getattr(args, attribute, None) not in (None, False, [])]
        if given:
            raise UsageError(
                f"{', '.join(given)} mean{'s' if len(given) == 1 else ''} nothing for a --command backfill "
                "(pipeline run options): leave {} out, or put what the command needs in its template".format(
                    "it" if len(given) == 1 else "them"
                )
            )
    if args.resume is None:
        for flag, given in (("--rerun", args.rerun), ("--ids", args.ids), ("--ids-from", args.ids_from)):
            if given:
                raise UsageError(f"{flag} is only accepted together with --continue ID")
    if args.full_refresh:
        raise BadInput(
            "--full-refresh is not supported for backfills (it would rebuild each table once per partition): "
            "run `backfill run TARGET --full-refresh` once, then backfill"
        )
    if args.command is not None:
        from engine.spec.command_template import split_template

        split_template(args.command)
    if args.name and not args.command:
        raise UsageError("--name is only accepted with --command (pipelines are named by pipeline.yml)")


def execution_options(args: argparse.Namespace) -> ExecutionOptions:
    return ExecutionOptions(
        max_parallel=args.max_parallel or 1,
        workers=args.workers or 16,
        retries=args.retries or 0,
        on_failure=args.on_failure or "stop",
        reverse=bool(args.reverse),
        timeout=timeout_arg(args.timeout)[1],
        launcher=args.launcher or "warm",
    )


def _plan_new(args: argparse.Namespace) -> Planned:
    run_options = run_options_from(args)
    return plan_request(
        target=args.target,
        command=args.command,
        name=args.name,
        start=args.start_date,
        end=args.end_date,
        timezone=args.timezone if args.timezone is not None else "UTC",  # '' is bad input, not the default
        partition=args.partition if args.partition is not None else "daily",
        environment=args.environment,
        config_file=args.config_file,
        run_options=run_options,
        options=execution_options(args),
        force=args.force,
    )


def print_dry_run(planned: Planned, args: argparse.Namespace) -> int:
    """The plan of a new backfill: every partition queued; nothing runs, nothing is written."""
    spec = planned.spec
    total = len(spec.plan)
    begin, stop = page_bounds(total, args.offset, args.limit)
    summary = summary_json(total, {"queued": total}, 0)

    def decorate(row: dict[str, Any]) -> None:
        row["status"] = "queued"
        row["attempts"] = []
        row["skipped"] = False

    rows = page_rows(PartitionDescriber(spec), range(begin, stop), decorate)
    if args.output == "json":
        write_json(
            sys.stdout.buffer,
            backfill=spec.to_json(),
            options=options_json(planned),
            summary=summary,
            rows=rows,
            begin=begin,
            stop=stop,
            offset=args.offset,
            limit=args.limit,
        )
        sys.stdout.buffer.flush()
    else:
        write_text(
            sys.stdout,
            title="backfill plan (dry run: nothing runs, nothing is saved)",
            header=header_lines(planned),
            summary=summary,
            rows=rows,
            begin=begin,
            stop=stop,
            limit=args.limit,
            next_page_hint="repeat with",
        )
    return 0
