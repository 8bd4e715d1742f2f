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
