"""``backfill pause|resume --target PATH --reason TEXT``: hold a whole pipeline, whichever state root its backfills
keep their records in (seed ``interventions.txt``, the pipeline-level pause).

A pause is written first, so nothing new of the pipeline starts from that moment; then every backfill of it that
runs now (the live-work registry) gets a pause request, and the pause keeps which ones it paused. A resume lifts
the pause and resumes those backfills (``--continue`` then goes on).
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
from pathlib import Path

from engine.base.errors import EXIT_OK, BackfillError, BadInput
from engine.base.settings import Settings
from engine.base.who import requester
from engine.execute.backfill import load_backfill
from engine.interventions.deliver import deliver_request
from engine.interventions.requests import Request
from engine.pipeline.repository import Target, resolve_target
from engine.store import audit
from engine.store.control import Decision
from engine.store.live_work import WorkKind, pipeline_key, read_live
from engine.store.manifest import now_text
from engine.store.state_store import check_state_root, default_state_root
from engine.store.target_pauses import note_paused_backfills, pause_target, resume_target


def target_command(verb: str, args: argparse.Namespace, reason: str, settings: Settings) -> int:
    if args.id is not None and args.target is not None:
        raise BadInput(f"give a backfill ID or --target PATH, not both: backfill {verb} acts on one of them")
    if args.target is None:
        raise BadInput(f"backfill {verb} needs a backfill ID, or --target PATH for a whole pipeline")
    if args.state_dir is not None:
        raise BadInput(
            "--state-dir means nothing with --target: a pipeline is paused whichever state root its backfills use"
        )
    target = resolve_target(args.target)
    name = _pipeline_name(target)
    who, at = requester(), now_text()
    applied_by = f"backfill {verb} --target (PID {os.getpid()} on {socket.gethostname()})"
    directory = target.pipeline_dir
    lines = []
    if verb == "pause":
        pause_target(directory, name, Decision("paused", who, at, reason))
        lines.append(f"paused pipeline {name} ({directory}): new backfills, --continue and backfill run of it start "
                     "nothing until backfill resume --target")  # fmt: skip
        held = []
        key = pipeline_key(directory)
        for work in read_live():
            if work.kind != WorkKind.BACKFILL or work.target != key or not work.backfill_id:
                continue
            message, ok = _send(verb, work.backfill_id, work.state_dir, reason, who, at, applied_by, settings)
            lines.append(f"  {message}")
            if ok:
                held.append({"id": work.backfill_id, "state_dir": work.state_dir or ""})
        note_paused_backfills(directory, held)
    else:
        before = resume_target(directory, name, who, at, reason)
        lines.append(f"resumed pipeline {name} ({directory}): its backfills and runs may start again")
        for backfill in before.paused_backfills:
            message, _ = _send(verb, backfill["id"], backfill["state_dir"], reason, who, at, applied_by, settings)
            lines.append(f"  {message}")
    _audit(target, verb, directory, reason, who, at, applied_by)
    sys.stdout.write("\n".join(lines) + "\n")
    return EXIT_OK


def _send(
    verb: str,
    backfill_id: str,
    state_dir: str | None,
    reason: str,
    who: str,
    at: str,
    applied_by: str,
    settings: Settings,
) -> tuple[str, bool]:
    """The pause (or resume) of one backfill the pipeline's pause holds; what happened, and whether it was applied."""
    try:
        loaded = load_backfill(backfill_id, state_dir, Path.cwd())
        request = Request(verb, reason, who, at, {})
        result = deliver_request(loaded.store, loaded.spec, request, applied_by, wait=settings.request_wait)
    except BackfillError as error:
        return f"backfill {backfill_id} not {verb}d: {error}", False
    return result.message, result.exit_code == EXIT_OK


def _audit(target: Target, verb: str, directory: Path, reason: str, who: str, at: str, applied_by: str) -> None:
    """Every pause and resume of a pipeline is in its repository's own audit log (``backfill audit`` without an
    ID), as well as in the pause's history."""
    root = default_state_root(target.repository)
    check_state_root(root)
    line = audit.entry(
        action=verb.upper(),
        to_status="paused" if verb == "pause" else "running",
        previous_message=f"target {directory}",
        reason=reason,
        requested_by=who,
        requested_at=at,
        applied_at=at,
        applied_by=applied_by,
    )
    audit.append(root, [line])


def _pipeline_name(target: Target) -> str:
    from engine.pipeline.loading import load_pipeline

    try:
        return load_pipeline(target.pipeline_dir).name
    except BackfillError:  # a pipeline that does not validate can still be held
        return target.pipeline_dir.name
