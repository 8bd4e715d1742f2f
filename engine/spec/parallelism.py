"""How many partitions may run at once, given the environment's connections.

Each child may use up to ``min(W, L)`` slots of a connection limited to ``L``
concurrent assets (W = workers per child), so at most ``max(1, L // min(W, L))``
children fit. A writable DuckDB file allows a single writer process, so any
such connection means one partition at a time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # a command's start-up does not load the pipeline's configuration code
    from engine.pipeline.config import Environment


@dataclass(frozen=True)
class Parallelism:
    requested: int
    effective: int
    reason: str | None  # why ``effective`` is below ``requested``, or None
    short_reason: str | None = None  # the same in a few words, for headers
    limit: tuple[int, str] | None = None  # the environment's own cap, binding or not, and in a few words why:
    # a --max-parallel raised while the backfill runs is held to it too


def effective_parallelism(requested: int, workers: int, environment: Environment | None) -> Parallelism:
    """Cap ``requested`` by every connection of the environment; say which connection capped it."""
    cap, reason, short = None, None, None
    for connection in environment.connections if environment else ():
        if connection.kind == "duckdb" and not connection.read_only:
            limit = 1
            why = f"connection {connection.name!r} is a writable DuckDB file (one writer process at a time)"
            brief = f"writable DuckDB {connection.name!r}"
        elif connection.max_concurrent_assets is not None:
            slots = connection.max_concurrent_assets
            limit = max(1, slots // min(workers, slots))
            why = (
                f"connection {connection.name!r} allows {slots} concurrent assets and each child may use "
                f"min({workers} workers, {slots}) = {min(workers, slots)}"
            )
            brief = f"{connection.name!r} max {slots} assets"
        else:
            continue
        if cap is None or limit < cap:
            cap, reason, short = limit, why, brief
    if cap is None:
        return Parallelism(requested, requested, None)
    if cap < requested:
        return Parallelism(requested, cap, reason, short, (cap, short))
    return Parallelism(requested, requested, None, None, (cap, short))
