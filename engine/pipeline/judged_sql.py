"""What a backfill's pre-flight judged of the SQL its assets run as written that cannot be classified: the shape of
each such statement (``sql_writes.shape``), by asset, written to the state directory's ``judged-sql.json`` for each
partition's run (``--judged-sql``).

The pre-flight judges the first partition's rendering; a macro may render another statement on later days. A
partition's run refuses a statement that cannot be classified unless its shape is here: one a person approved (or
the level let through) runs on every day it is rendered, and one nobody saw runs on none. In a file, not on the
command line: one long statement approved (a generated view) would pass the 128 KiB an argument may hold. A Dask
worker that cannot see the state directory is sent the file's bytes with the task.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import orjson

if TYPE_CHECKING:
    from engine.pipeline.sql_writes import Classified


def judged_shapes(run_sql: Mapping[str, Mapping[str, Sequence[Classified]]]) -> dict[str, list[str]]:
    """``run_sql``: by asset, the SQL each source runs as the pre-flight rendered and classified it. The shapes of
    the statements among it that cannot be classified, by asset (assets with none left out)."""
    if not run_sql:  # a command's: its start-up does not load the SQL classifier
        return {}
    from engine.pipeline.sql_writes import shape

    shapes = {
        asset: sorted({shape(s) for found in sources.values() for c in found for s in c.unclassified})
        for asset, sources in run_sql.items()
    }
    return {asset: found for asset, found in shapes.items() if found}


def judged_argument(shapes: Mapping[str, Sequence[str]]) -> str:
    """The shapes as a partition's run reads them (``judged-sql.json``)."""
    return orjson.dumps(shapes, option=orjson.OPT_SORT_KEYS).decode()


def read_judged_argument(text: str) -> dict[str, frozenset[str]]:
    """``judged-sql.json``'s text: by asset, the shapes its run may run unclassified. ValueError when it is not what
    :func:`judged_argument` writes."""
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        value = None
    if not isinstance(value, dict) or not all(
        isinstance(shapes, list) and all(isinstance(s, str) for s in shapes) for shapes in value.values()
    ):
        raise ValueError("an object of asset names, each with a list of statements")
    return {asset: frozenset(shapes) for asset, shapes in value.items()}
