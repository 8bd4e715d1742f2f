"""A partition's diff as text, for ``backfill diff`` and the dashboard's diff view (docs/diff.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from engine.dates.instants import format_instant
from engine.dates.plan import Interval
from engine.spec.backfill_spec import BackfillSpec

if TYPE_CHECKING:  # the dashboard shows a partition's row changes without loading the diff's SQL modules
    from engine.execute.preview import Preview
    from engine.guardrails.partition_diff import TableDiff


def preview_text(spec: BackfillSpec, preview: Preview) -> str:
    """What ``--preview`` and the pre-flight screen's F2 show: how the scratch run went, then its diff."""
    lines = (
        f"preview: partition {preview.interval.index} run into a scratch copy in {preview.seconds:.1f}s "
        "(the warehouse is untouched)\n"
        if preview.ran
        else f"preview: partition {preview.interval.index} not run into a scratch copy\n"
    )
    for name, why in preview.not_run.items():
        lines += f"  not run in the preview: {name} ({why}); what runs after it reads its table as it is\n"
    if not preview.ran:
        return lines + "  nothing else was selected: nothing ran, no changes to show\n"
    if preview.exit_code:
        lines += f"  the run failed (exit {preview.exit_code}); its last lines:\n"
        return lines + "".join(f"    {line}\n" for line in preview.output)
    return lines + diff_lines(spec, preview.interval, preview.diffs)


def changes_text(changes: dict[str, Any] | None) -> str | None:
    """``mid.orders +1 -1 ~1``: what an attempt recorded it changed, per table (None: nothing recorded)."""
    if not changes:
        return None
    parts = []
    for table, change in sorted(changes.items()):
        if not isinstance(change, dict) or "error" in change:
            parts.append(f"{table} not measured")
            continue
        text = f"{table} +{change.get('added') or 0:,} -{change.get('removed') or 0:,}"
        if change.get("changed") is not None:
            text += f" ~{change['changed']:,}"
        if change.get("key_breaks") and change.get("declared_key"):
            text += f" (key {', '.join(change['declared_key'])} repeated or null)"
        parts.append(text)
    return ", ".join(parts)


def diff_lines(spec: BackfillSpec, interval: Interval, diffs: list[TableDiff]) -> str:
    """A partition's diff as text: per table its counts, then ``+`` added, ``-`` removed and ``~`` changed rows."""
    partition_id = spec.ids.of(interval.start, interval.end)
    start, end = format_instant(interval.start, spec.zone), format_instant(interval.end, spec.zone)
    lines = [f"partition {interval.index}  {start} → {end}  {partition_id[:12]}"]
    for diff in diffs:
        lines.append("  " + summary(diff))
        lines += [f"    + {_row(row)}" for row in diff.added]
        lines += [f"    - {_row(row)}" for row in diff.removed]
        for change in diff.changed:
            moved = ", ".join(
                f"{c}: {change['before'].get(c)!r} → {change['after'].get(c)!r}" for c in change["columns"]
            )
            lines.append(f"    ~ {_row(change['key'])}: {moved}")
        shown = len(diff.added) + len(diff.removed) + len(diff.changed)
        total = sum(v or 0 for v in diff.counts.values())
        if total > shown:
            lines.append(f"    … {total - shown:,} more (--limit)")
    return "\n".join(lines) + "\n"


def summary(diff: TableDiff) -> str:
    """``mid.orders  by key id: +1 added, -1 removed, ~1 changed (3 rows before, 3 after)``."""
    if diff.key:
        how = f"by key {', '.join(diff.key)}"
    elif diff.key_breaks and diff.declared_key:
        breaks = diff.key_breaks
        how = (
            f"as multisets (its key {', '.join(diff.declared_key)} is repeated or null in "
            f"{breaks['before']:,} rows before, {breaks['after']:,} after)"
        )
    else:
        how = "as multisets (no primary key)"
    counts = diff.counts
    parts = [f"+{counts.get('added_total') or 0:,} added", f"-{counts.get('removed_total') or 0:,} removed"]
    if diff.key:
        parts.append(f"~{counts.get('changed_total') or 0:,} changed")
    return f"{diff.table}  {how}: {', '.join(parts)} ({diff.before:,} rows before, {diff.after:,} after)"


def _row(row: dict[str, Any]) -> str:
    return " ".join(f"{name}={value!r}" if isinstance(value, str) else f"{name}={value}" for name, value in row.items())
