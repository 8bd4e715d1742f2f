"""The partition table's visible rows written to a file: CSV for a spreadsheet, JSON for a script.

Visible means after the filter (a status, a kind of failure), in the table's order. Each row is a partition:
its index, ID, interval in the backfill's zone, status, attempts, latest duration and, for a failed or
cancelled one, the reason its record holds now.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import orjson

from engine.base.atomic import write_atomic
from engine.base.errors import BadInput
from engine.dates.instants import format_instant
from engine.store.status import Status
from tui.app.sources import BackfillSource

FIELDS = ("index", "id", "start", "end", "status", "attempts", "duration_seconds", "reason")
FORMATS = {".csv": "csv", ".json": "json"}


def export_format(path: Path) -> str:
    """``csv`` or ``json``, from the file's extension; anything else is bad input naming what is accepted."""
    found = FORMATS.get(path.suffix.lower())
    if found is None:
        raise BadInput(f"{path.name!r} ends in neither .csv nor .json: name the file so its format is clear")
    return found


def export_rows(source: BackfillSource, indices: Iterable[int]) -> list[dict[str, Any]]:
    spec, board = source.spec, source.board
    rows = []
    for index in indices:
        interval = spec.plan.interval(index)
        status = board.status(index)
        reason = source.records.load(index).reason if status in (Status.FAILED, Status.CANCELLED) else None
        duration = board.duration(index)
        rows.append(
            {
                "index": index,
                "id": spec.ids.of(interval.start, interval.end),
                "start": format_instant(interval.start, spec.zone),
                "end": format_instant(interval.end, spec.zone),
                "status": status.label,
                "attempts": board.attempts(index),
                "duration_seconds": round(duration, 3) if duration is not None else None,
                "reason": reason,
            }
        )
    return rows


def write_export(path: Path, source: BackfillSource, indices: Iterable[int]) -> int:
    """Write the rows of ``indices`` to ``path`` (replaced whole, never half-written); how many rows."""
    fmt = export_format(path)
    if not path.parent.is_dir():
        raise BadInput(f"{path.parent} is not a directory: choose a file in one that exists")
    rows = export_rows(source, indices)
    if fmt == "json":
        data = orjson.dumps({"backfill": source.store.id, "partitions": rows}, option=orjson.OPT_INDENT_2) + b"\n"
    else:
        text = io.StringIO()
        writer = csv.DictWriter(text, fieldnames=FIELDS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
        data = text.getvalue().encode()
    try:
        write_atomic(path, data, durable=False)
    except OSError as error:
        raise BadInput(f"cannot write {path}: {error.strerror or error}") from None
    return len(rows)
