"""Bruin's bruin.* SQL helpers rendered through a real template and run in DuckDB: the results Bruin's
DuckDB variants give (docs/assets/templating/macros.md)."""

from __future__ import annotations

import hashlib
from datetime import date
from zoneinfo import ZoneInfo

import duckdb
import pytest

from engine.pipeline.templating import Window, base_context, render

CONTEXT = base_context(
    Window(0, 86_399_999_999, ZoneInfo("UTC")), run_id="r", pipeline="p", variables={}, full_refresh=False
)


def one(db, template: str):
    return db.execute(render(template, CONTEXT)).fetchall()


@pytest.fixture
def db():
    with duckdb.connect() as connection:
        connection.execute(
            "CREATE TABLE t AS SELECT * FROM (VALUES (1, NULL, 'paid', 10, 4), (1, 'b', 'refunded', 10, 0), "
            "(2, 'c', 'paid', NULL, 5)) v(id, code, status, amount, parts)"
        )
        yield connection


def test_arithmetic_keys_and_grouping(db):
    """Surrogate keys are MD5 of '-'-joined text with NULL spelled as Bruin spells it; safe_divide gives NULL
    for a zero divisor; safe_add/safe_subtract count NULL as 0; group_by numbers the columns."""
    keys = one(db, "SELECT {{ bruin.generate_surrogate_key(['id', 'code']) }} FROM t ORDER BY ALL")
    expected = sorted(hashlib.md5(text.encode()).hexdigest() for text in ("1-_bruin_surrogate_key_null_", "1-b", "2-c"))
    assert [k for (k,) in keys] == expected
    assert one(db, "SELECT {{ bruin.generate_surrogate_key('id') }} FROM t WHERE id = 2") == [
        (hashlib.md5(b"2").hexdigest(),)
    ]
    assert one(db, "SELECT {{ bruin.safe_divide('amount', 'parts') }} FROM t ORDER BY id, parts") == [
        (None,),
        (2.5,),
        (None,),
    ]
    assert one(db, "SELECT {{ bruin.safe_add(['amount', 'parts', 'id']) }} FROM t WHERE id = 2") == [(7,)]
    assert one(db, "SELECT {{ bruin.safe_subtract('amount', 'parts') }} FROM t WHERE id = 2") == [(-5,)]
    assert one(db, "SELECT id, count(*) FROM t {{ bruin.group_by(1) }} ORDER BY 1") == [(1, 2), (2, 1)]


def test_pivot_slugify_and_buckets(db):
    """pivot counts each value into its own column (quoted, or slugified aliases); slugify as Bruin's; buckets
    are 1..n over [low, high), 0 below and n + 1 at or above the top."""
    rows = one(
        db, "SELECT id, {{ bruin.pivot('status', ['paid', 'refunded'], prefix='n_') }} FROM t GROUP BY id ORDER BY id"
    )
    assert rows == [(1, 1, 1), (2, 1, 0)]
    names = db.execute(
        render("SELECT {{ bruin.pivot('status', ['Paid Now'], quote_identifiers=false) }} FROM t", CONTEXT)
    )
    assert [d[0] for d in names.description] == ["paid_now"]
    assert render("{{ bruin.slugify('9 Active Users!') }}", CONTEXT) == "_9_active_users"
    buckets = one(
        db, "SELECT {{ bruin.width_bucket('x', 0, 10, 5) }} FROM (VALUES (-1), (0), (4), (5.5), (9.99), (10)) v(x)"
    )
    assert [int(b) for (b,) in buckets] == [0, 1, 3, 3, 5, 6]


def test_geometry_series_spines_dedupe_and_urls(db):
    """haversine over a sphere of 3,961 miles (km at 1.60934), radians, a 1..n series, date and timestamp spines
    that stop before their end, deduplicate keeping the first row of each partition, and URL parts."""
    [(miles,)] = one(db, "SELECT {{ bruin.haversine_distance('0', '0', '0', '1') }}")
    assert miles == pytest.approx(2 * 3961 * 0.0087265, rel=1e-4)
    [(km,)] = one(db, "SELECT {{ bruin.haversine_distance('0', '0', '0', '1', unit='km') }}")
    assert km == pytest.approx(miles * 1.60934)
    [(radians,)] = one(db, "SELECT {{ bruin.degrees_to_radians('180') }}")
    assert radians == pytest.approx(3.14159265)
    assert one(db, "{{ bruin.generate_series(3) }}") == [(1,), (2,), (3,)]
    days = one(db, "{{ bruin.date_spine('day', \"'2024-01-30'\", \"'2024-02-02'\") }}")
    assert days == [(date(2024, 1, 30),), (date(2024, 1, 31),), (date(2024, 2, 1),)]
    spine = "{{ bruin.date_spine('hour', \"'2024-01-01 22:00'\", \"'2024-01-02 00:00'\") }}"
    hours = one(db, f"SELECT cast(date_hour AS VARCHAR) FROM ({spine})")
    assert hours == [("2024-01-01 22:00:00",), ("2024-01-01 23:00:00",)]
    assert len(one(db, "{{ bruin.date_spine('quarter', \"'2024-01-01'\", \"'2025-01-01'\") }}")) == 4
    kept = one(db, "SELECT id, code FROM ({{ bruin.deduplicate('t', 'id', 'code desc nulls last') }}) ORDER BY id")
    assert kept == [(1, "b"), (2, "c")]
    url = "'https://shop.example.com/a/b?utm_source=news&x=1'"
    assert one(db, f"SELECT {{{{ bruin.get_url_host({url!r}) }}}}") == [("shop.example.com",)]
    assert one(db, f"SELECT {{{{ bruin.get_url_path({url!r}) }}}}") == [("a/b",)]
    assert one(db, f"SELECT {{{{ bruin.get_url_parameter({url!r}, 'utm_source') }}}}") == [("news",)]
    assert one(db, f"SELECT {{{{ bruin.get_url_parameter({url!r}, 'nope') }}}}") == [(None,)]
