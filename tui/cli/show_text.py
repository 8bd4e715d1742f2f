"""Text listing of a saved backfill: its inputs, counts and one page of partitions with statuses."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from engine.execute.backfill import Loaded
from engine.execute.rerun import PartitionSelection
from engine.spec.backfill_spec import ExecutionOptions, Planned
from engine.spec.parallelism import Parallelism
from engine.spec.partitions import PartitionDescriber
from engine.store.status import Status
from tui import human
from tui.cli.plan_output import header_lines, page_bounds, page_rows, summary_json, write_text

LAST_INTERVENTIONS = 3


def intervention_lines(directory: Path) -> list[tuple[str, str]]:
    """The pause or end in force, how many interventions the audit log holds, and the last few."""
    from engine.store import audit
    from engine.store.control import read_control
    from tui.cli.audit_command import entry_text
    from tui.cli.terminal import Paint

    lines = []
    control = read_control(directory)
    for decision in (control.paused, control.ended):
        if decision is not None:
            lines.append(("stepped in", decision.sentence()))
    log = audit.read(directory)
    if log.entries or log.torn:
        torn = f", {human.count(len(log.torn))} unreadable line(s)" if log.torn else ""
        entries = human.count(len(log.entries))
        lines.append(("audit", f"{entries} intervention(s){torn}: backfill audit {directory.name}"))
        for entry in log.entries[-LAST_INTERVENTIONS:]:
            lines.append(("", entry_text(entry, Paint(False))))
    return lines


def print_state_text(
    loaded: Loaded,
    options: ExecutionOptions,
    parallelism: Parallelism,
    selection: PartitionSelection | None,
    offset: int,
    limit: int,
    *,
    title: str,
    statuses: frozenset[Status] | None = None,
) -> None:
    """The saved state as a static listing; ``statuses`` restricts the listed partitions (not the counts)."""
    spec, board = loaded.spec, loaded.board
    total = len(spec.plan)
    selected = selection.count(board) if selection else total
    indices = board.indices_with(statuses) if statuses is not None else None
    listed = len(indices) if indices is not None else total
    begin, stop = page_bounds(listed, offset, limit)

    def decorate(row: dict[str, Any]) -> None:
        status = board.status(row["index"])
        row["status"] = status.label
        if status in (Status.FAILED, Status.CANCELLED) and board.attempts(row["index"]):
            record = loaded.store.read_record(row["id"], spec.plan, spec.ids.of)
            row["reason"] = record.reason if record else None

    rows = page_rows(PartitionDescriber(spec), range(begin, stop) if indices is None else indices[begin:stop], decorate)
    extra = [("state", str(loaded.store.directory))]
    reason = loaded.manifest.get("reason")
    if reason:
        extra.append(("reason", reason))
    from engine.store.guardrails_log import latest_preflight

    preflight = latest_preflight(loaded.store)
    if preflight:
        warnings = sum(1 for check in preflight["checks"] if check["status"] == "warn")
        extra.append(
            (
                "pre-flight",
                f"{preflight['verdict']} ({preflight['level']} guardrails, {warnings} warnings), "
                f"plan {preflight['digest'][:12]}",
            )
        )
    extra += intervention_lines(loaded.store.directory)
    header = header_lines(Planned(spec, options, parallelism), extra)
    write_text(
        sys.stdout,
        title=title,
        header=header,
        summary=summary_json(total, board.counts(), total - selected),
        rows=rows,
        begin=begin,
        stop=stop,
        limit=limit,
        next_page_hint="repeat with",
        listed_total=listed,
    )
