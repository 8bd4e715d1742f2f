"""Stepping in from a screen: the dashboard and the browser send exactly the requests the command line
sends (``engine.interventions``), from a worker thread, and show what came of them."""

from __future__ import annotations

import os
import socket

from engine.base.errors import BackfillError
from engine.base.who import requester
from engine.interventions.requests import Request, Result
from engine.store.control import read_control
from engine.store.manifest import now_text
from tui.app.sources import BackfillSource


def send(source: BackfillSource, action: str, reason: str, params: dict | None = None, *, wait: float) -> Result:
    """Apply one request to the backfill ``source`` shows (blocking: call it from a worker thread). Without a
    live executor the board on screen is the one changed, so the screen shows the change at once."""
    # Loaded with the first request sent: the dashboard reads whether a backfill is paused before its first frame.
    from engine.interventions.apply import CommandHolder
    from engine.interventions.deliver import deliver

    store, spec = source.store, source.spec

    def hold() -> CommandHolder:
        fresh, running = store.load_board(spec.plan, spec.ids.of)
        source.board.copy_from(fresh)
        applied_by = f"backfill dashboard (PID {os.getpid()} on {socket.gethostname()})"
        return CommandHolder(store, spec, source.board, applied_by, left_running=tuple(running))

    request = Request(action, reason, requester(), now_text(), params or {})
    try:
        return deliver(store, request, hold, wait=wait)
    except BackfillError as error:
        return Result(error.exit_code, str(error))
    except OSError as error:
        return Result(1, f"the request could not be written ({error.strerror or error}): nothing changed")


def is_paused(source: BackfillSource) -> bool:
    try:
        return read_control(source.store.directory).paused is not None
    except BackfillError:
        return False
