"""The audit log's line count, read incrementally as the log grows (the browser counts every few seconds)."""

from __future__ import annotations

from engine.store import audit


def test_the_count_follows_appends_torn_lines_and_a_replaced_file(tmp_path):
    """No log is nothing; a torn last line is torn; later appends add only what they add (the torn line stays
    torn); a shorter file (the directory restored from a copy) is counted again from the start; a line that is
    JSON but not an object is torn, as read() judges it."""
    log = tmp_path / "audit.jsonl"
    assert audit.count(tmp_path) == audit.AuditCount(0, 0)
    log.write_bytes(b'{"a": 1}\n{"b"')
    assert audit.count(tmp_path) == audit.AuditCount(1, 1)
    assert audit.count(tmp_path) == audit.AuditCount(1, 1)  # the same again: the tail is read again, not lost
    with open(log, "ab") as handle:
        handle.write(b'\n{"c": 1}\n')
    assert audit.count(tmp_path) == audit.AuditCount(2, 1)
    with open(log, "ab") as handle:
        handle.write(b'[1, 2]\n\n{"d": 1}\n')
    assert audit.count(tmp_path) == audit.AuditCount(3, 2)
    log.write_bytes(b'{"a": 1}\n')
    assert audit.count(tmp_path) == audit.AuditCount(1, 0)


def test_the_count_agrees_with_a_full_read(tmp_path):
    """Whatever the log holds, the incremental count and read() agree on interventions and torn lines."""
    log = tmp_path / "audit.jsonl"
    for chunk in (b'{"a": 1}\n', b"garbage\n", b'{"b": 2}', b'\n"text"\n', b"\n\n", b'{"c": 3}\n{"d"'):
        with open(log, "ab") as handle:
            handle.write(chunk)
        full = audit.read(tmp_path)
        assert audit.count(tmp_path) == audit.AuditCount(len(full.entries), len(full.torn)), chunk


def test_an_entry_has_every_field_and_a_fresh_sortable_id():
    """entry() fills every field (None where it does not apply), in FIELDS' order, with a new ID unless one is
    given; an unknown field or action is a programming error, named."""
    import re

    import pytest

    line = audit.entry(action="MARK", reason="r")
    assert list(line) == list(audit.FIELDS)
    assert line["action"] == "MARK" and line["reason"] == "r" and line["asset"] is None
    assert re.fullmatch(r"\d{16}-[0-9a-f]{6}", line["id"])
    assert audit.entry(action="MARK")["id"] != line["id"]
    assert audit.entry(action="RESTORE", id="given")["id"] == "given"
    with pytest.raises(ValueError, match=r"^unknown audit fields: \['colour', 'size'\]$"):
        audit.entry(action="MARK", size=1, colour=2)
    with pytest.raises(ValueError, match=r"^unknown audit action 'mark'$"):
        audit.entry(action="mark")
    with pytest.raises(ValueError, match=r"^unknown audit action None$"):
        audit.entry(reason="r")


def test_bulk_entries_share_their_common_fields_and_a_stem():
    """Each of many lines: every field, the common ones, its own values over them, ID stem-number."""
    common = {"backfill_id": "b", "reason": "r", "action": "MARK"}
    line = audit.bulk_entry(common, "123-abcdef", 7, partition_id="p7", reason="own")
    assert list(line) == list(audit.FIELDS)
    assert (line["id"], line["backfill_id"], line["reason"], line["partition_id"]) == ("123-abcdef-7", "b", "own", "p7")
    assert common == {"backfill_id": "b", "reason": "r", "action": "MARK"}  # not changed


def test_appends_are_whole_lines_even_after_a_torn_one(tmp_path):
    """Nothing to append writes nothing (no file); lines are appended whole and counted; after a torn last line
    the next append starts on a new line, the torn line kept as written; the file is private (0600)."""
    import os
    import stat

    assert audit.append(tmp_path, []) == 0
    assert not (tmp_path / "audit.jsonl").exists()
    assert audit.append(tmp_path, [{"a": 1}, {"b": 2}]) == 2
    assert stat.S_IMODE(os.stat(tmp_path / "audit.jsonl").st_mode) == 0o600
    with open(tmp_path / "audit.jsonl", "ab") as handle:
        handle.write(b'{"torn')
    assert audit.append(tmp_path, [{"c": 3}]) == 1
    assert (tmp_path / "audit.jsonl").read_bytes() == b'{"a":1}\n{"b":2}\n{"torn\n{"c":3}\n'
    log = audit.read(tmp_path)
    assert log.entries == [{"a": 1}, {"b": 2}, {"c": 3}] and log.torn == [3]


def test_torn_lines_are_reported_with_their_numbers(tmp_path):
    """A log with no torn line has no problem; one names its line, several the first five, in the plural."""
    assert audit.read(tmp_path) == audit.AuditLog()
    path = tmp_path / "audit.jsonl"
    assert audit.AuditLog([{"a": 1}]).problem(path) is None
    assert audit.AuditLog(torn=[4]).problem(path) == (
        f"{path}: line 4 is torn (a crash while appending); kept as written, every other line is read"
    )
    assert audit.AuditLog(torn=[1, 2, 3, 4, 5, 6]).problem(path) == (
        f"{path}: lines 1, 2, 3, 4, 5 are torn (a crash while appending); kept as written, every other line is read"
    )
    path.write_bytes(b'{"a": 1}\n\n  \n7\n{"b": 2}')
    log = audit.read(tmp_path)
    assert log.entries == [{"a": 1}, {"b": 2}] and log.torn == [4]


def test_whole_lines_are_appended_without_blank_lines_between(tmp_path):
    """An append after a whole last line adds no newline of its own."""
    audit.append(tmp_path, [{"a": 1}])
    audit.append(tmp_path, [{"b": 2}])
    assert (tmp_path / "audit.jsonl").read_bytes() == b'{"a":1}\n{"b":2}\n'


def test_counts_of_two_logs_and_of_an_unchanged_one(tmp_path):
    """Each log is counted on its own; counting a log again with nothing added gives the same count."""
    first, second = tmp_path / "one", tmp_path / "two"
    first.mkdir()
    second.mkdir()
    (first / "audit.jsonl").write_bytes(b'{"a": 1}\n{"b": 2}\n')
    (second / "audit.jsonl").write_bytes(b'{"a": 1}\n')
    assert audit.count(first) == audit.AuditCount(2, 0)
    assert audit.count(second) == audit.AuditCount(1, 0)
    assert audit.count(first) == audit.AuditCount(2, 0)
    assert audit.count(second) == audit.AuditCount(1, 0)


def test_entry_ids_are_microseconds_and_two_lines_are_plural(tmp_path):
    """An ID starts with the time in microseconds; two torn lines are 'lines … are'."""
    import time

    before = time.time_ns() // 1000
    stamp = int(audit.new_entry_id().split("-")[0])
    assert before <= stamp <= time.time_ns() // 1000
    problem = audit.AuditLog(torn=[1, 2]).problem(tmp_path)
    assert problem.endswith(
        ": lines 1, 2 are torn (a crash while appending); kept as written, every other line is read"
    )
