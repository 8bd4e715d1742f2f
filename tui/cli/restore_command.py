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
    reason = check_reason(args.reason)
    if reason is None:
        raise BadInput("--reason is required to restore a backfill's snapshot: say why, e.g. --reason 'bad fix'")
    store, _ = locate_backfill(args.id, args.state_dir, Path.cwd())
    done = restore_backfill(store, reason, force=args.force)
    sys.stdout.write(f"restored the snapshot of backfill {store.id}:\n" + "".join(f"  {line}\n" for line in done))
    return 0
