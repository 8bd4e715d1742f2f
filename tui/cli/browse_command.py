"""``backfill list`` and ``backfill show ID``: saved backfills as text, JSON, or the browser TUI."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from engine.base.errors import BadInput
from engine.store.catalog import (
    COMPLETE,
    BackfillSummary,
    interrupted_for_reading,
    interrupted_note,
    list_backfills,
    summarize,
)
from engine.store.control import resume_options
from engine.store.locate import state_root_of_cwd
from engine.store.status import Status
from engine.store.target_pauses import paused_targets
from tui import human
from tui.cli.arguments import list_parser, show_parser, watch_parser
from tui.cli.state_output import write_state_json
from tui.cli.terminal import Paint, colors_enabled, dashboard_possible

if TYPE_CHECKING:
    from engine.execute.backfill import Loaded

STATE_STYLES = {
    "complete": "green",
    "incomplete": "yellow",
    "running": "blue",
    "paused": "magenta",
    "cancelled": "yellow",
    "marked-failed": "red",
    "marked-succeeded": "green",
    "unreadable": "red",
}


def list_command(argv: list[str]) -> int:
    args = list_parser().parse_args(argv)
    root = state_root_of_cwd(args.state_dir, Path.cwd())
    if args.state_dir is not None and not root.is_dir():
        raise BadInput(
            f"--state-dir {args.state_dir!r} is not a directory: give the state root backfills were saved in"
        )
    if args.output is None and dashboard_possible(no_progress=False, json_output=False):
        from tui.cli.browser import browse

        return browse(root=root, backfill_id=None, state_dir=args.state_dir, no_color=args.no_color)
    summaries = list_backfills(root)
    paused = paused_targets()
    if args.output == "json":
        document = {
            "state_dir": str(root),
            "backfills": [s.to_json() for s in summaries],
            "paused_targets": [p.to_json() for p in paused],
        }
        sys.stdout.buffer.write(orjson.dumps(document) + b"\n")
        return 0
    print_list(summaries, root, Paint(colors_enabled(sys.stdout, no_color_flag=args.no_color)), wide=args.wide)
    for target in paused:  # whichever state root: a paused pipeline holds every backfill of it
        print(f"paused: {target.sentence()}")
    return 0


COUNT_SYMBOLS = (
    ("succeeded", "✓"),
    ("failed", "✗"),
    ("running", "▶"),
    ("cancelled", "⊘"),
    ("skipped", "↷"),
    ("queued", "·"),
)
LIST_WIDTH = 100  # the text listing fits a 100-column terminal or log viewer


def counts_text(summary: BackfillSummary) -> str:
    """``1,006,560 ✓40 ✗2 ·43``: the total, then each non-zero status."""
    parts = [
        f"{symbol}{human.count(summary.counts[name])}" for name, symbol in COUNT_SYMBOLS if summary.counts.get(name)
    ]
    return " ".join([human.count(summary.total), *parts])


def range_text(start: str, end: str) -> str:
    """``2024-01-01 → 03-31`` (end exclusive, in the backfill's zone): dates alone when both ends are midnight,
    the end's year left out when it is the start's."""
    if not start or not end:
        return "—"
    whole_days = start[11:16] in ("", "00:00") and end[11:16] in ("", "00:00")
    first = start[:10] if whole_days else f"{start[:10]} {start[11:16]}"
    last = end[:10] if whole_days else f"{end[:10]} {end[11:16]}"
    if last[:5] == first[:5]:
        last = last[5:]
    return f"{first} → {last}"


def print_list(
    summaries: list[BackfillSummary], root: Path, paint: Paint, now: float | None = None, *, wide: bool = False
) -> None:
    """One line per backfill: ID, state, last activity (relative, local zone), range (end exclusive), unit,
    partitions, then the name — within 100 columns, the name cut to what is left (``--wide``: every column,
    the time each was created among them, and names whole, however wide)."""
    if not summaries:
        print(f"no saved backfills under {root}")
        return
    titles = ("ID", "STATE", *(("CREATED",) if wide else ()), "ACTIVITY", "RANGE", "UNIT", "PARTITIONS", "NAME")
    rows = [titles]
    for s in summaries:
        state = s.state + (f" ✎{s.interventions}" if s.interventions else "")  # ✎: operators stepped in
        created = (human.relative_time(s.created_at, now),) if wide else ()
        activity = human.relative_time(s.last_activity, now)
        rows.append((s.id, state, *created, activity, range_text(s.start, s.end), s.partition, counts_text(s), s.name))
    widths = [max(len(row[i]) for row in rows) for i in range(len(titles) - 1)]
    room = LIST_WIDTH - sum(widths) - 2 * len(widths)
    cut = False
    for number, row in enumerate(rows):
        cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=False)]
        if number:
            cells[1] = paint(cells[1], STATE_STYLES.get(row[1].split(" ")[0], "bold"))
        name = row[-1]
        if not wide and len(name) > max(8, room):
            name, cut = name[: max(8, room) - 1] + "…", True
        print("  ".join([*cells, name]).rstrip())
    for s in summaries:
        if s.torn_interventions:  # counted as show counts them: the readable ones, and how many are not
            print(
                f"{s.id}: {s.interventions} intervention(s), {s.torn_interventions} unreadable line(s) in its audit log"
            )
    for s in summaries:
        if s.decision and s.state != COMPLETE:
            print(f"{s.id}: {s.decision}")
    broken = [s for s in summaries if s.error]
    for s in broken:
        print(f"warning: {s.id}: {s.error}", file=sys.stderr)
    print(f"\n{human.count(len(summaries))} backfill(s) under {root}")
    print(f"times in {human.local_zone()}; ranges end exclusive; details: backfill show ID")
    if cut:
        print(f"names cut to fit {LIST_WIDTH} columns: backfill list --wide shows them whole, and when each was made")


def show_command(argv: list[str]) -> int:
    args = show_parser().parse_args(argv)
    if args.output is None and dashboard_possible(no_progress=False, json_output=False):
        from tui.cli.browser import browse

        return browse(root=None, backfill_id=args.id, state_dir=args.state_dir, no_color=args.no_color)
    from engine.execute.backfill import load_backfill, shown_parallelism  # not for `list`: executor, pipelines
    from tui.cli.reconcile_command import expired_lease_note

    loaded = load_backfill(args.id, args.state_dir, Path.cwd())
    # Said, never acted on: show signals and settles nothing. An executor that is gone (no lock held on this
    # host) needs no reconcile, only a --continue: then only that is said.
    interrupted = interrupted_for_reading(loaded.store, loaded.board, loaded.running)
    note = interrupted_note(loaded.store, interrupted) if interrupted else expired_lease_note(loaded)
    if note is not None:
        sys.stderr.write(f"backfill: note: {note}\n")
    statuses = frozenset(Status.parse(s) for s in args.status) if args.status else None
    if args.output == "json":
        write_show_json(loaded, statuses, args.offset, args.limit)
        return 0
    from tui.cli.show_text import print_state_text

    options = resume_options(loaded.manifest, loaded.store.directory)
    summary = summarize(loaded.store, loaded.manifest, counts=loaded.board.counts())
    print_state_text(
        loaded,
        options,
        shown_parallelism(loaded.spec, options),
        None,
        args.offset,
        args.limit,
        title=f"backfill {loaded.store.id} ({summary.state}; created {summary.created_at})",
        statuses=statuses,
    )
    return 0


def watch_command(argv: list[str]) -> int:
    """``backfill watch ID``: the dashboard of a backfill, live while another process runs it, read-only."""
    args = watch_parser().parse_args(argv)
    if not dashboard_possible(no_progress=False, json_output=False):
        raise BadInput(
            "backfill watch needs a terminal (this output is not one, or TERM=dumb): "
            f"use backfill show {args.id} --output text, or --output json"
        )
    from tui.cli.browser import browse

    return browse(root=None, backfill_id=args.id, state_dir=args.state_dir, no_color=args.no_color, read_only=True)


def _guardrails_json(loaded: Loaded) -> dict[str, Any]:
    """The reason, the latest pre-flight and the latest record of a saved backfill (``show`` documents)."""
    from engine.store.guardrails_log import latest_preflight

    record = latest_record(loaded.store.directory / "records")
    return {
        "reason": loaded.manifest.get("reason"),
        "preflight": latest_preflight(loaded.store),
        "record": str(record) if record is not None else None,
    }


def latest_record(directory: Path) -> Path | None:
    """The record written last: records are written once, so by their time (``…Z-2.yml``, the second record of a
    second, sorts before ``…Z.yml`` by name)."""
    return max(directory.glob("*.yml"), key=_written_order, default=None)


def _written_order(path: Path) -> tuple[int, str]:
    try:
        return path.stat().st_mtime_ns, path.name
    except OSError:
        return 0, path.name


def interventions_json(directory: Path) -> dict[str, Any]:
    """The pause or end in force, the audit log's size, and its last lines as stored."""
    from engine.store import audit
    from engine.store.control import read_control

    control = read_control(directory)
    log = audit.read(directory)
    return {
        "paused": control.paused.to_json() if control.paused else None,
        "ended": control.ended.to_json() if control.ended else None,
        "count": len(log.entries),
        "torn_lines": log.torn,
        "last": log.entries[-5:],
    }


def write_show_json(loaded: Loaded, statuses: frozenset[Status] | None, offset: int, limit: int) -> None:
    from engine.execute.backfill import shown_parallelism

    options = resume_options(loaded.manifest, loaded.store.directory)
    summary = summarize(loaded.store, loaded.manifest, counts=loaded.board.counts())
    extra: dict[str, Any] = {
        "state": summary.state,
        "created_at": summary.created_at,
        "last_activity": summary.last_activity,
        "interventions": interventions_json(loaded.store.directory),
    }
    write_state_json(
        sys.stdout.buffer,
        spec=loaded.spec,
        store=loaded.store,
        board=loaded.board,
        options=options,
        parallelism=shown_parallelism(loaded.spec, options),
        selected=None,
        skipped=0,
        offset=offset,
        limit=limit,
        extra=_guardrails_json(loaded),
        indices=loaded.board.indices_with(statuses) if statuses is not None else None,
        extra_backfill=extra,
    )
    sys.stdout.buffer.flush()
