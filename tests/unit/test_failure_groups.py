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
    assert groups[2].example == NO_REASON  # no reason at all is said so, not left empty
    assert group_failures([]) == []


def test_the_sentence_names_the_three_largest_and_counts_the_rest():
    """One kind in the singular; past three, how many more; none: nothing to say."""
    many = group_failures([(i, f"error kind {chr(97 + i)}") for i in range(5)] + [(9, "error kind a")])
    assert groups_sentence(many) == (
        "5 kinds of failure: error kind a (2); error kind b (1); error kind c (1); and 2 more"
    )
    assert groups_sentence(group_failures([(0, "x")])) == "1 kind of failure: x (1)"
    three = group_failures([(0, "x"), (1, "y"), (2, "z")])
    assert groups_sentence(three) == "3 kinds of failure: x (1); y (1); z (1)"  # none more to count
    assert groups_sentence([]) is None


def test_a_backfill_s_failed_records_are_read_once_each_and_grouped(tmp_path):
    """Only partitions the board says failed are read, in plan order: their latest attempt's error; a record
    that cannot be read gives its problem as the reason; the groups' JSON names the first and last partition
    by index and ID."""
    from engine.store.failure_groups import failed_reasons, failure_groups
    from engine.store.records import Attempt
    from engine.store.status import Status, StatusBoard
    from tests.saved_backfills import saved_command_backfill
    from tests.unit.test_history import record_of

    saved = saved_command_backfill(tmp_path, end="2024-01-05")
    spec, store = saved.spec, saved.store
    first = Attempt(run_id="r0", status="failed", started_at="t", error="disk full at 2024-01-01")
    record_of(saved, 0, Attempt(run_id="q", status="failed", started_at="t", error="older"), first, status="failed")
    record_of(saved, 1, Attempt(run_id="r1", status="succeeded", started_at="t"))
    record_of(saved, 3, Attempt(run_id="r3", status="failed", started_at="t", error="disk full at 2024-01-04"),
              status="failed")  # fmt: skip
    interval = spec.plan.interval(2)
    store.record_path(spec.ids.of(interval.start, interval.end)).write_text("{")
    board = StatusBoard(len(spec.plan))
    for index, status in (
        (0, Status.FAILED),
        (1, Status.SUCCEEDED),
        (2, Status.FAILED),
        (3, Status.FAILED),
        (4, Status.FAILED),
    ):  # 4: failed on the board, no record on disk (no reason to read)
        board.set(index, status)
    reasons = list(failed_reasons(spec, store, board))
    assert [index for index, _ in reasons] == [0, 2, 3, 4] and reasons[3][1] is None
    assert reasons[0][1] == "disk full at 2024-01-01" and "is not valid JSON" in reasons[1][1]
    groups = failure_groups(spec, store, board)
    assert (groups[0].signature, groups[0].count, len(groups)) == ("disk full at <time>", 2, 3)
    document = groups[0].to_json(spec)
    last = spec.plan.interval(3)
    assert document["first"] == {"index": 0, "id": spec.ids.of(spec.plan.interval(0).start, spec.plan.interval(0).end)}
    assert document["last"] == {"index": 3, "id": spec.ids.of(last.start, last.end)}
    assert (document["example"], document["count"], document["signature"]) == (
        "disk full at 2024-01-01", 2, "disk full at <time>",
    )  # fmt: skip
    assert list(failed_reasons(spec, store, StatusBoard(len(spec.plan)))) == []
