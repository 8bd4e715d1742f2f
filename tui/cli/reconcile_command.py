"""``backfill reconcile [ID]``: settle backfills whose executor's lease expired (see
``engine.interventions.reconcile``); without an ID, every backfill of the state store. ``--continue`` and
``mark`` do the same for their backfill whenever they find an expired lease; ``show`` only says so (a read
command never signals or settles anything)."""

from __future__ import annotations

import os
import socket
import sys
import time
from pathlib import Path

import pendulum

from engine.base.errors import BackfillError
from engine.base.who import requester
from engine.execute.backfill import Loaded, load_backfill
from engine.guardrails.request import check_reason
from engine.interventions.reconcile import Reconciled, reconcile
from engine.store.catalog import list_backfills
from engine.store.lease import Lease, read_lease
from engine.store.locate import state_root_of_cwd
from tui.cli.intervene_arguments import reconcile_parser

AUTOMATIC = "lease expired (found by backfill {verb})"


def reconcile_command(argv: list[str]) -> int:
    args = reconcile_parser().parse_args(argv)
    reason = check_reason(args.reason) or "lease expired"
    ids = [args.id] if args.id else [s.id for s in list_backfills(state_root_of_cwd(args.state_dir, Path.cwd()))]
    if not ids:
        sys.stdout.write("no backfill to reconcile\n")
    failed = 0
    for backfill_id in ids:
        try:
            loaded = load_backfill(backfill_id, args.state_dir, Path.cwd())
            sys.stdout.write(settle(loaded, reason, "reconcile").message + "\n")
        except BackfillError as error:
            if args.id:
                raise
            failed += 1
            sys.stderr.write(f"backfill: error: {backfill_id}: {error}\n")
    return 1 if failed else 0


def settle(loaded: Loaded, reason: str, verb: str) -> Reconciled:
    return reconcile(
        loaded.store,
        loaded.spec.plan,
        loaded.spec.ids.of,
        requested_by=requester(),
        reason=reason,
        applied_by=f"backfill {verb} (PID {os.getpid()} on {socket.gethostname()})",
    )


def settle_if_expired(loaded: Loaded, verb: str) -> Loaded:
    """Before --continue, mark and show: an expired lease is reconciled first (said on stderr), and the
    backfill read again; a live or unowned one is left alone."""
    if _expired_lease(loaded) is None:
        return loaded
    result = settle(loaded, AUTOMATIC.format(verb=verb), verb)
    if result.verdict != "lost":
        return loaded
    sys.stderr.write(f"backfill: note: {result.message}\n")
    return load_backfill(loaded.store.id, str(loaded.root), Path.cwd())


def expired_lease_note(loaded: Loaded) -> str | None:
    """For read commands: the line that says an owner's lease expired, and what to run; None when it has not."""
    lease = _expired_lease(loaded)
    if lease is None:
        return None
    zone = pendulum.local_timezone()
    since = f"{pendulum.from_timestamp(lease.expires_at, tz=zone).format('YYYY-MM-DD HH:mm:ss')} ({zone.name})"
    return (
        f"the lease of executor PID {lease.pid} on {lease.host} expired at {since} (owner gone or frozen since "
        f"then): what it ran is still recorded as it left it; run `backfill reconcile {loaded.store.id}`"
    )


def _expired_lease(loaded: Loaded) -> Lease | None:
    """The backfill's lease if an owner holds it and it expired; else None."""
    lease = read_lease(loaded.store.directory)
    if lease is None or lease.host is None or not lease.expired(time.time()):
        return None
    return lease
