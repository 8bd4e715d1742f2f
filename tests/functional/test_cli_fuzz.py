"""The command line fuzzed over its grammar (hypothesis, seeded and bounded): whatever a user types, the answer is
a documented exit code, a refusal is one line on stderr naming what was wrong, never a traceback, and a value
that is nonsense for its flag is never silently accepted."""

from __future__ import annotations

import os
import subprocess

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import backfill_argv

GOOD = {
    "--start-date": ["2024-01-01", "2024-01-01T06:00:00Z", "2024-03-10T01:00:00"],
    "--end-date": ["2024-01-03", "2024-01-02T00:00:00+02:00"],
    "--partition": ["daily", "hourly", "6h", "90m", "weekly", "monthly"],
    "--timezone": ["UTC", "America/New_York", "Asia/Kolkata"],
    "--max-parallel": ["1", "4", "100000"],
    "--retries": ["0", "3"],
    "--timeout": ["30m", "none", "1h30m"],
    "--limit": ["0", "5"],
    "--offset": ["0", "2"],
    "--on-failure": ["stop", "continue", "fail-fast"],
    "--state-dir": ["state", "runs/state"],
}
NONSENSE = [
    "",
    " ",
    " 1",
    "1 ",
    "\t2024-01-01",
    "٣",
    "１２",
    "-1",
    "1e9",
    "nan",
    "9" * 40,
    "9223372036854775807h",
    "localtime",
    "{start",
    "2024-02-30",
    "0s",
    "1_000",
    "x" * 300,  # longer than a file name may be: a zone or a path the system cannot even look up
]
NUMERIC = ("--max-parallel", "--retries", "--limit", "--offset")


@st.composite
def argvs(draw) -> tuple[list[str], bool]:
    """A dry-run command line of good values for some flags and, most of the time, one value drawn from the
    nonsense list for another; and whether that value is nonsense for its flag (padded, empty, or a number in
    other digits)."""
    flags = draw(st.lists(st.sampled_from(sorted(GOOD)), unique=True, min_size=1, max_size=5))
    argv, nonsense = ["--command", "echo {start}", "--dry-run"], False
    probe = flags[0] if draw(st.integers(0, 9)) < 7 else None
    for flag in flags:
        if flag == probe:
            value = draw(st.sampled_from(NONSENSE))
            nonsense = value != value.strip() or value == "" or (flag in NUMERIC and not value.isascii())
        else:
            value = draw(st.sampled_from(GOOD[flag]))
        argv += [flag, value]
    if "--start-date" not in flags:
        argv += ["--start-date", "2024-01-01"]
    if "--end-date" not in flags:
        argv += ["--end-date", "2024-01-02"]
    return argv, nonsense


@settings(max_examples=60, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=argvs())
def test_every_command_line_gets_a_documented_answer(tmp_path, home, case):
    """Exit 0, 2, 3 or 4 only; no traceback; a non-zero exit says why in one `backfill: error:` line; a padded,
    empty or non-ASCII number value is refused."""
    argv, nonsense = case
    result = subprocess.run(
        [*backfill_argv(), *argv],
        cwd=tmp_path,
        env={**os.environ, "NO_COLOR": "1", **home},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode in (0, 2, 3, 4), (argv, result.returncode, result.stderr)
    assert "Traceback" not in result.stderr, (argv, result.stderr)
    if result.returncode == 2:
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("backfill: error: "), (argv, result.stderr)
    if nonsense:
        assert result.returncode == 2, (argv, result.stdout[-300:])
