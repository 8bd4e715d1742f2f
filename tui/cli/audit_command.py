"""``backfill audit ID``: every intervention on a backfill, oldest first; ``--output json`` gives the lines
as they are stored (JSON Lines). A torn line (a crash mid-append) is reported on stderr, never hidden."""

from __future__ import annotations

import sys
from pathlib import Path

import orjson

from engine.store import audit
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
    try:
        data = (directory / audit.AUDIT).read_bytes()
    except FileNotFoundError:
        data = b""
    lines = [line for line in data.split(b"\n") if line.strip()]
    torn: list[int] = []
    if args.output == "json":
        out = sys.stdout.buffer
        for number, line in enumerate(lines, start=1):
            if _parse(line) is None:
                torn.append(number)
            else:
                out.write(line + b"\n")
        out.flush()
    else:  # streamed: the first screen is out before the 100,000th line is parsed
        paint = Paint(colors_enabled(sys.stdout, no_color_flag=args.no_color))
        count = len(lines)
        heading = f"{count} line{'s' if count != 1 else ''} in its audit log" if count else "no intervention"
        sys.stdout.write(f"{name}: {heading}\n")
        for number, line in enumerate(lines, start=1):
            entry = _parse(line)
            if entry is None:
                torn.append(number)
                sys.stdout.write(paint(f"line {number}: torn (a crash while appending), kept as written", "red") + "\n")
            else:
                sys.stdout.write(entry_text(entry, paint) + "\n")
        sys.stdout.flush()
    problem = audit.AuditLog(torn=torn).problem(directory / audit.AUDIT)
    if problem:
        sys.stderr.write(f"backfill: warning: {problem}\n")
    return 0


def _parse(line: bytes) -> dict | None:
    try:
        value = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def entry_text(line: dict, paint: Paint) -> str:
    """``2026-11-30T21:40:00Z  MARK  3fa2c1d0e4b5  failed → succeeded  ann@box: loaded by hand (rows 1200)``"""
    action = str(line.get("action"))
    what = str(line.get("partition_id") or "backfill")[:12]
    if line.get("asset"):
        what += f" {line['asset']}"
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
