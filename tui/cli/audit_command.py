"""``backfill audit ID``: every intervention on a backfill, oldest first; ``--output json`` gives the lines
as they are stored (JSON Lines). A torn line (a crash mid-append) is reported on stderr, never hidden."""

from __future__ import annotations

import sys
from pathlib import Path

import orjson

from engine.execute.backfill import locate_backfill
from engine.store import audit
from tui.cli.intervene_arguments import audit_parser
from tui.cli.terminal import Paint, colors_enabled

ACTION_STYLES = {"CANCEL": "yellow", "PAUSE": "yellow", "RESUME": "green", "RECONCILE_LOST": "red", "MARK": "bold"}


def audit_command(argv: list[str]) -> int:
    args = audit_parser().parse_args(argv)
    store, _ = locate_backfill(args.id, args.state_dir, Path.cwd())
    log = audit.read(store.directory)
    problem = log.problem(store.directory / audit.AUDIT)
    if problem:
        sys.stderr.write(f"backfill: warning: {problem}\n")
    if args.output == "json":
        out = sys.stdout.buffer
        for line in log.entries:
            out.write(orjson.dumps(line) + b"\n")
        out.flush()
        return 0
    paint = Paint(colors_enabled(sys.stdout, no_color_flag=args.no_color))
    if not log.entries:
        sys.stdout.write(f"backfill {store.id}: no intervention\n")
        return 0
    sys.stdout.write(f"backfill {store.id}: {len(log.entries)} intervention{'s' if len(log.entries) != 1 else ''}\n")
    for line in log.entries:
        sys.stdout.write(entry_text(line, paint) + "\n")
    return 0


def entry_text(line: dict, paint: Paint) -> str:
    """``2026-11-30T21:40:00Z  MARK  3fa2c1d0e4b5  failed → succeeded  ann@box: loaded by hand (rows 1200)``"""
    action = str(line.get("action"))
    what = str(line.get("partition_id") or "backfill")[:12]
    if line.get("asset"):
        what += f" {line['asset']}"
    change = f"{line.get('from_status') or '—'} → {line.get('to_status') or '—'}"
    rows = f" (rows {line['target_count']})" if line.get("target_count") is not None else ""
    when = str(line.get("applied_at") or line.get("requested_at") or "")[:19] + "Z"
    return (
        f"{when:20}  {paint(action.ljust(14), ACTION_STYLES.get(action, 'bold'))}  {what:12}  {change}  "
        f"{line.get('requested_by')}: {line.get('reason')}{rows}"
    )
