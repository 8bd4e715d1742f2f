"""``backfill restore ID``: put back what a backfill's snapshot holds, under the backfill's lock — refused
when something else wrote those tables after the snapshot (a later run's record names it, or the tables differ
from what the backfill's last run left), since putting it back would undo that work."""

from __future__ import annotations

import contextlib
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from engine.base.errors import BackfillError, Refused
from engine.base.who import requester
from engine.guardrails.history import instant_of
from engine.guardrails.snapshot_left import changed_since_left, note_left
from engine.guardrails.table_snapshot import restorable_snapshot, restore_snapshot
from engine.pipeline.repository import logs_root, resolve_target
from engine.spec.backfill_spec import TargetSpec
from engine.store import audit
from engine.store.guardrails_log import append_entry
from engine.store.locks import FileLock
from engine.store.manifest import now_text
from engine.store.state_store import StateStore

LISTED = 10  # later writers named in a refusal


def restore_backfill(store: StateStore, reason: str, *, force: bool = False) -> list[str]:
    """Restore the snapshot (refused while the backfill runs, and when a later run or backfill wrote the same
    tables, unless ``force``); the restore is appended to ``guardrails.json`` and audited. What was done, per
    table."""
    lock = FileLock(store.lock_path)
    if not lock.try_acquire():
        raise Refused(f"backfill {store.id} is running: restore it once it has stopped")
    try:
        index = restorable_snapshot(store.directory)
        later, explained = later_writers(store, index)
        later += changed_since_left(index, explained)
        if later and not force:
            shown = "; ".join(later[:LISTED]) + (f"; and {len(later) - LISTED} more" if len(later) > LISTED else "")
            raise Refused(
                f"the snapshot of backfill {store.id} is older than later writes to its tables ({shown}): "
                "restoring would undo them. Pass --force with --reason to restore anyway"
            )
        done = restore_snapshot(store.directory)
        entry: dict[str, Any] = {"mode": "restore", "reason": reason, "at": now_text(), "by": requester()}
        entry["restored"] = done
        if later:
            entry["forced_over"] = later
        append_entry(store, entry)
        at = now_text()
        audit.append(
            store.directory,
            [
                audit.entry(
                    backfill_id=store.id,
                    action="RESTORE",
                    reason=reason
                    + (f" (--force over {len(later)} later write{'s' * (len(later) != 1)})" if later else ""),
                    previous_message="; ".join(done)[:300],
                    requested_by=requester(),
                    requested_at=at,
                    applied_at=at,
                    applied_by=f"backfill restore (PID {os.getpid()})",
                )
            ],
        )
        with contextlib.suppress(OSError, BackfillError):  # the tables as the restore left them: the last writer known
            note_left(store.directory)
        return done
    finally:
        lock.release()


def later_writers(store: StateStore, index: dict[str, Any]) -> tuple[list[str], set[str]]:
    """Runs (by hand, or of another backfill) that finished after the snapshot was taken and ran one of its
    tables' assets: ``run ID (who) at TIME: assets``, and the tables they name. Read from the pipeline's run
    records."""
    tables = {table["name"] for entry in index.get("files", []) for table in entry.get("tables", [])}
    runs = _runs_directory(store)
    named: set[str] = set()
    if not tables or runs is None:
        return [], named
    taken = int(index["taken_at_us"]) if "taken_at_us" in index else instant_of(index["taken_at"])
    found = []
    try:
        names = sorted(os.listdir(runs))
    except OSError:
        return [], named
    for name in names:
        if not name.endswith(".json"):
            continue
        try:
            record = orjson.loads((runs / name).read_bytes())
            if record.get("backfill_id") == store.id or record.get("stand_in") or not record.get("started_at"):
                continue
            # A run still writing when the snapshot was taken may have committed after it: its end counts.
            started = instant_of(record.get("finished_at") or record["started_at"])
            wrote = sorted(
                a["name"]
                for a in record.get("assets") or []
                if a.get("name") in tables and a.get("status") != "skipped"
            )
        except (OSError, orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            continue
        if started >= taken and wrote:
            who = f"backfill {record['backfill_id']}" if record.get("backfill_id") else "a run by hand"
            when = datetime.fromtimestamp(started / 1_000_000, UTC).isoformat(timespec="seconds")
            found.append(f"run {record.get('run_id')} ({who}) at {when}: {', '.join(wrote)}")
            named.update(wrote)
    return found, named


def _runs_directory(store: StateStore) -> Path | None:
    try:
        target = TargetSpec.from_json(store.read_manifest()["target"])
        if target.is_command or not target.path:
            return None
        return logs_root(resolve_target(target.path).repository) / "runs"
    except (BackfillError, KeyError, TypeError, ValueError):
        return None
