"""``backfill mark | cancel | pause | resume | set ID --reason TEXT``: step in on a backfill from any terminal.

The request goes to the backfill's live executor through its state directory, or, when none is live, is
applied here under the backfill's lock (see ``engine.interventions``). Either way one line says what
happened; a refusal is one line on stderr with exit code 3.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import time
from pathlib import Path

from engine.base.errors import EXIT_OK, BadInput, Refused
from engine.base.settings import Settings
from engine.base.who import requester
from engine.execute.backfill import Loaded, load_backfill
from engine.guardrails.request import check_reason
from engine.interventions.apply import BACKFILL_MARK_STATUSES, MARK_STATUSES
from engine.interventions.deliver import deliver_request
from engine.interventions.requests import Request
from engine.store.manifest import now_text
from engine.store.records import PARTITION_STATUSES
from engine.store.status import Status
from tui.cli.intervene_arguments import mark_parser, simple_parser
from tui.cli.reconcile_command import settle_if_expired
from tui.cli.resume import check_asset_name, resolve_halves, resolve_ids

DESCRIPTIONS = {
    "cancel": "Stop a backfill now: running children are stopped, nothing more starts.",
    "pause": "Hold a backfill: running children finish, nothing more starts until resume.",
    "resume": "Let a paused backfill go on (backfill --continue ID).",
    "set": "Change an execution control while the backfill runs; every later --continue starts from it.",
}


def intervene_command(verb: str, argv: list[str]) -> int:
    if verb == "mark":
        args = mark_parser().parse_args(argv)
    else:
        args = simple_parser(verb, DESCRIPTIONS[verb]).parse_args(argv)
    settings = Settings.from_environment()
    target = getattr(args, "target", None)
    reason = check_reason(args.reason)
    if reason is None:
        what = "a pipeline" if target is not None else "a backfill"
        raise BadInput(f"--reason is required to {verb} {what}: say why (it is recorded with who and when)")
    if target is not None or (verb in ("pause", "resume") and args.id is None):
        from tui.cli.target_command import target_command

        return target_command(verb, args, reason, settings)
    loaded = load_backfill(args.id, args.state_dir, Path.cwd())
    if verb == "mark":
        loaded = settle_if_expired(loaded, "mark")
    if verb == "mark":
        action, params = _mark_request(args, loaded)
    elif verb == "set":
        if args.max_parallel is None:
            raise BadInput("backfill set changes --max-parallel: give --max-parallel N (1 to 100,000)")
        action, params = "set", {"max_parallel": args.max_parallel}
    elif verb == "cancel" and args.ids:
        action, params = "stop", {"indices": sorted(resolve_ids(loaded, args.ids))}
    else:
        action, params = verb, {}
    if verb == "mark" and args.stale:
        _check_stale(loaded, params)
    request = Request(action, reason, requester(), now_text(), params)
    applied_by = f"backfill {verb} (PID {os.getpid()} on {socket.gethostname()})"
    result = deliver_request(loaded.store, loaded.spec, request, applied_by, wait=settings.request_wait)
    if result.exit_code != EXIT_OK:
        error = Refused(result.message) if result.exit_code == Refused.exit_code else BadInput(result.message)
        error.exit_code = result.exit_code
        raise error
    sys.stdout.write(result.message + "\n")
    return EXIT_OK


def _check_stale(loaded: Loaded, params: dict) -> None:
    """``mark --stale`` (the seed's compatibility option): the expired lease was reconciled above; a partition
    still running under a lease that runs is live, and --stale never overrides a valid lease."""
    from engine.store.lease import read_lease

    if "indices" not in params:
        raise BadInput("--stale names the partitions whose attempts are stale: give partition IDs")
    running = sorted(i for i in params["indices"] if loaded.board.status(i) is Status.RUNNING)
    lease = read_lease(loaded.store.directory)
    if not running or lease is None or lease.host is None:
        return
    here = lease.host == socket.gethostname()
    if not lease.expired(time.time()) or (not here and time.time() < lease.held_elsewhere_until()):
        ids = ", ".join(_partition_id(loaded, i)[:12] for i in running[:3])
        raise Refused(
            f"--stale refused: partition {ids}{' …' if len(running) > 3 else ''} is live — executor PID "
            f"{lease.pid} on {lease.host} holds its lease; --stale never overrides a valid lease "
            f"(cancel the backfill, or wait for the lease to expire and mark again)"
        )


def _partition_id(loaded: Loaded, index: int) -> str:
    interval = loaded.spec.plan.interval(index)
    return loaded.spec.ids.of(interval.start, interval.end)


def _mark_request(args: argparse.Namespace, loaded: Loaded) -> tuple[str, dict]:
    """What a mark names: partitions (IDs or a status filter), or, with neither, the backfill itself."""
    status = args.status
    if status is None:
        raise BadInput("--status is required: give succeeded, failed or skipped")
    for name in args.status_filter:
        if name not in PARTITION_STATUSES:
            raise BadInput(f"--status-filter {name!r} is not a status: give one of {', '.join(PARTITION_STATUSES)}")
    if args.partitions and args.status_filter:
        raise BadInput("partition IDs and --status-filter select partitions in two ways: give one of them")
    if not args.partitions and not args.status_filter:
        if status not in BACKFILL_MARK_STATUSES:
            raise BadInput(
                f"--status {status!r} cannot end a backfill: give succeeded or failed "
                "(or name partitions to mark them skipped)"
            )
        for flag, value in (("--rows", args.rows), ("--asset", args.asset)):
            if value is not None:
                raise BadInput(
                    f"{flag} means nothing for a mark of the whole backfill: name partitions, or leave it out"
                )
        return "mark_backfill", {"to": status}
    if status not in MARK_STATUSES:
        raise BadInput(f"--status {status!r} cannot be marked: give one of {', '.join(MARK_STATUSES)}")
    if args.rows is not None and status != "succeeded":
        raise BadInput(f"--rows means nothing for a partition marked {status}: only a success loaded rows")
    if args.asset is not None:
        check_asset_name(loaded, args.asset)
    params: dict = {"to": status, "rows": args.rows, "asset": args.asset}
    if args.partitions:
        halves = resolve_halves(loaded, args.partitions)  # halves of split partitions, by their own IDs
        plain = [text for text in args.partitions if text not in halves]
        params["indices"] = sorted(resolve_ids(loaded, plain, flag="partition")) if plain else []
        if halves:
            params["halves"] = {half_id: index for half_id, index in halves.values()}
    else:
        params["status_filter"] = sorted(set(args.status_filter))
    return "mark", params
