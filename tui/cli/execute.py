"""Running a prepared backfill in the foreground: announce it, run the executor thread, follow it
with a front end, stop it on Ctrl+C or SIGTERM, then summarise (text) or print the state (JSON)."""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Callable
from typing import IO

import orjson

from engine.base.errors import BadInput, Refused
from engine.execute.backfill import Prepared
from engine.execute.executor import Executor, Outcome
from engine.execute.executor_thread import ExecutorThread
from engine.execute.invocation import Invocation
from engine.guardrails.preflight import Approval, NeedsApproval, Preflight
from engine.guardrails.tiers import AUTO, NEVER
from tui import human
from tui.cli.preflight_text import verdict_line, write_report
from tui.cli.progress import NOBODY_READS, ProgressLines
from tui.cli.state_output import write_state_json
from tui.cli.stop_signals import install_stop_handlers, restore_handlers
from tui.cli.summary import exit_code_of, resume_hint, summary_lines
from tui.cli.terminal import (
    Paint,
    colors_enabled,
    dashboard_possible,
    detach_from_terminal,
    nobody_reads,
    silence,
    terminal_descriptors,
)


def execute(invocation: Invocation, args: argparse.Namespace, *, hint: str, title: str) -> int:
    """Decide (asking on a terminal when a person must answer), start, run with a front end, summarise."""
    with invocation:  # whatever stops it here gives the backfill up
        approval = guard_decision(invocation, args, hint=hint, title=title)
        prepared = invocation.start(approval)
    return run_prepared(prepared, invocation.executor(), args, preflight=invocation.preflight)


def _previewer(invocation: Invocation):
    """For a new pipeline backfill: what the pre-flight screen's F2 runs (the first partition into a scratch copy,
    and its diff as text); None otherwise."""
    planned = invocation.planned
    if planned.spec.target.is_command or invocation.loaded is not None:
        return None

    def preview() -> str:
        from engine.base.errors import BackfillError
        from engine.execute.preview import preview_first_partition, uncontained
        from tui.diff_text import preview_text

        if invocation.preflight is None:  # never for a new backfill; without a judgement nothing is left out
            return "no preview: the plan was not judged"
        leave_out = uncontained(invocation.preflight.facts)
        try:
            return preview_text(planned.spec, preview_first_partition(planned, limit=20, leave_out=leave_out))
        except BackfillError as error:
            return f"no preview: {error}"

    return preview


def guard_decision(invocation: Invocation, args: argparse.Namespace, *, hint: str, title: str) -> Approval | None:
    """Run only what the verdict allows, and say why it runs. On a terminal, the pre-flight screen asks for a
    missing reason and, when the verdict needs a person, for the digest typed back. Elsewhere the report goes to
    stdout (or the JSON document), ``never`` is refused (exit 3) and an unapproved verdict is held (exit 4)."""
    preflight = invocation.preflight
    interactive = dashboard_possible(no_progress=args.no_progress, json_output=args.output == "json")
    typed, reason = False, None
    asks = preflight is not None and preflight.verdict != NEVER and invocation.needs_a_person(args.approve)
    if interactive and asks:
        from tui.app.preflight_app import PreflightApp

        invocation.close_warehouses()
        screen = PreflightApp(preflight, title, invocation.reason, preview=_previewer(invocation))
        answer = screen.run()
        if screen.terminal_gone:  # SIGHUP ignored: the refusal below goes nowhere, without failing on the way
            detach_from_terminal()
        if answer is None:
            if preflight.verdict == AUTO:
                raise BadInput("--reason is required to run a backfill: none was given on the pre-flight screen")
            raise NeedsApproval(f"not approved on the pre-flight screen (plan {preflight.short_digest}): nothing ran")
        reason, typed = answer.reason, answer.approved
    try:
        return invocation.approve(approve=args.approve, typed=typed, reason=reason)
    except (Refused, NeedsApproval):
        assert preflight is not None
        if args.output == "json":
            sys.stdout.buffer.write(orjson.dumps({"preflight": preflight.to_json()}) + b"\n")
            sys.stdout.flush()
        else:
            write_report(sys.stdout, preflight, hint=hint)
        raise


def run_prepared(
    prepared: Prepared, executor: Executor, args: argparse.Namespace, *, preflight: Preflight | None = None
) -> int:
    as_json = args.output == "json"
    terminals = terminal_descriptors()  # asked before a write can fail: a terminal that hung up says it is none
    announce = sys.stderr if as_json else sys.stdout
    selected_mask = prepared.selection.mask(prepared.board) if as_json else None
    hint = resume_hint(prepared)
    announced = _delivered(
        announce, terminals, lambda: announce.write(_announcement(prepared, executor, preflight, hint))
    )
    if not announced and signal.getsignal(signal.SIGHUP) != signal.SIG_IGN:  # nobody sees the run: it never starts
        executor.request_stop(NOBODY_READS, signal.SIGTERM)
    use_dashboard = dashboard_possible(no_progress=args.no_progress, json_output=as_json)
    if use_dashboard:
        from tui.cli.dashboard_runner import run_with_dashboard

        outcome, reruns = run_with_dashboard(executor, prepared, no_color=args.no_color)
        finished = [run for run in reruns if run.thread.outcome is not None or run.thread.error is not None]
        if finished:  # a rerun from the dashboard ran last: summarise the backfill as that run left it
            prepared, outcome = finished[-1].prepared, finished[-1].thread.result()
            hint = resume_hint(prepared)
    else:
        outcome = _run_with_progress_lines(executor, prepared, no_color=args.no_color, terminals=terminals)
    out = sys.stderr if as_json else sys.stdout
    paint = Paint(colors_enabled(out, no_color_flag=args.no_color))
    lines = summary_lines(
        store=prepared.store,
        spec=prepared.spec,
        board=prepared.board,
        outcome=outcome,
        resume=hint,
        paint=paint,
        preflight=preflight,
    )
    # The run is over: a reader gone from here on changes nothing of its exit code.
    _delivered(out, terminals, lambda: out.write("\n".join(lines) + "\n"))
    if as_json:
        _delivered(sys.stdout, terminals, lambda: _write_state(prepared, outcome, args, selected_mask, preflight))
    return exit_code_of(outcome)


def _delivered(stream: IO[str], terminals: frozenset[int], write: Callable[[], object]) -> bool:
    """``write`` to ``stream``, flushed; False when nobody reads the stream any more (it then goes nowhere, without
    error). Any other failure to write is raised."""
    try:
        write()
        stream.flush()
    except OSError as error:
        if not nobody_reads(error, stream, terminals):
            raise
        silence(stream, terminals)
        return False
    return True


def _write_state(
    prepared: Prepared, outcome: Outcome, args: argparse.Namespace, selected_mask, preflight: Preflight | None
) -> None:
    write_state_json(
        sys.stdout.buffer,
        spec=prepared.spec,
        store=prepared.store,
        board=prepared.board,
        options=prepared.options,
        parallelism=prepared.parallelism,
        selected=selected_mask,
        skipped=len(prepared.spec.plan) - outcome.selected,
        offset=args.offset,
        limit=args.limit,
        extra=(
            {"preflight": preflight.to_json(), "record": outcome.record, "record_error": outcome.record_error}
            if preflight is not None
            else None
        ),
    )
    sys.stdout.buffer.flush()


def _announcement(prepared: Prepared, executor: Executor, preflight: Preflight | None, hint: str) -> str:
    """What the run is, where its state lives and how to resume it: the lines before the first progress line."""
    selected = prepared.selection.count(prepared.board)
    parallelism = prepared.parallelism
    capped = f" (capped: {parallelism.reason})" if parallelism.reason else ""
    runners = ", in warm runners" if prepared.launcher_name == "warm" else ""
    describe = getattr(executor.launcher, "describe", None)
    if describe is not None:
        runners = f", on {describe()}"
    total = human.count(len(prepared.spec.plan))
    return (
        f"backfill {prepared.store.id}: {human.count(selected)} of {total} partitions to run, "
        f"{parallelism.effective} at a time{capped}{runners}\n"
        f"  state   {prepared.store.directory}\n  resume  {hint}\n"
        + "".join(f"  note    {note}\n" for note in prepared.takeover.notes)
        + "".join(f"  warning {warning}\n" for warning in (preflight.pipeline_warnings if preflight else ()))
        + (verdict_line(preflight) + "\n" if preflight is not None else "")
    )


def _run_with_progress_lines(
    executor: Executor, prepared: Prepared, *, no_color: bool, terminals: frozenset[int]
) -> Outcome:
    """Follow the run with progress lines on stderr. When nobody can read them any more (the terminal hung up
    without a SIGHUP reaching us, the pipe's reader went away) that is a hangup: the run stops as on SIGHUP,
    unless SIGHUP is ignored (nohup), when it goes on with its lines going nowhere. Any other failure to write
    them (a full disk under a redirected stderr) stops the run too, its children waited for, before it is told:
    the run never goes on unwatched with no one to stop it."""
    thread = ExecutorThread(executor)
    previous = install_stop_handlers(executor)
    lines = ProgressLines(
        executor, prepared.spec, prepared.store, sys.stderr, Paint(colors_enabled(sys.stderr, no_color_flag=no_color))
    )
    try:
        thread.start()
        lines.follow_while_read(thread, terminals, hangup_stops=signal.SIGHUP in previous)  # not under nohup
    finally:
        if thread.is_alive():
            executor.request_stop("its progress lines could not be written")
            thread.join()
        restore_handlers(previous)
    return thread.result()
