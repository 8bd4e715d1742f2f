"""``backfill TARGET ...`` and ``backfill --command ...``: plan, then dry-run or execute."""

from __future__ import annotations

import argparse
import shlex
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.base.errors import BadInput
from engine.base.printable import has_controls
from engine.base.settings import Settings
from engine.dates.instants import format_instant
from engine.guardrails.preflight import Preflight, check_digest_prefix
from engine.guardrails.request import GuardOptions, check_reason, check_verify_mode
from engine.guardrails.settings import check_level
from engine.pipeline.options import RUN_OPTIONS
from engine.spec.backfill_spec import ExecutionOptions, Planned
from engine.spec.partitions import PartitionDescriber
from engine.spec.planning import plan_request
from tui.cli.arguments import UsageError, backfill_parser, run_options_from, split_args, timeout_arg
from tui.cli.plan_output import header_lines, options_json, page_bounds, page_rows, summary_json, write_json, write_text
from tui.cli.preflight_text import approve_line, dry_run_approval, write_report
from tui.cli.terminal import dashboard_possible

if TYPE_CHECKING:
    from engine.execute.preview import Preview

MAX_NAME = 200  # characters: a name is a label in listings and on the dashboard's header, not a description


def _stop_as_interrupt(_signum: int, _frame: object) -> None:
    raise KeyboardInterrupt


def backfill_command(argv: list[str]) -> int:
    # Until an executor takes the stop signals over, SIGTERM (and SIGHUP, unless ignored: nohup) stops the command
    # as Ctrl+C does: a store being built is removed, nothing half-made is left, exit 130. Their default action
    # would end the process at once, leaving a .building-* directory behind (found by the kill campaign).
    signal.signal(signal.SIGTERM, _stop_as_interrupt)
    if signal.getsignal(signal.SIGHUP) != signal.SIG_IGN:
        signal.signal(signal.SIGHUP, _stop_as_interrupt)
    parser = backfill_parser()
    args = parser.parse_args(argv)
    _check_combinations(args, parser.given)
    settings = Settings.from_environment()  # a bad BACKFILL_* value is refused before anything is judged
    if args.resume is not None:
        from tui.cli.resume import resume_command

        return resume_command(args, settings)
    planned = _plan_new(args)
    guard = guard_options(args, planned.spec.target.is_command)
    reason = check_reason(args.reason)
    # A dry run checks --approve too, and says whether it matches the plan.
    approve = check_digest_prefix(args.approve) if args.approve is not None else None
    from engine.execute.invocation import judge_new

    invocation = judge_new(
        planned,
        guard,
        reason=reason,
        state_dir=args.state_dir,
        cwd=Path.cwd(),
        settings=settings,
        can_ask=dashboard_possible(no_progress=args.no_progress, json_output=args.output == "json"),
        dry_run=args.dry_run,
    )
    assert invocation.preflight is not None
    if args.dry_run:  # writes nothing, not even the cache of what the digest covered
        return print_dry_run(planned, args, invocation.preflight, approve)
    from tui.cli.execute import execute

    spec = planned.spec
    title = f"{spec.target.name} · {format_instant(spec.start, spec.zone)} → {format_instant(spec.end, spec.zone)}"
    return execute(invocation, args, hint=_hint(args), title=title)


def _hint(args: argparse.Namespace) -> str:
    """The command the operator ran, without its guardrail flags (for "next: …")."""
    return "backfill " + " ".join(shlex.quote(word) for word in _without_guard_flags(sys.argv[1:]))


def _without_guard_flags(argv: list[str]) -> list[str]:
    kept, skip = [], False
    for word in argv:
        if skip:
            skip = False
            continue
        name = word.split("=", 1)[0]
        if name in ("--reason", "--approve"):
            skip = "=" not in word
            continue
        if name == "--dry-run":
            continue
        kept.append(word)
    return kept


def guard_options(args: argparse.Namespace, is_command: bool) -> GuardOptions:
    """The guardrail flags, each refused where it means nothing for this target."""
    command_only = (
        ("--reversible", args.reversible),
        ("--guardrails", args.guardrails),
        ("--verify-command", args.verify_command),
    )
    pipeline_only = (("--no-snapshot", args.no_snapshot), ("--ignore-dependencies", args.ignore_dependencies))
    wrong = [flag for flag, value in (pipeline_only if is_command else command_only) if value not in (None, False)]
    if wrong:
        kind = "--command" if is_command else "pipeline"
        where = (
            "the pipeline's environment sets guardrails in .bruin.yml"
            if not is_command
            else "a command has no snapshot and no known upstream"
        )
        raise UsageError(
            f"{', '.join(wrong)} mean{'s' if len(wrong) == 1 else ''} nothing for a {kind} backfill ({where})"
        )
    if args.verify_command is not None:
        from engine.spec.command_template import check_placeholders

        if not args.verify_command.strip():
            raise BadInput("--verify-command '' is empty: give a program and its arguments, e.g. 'check.sh {start}'")
        check_placeholders(args.verify_command)
    if args.guardrails is not None:
        check_level(args.guardrails)
    return GuardOptions(
        level=args.guardrails,
        allow_long_range=args.allow_long_range,
        reversible=args.reversible,
        snapshot=not args.no_snapshot,
        verify=check_verify_mode(args.verify) if args.verify is not None else "on",
        verify_command=args.verify_command,
        ignore_dependencies=args.ignore_dependencies,
    )


PIPELINE_ONLY = (
    ("--environment", "environment"),
    ("--config-file", "config_file"),
    *((option.flag, option.dest) for option in RUN_OPTIONS),
    ("--workers", "workers"),
    ("--launcher", "launcher"),
    ("--preview", "preview"),
    ("--force", "force"),  # production is an environment's name: a command has none
)


def _check_combinations(args: argparse.Namespace, given: dict[str, Any]) -> None:
    """Options that mean nothing together are bad input (``given``: the options given, by destination)."""
    if args.preview and not args.dry_run:
        raise UsageError(
            "--preview goes with --dry-run: it shows what the first partition would change, and saves nothing"
        )
    if args.preview and args.resume is not None:
        raise UsageError(
            "--preview runs a new backfill's first partition into a scratch copy: with --continue, --dry-run lists "
            "what would run again"
        )
    if args.force and args.resume is not None:
        raise UsageError(
            "--force means nothing with --continue: the backfill's environment was allowed when it was started"
        )
    if "preview_limit" in given and not args.preview:
        raise UsageError("--preview-limit goes with --preview: it is how many rows the preview shows per table")
    paging = [flag for flag, dest in (("--offset", "offset"), ("--limit", "limit")) if dest in given]
    if paging and not (args.dry_run or args.output == "json"):
        raise UsageError(
            f"{paging[0]} pages the partitions --dry-run or --output json lists; it does not choose which run: narrow "
            "--start-date and --end-date (on --continue, give --ids)"
        )
    if args.command is not None:
        named = [flag for flag, attribute in PIPELINE_ONLY if getattr(args, attribute, None) not in (None, False, [])]
        if args.launcher is not None and args.launcher.startswith("dask"):
            named.remove("--launcher")  # a command's attempts run on a Dask cluster like a pipeline's
        if named:
            raise UsageError(
                f"{', '.join(named)} mean{'s' if len(named) == 1 else ''} nothing for a --command backfill "
                "(pipeline run options): leave {} out, or put what the command needs in its template".format(
                    "it" if len(named) == 1 else "them"
                )
            )
    if args.resume is None:
        for flag, value in (
            ("--rerun", args.rerun),
            ("--ids", args.ids),
            ("--ids-from", args.ids_from),
            ("--asset", args.asset),
            ("--with-downstream", args.with_downstream),
            ("--rerun-whole-partition", args.rerun_whole_partition),
        ):
            if value is not None and value is not False:  # an empty --asset '' was given too
                raise UsageError(f"{flag} is only accepted together with --continue ID")
    if args.full_refresh:
        raise BadInput(
            "--full-refresh is not supported for backfills (it would rebuild each table once per partition): "
            "run `backfill run TARGET --full-refresh` once, then backfill"
        )
    if args.command is not None:
        from engine.spec.command_template import split_template

        split_template(args.command)
    # Shown to whoever lists the state. A command may span lines (`python -c` of a script); a name may not.
    for flag, text, allowed in (("--command", args.command, "\t\n\r"), ("--name", args.name, "\t")):
        if text is not None and has_controls(text, allowed):
            raise UsageError(f"{flag} {text[:40]!r} contains control characters: give printable text")
    if args.name and not args.command:
        raise UsageError("--name is only accepted with --command (pipelines are named by pipeline.yml)")
    if args.name is not None and len(args.name) > MAX_NAME:
        raise UsageError(
            f"--name is {len(args.name):,} characters long: keep it to {MAX_NAME} (it heads every listing)"
        )


def execution_options(args: argparse.Namespace) -> ExecutionOptions:
    return ExecutionOptions(
        max_parallel=args.max_parallel or 1,
        workers=args.workers or 16,
        retries=args.retries or 0,
        on_failure=args.on_failure or "stop",
        reverse=bool(args.reverse),
        timeout=timeout_arg(args.timeout)[1],
        launcher=args.launcher or "warm",
        dask_scheduler=args.dask_scheduler,
        **split_args(args),
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


def print_dry_run(planned: Planned, args: argparse.Namespace, preflight: Preflight, approve: str | None) -> int:
    """The plan of a new backfill: every partition queued; nothing runs, nothing is written."""
    spec = planned.spec
    total = len(spec.plan)
    begin, stop = page_bounds(total, args.offset, args.limit)
    summary = summary_json(total, {"queued": total}, 0)

    def decorate(row: dict[str, Any]) -> None:
        row["status"] = "queued"
        row["attempts"] = []
        row["not_selected"] = False

    rows = page_rows(PartitionDescriber(spec), range(begin, stop), decorate)
    preview = None
    if args.preview:
        from engine.execute.preview import preview_first_partition, uncontained

        preview = preview_first_partition(planned, limit=args.preview_limit, leave_out=uncontained(preflight.facts))
    failed = 1 if preview is not None and preview.exit_code else 0
    approval = dry_run_approval(preflight, approve)
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
            extra={
                "preflight": preflight.to_json(),
                **({"approve": approval} if approval else {}),
                **({"preview": preview.to_json()} if preview else {}),
            },
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
        sys.stdout.write("\n")
        write_report(sys.stdout, preflight, hint=_hint(args))
        if approval is not None:
            sys.stdout.write(approve_line(preflight, approve, bool(approval["matches"])) + "\n")
        if preview is not None:
            _print_preview(planned, preview)
    return failed


def _print_preview(planned: Planned, preview: Preview) -> None:
    """``--preview``: the first partition run into a scratch copy, and what it would change."""
    from tui.diff_text import preview_text

    sys.stdout.write("\n" + preview_text(planned.spec, preview))
