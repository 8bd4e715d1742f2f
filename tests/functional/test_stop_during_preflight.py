"""A stop signal while the pre-flight runs a long sample query ends the command there: DuckDB took the signal for
an error of its query, the pre-flight for a check it could not decide, and went on to its next sample."""

from __future__ import annotations

import signal
import subprocess

import psutil
import pytest

from tests.backfills import start_background, state_dirs, wait_for
from tests.builder import Repo
from tests.functional.test_guardrails import TIME_INTERVAL, redeclare_daily

# The fixture's ten rows a day, beside a count over a trillion hashed numbers: hours of both cores for DuckDB.
SLOW_QUERY = (
    "SELECT d.day, d.n FROM (SELECT CAST(range AS DATE) AS day, n FROM range(DATE '{{ start_date }}', "
    "DATE '{{ end_date }}' + INTERVAL 1 DAY, INTERVAL 1 DAY), range(10) AS t(n)) AS d, "
    "(SELECT sum(hash(range) % 7) AS c FROM range(1000000000000)) AS s WHERE s.c >= 0"
)


def busy_for(process: subprocess.Popen, seconds: float) -> bool:
    """Whether the process has used ``seconds`` of CPU: planning and judging take a fraction of that, so it is in
    a sample query."""
    times = psutil.Process(process.pid).cpu_times()
    return times.user + times.system >= seconds


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_a_stop_during_a_long_sample_query_ends_the_command_at_once(tmp_path, home, stop):
    """Ctrl+C (a supervisor's SIGTERM, a closed terminal's SIGHUP) while the pre-flight counts a sample of hours:
    the command ran on through every sample, each interrupted into "could not decide", or through the query to its
    end (still running a minute later). Now it stops at once, exit 130, with nothing saved."""
    repo = Repo(tmp_path / "repo", guardrails="standard")
    repo.sql("raw.events", "SELECT 1 AS x", materialization={"type": "view"})
    redeclare_daily(repo)
    repo.run_ok("--start-date", "2023-12-01", "--end-date", "2024-01-07", env=home)
    repo.sql("mid.daily", SLOW_QUERY, depends=["raw.events"], materialization=TIME_INTERVAL)
    process = start_background(
        "p", "--start-date", "2024-01-08", "--end-date", "2024-01-09", "--reason", "r", "--no-progress",
        cwd=repo.root, env=home,
    )  # fmt: skip
    try:
        wait_for(lambda: busy_for(process, 2.0), timeout=60)
        process.send_signal(stop)
        out, err = process.communicate(timeout=60)
    finally:
        process.kill()
        process.wait()
    assert process.returncode == 130, out + err
    assert state_dirs(repo.root / "logs" / "backfills") == []
