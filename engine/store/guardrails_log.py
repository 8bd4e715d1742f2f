"""``guardrails.json`` in a backfill's state directory: every invocation's pre-flight, verdict, digest and
approval, and every restore, appended in order (the file is rewritten atomically each time).

The store keeps the entries as the guardrails wrote them; it does not interpret them.
"""

from __future__ import annotations

from typing import Any

import orjson

from engine.base.atomic import write_atomic
from engine.base.errors import StateUnreadable
from engine.store.state_store import StateStore

GUARDRAILS_FILE = "guardrails.json"


def read_guardrails(store: StateStore) -> dict[str, Any]:
    """The whole document (an empty one when the backfill has none yet); unreadable is ``StateUnreadable``."""
    path = store.directory / GUARDRAILS_FILE
    try:
        data = orjson.loads(path.read_bytes())
    except FileNotFoundError:
        return {"format": 1, "invocations": []}
    except (OSError, orjson.JSONDecodeError) as error:
        raise StateUnreadable(f"{path} cannot be read ({error}): move it away to resume without its history") from None
    if not isinstance(data, dict) or not isinstance(data.get("invocations", []), list):
        raise StateUnreadable(f"{path} is not a guardrails document")
    return data


def append_entry(store: StateStore, entry: dict[str, Any]) -> None:
    """Add one invocation (or restore) to ``guardrails.json``."""
    document = read_guardrails(store)
    document.setdefault("invocations", []).append(entry)
    write_atomic(store.directory / GUARDRAILS_FILE, orjson.dumps(document, option=orjson.OPT_INDENT_2))


def latest_preflight(store: StateStore) -> dict[str, Any] | None:
    """The last invocation's pre-flight, or None (none yet, or the file cannot be read)."""
    try:
        invocations = read_guardrails(store).get("invocations") or []
    except StateUnreadable:
        return None
    return invocations[-1]["preflight"] if invocations else None
