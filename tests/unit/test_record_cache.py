"""The screens' record cache (issue 26, item 2): a record is read once per version — its file rewritten, or a
bulk mark made — and handed back without touching the disk while it holds."""

from __future__ import annotations

from dataclasses import replace

from engine.store.bulk_marks import BulkMark, write_bulk_mark
from tests.tui.fixtures import FixedStateSource, build_saved_backfill
from tui.app.record_cache import RecordCache


def test_a_record_is_read_again_only_when_its_file_or_the_marks_change(tmp_path):
    """Loaded twice unchanged: the same object (nothing read); rewritten: the new record; a bulk mark made:
    read again with the mark merged; a partition never attempted: no record; a damaged file: its error."""
    source = FixedStateSource(build_saved_backfill(tmp_path / "states"))
    cache = RecordCache(source.spec, source.store)
    first = cache.load(40)
    assert first.reason == "psycopg.OperationalError: connection to server lost" and first.error is None
    assert cache.load(40) is first and cache.cached(40) is first
    assert cache.cached(41) is None  # never loaded: nothing read while painting
    record = first.record
    source.store.write_record(replace(record, attempts=[*record.attempts[:-1], replace(record.attempts[-1],
                              error="disk full")]), durable=False)  # fmt: skip
    again = cache.load(40)
    assert again is not first and again.reason == "disk full"
    mark = BulkMark("001", "succeeded", "fixed by hand", "2024-03-01T00:00:00Z", "ops", None, None, {40: 3})
    write_bulk_mark(source.store.directory, mark)
    marked = cache.load(40)
    assert marked is not again and marked.record.attempts[-1].kind == "mark"
    assert marked.reason == "fixed by hand" and cache.load(40) is marked
    never = cache.load(source.board.size - 1)
    assert (never.record, never.error, never.reason) == (None, None, None)
    interval = source.spec.plan.interval(41)
    source.store.record_path(source.spec.ids.of(interval.start, interval.end)).write_text("{")
    broken = cache.load(41)
    assert broken.record is None and broken.error.startswith("partition file ") and "is not valid JSON" in broken.error


def test_the_cache_holds_at_most_its_limit(tmp_path):
    """Past its limit the cache starts again rather than growing: the oldest records must be loaded anew."""
    source = FixedStateSource(build_saved_backfill(tmp_path / "states"))
    cache = RecordCache(source.spec, source.store, limit=2)
    one = cache.load(0)
    cache.load(1)
    assert cache.cached(0) is one
    cache.load(2)
    assert cache.cached(0) is None and cache.cached(2) is not None
    assert cache.cached(1) is None
