"""guardrails.json over a real state directory: appended in order, read back as written, an absent file an empty
history, a damaged one refused with a way on (never taken for an empty history), and the latest pre-flight."""

from __future__ import annotations

import orjson
import pytest

from engine.base.errors import StateUnreadable
from engine.store.guardrails_log import GUARDRAILS_FILE, append_entry, latest_preflight, read_guardrails
from engine.store.state_store import StateStore


@pytest.fixture
def store(tmp_path) -> StateStore:
    directory = tmp_path / "bf-1"
    directory.mkdir()
    return StateStore(directory)


def test_an_absent_file_is_an_empty_history(store):
    """No guardrails.json yet: format 1, no invocation, no latest pre-flight."""
    assert read_guardrails(store) == {"format": 1, "invocations": []}
    assert latest_preflight(store) is None


def test_entries_are_appended_in_order_and_kept_as_written(store):
    """Each entry goes to the end, the document is indented JSON, and the latest pre-flight is the last one's."""
    append_entry(store, {"preflight": {"verdict": "auto"}, "n": 1})
    append_entry(store, {"restore": True})
    append_entry(store, {"preflight": {"verdict": "approval"}, "n": 3})
    path = store.directory / GUARDRAILS_FILE
    assert orjson.loads(path.read_bytes())["invocations"] == [
        {"preflight": {"verdict": "auto"}, "n": 1},
        {"restore": True},
        {"preflight": {"verdict": "approval"}, "n": 3},
    ]
    assert path.read_text().startswith('{\n  "format": 1,\n  "invocations": [')
    assert latest_preflight(store) == {"verdict": "approval"}


def test_a_document_without_invocations_gets_them(store):
    """A document that has no invocations list yet (written by hand) gets one on the first append."""
    (store.directory / GUARDRAILS_FILE).write_bytes(b'{"format": 1}')
    append_entry(store, {"preflight": {"verdict": "auto"}})
    assert read_guardrails(store) == {"format": 1, "invocations": [{"preflight": {"verdict": "auto"}}]}


@pytest.mark.parametrize(
    "content, message",
    [
        (b"{", "cannot be read"),
        (b"[1, 2]", "is not a guardrails document"),
        (b'{"invocations": {"a": 1}}', "is not a guardrails document"),
    ],
)
def test_a_damaged_file_is_refused_never_taken_for_an_empty_history(store, content, message):
    """Torn JSON, a list, invocations that are not a list: StateUnreadable naming the file (and, torn, how to go
    on); appending refuses too, leaving the file as it was; the latest pre-flight is unknown (None)."""
    path = store.directory / GUARDRAILS_FILE
    path.write_bytes(content)
    with pytest.raises(StateUnreadable) as refused:
        read_guardrails(store)
    assert str(path) in str(refused.value) and message in str(refused.value)
    if message == "cannot be read":
        assert "move it away to resume without its history" in str(refused.value)
    with pytest.raises(StateUnreadable):
        append_entry(store, {"preflight": {}})
    assert path.read_bytes() == content
    assert latest_preflight(store) is None


def test_an_unreadable_file_is_refused(store):
    """A guardrails.json that cannot be opened (a directory in its place) is refused the same way."""
    (store.directory / GUARDRAILS_FILE).mkdir()
    with pytest.raises(StateUnreadable, match="cannot be read"):
        read_guardrails(store)
