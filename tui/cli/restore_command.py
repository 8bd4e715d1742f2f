"""``backfill restore ID --reason TEXT``: put back the tables a backfill's snapshot holds."""

from __future__ import annotations

import sys
from pathlib import Path

from engine.base.errors import BadInput
from engine.guardrails.request import check_reason
from engine.guardrails.restore import restore_backfill
from engine.store.locate import locate_backfill
from tui.cli.arguments import restore_parser


def restore_command(argv: list[str]) -> int:
    args = restore_parser().parse_args(argv)
    if args.prune:
        return _prune(args)
    if not args.id:
        raise BadInput("backfill restore needs a backfill ID (backfill list shows them), or --prune")
    reason = check_reason(args.reason)
    if reason is None:
        raise BadInput("--reason is required to restore a backfill's snapshot: say why, e.g. --reason 'bad fix'")
    store, _ = locate_backfill(args.id, args.state_dir, Path.cwd())
    done = restore_backfill(store, reason, force=args.force)
    sys.stdout.write(f"restored the snapshot of backfill {store.id}:\n" + "".join(f"  {line}\n" for line in done))
    return 0


def _prune(args) -> int:
    """``--prune``: every expired snapshot of the state root, whatever backfill it belongs to."""
    import time

    from engine.guardrails.table_snapshot import prune_snapshots
    from engine.store.locate import state_root_of_cwd
    from engine.store.state_store import saved_backfill_dirs

    given = [
        flag for flag, value in (("backfill ID", args.id), ("--reason", args.reason), ("--force", args.force)) if value
    ]
    if given:
        raise BadInput(f"--prune takes no {' or '.join(given)}: it deletes every snapshot past its retention")
    root = state_root_of_cwd(args.state_dir, Path.cwd())
    pruned = prune_snapshots(saved_backfill_dirs(root), now=time.time())
    if not pruned:
        sys.stdout.write(f"no snapshot in {root} is past its retention\n")
        return 0
    sys.stdout.write(f"pruned {len(pruned)} snapshot{'s' if len(pruned) != 1 else ''} in {root}:\n")
    sys.stdout.write("".join(f"  {line}\n" for line in pruned))
    return 0
