"""Running a prepared backfill in the foreground: announce it, run the executor thread, follow it
with a front end, stop it on Ctrl+C or SIGTERM, then summarise (text) or print the state (JSON)."""

from __future__ import annotations

import argparse
import sys
import threading
from pathlib import Path

import orjson

from engine.base.errors import BadInput, Refused
from engine.execute.backfill import Prepared, create_backfill
from engine.execute.executor import Executor, Outcome
from engine.execute.guarding import append_invocation, guard_hooks, manifest_guardrails
from engine.guardrails.preflight import Approval, NeedsApproval, Preflight, decide, remember
from engine.guardrails.request import GuardRequest
from engine.guardrails.tiers import APPROVAL, AUTO, HUMAN_ONLY, NEVER
from engine.spec.backfill_spec import Planned
from engine.store.manifest import now_text
from tui.cli.preflight_text import verdict_line, write_report
from tui.cli.progress import ProgressLines
from tui.cli.state_output import write_state_json
from tui.cli.stop_signals import install_stop_handlers, restore_handlers
from tui.cli.summary import exit_code_of, resume_hint, summary_lines
from tui.cli.terminal import Paint, colors_enabled, dashboard_possible


def guard_decision(
    preflight: Preflight, args: argparse.Namespace, reason: str | None, *, hint: str, title: str
) -> tuple[Approval, str]:
    """Run only what the verdict allows, and say why it runs. On a terminal, the pre-flight screen asks for a
    missing reason and, when the verdict needs a person, for the digest typed back. Elsewhere the report goes to
    stdout (or the JSON document), ``never`` is refused (exit 3) and an unapproved verdict is held (exit 4)."""
    interactive = dashboard_possible(no_progress=args.no_progress, json_output=args.output == "json")
    typed = False
    if interactive and preflight.verdict != NEVER and _needs_a_person(preflight, args.approve, reason):
        from tui.app.preflight_app import PreflightApp

        answer = PreflightApp(preflight, title, reason).run()
        if answer is None:
            if preflight.verdict == AUTO:
                raise BadInput("--reason is required to run a backfill: none was given on the pre-flight screen")
            raise NeedsApproval(f"not approved on the pre-flight screen (plan {preflight.short_digest}): nothing ran")
        reason, typed = answer.reason, answer.approved
    try:
        approval = decide(
            preflight, approve=args.approve, interactive_approval=typed, reason=reason, now_text=now_text()
        )
    except (Refused, NeedsApproval):
        remember(preflight)
        if args.output == "json":
            sys.stdout.buffer.write(orjson.dumps({"preflight": preflight.to_json()}) + b"\n")
            sys.stdout.flush()
        else:
            write_report(sys.stdout, preflight, hint=hint)
        raise
    if reason is None:
        raise BadInput("--reason is required to run a backfill: say why it runs (a --dry-run needs none)")
    return approval, reason


def _needs_a_person(preflight: Preflight, approve: str | None, reason: str | None) -> bool:
    if reason is None or preflight.verdict == HUMAN_ONLY:
        return True
    return preflight.verdict == APPROVAL and not (approve and preflight.digest.startswith(approve.lower()))


def execute_new(
    planned: Planned,
    args: argparse.Namespace,
    *,
    request: GuardRequest,
    preflight: Preflight,
    approval: Approval,
    reason: str | None,
) -> int:
    extra = {"reason": reason, "guardrails": manifest_guardrails(request, preflight)}
    prepared = create_backfill(planned, state_dir=args.state_dir, cwd=Path.cwd(), extra=extra)
    append_invocation(prepared.store, mode=request.mode, reason=reason, preflight=preflight, approval=approval)
    prepared.hooks = guard_hooks(prepared, preflight, approval)
    return run_prepared(prepared, args, preflight=preflight)


def run_prepared(prepared: Prepared, args: argparse.Namespace, *, preflight: Preflight | None = None) -> int:
    as_json = args.output == "json"
    announce = sys.stderr if as_json else sys.stdout
    selected_mask = prepared.selection.mask(prepared.board) if as_json else None
    executor = prepared.executor()
    hint = resume_hint(prepared)
    selected = prepared.selection.count(prepared.board)
    parallelism = prepared.parallelism
    capped = f" (capped: {parallelism.reason})" if parallelism.reason else ""
    runners = ", in warm runners" if prepared.launcher_name == "warm" else ""
    describe = getattr(executor.launcher, "describe", None)
    if describe is not None:
        runners = f", on {describe()}"
    announce.write(
        f"backfill {prepared.store.id}: {selected} of {len(prepared.spec.plan)} partitions to run, "
        f"{parallelism.effective} at a time{capped}{runners}\n"
        f"  state   {prepared.store.directory}\n  resume  {hint}\n"
        + "".join(f"  note    {note}\n" for note in prepared.takeover.notes)
        + (verdict_line(preflight) + "\n" if preflight is not None else "")
    )
    announce.flush()
    use_dashboard = dashboard_possible(no_progress=args.no_progress, json_output=as_json)
    if use_dashboard:
        from tui.cli.dashboard_runner import run_with_dashboard

        outcome, reruns = run_with_dashboard(executor, prepared, no_color=args.no_color)
        finished = [run for run in reruns if run.outcome is not None]
        if finished:  # a rerun from the dashboard ran last: summarise the backfill as that run left it
            prepared, outcome = finished[-1].prepared, finished[-1].outcome
            hint = resume_hint(prepared)
    else:
        outcome = _run_with_progress_lines(executor, prepared, no_color=args.no_color)
    out = sys.stderr if as_json else sys.stdout
    paint = Paint(colors_enabled(out, no_color_flag=args.no_color))
    lines = summary_lines(
        store=prepared.store, spec=prepared.spec, board=prepared.board, outcome=outcome, resume=hint, paint=paint
    )
    out.write("\n".join(lines) + "\n")
    out.flush()
    if as_json:
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
    return exit_code_of(outcome)


def _run_with_progress_lines(executor: Executor, prepared: Prepared, *, no_color: bool) -> Outcome:
    result: dict[str, Outcome | BaseException] = {}

    def work() -> None:
        try:
            result["outcome"] = executor.run()
        except BaseException as error:
            result["error"] = error

    thread = threading.Thread(target=work, name="executor", daemon=False)
    previous = install_stop_handlers(executor)
    try:
        thread.start()
        ProgressLines(
            executor,
            prepared.spec,
            prepared.store,
            sys.stderr,
            Paint(colors_enabled(sys.stderr, no_color_flag=no_color)),
        ).follow(thread)
    finally:
        restore_handlers(previous)
    if "error" in result:
        raise result["error"]  # type: ignore[misc]
    return result["outcome"]  # type: ignore[return-value]
