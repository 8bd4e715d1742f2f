"""Text listing of a saved backfill: its inputs, counts and one page of partitions with statuses."""

from __future__ import annotations

import sys
from typing import Any

from engine.backfill import Loaded
from engine.parallelism import Parallelism
from engine.partitions import PartitionDescriber
from engine.rerun import PartitionSelection
from engine.spec import ExecutionOptions, Planned
from tui.backfill_command import header_lines
from tui.plan_output import page_bounds, page_rows, summary_json, write_text


def print_state_text(
    loaded: Loaded,
    options: ExecutionOptions,
    parallelism: Parallelism,
    selection: PartitionSelection | None,
    offset: int,
    limit: int,
    *,
    title: str,
) -> None:
    spec, board = loaded.spec, loaded.board
    total = len(spec.plan)
    begin, stop = page_bounds(total, offset, limit)
    selected = selection.count(board) if selection else total

    def decorate(row: dict[str, Any]) -> None:
        row["status"] = board.status(row["index"]).label

    planned = Planned(spec, options, parallelism)
    header = header_lines(planned, [("state", str(loaded.store.directory))])
    write_text(
        sys.stdout,
        title=title,
        header=header,
        summary=summary_json(total, board.counts(), total - selected),
        rows=page_rows(PartitionDescriber(spec), begin, stop, decorate),
        begin=begin,
        stop=stop,
        limit=limit,
        next_page_hint="repeat with",
    )
