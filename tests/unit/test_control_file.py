"""``control.json``, the operators' decisions about a whole backfill: kept through a write and a read, said in
one sentence, and refused with one line when damaged."""

from __future__ import annotations

import orjson
import pytest

from engine.base.errors import StateUnreadable
from engine.store.control import CONTROL, Control, Decision, Setting, read_control, resume_options, write_control

SETTING = b'{"value": %s, "by": "ana", "at": "T", "reason": "why"}'
PAUSE = Decision("paused", "ana", "2026-03-01T10:00:00+00:00", "warehouse maintenance")
END = Decision("cancelled", "bo", "2026-03-02T11:30:00+00:00", "wrong range")


def test_decisions_read_back_as_written(tmp_path):
    """A pause and an end survive a write and a read; the file is indented JSON ending in a newline."""
    write_control(tmp_path, Control(paused=PAUSE, ended=END))
    assert read_control(tmp_path) == Control(paused=PAUSE, ended=END)
    raw = (tmp_path / CONTROL).read_bytes()
    assert raw.endswith(b"}\n") and b'\n  "paused": {' in raw
    assert orjson.loads(raw) == {
        "format": 1,
        "paused": {
            "status": "paused",
            "by": "ana",
            "at": "2026-03-01T10:00:00+00:00",
            "reason": "warehouse maintenance",
        },
        "ended": {"status": "cancelled", "by": "bo", "at": "2026-03-02T11:30:00+00:00", "reason": "wrong range"},
        "max_parallel": None,
    }


def test_no_decision_is_written_as_null(tmp_path):
    """A control with nothing decided writes nulls and reads back empty; no file reads as nothing decided."""
    assert read_control(tmp_path) == Control()
    write_control(tmp_path, Control())
    assert orjson.loads((tmp_path / CONTROL).read_bytes()) == {
        "format": 1,
        "paused": None,
        "ended": None,
        "max_parallel": None,
    }
    assert read_control(tmp_path) == Control()


@pytest.mark.parametrize(
    ("status", "sentence"),
    [
        ("paused", "paused by ana at T: why"),
        ("cancelled", "cancelled by ana at T: why"),
        ("succeeded", "marked succeeded by ana at T: why"),
        ("failed", "marked failed by ana at T: why"),
    ],
)
def test_a_decision_says_who_what_when_and_why(status, sentence):
    """Pauses and cancels are named by their verb, marks by the status they set."""
    assert Decision(status, "ana", "T", "why").sentence() == sentence


def test_fields_written_as_numbers_are_read_as_text(tmp_path):
    """A decision edited by hand with a number for a field is read as text, like every decision."""
    (tmp_path / CONTROL).write_bytes(
        orjson.dumps({"format": 1, "paused": {"status": "paused", "by": 7, "at": 8, "reason": 9}})
    )
    assert read_control(tmp_path) == Control(paused=Decision("paused", "7", "8", "9"))


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"{oops", "is not valid JSON ("),
        (b'{"format": 2}', "has an unknown format: it was not written by this backfill"),
        (b"[1]", "has an unknown format: it was not written by this backfill"),
        (b'{"format": 1, "paused": {"status": "paused"}}', "is damaged (a decision lacks a field)"),
        (b'{"format": 1, "ended": ["cancelled"]}', "is damaged (a decision lacks a field)"),
        (b'{"format": 1, "max_parallel": {"value": 4}}', "is damaged (a setting lacks a field)"),
        (b'{"format": 1, "max_parallel": [4]}', "is damaged (a setting lacks a field)"),
        (b'{"format": 1, "max_parallel": %s}' % SETTING % b"0", "is damaged (max_parallel 0 is not a count)"),
        (b'{"format": 1, "max_parallel": %s}' % SETTING % b"true", "is damaged (max_parallel True is not a count)"),
        (b'{"format": 1, "max_parallel": %s}' % SETTING % b'"4"', "is damaged (max_parallel '4' is not a count)"),
        (b'{"format": 1, "max_parallel": %s}' % SETTING % b"2.5", "is damaged (max_parallel 2.5 is not a count)"),
    ],
)
def test_a_damaged_control_is_refused_with_one_line(tmp_path, content, message):
    """Bad JSON, another format or a decision missing a field: one line naming the file."""
    (tmp_path / CONTROL).write_bytes(content)
    with pytest.raises(StateUnreadable) as raised:
        read_control(tmp_path)
    assert str(raised.value).startswith(f"{tmp_path / CONTROL} ")
    assert message in str(raised.value)


def test_a_bad_json_line_says_what_the_file_holds(tmp_path):
    """The JSON error names the pause it holds, so the operator knows what moving it away loses."""
    (tmp_path / CONTROL).write_bytes(b"{oops")
    with pytest.raises(StateUnreadable, match=r"\): it holds the backfill's pause$"):
        read_control(tmp_path)


def test_an_unreadable_control_says_why(tmp_path):
    """A control file that cannot be read names the operating system's reason."""
    (tmp_path / CONTROL).mkdir()
    with pytest.raises(StateUnreadable, match=r"control\.json cannot be read \(Is a directory\)$"):
        read_control(tmp_path)


def test_a_setting_reads_back_and_is_what_a_resume_starts_from(tmp_path):
    """A max-parallel an operator set is kept through a write and a read, with who, when and why, and the
    controls of a resume start from it rather than from the first invocation's; without one they do not."""
    from tests.saved_backfills import saved_command_backfill

    prepared = saved_command_backfill(tmp_path, end="2024-01-03")
    directory, manifest = prepared.store.directory, prepared.store.read_manifest()
    first = resume_options(manifest, directory)
    assert first.max_parallel == prepared.options.max_parallel
    setting = Setting(first.max_parallel + 5, "ana", "T", "why")
    write_control(directory, Control(max_parallel=setting))
    assert read_control(directory) == Control(max_parallel=setting)
    assert orjson.loads((directory / CONTROL).read_bytes())["max_parallel"] == {
        "value": first.max_parallel + 5,
        "by": "ana",
        "at": "T",
        "reason": "why",
    }
    resumed = resume_options(manifest, directory)
    assert resumed.max_parallel == first.max_parallel + 5
    assert resumed == first.with_changes(max_parallel=first.max_parallel + 5)  # nothing else changes
