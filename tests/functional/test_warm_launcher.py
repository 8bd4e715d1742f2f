"""The warm launcher: runners that serve pipeline partitions one after another, with every guarantee of exec."""

from __future__ import annotations

import os
import re
import shutil
import signal
import time
from pathlib import Path

import duckdb
import orjson
import psutil
import pytest

from tests.backfills import alive, child_running, records, start_background, state_dirs, wait_for
from tests.builder import Repo
from tests.conftest import run_backfill
from tests.guard_flags import REASON

DAYS = ("--start-date", "2024-01-01", "--end-date", "2024-01-12")  # 12 days: each exec partition costs 0.7 s
# 10^12 rows: minutes of DuckDB work, for the first attempt of 2024-01-03 only (a resumed attempt is quick).
SLOW = (
    "{% if start_date == '2024-01-03' and run_id.endswith('-a1') %}"
    "(SELECT count(*) FROM range(1000000) a, range(1000000) b)"
    "{% else %}1{% endif %}"
)
FIVE_DAYS = ("--start-date", "2024-01-01", "--end-date", "2024-01-05")


def runners_of(backfill_id: str) -> list[psutil.Process]:
    """Live warm runners of this backfill (found by BACKFILL_ID in their environment)."""
    found = []
    for process in psutil.process_iter(["cmdline"]):
        try:
            runner = "__warm-runner" in (process.info["cmdline"] or [])
            if runner and process.environ().get("BACKFILL_ID") == backfill_id:
                found.append(process)
        except psutil.Error:
            continue
    return found


def tables(database: Path) -> dict[str, list[tuple]]:
    with duckdb.connect(str(database), read_only=True) as connection:
        names = connection.execute(
            "SELECT table_schema || '.' || table_name FROM information_schema.tables ORDER BY ALL"
        ).fetchall()
        return {name: connection.execute(f"SELECT * FROM {name} ORDER BY ALL").fetchall() for (name,) in names}


def normalised_records(backfill: Path) -> list[dict]:
    """Partition records without what differs between any two runs (times, PIDs, the backfill's ID)."""
    kept = []
    for record in records(backfill):
        attempts = [
            {"status": a["status"], "exit_code": a["exit_code"], "error": a["error"], "run": a["run_id"][-6:]}
            for a in record["attempts"]
        ]
        kept.append({"index": record["index"], "id": record["id"], "status": record["status"], "attempts": attempts})
    return kept


def normalised_log(path: Path, backfill_id: str) -> list[str]:
    """The log's lines without IDs, durations and paths, sorted: independent assets finish in any order."""
    text = path.read_text().replace(backfill_id, "ID")
    text = re.sub(r"\d+\.\d+s", "Ts", text)
    return sorted(re.sub(r"record \S+", "record R", line) for line in text.splitlines())


TIMES = {"started_at", "finished_at", "duration_seconds", "run_id", "backfill_id", "target"}


def comparable_run(path: Path) -> dict:
    """A run record without its times, IDs and paths; assets in name order (they finish in any order)."""
    run = {k: v for k, v in orjson.loads(path.read_bytes()).items() if k not in TIMES}
    run["assets"] = sorted(
        ({k: v for k, v in asset.items() if k not in TIMES} for asset in run["assets"]), key=lambda a: a["name"]
    )
    return run


def test_warm_and_exec_leave_identical_tables_records_and_logs(shop, home, tmp_path):
    """The example over 12 days, once per launcher from the same start: the same tables row for row, the same
    partition records, run records and logs (times, PIDs and IDs aside)."""
    other = tmp_path / "shop-exec"
    shutil.copytree(shop, other)
    for repository, launcher in ((shop, "warm"), (other, "exec")):
        result = run_backfill(
            *REASON, "pipeline", *DAYS, "--launcher", launcher, "--no-progress", cwd=repository, env=home
        )
        assert result.returncode == 0, result.stderr
        first_line = result.stdout.splitlines()[0]
        assert first_line.endswith(", in warm runners") == (launcher == "warm"), first_line
    assert tables(shop / "warehouse.duckdb") == tables(other / "warehouse.duckdb")
    [warm], [cold] = state_dirs(shop / "logs" / "backfills"), state_dirs(other / "logs" / "backfills")
    assert orjson.loads((warm / "manifest.json").read_bytes())["initial_execution"]["launcher"] == "warm"
    assert normalised_records(warm) == normalised_records(cold)
    assert len(normalised_records(warm)) == 12
    for record in records(warm):
        run_id = record["attempts"][-1]["run_id"]
        cold_id = run_id.replace(warm.name, cold.name)
        assert normalised_log(warm / "children" / f"{run_id}.log", warm.name) == normalised_log(
            cold / "children" / f"{cold_id}.log", cold.name
        )
        warm_run = comparable_run(shop / "logs" / "runs" / f"{run_id}.json")
        cold_run = comparable_run(other / "logs" / "runs" / f"{cold_id}.json")
        assert warm_run == cold_run
        # the warehouse did not exist before (no snapshot file): every table measured against nothing, no error
        changes = record["attempts"][-1]["row_changes"] or {}
        assert changes and all("error" not in change and change["before"] == 0 for change in changes.values())
    pids = {a["pid"] for r in records(warm) for a in r["attempts"]}
    assert len(pids) == 1  # one runner served all 12 partitions (a writable DuckDB file: one at a time)
    assert len({a["pid"] for r in records(cold) for a in r["attempts"]}) == 12
    assert not runners_of(warm.name)


@pytest.fixture
def slow(tmp_path) -> Repo:
    """Pipeline `p`: `s.t` appends one row per day; its first attempt on 2024-01-03 runs for minutes."""
    repo = Repo(tmp_path / "repo")
    repo.sql(
        "s.t",
        f"SELECT DATE '{{{{ start_date }}}}' AS day, {SLOW} AS n",
        materialization={"type": "table", "strategy": "append"},
    )
    return repo


def lock_free(database: Path) -> bool:
    """Whether no process holds the DuckDB file's lock any more."""
    try:
        duckdb.connect(str(database), read_only=True).close()
    except duckdb.IOException:
        return False
    return True


def days_in_table(repo: Repo) -> list[str]:
    return [str(day) for (day,) in repo.query("SELECT day FROM s.t ORDER BY day")]


def running_record(backfill: Path, index: int) -> dict:
    def found():
        return next((r for r in records(backfill) if r["index"] == index and child_running(r)), None)

    return wait_for(found, timeout=60)


def backfill_of(root: Path) -> Path:
    return wait_for(lambda: (state_dirs(root / "logs" / "backfills") or [None])[0])


def test_ctrl_c_mid_query_rolls_the_partition_back_and_leaves_no_runner(slow, home):
    """SIGINT while the runner is deep in 2024-01-03's query: the query is interrupted, the partition recorded
    cancelled, the table holds Jan 1–2 only, the command exits 130 within seconds and no runner is left."""
    process = start_background(*REASON, "p", *FIVE_DAYS, "--no-progress", cwd=slow.root, env=home)
    backfill = backfill_of(slow.root)
    running_record(backfill, 2)
    time.sleep(1.0)  # well inside the minutes-long query
    started = time.monotonic()
    process.send_signal(signal.SIGINT)
    process.communicate(timeout=60)
    assert process.returncode == 130
    assert time.monotonic() - started < 20
    assert [r["status"] for r in records(backfill)] == ["succeeded", "succeeded", "cancelled"]
    assert days_in_table(slow) == ["2024-01-01", "2024-01-02"]
    assert not runners_of(backfill.name)


def test_a_timeout_interrupts_the_query_and_the_runner_serves_the_next_partitions(slow, home):
    """--timeout 2s on the slow day: it fails "timed out after 2s" with nothing written, and the same runner goes
    on with Jan 4 and 5 (on-failure continue)."""
    result = run_backfill(
        *REASON, "p", *FIVE_DAYS, "--timeout", "2s", "--on-failure", "continue", cwd=slow.root, env=home
    )
    assert result.returncode == 1, result.stderr
    [backfill] = state_dirs(slow.root / "logs" / "backfills")
    finished = records(backfill)
    assert [r["status"] for r in finished] == ["succeeded", "succeeded", "failed", "succeeded", "succeeded"]
    assert finished[2]["attempts"][-1]["error"] == "timed out after 2s"
    assert days_in_table(slow) == ["2024-01-01", "2024-01-02", "2024-01-04", "2024-01-05"]
    assert len({r["attempts"][-1]["pid"] for r in finished}) == 1  # interrupted, not replaced


def test_a_runner_killed_mid_partition_fails_only_that_partition(slow, home):
    """SIGKILL to the runner while it runs Jan 3: that partition fails (killed by SIGKILL), a fresh runner
    takes Jan 4 and 5, and the table has no row of Jan 3."""
    process = start_background(
        *REASON, "p", *FIVE_DAYS, "--on-failure", "continue", "--no-progress", cwd=slow.root, env=home
    )
    backfill = backfill_of(slow.root)
    first = running_record(backfill, 2)["attempts"][-1]["pid"]
    time.sleep(0.5)
    os.kill(first, signal.SIGKILL)
    process.communicate(timeout=120)
    assert process.returncode == 1
    finished = records(backfill)
    assert [r["status"] for r in finished] == ["succeeded", "succeeded", "failed", "succeeded", "succeeded"]
    assert "killed by SIGKILL" in finished[2]["attempts"][-1]["error"]
    assert {finished[3]["attempts"][-1]["pid"], finished[4]["attempts"][-1]["pid"]} != {first}
    assert days_in_table(slow) == ["2024-01-01", "2024-01-02", "2024-01-04", "2024-01-05"]
    assert not runners_of(backfill.name)


def test_the_runner_dies_with_a_killed_executor_and_continue_completes(slow, home):
    """SIGKILL to the executor mid-query: its runner dies with it (parent-death signal), nothing of Jan 3 was
    written, and --continue records it cancelled ("previous executor interrupted") and runs it again."""
    process = start_background(*REASON, "p", *FIVE_DAYS, "--no-progress", cwd=slow.root, env=home)
    backfill = backfill_of(slow.root)
    runner = running_record(backfill, 2)["attempts"][-1]["pid"]
    time.sleep(0.5)
    os.kill(process.pid, signal.SIGKILL)
    process.communicate(timeout=10)
    wait_for(lambda: not alive(runner), timeout=10)
    assert not runners_of(backfill.name)
    # A killed runner's main thread is a zombie before its DuckDB threads have exited and let go of the file:
    # wait for the file's lock, not for a time.
    wait_for(lambda: lock_free(slow.database), timeout=30)
    assert days_in_table(slow) == ["2024-01-01", "2024-01-02"]
    resumed = run_backfill("--continue", backfill.name, cwd=slow.root, env=home)
    assert resumed.returncode == 0, resumed.stderr
    third = records(backfill)[2]
    assert [(a["status"], a["run_id"][-2:]) for a in third["attempts"]] == [("cancelled", "a1"), ("succeeded", "a2")]
    assert days_in_table(slow) == ["2024-01-01", "2024-01-02", "2024-01-03", "2024-01-04", "2024-01-05"]


def test_an_asset_edited_mid_backfill_stops_the_warm_runners_and_is_judged_before_it_runs(tmp_path, home):
    """The runners keep the parsed pipeline: an edit made while Jan 2 runs must not reach Jan 3 unjudged. Jan 2
    finishes with what it parsed, nothing more starts (exit 1), and ``--continue`` judges the edit, after which the
    runners (new ones) run the new version."""
    repo = Repo(tmp_path / "repo")
    marker = tmp_path / "go"
    waiting = tmp_path / "waiting"
    asset = repo.sql(
        "s.t",
        "SELECT DATE '{{ start_date }}' AS day, 'old' AS version",
        materialization={"type": "table", "strategy": "append"},
        depends=["s.wait"],  # Jan 2 writes after the edit, from the pipeline as parsed when it started
    )
    repo.python(
        "s.wait",
        "import os, pathlib, time\n"
        "if os.environ['BACKFILL_START'].startswith('2024-01-02'):\n"
        f"    pathlib.Path({str(waiting)!r}).touch()\n"
        f"while os.environ['BACKFILL_START'].startswith('2024-01-02') and not os.path.exists({str(marker)!r}):\n"
        "    time.sleep(0.05)\n",
    )
    process = start_background(*REASON, "p", *FIVE_DAYS, "--no-progress", cwd=repo.root, env=home)
    # Wait until Jan 2's pipeline has been parsed and its first asset runs, not merely until the record says
    # running: the runner may not have read the asset yet when the executor has written its attempt.
    wait_for(waiting.exists, timeout=60)
    asset.write_text(asset.read_text().replace("'old'", "'new'"))
    marker.touch()
    out, err = process.communicate(timeout=120)
    assert process.returncode == 1, out + err
    assert "stopped: the pipeline changed since this backfill was judged (assets/s.t.sql changed)" in out + err
    assert repo.query("SELECT day::VARCHAR, version FROM s.t ORDER BY day") == [
        ("2024-01-01", "old"),
        ("2024-01-02", "old"),
    ]
    [backfill] = state_dirs(repo.root / "logs" / "backfills")
    resumed = run_backfill("--continue", backfill.name, "--no-progress", cwd=repo.root, env=home)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert repo.query("SELECT day::VARCHAR, version FROM s.t ORDER BY day") == [
        ("2024-01-01", "old"),
        ("2024-01-02", "old"),
        ("2024-01-03", "new"),
        ("2024-01-04", "new"),
        ("2024-01-05", "new"),
    ]


def test_python_assets_run_as_their_own_processes_with_the_partitions_environment(tmp_path, home):
    """Under the warm launcher a Python asset is still its own process, not the runner, and sees its
    partition's BACKFILL_* variables (not those of the runner's first partition)."""
    repo = Repo(tmp_path / "repo")
    seen = tmp_path / "seen.jsonl"
    repo.python(
        "s.py",
        "import json, os\n"
        f"with open({str(seen)!r}, 'a') as out:\n"
        "    out.write(json.dumps({'pid': os.getpid(), 'ppid': os.getppid(), 'start': os.environ['BACKFILL_START'],"
        " 'partition': os.environ['BACKFILL_PARTITION_ID'], 'id': os.environ['BACKFILL_ID']}) + '\\n')\n",
    )
    result = run_backfill(
        *REASON, "p", "--start-date", "2024-01-01", "--end-date", "2024-01-03", cwd=repo.root, env=home
    )
    assert result.returncode == 0, result.stderr
    [backfill] = state_dirs(repo.root / "logs" / "backfills")
    lines = [orjson.loads(line) for line in seen.read_text().splitlines()]
    finished = records(backfill)
    runner = {r["attempts"][-1]["pid"] for r in finished}
    assert len(runner) == 1
    assert [line["start"][:10] for line in lines] == ["2024-01-01", "2024-01-02", "2024-01-03"]
    assert [line["partition"] for line in lines] == [r["id"] for r in finished]
    assert all(line["pid"] not in runner and line["ppid"] in runner and line["id"] == backfill.name for line in lines)


@pytest.fixture
def readers(tmp_path) -> Repo:
    """Pipeline `p` on a read-only DuckDB file: nothing caps parallelism. `s.q` is a plain query; on 2024-01-01
    it fails after 1 s, on 2024-01-02 it runs for minutes, elsewhere it is instant."""
    repo = Repo(tmp_path / "repo")
    duckdb.connect(str(repo.database)).close()
    repo.write(
        ".bruin.yml",
        "default_environment: dev\nenvironments:\n  dev:\n    guardrails: sandbox\n    connections:\n"
        "      duckdb:\n        - {name: db, path: warehouse.duckdb, read_only: true}\n",
    )
    repo.sql(
        "s.q",
        "SELECT {% if start_date == '2024-01-01' %}error('planted failure') FROM (SELECT count(*) FROM "
        "range(3000000000)){% elif start_date == '2024-01-02' and run_id.endswith('-a1') %}"
        "(SELECT count(*) FROM range(1000000) a, range(1000000) b){% else %}1{% endif %} AS n",
    )
    return repo


def test_one_runner_per_parallel_slot_each_serving_several_partitions(readers, home):
    """Six quick partitions three at a time: at most three runners, some serving more than one partition."""
    result = run_backfill(
        *REASON,
        "p",
        "--start-date",
        "2024-01-03",
        "--end-date",
        "2024-01-08",
        "--max-parallel",
        "3",
        cwd=readers.root,
        env=home,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0].endswith("3 at a time, in warm runners")
    [backfill] = state_dirs(readers.root / "logs" / "backfills")
    pids = [r["attempts"][-1]["pid"] for r in records(backfill)]
    assert 1 <= len(set(pids)) <= 3 and len(set(pids)) < len(pids)
    assert not runners_of(backfill.name)


def test_fail_fast_interrupts_the_sibling_query_in_its_runner(readers, home):
    """Jan 1 fails while Jan 2's query runs in another runner: fail-fast cancels Jan 2 at once (its query
    interrupted, not waited for), the command exits 1 within seconds, and no runner is left."""
    started = time.monotonic()
    result = run_backfill(
        *REASON,
        "p",
        *FIVE_DAYS,
        "--max-parallel",
        "2",
        "--on-failure",
        "fail-fast",
        cwd=readers.root,
        env=home,
        timeout=120,
    )
    assert result.returncode == 1, result.stderr
    assert time.monotonic() - started < 25
    [backfill] = state_dirs(readers.root / "logs" / "backfills")
    first, second = records(backfill)[:2]
    assert first["status"] == "failed" and "planted failure" in first["attempts"][-1]["error"]
    assert (second["status"], second["attempts"][-1]["error"]) == (
        "cancelled",
        "cancelled: fail-fast after partition 0 failed",
    )
    assert not runners_of(backfill.name)


def test_a_resume_may_switch_the_launcher(slow, home):
    """The launcher is an execution control: a --continue with --launcher exec runs its attempts in new
    processes, and the attempts say which launcher ran them."""
    first = run_backfill(
        *REASON, "p", "--start-date", "2024-01-01", "--end-date", "2024-01-02", cwd=slow.root, env=home
    )
    assert first.returncode == 0, first.stderr
    [backfill] = state_dirs(slow.root / "logs" / "backfills")
    again = run_backfill(
        *REASON, "--continue", backfill.name, "--rerun", "all", "--launcher", "exec", cwd=slow.root, env=home
    )
    assert again.returncode == 0, again.stderr
    assert not again.stdout.splitlines()[0].endswith("in warm runners")
    for record in records(backfill):
        assert [a["launcher"] for a in record["attempts"]] == ["warm", "exec"]


def test_runners_are_recycled_after_serving_their_share_of_partitions(shop, home):
    """With BACKFILL_RUNNER_PARTITIONS=3, seven partitions are served by three runners in turn (3, 3, 1): each
    retired runner has left before its successor opens the DuckDB file, and every partition succeeds."""
    env = {**home, "BACKFILL_RUNNER_PARTITIONS": "3"}
    result = run_backfill(
        *REASON, "pipeline", "--start-date", "2024-01-01", "--end-date", "2024-01-07", cwd=shop, env=env
    )
    assert result.returncode == 0, result.stderr
    [backfill] = state_dirs(shop / "logs" / "backfills")
    pids = [r["attempts"][-1]["pid"] for r in records(backfill)]
    assert [pids.count(pid) for pid in dict.fromkeys(pids)] == [3, 3, 1]
    assert [r["status"] for r in records(backfill)] == ["succeeded"] * 7
    assert not runners_of(backfill.name)


@pytest.mark.parametrize("value", ["0", "x", "١٠", "1000001", ""])
def test_a_bad_runner_partitions_setting_is_refused_before_anything_is_saved(shop, home, value):
    """BACKFILL_RUNNER_PARTITIONS outside 1..1,000,000 (or not ASCII digits): one line, exit 2, no store."""
    result = run_backfill(*REASON, "pipeline", *FIVE_DAYS, cwd=shop, env={**home, "BACKFILL_RUNNER_PARTITIONS": value})
    if value == "":
        assert result.returncode == 0, result.stderr  # unset in effect: the default
        return
    assert result.returncode == 2
    assert result.stderr == (
        f"backfill: error: BACKFILL_RUNNER_PARTITIONS {value!r} is not a whole number of partitions "
        "from 1 to 1,000,000\n"
    )
    assert not (shop / "logs" / "backfills").exists() or not list((shop / "logs" / "backfills").iterdir())
