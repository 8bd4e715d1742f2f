"""`backfill audit` over a long history, as a real process: --since and --action keep exactly what an oracle reading
every line keeps, the heading counts the whole log, and a bad value is one line and exit 2."""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta

import pytest

from engine.store import audit
from tests.conftest import run_backfill

START = datetime(2026, 11, 1, tzinfo=UTC)
ACTIONS = ("MARK", "CANCEL", "PAUSE", "RESUME", "SET")


def stamp(moment: datetime) -> str:
    return moment.isoformat(timespec="microseconds").replace("+00:00", "Z")


@pytest.fixture
def history(tmp_path):
    """3,000 interventions over ten days, appended in batches, some a little out of order (made before the lock,
    appended after a later one)."""
    chooser = random.Random(7)
    entries = []
    for number in range(3000):
        moment = START + timedelta(minutes=5 * number - chooser.choice((0, 0, 0, 7)))
        entries.append(audit.entry(action=chooser.choice(ACTIONS), reason=f"n{number}", applied_at=stamp(moment)))
    for begin in range(0, 3000, 250):
        audit.append(tmp_path, entries[begin : begin + 250])
    return tmp_path, entries


def kept(entries, since: datetime, actions) -> list[str]:
    return [
        e["reason"]
        for e in entries
        if datetime.fromisoformat(e["applied_at"]) >= since and (not actions or e["action"] in actions)
    ]


@pytest.mark.parametrize(
    ("since", "moment", "actions"),
    [
        ("2026-11-06", datetime(2026, 11, 6, tzinfo=UTC), ()),
        ("2026-11-06T12:01:00+01:00", datetime(2026, 11, 6, 11, 1, tzinfo=UTC), ("MARK",)),
        ("2026-11-08T00:00:00Z", datetime(2026, 11, 8, tzinfo=UTC), ("MARK", "PAUSE", "RESUME")),
        (None, START, ("CANCEL", "SET")),
    ],
)
def test_since_and_action_keep_exactly_what_an_oracle_keeps(history, since, moment, actions):
    """JSON lines and text lines alike: only entries applied at or after --since with one of the --action values,
    in the log's order."""
    root, entries = history
    away = {"TZ": "America/New_York"}  # a date is midnight UTC, whatever the machine's zone
    flags = [*(["--since", since] if since else []), *(["--action", ",".join(actions)] if actions else [])]
    result = run_backfill("audit", "--state-dir", str(root), *flags, "--output", "json", env=away)
    assert result.returncode == 0 and result.stderr == "", result.stderr
    assert [json.loads(line)["reason"] for line in result.stdout.splitlines()] == kept(entries, moment, actions)
    text = run_backfill("audit", "--state-dir", str(root), *flags, env=away)
    heading, *lines = text.stdout.splitlines()
    assert heading.startswith(f"state directory {root}: 3,000 lines in its audit log")
    assert [line.rsplit(": ", 1)[1] for line in lines] == kept(entries, moment, actions)
    if since:
        assert "; showing since " in heading


def test_a_torn_line_after_since_is_shown_and_named(history):
    """A line torn by a crash, after the --since point: printed as torn in its place, and named on stderr."""
    root, _ = history
    with open(root / audit.AUDIT, "ab") as handle:
        handle.write(b'{"action": "MA')
    audit.append(root, [audit.entry(action="MARK", reason="after", applied_at=stamp(datetime.now(UTC)))])
    result = run_backfill("audit", "--state-dir", str(root), "--since", "1h")
    assert result.stdout.splitlines()[1:] == [
        "line 3001: torn (a crash while appending), kept as written",
        result.stdout.splitlines()[-1],
    ]
    assert result.stdout.splitlines()[-1].endswith(": after")
    assert "line 3001 is torn" in result.stderr


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--since", ""], "--since ''"),
        (["--since", "2026-11-06T09:00:00"], "has no offset"),
        (["--since", "2099-01-01"], "is in the future"),
        (["--since", "٢٠٢٦-11-06"], "--since '٢٠٢٦-11-06'"),
        (["--since", "2026-02-30"], "is not a date"),
        (["--since", "yesterday"], "--since 'yesterday'"),
        (["--since", "0s"], "--since '0s'"),
        (["--since", "99999999h"], "--since '99999999h' reaches back before the year 1"),
        (["--action", "NOPE"], "--action 'NOPE' is not an audit action: give one of MARK"),
        (["--action", ""], "--action '' is not an audit action"),
        (["--action", "MARK,"], "--action 'MARK,' is not an audit action"),
    ],
)
def test_a_bad_since_or_action_is_one_line_and_exit_2(history, flags, named):
    """Each names the value and what would be accepted; no traceback, nothing printed on stdout."""
    root, _ = history
    result = run_backfill("audit", "--state-dir", str(root), *flags)
    assert result.returncode == 2 and result.stdout == ""
    assert len(result.stderr.splitlines()) == 1 and named in result.stderr, result.stderr
