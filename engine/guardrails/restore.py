"""``backfill restore ID``: put back what a backfill's snapshot holds, under the backfill's lock."""

from __future__ import annotations

import os

from engine.base.errors import Refused
from engine.base.who import requester
from engine.guardrails.table_snapshot import restore_snapshot
from engine.store import audit
from engine.store.guardrails_log import append_entry
from engine.store.locks import FileLock
from engine.store.manifest import now_text
from engine.store.state_store import StateStore


def restore_backfill(store: StateStore, reason: str) -> list[str]:
    """Restore the snapshot (refused while the backfill runs); the restore is appended to ``guardrails.json``
    and audited. What was done, per table."""
    lock = FileLock(store.lock_path)
    if not lock.try_acquire():
        raise Refused(f"backfill {store.id} is running: restore it once it has stopped")
    try:
        done = restore_snapshot(store.directory)
        append_entry(
            store, {"mode": "restore", "reason": reason, "at": now_text(), "by": requester(), "restored": done}
        )
        at = now_text()
        audit.append(
            store.directory,
            [
                audit.entry(
                    backfill_id=store.id,
                    action="RESTORE",
                    reason=reason,
                    previous_message="; ".join(done)[:300],
                    requested_by=requester(),
                    requested_at=at,
                    applied_at=at,
                    applied_by=f"backfill restore (PID {os.getpid()})",
                )
            ],
        )
        return done
    finally:
        lock.release()
