"""``backfill audit ID``: every intervention on a backfill, oldest first; ``--output json`` gives the lines
as they are stored (JSON Lines); ``--since`` and ``--action`` keep some. A torn line (a crash mid-append) is
reported on stderr, never hidden."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path

import orjson

from engine.store import audit
from engine.store.audit_index import AuditLines, entry_time
from engine.store.locate import locate_backfill, state_root_of_cwd
from tui.cli.intervene_arguments import audit_parser
from tui.cli.terminal import Paint, colors_enabled

ACTION_STYLES = {"CANCEL": "yellow", "PAUSE": "yellow", "RESUME": "green", "RECONCILE_LOST": "red", "MARK": "bold"}


def audit_command(argv: list[str]) -> int:
    args = audit_parser().parse_args(argv)
    if args.id is None:  # the state root's own log: interventions that belong to no backfill (stand-ins)
        directory = state_root_of_cwd(args.state_dir, Path.cwd())
        name = f"state directory {directory}"
    else:
        store, _ = locate_backfill(args.id, args.state_dir, Path.cwd())
        directory, name = store.directory, f"backfill {store.id}"
    actions = frozenset(action for given in args.action for action in given)
    torn: list[int] = []
    # Streamed through the offset index: the first screen is out before the 100,000th line is read, and --since
    # starts at its first line by a binary search, whatever the length of the history.
    with AuditLines(directory) as log:
        first = 0 if args.since is None else log.first_at_or_after(args.since)
        while first and _parse(log.line(first - 1)) is None:  # a torn line's time is unknown: never left out
            first -= 1
        wanted = _filter(actions, args.since)
        paint = None
        if args.output != "json":
            paint = Paint(colors_enabled(sys.stdout, no_color_flag=args.no_color))
            sys.stdout.write(f"{name}: {_heading(log.count, actions, args.since, first)}\n")
        out = sys.stdout.buffer if paint is None else sys.stdout
        for number, line in enumerate(log.lines(first), start=first + 1):
            entry = _parse(line)
            if entry is None:
                torn.append(number)
                if paint is not None and not actions:
                    out.write(paint(f"line {number}: torn (a crash while appending), kept as written", "red") + "\n")
            elif wanted(entry):
                out.write(line + b"\n" if paint is None else entry_text(entry, paint) + "\n")
        out.flush()
    problem = audit.AuditLog(torn=torn).problem(directory / audit.AUDIT)
    if problem:
        sys.stderr.write(f"backfill: warning: {problem}\n")
    return 0


def _heading(count: int, actions: frozenset[str], since: int | None, first: int) -> str:
    """``12,004 lines in its audit log`` and, when filtered, what is shown of them."""
    if not count:
        return "no intervention"
    heading = f"{count:,} line{'s' if count != 1 else ''} in its audit log"
    shown = []
    if since is not None:
        moment = datetime.fromtimestamp(since / 1_000_000, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
        shown.append(f"since {moment} (from line {first + 1:,})")
    if actions:
        shown.append(", ".join(sorted(actions)))
    return heading + (f"; showing {' and '.join(shown)}" if shown else "")


def _filter(actions: frozenset[str], since: int | None):
    """Whether an entry passes ``--action`` and ``--since`` (a line after the first one since may have been
    applied a moment earlier than the line before it: each is judged by its own time)."""

    def wanted(entry: dict) -> bool:
        if actions and entry.get("action") not in actions:
            return False
        if since is not None:
            moment = entry_time(entry)
            return moment is not None and moment >= since
        return True

    return wanted


def _parse(line: bytes) -> dict | None:
    try:
        value = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def entry_text(line: dict, paint: Paint) -> str:
    """``2026-11-30T21:40:00Z  MARK  3fa2c1d0e4b5  failed → succeeded  ann@box: loaded by hand (rows 1200)``"""
    action = str(line.get("action"))
    what = audit.subject(line)
    change = f"{line.get('from_status') or '—'} → {line.get('to_status') or '—'}"
    rows = f" (rows {line['target_count']})" if line.get("target_count") is not None else ""
    if rows and line.get("from_status") == line.get("to_status"):  # rows stated on a partition already so
        rows = f" (rows {line.get('previous_count') if line.get('previous_count') is not None else '—'} → "
        rows += f"{line['target_count']})"
    when = str(line.get("applied_at") or line.get("requested_at") or "")[:19] + "Z"
    return (
        f"{when:20}  {paint(action.ljust(14), ACTION_STYLES.get(action, 'bold'))}  {what:12}  {change}  "
        f"{line.get('requested_by')}: {line.get('reason')}{rows}"
    )
