"""Source data against a Python asset's script in a backfill, through the real command: a script writes the DuckDB
file itself, outside any transaction of ours, and is let through unjudged in a sandbox (human-only elsewhere). One
that deletes or changes a row of a raw table fails its partition and stops the backfill; one that only adds rows
(a re-ingested month) runs every day. Each test counts the rows of the raw table, not the exit code alone."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.backfills import records, state_dirs
from tests.builder import Repo
from tests.conftest import run_backfill
from tests.functional.test_guardrails import WEEK

SCRIPT = """import duckdb, os
connection = duckdb.connect(os.environ["BRUIN_DUCKDB_PATH"])
connection.execute({statement!r})
connection.close()
"""


def loader(tmp_path, statement: str, rows: int = 5) -> Repo:
    """A sandbox pipeline of one Python asset running ``statement`` on the warehouse, beside raw.landing of
    ``rows`` rows."""
    repo = Repo(tmp_path / "repo")
    repo.execute("CREATE SCHEMA raw", f"CREATE TABLE raw.landing AS SELECT range AS x FROM range({rows})")
    repo.python("mid.loader", SCRIPT.format(statement=statement), connection="db")
    return repo


def backfill_week(repo: Repo, home) -> tuple[int, list[tuple[str, str, str]]]:
    ran = run_backfill("p", *WEEK, "--reason", "r", "--no-progress", cwd=repo.root, env=home)
    [backfill] = state_dirs(repo.root / "logs" / "backfills")
    found = [(r["start"][:10], r["status"], (r["attempts"][-1].get("error") or "")) for r in records(backfill)]
    return ran.returncode, found


@pytest.mark.parametrize(
    ("statement", "change"),
    [
        ("DELETE FROM raw.landing", "5 rows before, 0 after"),
        ("UPDATE raw.landing SET x = x + 1 WHERE x = 4", "the same 5 rows, but their contents changed"),
        ("DROP TABLE raw.landing", "5 rows before, 0 after"),
        (
            "DROP TABLE raw.landing; CREATE TABLE raw.landing AS SELECT range + 10 AS x FROM range(6)",
            "the same 5 rows, but their contents changed",
        ),
    ],
)
def test_a_script_that_deletes_or_changes_source_rows_stops_the_backfill_on_its_first_day(tmp_path, home, statement,
                                                                                          change):  # fmt: skip
    """A sandbox's Python asset whose script deletes raw.landing's rows (or changes one, drops the table, or
    rebuilds it with other rows): verdict auto, and all five days ran and "succeeded", exit 0, the source emptied
    on the first. Its first day now fails naming the table and what changed, and no later day runs. What the script
    did to the file cannot be rolled back (it wrote the file itself): the line says so."""
    repo = loader(tmp_path, statement)
    code, found = backfill_week(repo, home)
    assert code == 1 and [(day, status) for day, status, _ in found] == [("2024-01-08", "failed")]
    assert (
        f"mid.loader: its script deleted or changed rows of raw.landing, a raw table ({change}): source data is never "
        "deleted or rebuilt in a backfill, and a script's writes cannot be rolled back: restore raw.landing yourself"
    ) in found[0][2]


def test_a_script_that_only_adds_source_rows_runs_every_day(tmp_path, home):
    """A script that appends its day to raw.landing (a source re-sent) is no delete: all five days run, exit 0, the
    table keeps its rows and gains five. Its file held deletes a crashed writer left in the write-ahead log, which
    the first checkpoint compacts, renumbering the rows: read before that checkpoint, the script's own (as it
    closes) would make its append look like a change."""
    repo = loader(tmp_path, "INSERT INTO raw.landing SELECT epoch(now())::BIGINT", rows=300_000)
    crashed_writer = (
        "import duckdb, os\n"
        f"connection = duckdb.connect({str(repo.database)!r})\n"
        "connection.execute(\"SET checkpoint_threshold = '10GB'\")\n"
        "connection.execute('DELETE FROM raw.landing WHERE x < 200000')\n"
        "os._exit(0)\n"
    )
    subprocess.run([sys.executable, "-c", crashed_writer], check=True)
    assert repo.database.with_name("warehouse.duckdb.wal").exists()
    code, found = backfill_week(repo, home)
    assert (code, [status for _, status, _ in found]) == (0, ["succeeded"] * 5), found
    assert repo.query("SELECT count(*), count(*) FILTER (WHERE x < 300000) FROM raw.landing") == [(100_005, 100_000)]
