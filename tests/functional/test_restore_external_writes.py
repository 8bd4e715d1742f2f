"""`backfill restore` over writes no run record names: another tool or a SQL session changed a snapshotted table
after the backfill ended, and putting the snapshot back would silently undo that. Real backfills, a real DuckDB
file written from outside, the tables read after each refusal and each restore."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from tests.backfills import alive, records, start_background, state_dirs, wait_for
from tests.builder import WAITER, Repo
from tests.conftest import run_backfill

DAILY = {"type": "table", "strategy": "time_interval", "incremental_key": "day", "time_granularity": "date"}
TWO_DAYS = ("--start-date", "2024-01-03", "--end-date", "2024-01-04")
TABLES = "SELECT day, n FROM mid.daily UNION ALL SELECT NULL, n FROM mid.totals ORDER BY ALL"


DAYS = "range(DATE '{{ start_date }}', DATE '{{ end_date }}' + INTERVAL 1 DAY, INTERVAL 1 DAY)"


@pytest.fixture
def restored(tmp_path: Path, home: dict[str, str]) -> tuple[Repo, Path, dict[str, str]]:
    """mid.daily (time_interval: the snapshot keeps the range's rows) and mid.totals (rebuilt whole), a week run
    by hand (``n`` = 1), then a backfill of two days of it with new SQL (``n`` = 2)."""
    repo = Repo(tmp_path / "repo")
    repo.sql("mid.daily", f"SELECT CAST(range AS DATE) AS day, 1 AS n FROM {DAYS}", materialization=DAILY)
    repo.sql(
        "mid.totals", "SELECT count(*) AS n FROM mid.daily", depends=["mid.daily"], materialization={"type": "table"}
    )
    repo.run_ok("--start-date", "2024-01-01", "--end-date", "2024-01-07")
    repo.sql("mid.daily", f"SELECT CAST(range AS DATE) AS day, 2 AS n FROM {DAYS}", materialization=DAILY)
    ran = run_backfill("p", *TWO_DAYS, "--reason", "v2", "--no-progress", cwd=repo.root, env=home)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    [backfill] = state_dirs(repo.root / "logs" / "backfills")
    return repo, backfill, home


def outside(repo: Repo, sql: str) -> None:
    """A write by a SQL session of its own: no run record anywhere."""
    with duckdb.connect(str(repo.database)) as connection:
        connection.execute(sql)


@pytest.mark.parametrize(
    ("write", "table", "counts"),
    [
        ("UPDATE mid.daily SET n = n + 100 WHERE day = DATE '2024-01-03'", "mid.daily", "2 rows then, 2 rows now"),
        ("INSERT INTO mid.totals VALUES (99)", "mid.totals", "1 row then, 2 rows now"),
        ("DROP TABLE mid.totals", "mid.totals", "1 row then, no table now"),
    ],
)
def test_a_restore_over_a_write_no_run_record_names_is_refused_unless_forced(restored, write, table, counts):
    """A session changed a snapshotted table (in the range a restore puts back, or a table restored whole) after
    the backfill ended: the restore is refused (exit 3, one line naming the table and that no run record explains
    it) and every table is as the session left it; ``--force`` restores and records what it overrode."""
    repo, backfill, home = restored
    outside(repo, write)
    after_write = repo.query(TABLES) if "DROP" not in write else None
    refused = run_backfill("restore", backfill.name, "--reason", "v2 was wrong", cwd=repo.root, env=home)
    assert refused.returncode == 3, refused.stdout + refused.stderr
    assert refused.stderr.count("\n") == 1, refused.stderr
    assert f"({table} changed since the backfill's last run ended at " in refused.stderr
    assert f"Z ({counts}) by a writer" in refused.stderr
    assert "by a writer that left no run record (another tool or a SQL session)): restoring would undo" in (
        refused.stderr
    )
    if after_write is not None:
        assert repo.query(TABLES) == after_write
    forced = run_backfill("restore", backfill.name, "--reason", "v2 was wrong", "--force", cwd=repo.root, env=home)
    assert forced.returncode == 0, forced.stdout + forced.stderr
    assert repo.query("SELECT * FROM mid.totals") == [(7,)]
    assert repo.query("SELECT DISTINCT n FROM mid.daily") == [(1,)]
    entry = json.loads((backfill / "guardrails.json").read_text())["invocations"][-1]
    assert entry["mode"] == "restore" and [table in line for line in entry["forced_over"]] == [True]


def test_a_write_outside_what_a_restore_puts_back_does_not_hold_it(restored):
    """A session changed mid.daily outside the backfill's range, which a restore of the range's rows leaves alone:
    the restore goes ahead, the range is put back and the session's change is kept. A second restore, with
    nothing written since the first, goes ahead too (the first restore is the last writer known)."""
    repo, backfill, home = restored
    outside(repo, "UPDATE mid.daily SET n = n + 100 WHERE day = DATE '2024-01-06'")
    done = run_backfill("restore", backfill.name, "--reason", "v2 was wrong", cwd=repo.root, env=home)
    assert done.returncode == 0, done.stdout + done.stderr
    assert repo.query("SELECT day, n FROM mid.daily WHERE n > 1") == [
        (repo.query("SELECT DATE '2024-01-06'")[0][0], 101)
    ]
    again = run_backfill("restore", backfill.name, "--reason", "once more", cwd=repo.root, env=home)
    assert again.returncode == 0, again.stdout + again.stderr


def test_a_later_run_by_hand_is_named_once_as_the_run(restored):
    """A run by hand wrote the range after the backfill: its run record names it, and the same change is not named
    a second time as a write nobody recorded."""
    repo, backfill, home = restored
    repo.sql("mid.daily", f"SELECT CAST(range AS DATE) AS day, 3 AS n FROM {DAYS}", materialization=DAILY)
    repo.run_ok("--start-date", "2024-01-03", "--end-date", "2024-01-03")
    refused = run_backfill("restore", backfill.name, "--reason", "v2 was wrong", cwd=repo.root, env=home)
    assert refused.returncode == 3, refused.stdout + refused.stderr
    assert "(a run by hand) at " in refused.stderr and "left no run record" not in refused.stderr


def test_a_resumed_run_killed_midway_leaves_no_stale_state_to_compare_with(restored, tmp_path):
    """A ``--continue`` with new SQL is killed (SIGKILL) after its first day committed: what the earlier run left
    no longer describes the tables, and the backfill's own write must not be taken for a stranger's. The restore
    goes ahead (judged on run records alone) and every table is as before the backfill."""
    repo, backfill, home = restored
    before = run_backfill("restore", backfill.name, "--reason", "probe", cwd=repo.root, env=home)
    assert before.returncode == 0, before.stdout + before.stderr
    pristine = repo.query(TABLES)
    repo.sql("mid.daily", f"SELECT CAST(range AS DATE) AS day, 3 AS n FROM {DAYS}", materialization=DAILY)
    repo.python("p.wait", WAITER, depends=["mid.totals"])
    env = {**home, "LIVE_STARTED": str(tmp_path / "started"), "LIVE_GO": str(tmp_path / "go")}
    resumed = start_background("--continue", backfill.name, "--rerun", "all", "--reason", "v3", "--max-parallel",
                               "1", "--launcher", "exec", "--no-progress", cwd=repo.root, env=env)  # fmt: skip
    try:
        wait_for(lambda: Path(env["LIVE_STARTED"]).exists(), timeout=60)
        child = wait_for(lambda: [a["pid"] for r in records(backfill) for a in r["attempts"] if a.get("pid")
                                  and a["status"] == "running"], timeout=30)  # fmt: skip
        resumed.kill()
        resumed.communicate(timeout=30)
    finally:
        Path(env["LIVE_GO"]).write_text("go")
    wait_for(lambda: not any(alive(pid) for pid in child), timeout=60)
    assert repo.query("SELECT DISTINCT n FROM mid.daily WHERE day = DATE '2024-01-03'") == [(3,)]
    done = run_backfill("restore", backfill.name, "--reason", "v3 was wrong", cwd=repo.root, env=home)
    assert done.returncode == 0, done.stdout + done.stderr
    assert repo.query(TABLES) == pristine


@pytest.mark.parametrize("noted", [True, False])
def test_a_restore_while_a_session_holds_the_warehouse_is_one_line_and_changes_nothing(restored, noted):
    """Another process holds the warehouse for writing: the restore is refused (exit 3, one line saying so) rather
    than a traceback or a claim of later writes, whether or not the last run left fingerprints to compare
    (``noted``), and once the holder is gone the tables are as they were."""
    repo, backfill, home = restored
    if not noted:
        index = json.loads((backfill / "snapshot.json").read_text())
        index.pop("left_at_us")
        (backfill / "snapshot.json").write_text(json.dumps(index))
    before = repo.query(TABLES)
    holder = subprocess.Popen(
        [sys.executable, "-c", f"import duckdb, sys; c = duckdb.connect({str(repo.database)!r}); print('held', "
         "flush=True); sys.stdin.read()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout.readline() == "held\n"
        refused = run_backfill("restore", backfill.name, "--reason", "v2 was wrong", cwd=repo.root, env=home)
    finally:
        holder.communicate("")
    assert refused.returncode == 3, refused.stdout + refused.stderr
    assert refused.stderr.count("\n") == 1 and "Traceback" not in refused.stderr
    assert f"the warehouse {repo.database.resolve()} is open for writing elsewhere (a run, or a session)" in (
        refused.stderr
    )
    assert "nothing was restored" in refused.stderr
    assert repo.query(TABLES) == before


def test_a_corrupt_snapshot_file_restores_nothing(restored):
    """The snapshot's copy is no longer a DuckDB file: one line naming it, exit 5, every table as it was."""
    repo, backfill, home = restored
    before = repo.query(TABLES)
    (backfill / "snapshot-0.duckdb").write_bytes(b"not a database")
    refused = run_backfill("restore", backfill.name, "--reason", "v2 was wrong", cwd=repo.root, env=home)
    assert refused.returncode == 5, refused.stdout + refused.stderr
    assert refused.stderr.count("\n") == 1 and "Traceback" not in refused.stderr
    assert f"snapshot file {backfill / 'snapshot-0.duckdb'} cannot be read (" in refused.stderr
    assert refused.stderr.rstrip().endswith("): nothing was restored")
    assert repo.query(TABLES) == before
