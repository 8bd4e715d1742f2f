"""The audit log's line count, read incrementally as the log grows (the browser counts every few seconds)."""

from __future__ import annotations

from engine.store import audit


def test_the_count_follows_appends_torn_lines_and_a_replaced_file(tmp_path):
    """No log is 0; a torn last line counts; later appends add only what they add; a shorter file (the
    directory restored from a copy) is counted again from the start."""
    log = tmp_path / "audit.jsonl"
    assert audit.count(tmp_path) == 0
    log.write_bytes(b'{"a": 1}\n{"b"')
    assert audit.count(tmp_path) == 2
    with open(log, "ab") as handle:
        handle.write(b'\n{"c": 1}\n')
    assert audit.count(tmp_path) == 3
    log.write_bytes(b'{"a": 1}\n')
    assert audit.count(tmp_path) == 1
