"""The final summary: outcome, range, duration, non-zero counts, logs, and how to resume."""

from __future__ import annotations

import shlex
from pathlib import Path

from engine.dates.durations import format_elapsed
from engine.dates.instants import format_instant, zone_name
from engine.spec.backfill_spec import BackfillSpec
from engine.store.state_store import StateStore, default_state_root
from engine.store.status import STATUS_NAMES
from tui.cli.terminal import STATUS_STYLE, Paint


def resume_command(store: StateStore, state_root: Path, repository_root: Path | None) -> str:
    """``backfill --continue ID``, with ``--state-dir`` when the store is not where it is looked for."""
    command = f"backfill --continue {store.id}"
    if state_root.resolve() != default_state_root(repository_root).resolve():
        command += f" --state-dir {shlex.quote(str(state_root))}"
    return command


def summary_lines(
    *,
    store: StateStore,
    spec: BackfillSpec,
    outcome: str,
    seconds: float,
    counts: dict[str, int],
    resume: str | None,
    paint: Paint,
) -> list[str]:
    style = {"succeeded": "green", "failed": "red", "cancelled": "yellow"}.get(outcome, "bold")
    lines = [f"backfill {store.id} {paint(outcome, style)} after {format_elapsed(seconds)}"]
    lines.append(
        f"  range       {format_instant(spec.start, spec.zone)} → {format_instant(spec.end, spec.zone)} "
        f"(end exclusive), {spec.unit.name} in {zone_name(spec.zone)}"
    )
    parts = [paint(f"{counts[name]} {name}", STATUS_STYLE[name]) for name in STATUS_NAMES if counts.get(name)]
    lines.append(f"  partitions  {sum(counts.values())}: " + ", ".join(parts))
    lines.append(f"  logs        {store.children}")
    if resume and outcome != "succeeded":
        lines.append(f"  resume      {resume}")
    return lines
