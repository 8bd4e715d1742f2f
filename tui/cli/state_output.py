"""The state document of a saved backfill: the plan document plus IDs, statuses and attempts."""

from __future__ import annotations

from typing import IO, Any

from engine.base.errors import StateUnreadable
from engine.spec.backfill_spec import BackfillSpec, ExecutionOptions, Planned
from engine.spec.parallelism import Parallelism
from engine.spec.partitions import PartitionDescriber
from engine.store.failure_groups import GROUPS_SHOWN, failure_groups
from engine.store.split_tree import SplitNode, read_tree
from engine.store.state_store import StateStore
from engine.store.status import StatusBoard
from tui.cli.plan_output import options_json, page_bounds, page_rows, summary_json, write_json

# What an attempt sent to a Dask scheduler adds: where it ran and the child it ran there (docs/json.md).
REMOTE_FIELDS = ("scheduler", "cluster", "worker", "host", "pgid")


def attempts_json(store: StateStore, record_attempts) -> list[dict[str, Any]]:
    return [_attempt_json(store, a) for a in record_attempts]


def _attempt_json(store: StateStore, a) -> dict[str, Any]:
    document = {
        "run_id": a.run_id,
        "status": a.status,
        "started_at": a.started_at,
        "finished_at": a.finished_at,
        "exit_code": a.exit_code,
        "error": a.error,
        "log": str(store.directory / a.log) if a.log else None,
        "verification": a.verification,
        "kind": a.kind,
        "rows": a.rows,
        "asset": a.asset,
        "by": a.by,
        "assets": a.assets,
        "carried": a.carried,
        "split": a.split,
        "row_changes": a.row_changes,
    }
    if a.launcher == "dask":
        remote = a.remote or {}
        document |= {key: remote[key] for key in REMOTE_FIELDS if key in remote}
        document |= {"pid": a.pid, "pid_started": a.pid_started, "pid_birth": a.pid_birth}
    return document


def children_json(store: StateStore, node: SplitNode) -> list[dict[str, Any]] | None:
    """A split partition's halves, each with its status, attempts and its own halves (null: it did not split)."""
    if not node.halves:
        return None
    return [
        {
            "id": half.record.id,
            "start": half.record.start,
            "end": half.record.end,
            "status": half.record.status,
            "attempts": attempts_json(store, half.record.attempts),
            "children": children_json(store, half),
        }
        for half in node.halves
    ]


def backfill_json(spec: BackfillSpec, store: StateStore) -> dict[str, Any]:
    return {"id": store.id, "state_dir": str(store.directory), **spec.to_json()}


def write_state_json(
    out: IO[bytes],
    *,
    spec: BackfillSpec,
    store: StateStore,
    board: StatusBoard,
    options: ExecutionOptions,
    parallelism: Parallelism,
    selected: bytes | None,
    skipped: int,
    offset: int,
    limit: int,
    indices: list[int] | None = None,
    extra_backfill: dict[str, Any] | None = None,
    extra: dict[str, Any] | None = None,
) -> None:
    """``{backfill, options, summary, partitions, page, has_more}`` with statuses and attempts.

    ``selected`` has a byte per partition, 1 when this invocation runs it (None: none is skipped);
    ``indices`` restricts the listing (a status filter), counts still covering the whole plan.
    """
    total = len(spec.plan)
    listing = indices
    universe = len(listing) if listing is not None else total
    begin, stop = page_bounds(universe, offset, limit)
    describer = PartitionDescriber(spec)
    damaged: list[StateUnreadable] = []  # reported once the document is whole: never half a document on stdout

    def decorate(row: dict[str, Any]) -> None:
        index = row["index"]
        row["status"] = board.status(index).label
        attempts: list[dict[str, Any]] = []
        children, reason, changes = None, None, None
        if board.attempts(index):
            try:
                record = store.read_record(row["id"], spec.plan, spec.ids.of)
                if record is not None and record.is_split:
                    children = children_json(store, read_tree(store.splits, record))
            except StateUnreadable as error:
                record, row["record_error"] = None, str(error)
                damaged.append(error)
            if record is not None:
                attempts = attempts_json(store, record.attempts)
                reason = record.reason
                succeeded = [a for a in record.attempts if a.status == "succeeded" and a.row_changes is not None]
                changes = succeeded[-1].row_changes if succeeded else None
        row["attempts"] = attempts
        row["children"] = children
        row["row_changes"] = changes
        row["reason"] = reason if row["status"] in ("failed", "cancelled", "skipped") else None
        row["not_selected"] = selected is not None and not selected[index]

    rows = page_rows(describer, range(begin, stop) if listing is None else listing[begin:stop], decorate)
    planned = Planned(spec, options, parallelism)
    groups = failure_groups(spec, store, board)
    extra = {
        **(extra or {}),
        "failure_groups": [group.to_json(spec) for group in groups[:GROUPS_SHOWN]],
        "failure_groups_total": len(groups),
    }
    write_json(
        out,
        backfill={**backfill_json(spec, store), **(extra_backfill or {})},
        options=options_json(planned),
        summary=summary_json(total, board.counts(), skipped),
        rows=rows,
        begin=begin,
        stop=stop,
        offset=offset,
        limit=limit,
        listed_total=universe,
        extra=extra,
    )
    if damaged:
        more = f" (and {len(damaged) - 1} more damaged partition files on this page)" if len(damaged) > 1 else ""
        raise StateUnreadable(f"{damaged[0]}{more}")
