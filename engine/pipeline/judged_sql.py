"""What a backfill's pre-flight judged of the SQL its assets run as written that cannot be classified: the shape of
each such statement (``sql_writes.shape``), by asset, handed to each partition's run on its command line.

The pre-flight judges the first partition's rendering; a macro may render another statement on later days. A
partition's run refuses a statement that cannot be classified unless its shape is here: one a person approved (or
the level let through) runs on every day it is rendered, and one nobody saw runs on none. On the command line, not
in a file, so that a run on another host (a Dask worker) reads the same.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import orjson

from engine.pipeline.sql_writes import Classified, shape


def judged_shapes(run_sql: Mapping[str, Mapping[str, Sequence[Classified]]]) -> dict[str, list[str]]:
    """``run_sql``: by asset, the SQL each source runs as the pre-flight rendered and classified it. The shapes of
    the statements among it that cannot be classified, by asset (assets with none left out)."""
    shapes = {
        asset: sorted({shape(s) for found in sources.values() for c in found for s in c.unclassified})
        for asset, sources in run_sql.items()
    }
    return {asset: found for asset, found in shapes.items() if found}


def judged_argument(shapes: Mapping[str, Sequence[str]]) -> str:
    """The shapes as a partition's run is given them (``--judged-sql``)."""
    return orjson.dumps(shapes, option=orjson.OPT_SORT_KEYS).decode()


def read_judged_argument(text: str) -> dict[str, frozenset[str]]:
    """``--judged-sql``'s value: by asset, the shapes its run may run unclassified. ValueError when it is not what
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
