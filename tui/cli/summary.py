"""The final summary: the whole backfill's outcome, range, duration, counts, failures with their reasons,
logs, and the exact commands to resume or to rerun the failures."""

from __future__ import annotations

from pathlib import Path

from engine.base.errors import EXIT_CANCELLED, EXIT_FAILED, EXIT_OK, EXIT_PAUSED
from engine.dates.instants import format_instant, zone_name
from engine.execute.backfill import Prepared
from engine.execute.executor import Outcome
from engine.guardrails.preflight import Preflight
from engine.spec.backfill_spec import BackfillSpec
from engine.store import locate
from engine.store.failure_groups import failure_groups, groups_sentence
from engine.store.state_store import MANIFEST, StateStore
from engine.store.status import STATUS_NAMES, Status, StatusBoard, backfill_status
from tui import human
from tui.cli.terminal import STATUS_STYLE, Paint

FAILURES_LISTED = 10
EXIT_BY_OUTCOME = {"succeeded": EXIT_OK, "failed": EXIT_FAILED, "cancelled": EXIT_CANCELLED, "paused": EXIT_PAUSED}


def exit_code_of(outcome: Outcome) -> int:
    """An operator's cancel is a failure of the run (exit 1), not an interrupt of this terminal (130)."""
    if outcome.status == "cancelled" and outcome.intervention:
        return EXIT_FAILED
    return EXIT_BY_OUTCOME[outcome.status]


OUTCOME_STYLES = {
    "succeeded": "green",
    "failed": "red",
    "cancelled": "yellow",
    "incomplete": "yellow",
    "paused": "yellow",
}


def resume_command(store: StateStore, state_root: Path, cwd: Path | None = None) -> str:
    """``backfill --continue ID``, exact from where it is printed (``engine.store.locate.resume_command``)."""
    return locate.resume_command(store.id, state_root, cwd or Path.cwd())


def resume_hint(prepared: Prepared) -> str:
    """The resume command for a prepared backfill, from the current directory."""
    return resume_command(prepared.store, prepared.state_root)


def summary_lines(
    *,
    store: StateStore,
    spec: BackfillSpec,
    board: StatusBoard,
    outcome: Outcome,
    resume: str | None,
    paint: Paint,
    preflight: Preflight | None = None,
) -> list[str]:
    """Describes the backfill on disk, not only what this invocation ran: a ``--continue --ids`` that
    succeeded over a backfill with queued partitions reports it incomplete, with the resume command. Upstream
    intervals its ``preflight`` let through (a warn or off gate, ``--ignore-dependencies``) are named, as the
    seed asks of the run's own summary."""
    counts = board.counts()
    status = backfill_status(counts, outcome.status)
    if outcome.record_error and status == "succeeded":
        status = "not recorded"  # every partition succeeded, but without its record the backfill is not done
    if outcome.intervention and outcome.intervention.startswith("marked"):
        status = outcome.status  # an operator ended it so, whatever its partitions say
    shown = paint(status, OUTCOME_STYLES.get(status, "bold"))
    lines = [f"backfill {store.id} {shown} after {human.duration(outcome.seconds)}"]
    lines.append(
        f"  range       {format_instant(spec.start, spec.zone)} → {format_instant(spec.end, spec.zone)} "
        f"(end exclusive), {spec.unit.name} in {zone_name(spec.zone)}"
    )
    parts = [
        paint(f"{human.count(counts[name])} {name}", STATUS_STYLE[name]) for name in STATUS_NAMES if counts.get(name)
    ]
    lines.append(f"  partitions  {human.count(board.size)}: " + ", ".join(parts))
    if outcome.splits:
        depth = "level" if outcome.split_depth == 1 else "levels"
        lines.append(
            f"  split       {human.count(outcome.split_partitions)} partition"
            f"{'s' if outcome.split_partitions != 1 else ''} split in this run ({human.count(outcome.splits)} "
            f"split{'s' if outcome.splits != 1 else ''}, down to {outcome.split_depth} {depth})"
        )
    stopped = _stopped_run(outcome)
    if stopped is not None:
        lines.append(f"  this run    {stopped}")
    elif outcome.selected < board.size:
        failed_here = len(outcome.failed_in_run)
        lines.append(
            f"  this run    {human.count(outcome.selected)} of {human.count(board.size)} partitions {outcome.status}"
            + (f" ({failed_here} failed)" if failed_here else "")
        )
    failed = counts.get("failed", 0)
    if failed:
        lines.append(f"  failed      {human.count(failed)}:")
        lines += _failures(store, spec, board, paint)
        if failed > FAILURES_LISTED:
            lines.append(
                f"              … and {failed - FAILURES_LISTED} more: backfill show {store.id} --status failed"
            )
        kinds = groups_sentence(failure_groups(spec, store, board))
        if kinds is not None:  # a thousand failures are usually a few problems: say which (t in the dashboard)
            lines.append(paint(f"  kinds       {kinds}", "red"))
    if outcome.intervention:
        lines.append(paint(f"  stepped in  {outcome.intervention}", "yellow"))
    for check in preflight.checks if preflight is not None else ():
        if check.evidence.get("gate_bypass"):
            lines.append(paint(f"  gates       {check.detail}", "yellow"))
    lines.append(f"  logs        {store.children}")
    if outcome.record:
        lines.append(f"  record      {outcome.record}")
    if outcome.record_error:
        lines.append(paint(f"  record      not written: {outcome.record_error}", "red"))
    if resume and not (store.directory / MANIFEST).exists():
        # Removed or moved while it ran (the executor stopped itself): nothing to resume from where it was.
        lines.append(paint(f"  state       {store.directory} is gone: put it back there to resume", "red"))
        resume = None
    if resume and needs_own_reason(outcome):
        resume += " --reason TEXT"  # an operator ended it: a --continue must say why it goes on (exit 2 without)
    if resume and outcome.status == "paused":
        # --continue holds while the pause is in force (exit 0, nothing started): the pause is lifted first
        lifted = resume.replace(" --continue ", " resume ", 1)
        lines.append(f"  resume      {lifted} --reason TEXT, then {resume}")
    elif resume and status != "succeeded":
        lines.append(f"  resume      {resume}")
    if resume and failed:
        lines.append(f"  rerun       {resume} --rerun failed")
    return lines


def needs_own_reason(outcome: Outcome) -> bool:
    """Whether an operator ended the backfill (a cancel, or a mark of the whole backfill), after which
    ``--continue`` needs a reason of its own: the printed resume command then carries ``--reason``."""
    return bool(outcome.intervention) and outcome.intervention.startswith(("cancelled", "marked"))


def _stopped_run(outcome: Outcome) -> str | None:
    """What a cancelled or paused run stopped: how many partitions were running, how many never started
    (``cancelled: 3 partitions were running; 44,529 not started``), rather than all of them "cancelled"."""
    if outcome.status not in ("cancelled", "paused"):
        return None
    ran = outcome.tally.ran
    not_started = max(0, outcome.selected - ran)
    if outcome.status == "paused":
        return f"paused: {human.count(ran)} partitions ran; {human.count(not_started)} not started"
    running = outcome.tally.statuses["cancelled"]
    were = "partition was" if running == 1 else "partitions were"
    return f"cancelled: {human.count(running)} {were} running; {human.count(not_started)} not started"


def _failures(store: StateStore, spec: BackfillSpec, board: StatusBoard, paint: Paint) -> list[str]:
    """The first failed partitions in plan order, each with its reason."""
    lines = []
    index = board.find(Status.FAILED, 0)
    width = len(str(board.size - 1))
    while index >= 0 and len(lines) < FAILURES_LISTED:
        interval = spec.plan.interval(index)
        reason = None
        try:
            record = store.read_record(spec.ids.of(interval.start, interval.end), spec.plan, spec.ids.of)
            reason = record.reason if record else None
        except Exception:  # an unreadable record: the listing still names the partition
            reason = "(its record cannot be read)"
        start = format_instant(interval.start, spec.zone)
        lines.append(f"    {str(index).rjust(width)}  {start}  {paint(reason or 'failed', 'red')}")
        index = board.find(Status.FAILED, index + 1)
    return lines
