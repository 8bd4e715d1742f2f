"""``backfill TARGET ...`` and ``backfill --command ...``: plan, then dry-run or execute."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from engine.durations import parse_duration
from engine.errors import BadInput
from engine.instants import format_instant, zone_name
from engine.partitions import PartitionDescriber
from engine.spec import (
    ExecutionOptions,
    Planned,
    plan_request,
)
from tui.arguments import UsageError, backfill_parser, run_options_from
from tui.plan_output import options_json, page_bounds, page_rows, summary_json, write_json, write_text


def backfill_command(argv: list[str]) -> int:
    args = backfill_parser().parse_args(argv)
    _check_combinations(args)
    if args.resume is not None:
        from tui.resume import resume_command

        return resume_command(args)
    planned = _plan_new(args)
    if args.dry_run:
        return print_dry_run(planned, args)
    from tui.execute import execute_new

    return execute_new(planned, args)


def _check_combinations(args: argparse.Namespace) -> None:
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
        from engine.children import split_template

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
        timeout=parse_duration(args.timeout, "--timeout") if args.timeout else None,
    )


def _plan_new(args: argparse.Namespace) -> Planned:
    run_options = run_options_from(args)
    return plan_request(
        target=args.target,
        command=args.command,
        name=args.name,
        start=args.start_date,
        end=args.end_date,
        timezone=args.timezone or "UTC",
        partition=args.partition or "daily",
        environment=args.environment,
        config_file=args.config_file,
        run_options=run_options,
        options=execution_options(args),
        force=args.force,
    )


def header_lines(planned: Planned, extra: list[tuple[str, str]] | None = None) -> list[tuple[str, str]]:
    """Normalized inputs and effective parallelism, as label/value pairs for text output."""
    spec, options, parallelism = planned.spec, planned.options, planned.parallelism
    target = spec.target
    lines = [("target", f"{target.template if target.is_command else target.path}")]
    if target.name != (target.template or ""):
        lines.append(("name", target.name))
    if spec.environment:
        lines.append(("environment", spec.environment))
    lines.append(
        ("range", f"{format_instant(spec.start, spec.zone)} → {format_instant(spec.end, spec.zone)} (end exclusive)")
    )
    lines.append(("partition", f"{spec.unit.name} in {zone_name(spec.zone)}"))
    if parallelism.reason:
        parallel = f"{parallelism.effective} (requested {parallelism.requested}; {parallelism.reason})"
    else:
        parallel = str(parallelism.effective)
    lines.append(("parallelism", f"{parallel} × {options.workers} workers"))
    controls = f"retries {options.retries}, on failure {options.on_failure}, " + (
        "newest first" if options.reverse else "oldest first"
    )
    if options.timeout:
        from engine.durations import format_duration

        controls += f", timeout {format_duration(options.timeout)}"
    lines.append(("controls", controls))
    run_options = spec.run_options
    for label, value in (
        ("selector", " ".join(run_options.selector)),
        ("tags", ", ".join(run_options.tags)),
        ("exclude tags", ", ".join(run_options.exclude_tags)),
        ("only", run_options.only or ""),
        ("variables", ", ".join(f"{k}={v!r}" for k, v in run_options.variables.items())),
    ):
        if value:
            lines.append((label, value))
    return lines + (extra or [])


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
