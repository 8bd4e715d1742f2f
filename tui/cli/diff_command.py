"""``backfill diff ID [--ids P...] [--table T] [--limit N]``: what partitions changed, row by row (docs/diff.md)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import orjson

from engine.execute.backfill import Loaded, load_backfill
from engine.guardrails.partition_diff import diff_partitions
from engine.store.status import Status
from tui.cli.arguments import diff_parser
from tui.cli.resume import resolve_ids
from tui.diff_text import diff_lines


def diff_command(argv: list[str]) -> int:
    args = diff_parser().parse_args(argv)
    loaded = load_backfill(args.id, args.state_dir, Path.cwd())
    spec = loaded.spec
    indices = sorted(resolve_ids(loaded, args.ids)) if args.ids else changed_partitions(loaded)
    intervals = [spec.plan.interval(index) for index in indices]
    found = diff_partitions(loaded.store.directory, spec, intervals, table=args.table, limit=args.limit)
    if args.output == "json":
        document = {
            "backfill": loaded.store.id,
            "partitions": [
                {
                    "id": spec.ids.of(interval.start, interval.end),
                    "index": interval.index,
                    "start": _text(loaded, interval.start),
                    "end": _text(loaded, interval.end),
                    "tables": [diff.to_json() for diff in diffs],
                }
                for interval, diffs in found
            ],
        }
        sys.stdout.buffer.write(orjson.dumps(document, option=orjson.OPT_INDENT_2) + b"\n")
        return 0
    if not found:
        sys.stdout.write(f"no partition of backfill {loaded.store.id} recorded a change: nothing to show\n")
        return 0
    sys.stdout.write("".join(diff_lines(spec, interval, diffs) for interval, diffs in found))
    return 0


def changed_partitions(loaded: Loaded) -> list[int]:
    """The succeeded partitions whose last attempt recorded a change to any table."""
    spec, store, board = loaded.spec, loaded.store, loaded.board
    changed = []
    for index in board.indices_with(frozenset({Status.SUCCEEDED})):
        interval = spec.plan.interval(index)
        record = store.read_record(spec.ids.of(interval.start, interval.end), spec.plan, spec.ids.of)
        last = record.attempts[-1] if record is not None and record.attempts else None
        if last is not None and any(_moved(c) for c in (last.row_changes or {}).values()):
            changed.append(index)
    return changed


def _moved(change: Any) -> bool:
    return isinstance(change, dict) and any(change.get(k) for k in ("added", "removed", "changed"))


def _text(loaded: Loaded, instant: int) -> str:
    from engine.dates.instants import format_instant

    return format_instant(instant, loaded.spec.zone)
