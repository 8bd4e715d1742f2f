"""The plan and state documents: one streamed JSON object, or a static paginated text listing.

Both list one page of partitions (``--offset``/``--limit``); counts always cover
the whole plan. JSON is written in chunks so that ``--limit 0`` over hundreds of
thousands of partitions never builds the whole document in memory.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import IO, Any

import orjson

from engine.dates.durations import format_duration
from engine.dates.instants import format_instant, zone_name
from engine.pipeline.options import RUN_OPTIONS
from engine.spec.backfill_spec import Planned
from engine.spec.partitions import PartitionDescriber
from engine.store.status import STATUS_NAMES
from tui import human

SUMMARY_KEYS = ("total", *STATUS_NAMES, "not_selected")
_CHUNK = 4096


def page_bounds(total: int, offset: int, limit: int) -> tuple[int, int]:
    """``[begin, stop)`` of the listed page; ``limit`` 0 means everything from ``offset``."""
    begin = min(offset, total)
    stop = total if limit == 0 else min(total, begin + limit)
    return begin, stop


def options_json(planned: Planned) -> dict[str, Any]:
    options = planned.options
    return {
        "max_parallel": options.max_parallel,
        "effective_max_parallel": planned.parallelism.effective,
        "parallelism_reason": planned.parallelism.reason,
        "workers": options.workers,
        "retries": options.retries,
        "on_failure": options.on_failure,
        "reverse": options.reverse,
        "timeout": _timeout_text(options.timeout),
    }


def _timeout_text(timeout: int | None) -> str | None:
    return format_duration(timeout) if timeout else None


def summary_json(total: int, counts: dict[str, int], not_selected: int) -> dict[str, int]:
    return {"total": total, **{name: counts.get(name, 0) for name in STATUS_NAMES}, "not_selected": not_selected}


def page_rows(
    describer: PartitionDescriber,
    indices: Iterable[int],
    decorate: Callable[[dict[str, Any]], None],
) -> Iterator[dict[str, Any]]:
    """Rows of the partitions ``indices`` (a page) with the shared fields, completed by ``decorate``."""
    plan = describer.spec.plan
    for row in describer.describe_many(plan.interval(index) for index in indices):
        decorate(row)
        yield row


def write_json(
    out: IO[bytes],
    *,
    backfill: dict[str, Any],
    options: dict[str, Any],
    summary: dict[str, int],
    rows: Iterator[dict[str, Any]],
    begin: int,
    stop: int,
    offset: int,
    limit: int,
    listed_total: int | None = None,
    extra: dict[str, Any] | None = None,
) -> None:
    """``{backfill, options, [preflight, record,] summary, partitions, page, has_more}``, streamed.

    ``listed_total`` is how many partitions the listing pages through when it is filtered
    (default: all of them).
    """
    out.write(b'{"backfill":' + orjson.dumps(backfill) + b',"options":' + orjson.dumps(options))
    for key, value in (extra or {}).items():
        out.write(b',"' + key.encode() + b'":' + orjson.dumps(value))
    out.write(b',"summary":' + orjson.dumps(summary) + b',"partitions":[')
    chunk: list[dict[str, Any]] = []
    first = True
    for row in rows:
        chunk.append(row)
        if len(chunk) == _CHUNK:
            out.write((b"" if first else b",") + orjson.dumps(chunk)[1:-1])
            first, chunk = False, []
    if chunk:
        out.write((b"" if first else b",") + orjson.dumps(chunk)[1:-1])
    page = {"offset": offset, "limit": limit}
    listed = summary["total"] if listed_total is None else listed_total
    out.write(b'],"page":' + orjson.dumps(page) + b',"has_more":' + (b"true" if stop < listed else b"false"))
    out.write(b"}\n")


def write_text(
    out: IO[str],
    *,
    title: str,
    header: list[tuple[str, str]],
    summary: dict[str, int],
    rows: Iterator[dict[str, Any]],
    begin: int,
    stop: int,
    limit: int,
    next_page_hint: str,
    listed_total: int | None = None,
) -> None:
    """A static listing: header, counts, the page's rows and how to see the next page."""
    lines = [title]
    width = max(len(label) for label, _ in header)
    lines += [f"  {label.ljust(width)}  {value}" for label, value in header]
    counts = ", ".join(
        f"{name.replace('_', ' ')} {human.count(summary[name])}" for name in SUMMARY_KEYS[1:] if summary[name]
    )
    lines.append(f"partitions: {human.count(summary['total'])}" + (f" ({counts})" if counts else ""))
    out.write("\n".join(lines) + "\n\n")
    # As wide as the plan's last index, whatever the page or the status filter lists: columns line up.
    index_width = len(str(max(summary["total"] - 1, 0)))
    out.write(f"  {'#'.rjust(index_width)}  {'id':<12}  {'status':<9}  {'start':<26}  end (exclusive)\n")
    for row in rows:
        out.write(
            f"  {str(row['index']).rjust(index_width)}  {row['id'][:12]}  {row['status']:<9}  "
            f"{row['start']:<26}  {row['end']}" + (f"  {row['reason']}" if row.get("reason") else "") + "\n"
        )
    total = summary["total"] if listed_total is None else listed_total
    if begin >= stop:
        out.write(f"\n(no partitions at offset {human.count(begin)}; {human.count(total)} listed)\n")
    else:
        out.write(f"\nshowing {human.count(begin + 1)}–{human.count(stop)} of {human.count(total)}")
        if stop < total:
            step = limit or 1000
            out.write(f"; next page: {next_page_hint} --offset {stop} --limit {step}")
        out.write("\n")


def header_lines(planned: Planned, extra: list[tuple[str, str]] | None = None) -> list[tuple[str, str]]:
    """Normalized inputs and effective parallelism, as label/value pairs for text output."""
    spec, options, parallelism = planned.spec, planned.options, planned.parallelism
    target = spec.target
    lines = [("target", f"{target.template if target.is_command else target.path}")]
    if target.name != (target.template or ""):
        lines.append(("name", target.name))
    if spec.environment:
        lines.append(("environment", spec.environment))
    lines.append(
        ("range", f"{format_instant(spec.start, spec.zone)} → {format_instant(spec.end, spec.zone)} (end exclusive)")
    )
    lines.append(("partition", f"{spec.unit.name} in {zone_name(spec.zone)}"))
    if parallelism.reason:
        parallel = f"{parallelism.effective} (requested {parallelism.requested}; {parallelism.reason})"
    else:
        parallel = str(parallelism.effective)
    # Workers are the assets a pipeline child runs at once; a command has none.
    lines.append(("parallelism", parallel if target.is_command else f"{parallel} × {options.workers} workers"))
    controls = f"retries {options.retries}, on failure {options.on_failure}, " + (
        "newest first" if options.reverse else "oldest first"
    )
    if options.timeout:
        controls += f", timeout {format_duration(options.timeout)}"
    lines.append(("controls", controls))
    for option in RUN_OPTIONS:
        value = option.shown(getattr(spec.run_options, option.attribute))
        if option.label is not None and value:
            lines.append((option.label, value))
    return lines + (extra or [])
