"""Failures grouped by signature (issue 26, item 14): what varies between partitions is left out, what says what
went wrong is kept."""

from __future__ import annotations

import pytest

from engine.store.failure_groups import NO_REASON, group_failures, groups_sentence, signature


@pytest.mark.parametrize(
    ("reason", "expected"),
    [
        ("mid.orders failed: Conversion Error: Could not convert string 'x1' to INT32 at line 42",
         "mid.orders failed: Conversion Error: Could not convert string 'x1' to INT32 at line <n>"),
        ("psycopg.OperationalError: connection to server at 10.0.3.7 port 5432 lost",
         "psycopg.OperationalError: connection to server at <n> port <n> lost"),
        ("no file for 2024-03-10 in /data/raw/orders/2024-03-10.csv",
         "no file for <time> in <path>"),
        ("timed out after 30m at 2024-03-10T04:00:00+05:30", "timed out after 30m at <time>"),
        ("request 3fa85f64-5717-4562-b3fc-2c963f66afa6 refused", "request <id> refused"),
        ("batch 9f86d081884c7d65 failed with 3 errors", "batch <id> failed with <n> errors"),
        ("staging.v2_orders check not_null failed: 12 rows", "staging.v2_orders check not_null failed: <n> rows"),
        ("killed by SIGKILL (signal 9)", "killed by SIGKILL (signal <n>)"),
        ("read   12,345 rows\tthen   failed", "read <n> rows then failed"),
        ("deadbeef is not a table", "deadbeef is not a table"),  # a word of hex letters only stays a word
        ("", NO_REASON),
        (None, NO_REASON),
    ],
)  # fmt: skip
def test_a_signature_keeps_the_words_and_leaves_out_what_varies(reason, expected):
    """Numbers, dates and times, IDs and paths become placeholders; asset names, words and units stay."""
    assert signature(reason) == expected


def test_groups_are_counted_ordered_and_keep_their_first_reason():
    """The largest group first (ties: the earlier first partition); each with its count, first and last
    partition, every index, and its first partition's reason as written."""
    reasons = [
        (9, None),
        (2, "mid.a failed: division by zero"),
        (7, "load failed for 2024-01-08: 503"),
        (3, "load failed for 2024-01-04: 503"),
        (5, "load failed for 2024-01-06: 404"),
        (4, "mid.a failed: division by zero"),
    ]
    groups = group_failures(reasons)
    assert [(g.signature, g.count, g.first, g.last, g.indices) for g in groups] == [
        ("load failed for <time>: <n>", 3, 3, 7, (3, 5, 7)),
        ("mid.a failed: division by zero", 2, 2, 4, (2, 4)),
        (NO_REASON, 1, 9, 9, (9,)),
    ]
    assert groups[0].example == "load failed for 2024-01-08: 503"  # the first seen, as written
    assert group_failures([]) == []


def test_the_sentence_names_the_three_largest_and_counts_the_rest():
    """One kind in the singular; past three, how many more; none: nothing to say."""
    many = group_failures([(i, f"error kind {chr(97 + i)}") for i in range(5)] + [(9, "error kind a")])
    assert groups_sentence(many) == (
        "5 kinds of failure: error kind a (2); error kind b (1); error kind c (1); and 2 more"
    )
    assert groups_sentence(group_failures([(0, "x")])) == "1 kind of failure: x (1)"
    assert groups_sentence([]) is None
