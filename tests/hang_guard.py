"""Calls that must return: a thread's join or a queue's drain that never comes back fails the test (and kills
the mutant that broke it) instead of hanging the suite."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any


def finishes(call: Callable[[], Any], seconds: float = 30.0) -> Any:
    """``call()``'s result (or its exception), provided it returns within ``seconds``."""
    outcome: list[tuple[bool, Any]] = []

    def run() -> None:
        try:
            outcome.append((True, call()))
        except BaseException as error:
            outcome.append((False, error))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert outcome, f"{getattr(call, '__name__', call)!s} never returned"
    ok, value = outcome[0]
    if not ok:
        raise value
    return value
