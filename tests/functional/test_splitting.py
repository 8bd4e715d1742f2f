"""Adaptive splitting through the real command: children that time out or run out of memory on long windows make
their partitions split along the calendar until the halves succeed (docs/splitting.md)."""

from __future__ import annotations

import itertools
import json
import os
import re
import signal
import subprocess
import sys
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import orjson
import psutil

from engine.dates.instants import to_micros
from tests.backfills import child_command, records, start_background, state_dirs, wait_for
from tests.builder import Repo
from tests.conftest import ROOT, run_backfill
from tests.guard_flags import GUARD, REASON
from tests.oracle import oracle_partitions
from tests.unit.test_split_properties import oracle_hours

BERLIN = ZoneInfo("Europe/Berlin")
SPLIT = ("--split-on", "timeout", "--min-partition", "1h")


def _show(work: Path, backfill: Path) -> dict:
    shown = run_backfill("show", backfill.name, "--output", "json", cwd=work)
    assert shown.returncode == 0, shown.stderr
    return json.loads(shown.stdout)


def _leaves(children: list[dict] | None, into: list[dict]) -> list[dict]:
    for child in children or []:
        if child["children"]:
            _leaves(child["children"], into)
        else:
            into.append(child)
    return into


def _micros(text: str) -> int:
    return to_micros(datetime.fromisoformat(text))


def _backfill(work: Path) -> Path:
    [backfill] = state_dirs(work / "logs" / "backfills")
    return backfill


def test_days_that_time_out_split_into_local_hours_and_succeed(tmp_path, home):
    """Children hang on windows over 12 h: each day (a 25-hour fall-back day among them) splits on its timeout,
    the 13-hour half again, and every leaf ends on the oracle's local hour boundaries, tiles its day, ran its own
    window and succeeded; the partitions keep their IDs and intervals and succeed."""
    (tmp_path / ".git").mkdir()
    command = child_command("--hang-longer-than", "12")
    result = run_backfill(
        *GUARD, "--command", command, "--start-date", "2024-10-26", "--end-date", "2024-10-28", "--tz",
        "Europe/Berlin", "--timeout", "2s", *SPLIT, "--max-parallel", "4", "--no-progress",
        cwd=tmp_path, env=home, timeout=180,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    counters = [int(done) for done in re.findall(r"^\[(\d+)/3\]", result.stdout + result.stderr, re.MULTILINE)]
    assert counters and max(counters) == 3 and counters == sorted(counters)  # each partition counted once, at its end
    assert "split       3 partitions split in this run (4 splits, down to 2 levels)" in result.stdout + result.stderr
    backfill = _backfill(tmp_path)
    shown = _show(tmp_path, backfill)
    days = oracle_partitions(
        datetime(2024, 10, 26, tzinfo=BERLIN), datetime(2024, 10, 29, tzinfo=BERLIN), BERLIN, "daily", None
    )
    lengths = []
    for partition, (day_start, day_end) in zip(shown["partitions"], days, strict=True):
        assert partition["status"] == "succeeded"
        assert (_micros(partition["start"]), _micros(partition["end"])) == (to_micros(day_start), to_micros(day_end))
        assert partition["attempts"][-1]["split"] is not None and partition["attempts"][-1]["error"].startswith(
            "timed out"
        )
        leaves = _leaves(partition["children"], [])
        edges = [(_micros(leaf["start"]), _micros(leaf["end"])) for leaf in leaves]
        assert edges[0][0] == to_micros(day_start) and edges[-1][1] == to_micros(day_end)
        assert all(a[1] == b[0] for a, b in itertools.pairwise(edges))
        assert {end for _, end in edges[:-1]} <= set(oracle_hours(day_start, day_end, BERLIN))
        for leaf in leaves:
            assert leaf["status"] == "succeeded"
            words = dict(w.split("=", 1) for w in Path(leaf["attempts"][-1]["log"]).read_text().split() if "=" in w)
            ran = (_micros(words["start"]), _micros(words["end"]) + 1)  # {end} is inclusive: 1 µs before the end
            assert ran == (_micros(leaf["start"]), _micros(leaf["end"]))  # the child ran the half's own window
        lengths.append([(b - a) // 3_600_000_000 for a, b in edges])
    assert lengths == [[12, 12], [12, 6, 7], [12, 12]]  # the 25-hour day: 12 h, then 13 h split 6 + 7
    audit = [json.loads(line) for line in (backfill / "audit.jsonl").read_text().splitlines()]
    assert sum(1 for line in audit if line["action"] == "SPLIT") == 4


def test_a_child_out_of_memory_splits_until_its_windows_fit(tmp_path, home):
    """Under ``ulimit -v`` a child allocating 40 MB per hour of its window raises MemoryError on a day and on 12 h,
    not on 6 h: with ``--split-on oom`` the day ends as four succeeded 6-hour leaves, two levels deep."""
    (tmp_path / ".git").mkdir()
    command = 'sh -c \'ulimit -v 400000; exec "$0" "$@"\' ' + child_command("--allocate-mb-per-hour", "40")
    result = run_backfill(
        *GUARD, "--command", command, "--start-date", "2024-01-01", "--end-date", "2024-01-01",
        "--split-on", "oom", "--min-partition", "1h", "--max-parallel", "2", "--no-progress",
        cwd=tmp_path, env=home, timeout=180,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    [partition] = _show(tmp_path, _backfill(tmp_path))["partitions"]
    assert partition["status"] == "succeeded"
    assert "MemoryError" in partition["attempts"][0]["error"]
    leaves = _leaves(partition["children"], [])
    assert [(leaf["start"][11:16], leaf["end"][11:16], leaf["status"]) for leaf in leaves] == [
        ("00:00", "06:00", "succeeded"),
        ("06:00", "12:00", "succeeded"),
        ("12:00", "18:00", "succeeded"),
        ("18:00", "00:00", "succeeded"),
    ]
    assert [c["attempts"][0]["split"] for c in partition["children"]] == ["split on oom into 6h + 6h"] * 2


def test_a_partition_s_record_lists_its_halves_before_either_starts(tmp_path, home):
    """On a disk where each partition record lands a second late, both halves' children, as they start, find
    themselves listed in their partition's record: the split is written, and waited for, before a half runs (a
    crash at that instant leaves a record that knows its halves)."""
    (tmp_path / ".git").mkdir()
    ledger = tmp_path / "listed.txt"
    state_root = tmp_path / "logs" / "backfills"
    command = child_command("--hang-longer-than", "12", "--check-listed", str(state_root), str(ledger))
    argv = [sys.executable, str(ROOT / "tests" / "slow_records.py"), *GUARD, "--command", command, "--start-date",
            "2024-01-01", "--end-date", "2024-01-01", "--timeout", "1s", *SPLIT, "--no-progress"]  # fmt: skip
    env = {**os.environ, "NO_COLOR": "1", **home, "PYTHONPATH": str(ROOT), "SLOW_RECORD_SECONDS": "1"}
    result = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    [partition] = _show(tmp_path, _backfill(tmp_path))["partitions"]
    halves = [child["id"] for child in partition["children"]]
    assert sorted(ledger.read_text().splitlines()) == sorted(f"listed {half}" for half in halves)


def test_without_its_trigger_a_failure_does_not_split(tmp_path, home):
    """The same out-of-memory child with ``--split-on timeout`` only: the partition fails whole, as without the
    option, and lists no children."""
    (tmp_path / ".git").mkdir()
    command = 'sh -c \'ulimit -v 400000; exec "$0" "$@"\' ' + child_command("--allocate-mb-per-hour", "40")
    result = run_backfill(
        *GUARD, "--command", command, "--start-date", "2024-01-01", "--end-date", "2024-01-01",
        *SPLIT, "--no-progress", cwd=tmp_path, env=home, timeout=120,
    )  # fmt: skip
    assert result.returncode == 1, result.stdout + result.stderr
    [partition] = _show(tmp_path, _backfill(tmp_path))["partitions"]
    assert (partition["status"], partition["children"]) == ("failed", None)
    assert not (_backfill(tmp_path) / "splits").exists()


def test_a_reason_matching_the_expression_splits_and_min_partition_stops_it(tmp_path, home):
    """``--split-on REGEX``: a child whose last words match splits; at ``--min-partition 12h`` the halves cannot split
    again, so halves that still fail fail their partition (exit 1), once each, with their own reasons."""
    (tmp_path / ".git").mkdir()
    result = run_backfill(
        *GUARD, "--command", child_command("--fail-longer-than", "6"), "--start-date", "2024-01-01",
        "--end-date", "2024-01-01", "--split-on", "too many (rows|columns),? for", "--min-partition", "12h",
        "--on-failure", "continue", "--no-progress", cwd=tmp_path, env=home, timeout=120,
    )  # fmt: skip
    assert result.returncode == 1, result.stdout + result.stderr
    [partition] = _show(tmp_path, _backfill(tmp_path))["partitions"]
    assert partition["status"] == "failed"
    assert partition["attempts"][0]["split"] == "split on pattern into 12h + 12h"
    assert [(c["status"], len(c["attempts"]), c["children"]) for c in partition["children"]] == [
        ("failed", 1, None),
        ("failed", 1, None),
    ]
    assert all("too many rows for a window of 12 h" in c["attempts"][0]["error"] for c in partition["children"])


def test_resume_reruns_only_the_failed_leaf(tmp_path, home):
    """A half that failed for another reason leaves its partition failed; ``--continue --rerun failed`` runs that
    leaf again — not the partition whole, not its succeeded sibling — and the partition ends succeeded."""
    backfill = _first_half_fails(tmp_path, home, "--on-failure", "continue")
    gate = tmp_path / "fail-while"
    [partition] = _show(tmp_path, backfill)["partitions"]
    assert partition["status"] == "failed"
    assert [c["status"] for c in partition["children"]] == ["failed", "succeeded"]
    # the partition's reason is its failed leaf's, not its own timeout: what triage and the table show
    assert partition["reason"] == "failing 2024-01-01 on purpose"
    assert partition["attempts"][0]["error"] == "timed out after 2s"
    shown = run_backfill("show", backfill.name, cwd=tmp_path, env=home)
    assert "failing 2024-01-01 on purpose" in shown.stdout
    gate.unlink()
    again = run_backfill("--continue", backfill.name, "--rerun", "failed", "--no-progress", cwd=tmp_path, env=home)
    assert again.returncode == 0, again.stdout + again.stderr
    [partition] = _show(tmp_path, backfill)["partitions"]
    assert partition["status"] == "succeeded"
    assert len(partition["attempts"]) == 1  # the partition itself never ran again
    assert [(c["status"], len(c["attempts"])) for c in partition["children"]] == [("succeeded", 2), ("succeeded", 1)]
    [record] = records(backfill)
    assert record["status"] == "succeeded" and len(record["children"]) == 2
    for child in record["children"]:
        half = orjson.loads((backfill / "splits" / f"{child['id']}.json").read_bytes())
        assert (half["parent"], half["status"]) == (record["id"], "succeeded")


def test_split_on_and_min_partition_bad_input(tmp_path, home):
    """Bad ``--split-on``/``--min-partition`` values get one line naming the value and what is accepted, exit 2."""
    (tmp_path / ".git").mkdir()
    base = (*GUARD, "--command", "true", "--start-date", "2024-01-01", "--end-date", "2024-01-01", "--dry-run")
    cases = {
        ("--split-on", ""): "--split-on '' is empty",
        ("--split-on", "timeout,timeout"): "names timeout twice",
        ("--split-on", "timeout,("): "is not a regular expression",
        ("--split-on", "timeout,,oom"): "has an empty item",
        ("--split-on", "deadlock,"): "has an empty item",
        ("--split-on", ",,"): "has an empty item",
        ("--split-on", "timeout", "--min-partition", "0.5s"): "shorter than a second",
        ("--split-on", "timeout", "--min-partition", "1d"): "--min-partition '1d' is not a duration",
        ("--min-partition", "1h"): "--min-partition means nothing without --split-on",
    }
    for flags, expected in cases.items():
        result = run_backfill(*base, *flags, cwd=tmp_path, env=home)
        assert result.returncode == 2, (flags, result.stderr)
        assert expected in result.stderr and result.stderr.count("\n") == 1, (flags, result.stderr)
        assert "Traceback" not in result.stderr


def test_a_minimum_no_partition_can_split_into_is_refused(tmp_path, home):
    """``--min-partition 13h`` over daily partitions: no day has two halves of 13 h, so the pre-flight refuses
    (exit 3) and says what to give instead."""
    (tmp_path / ".git").mkdir()
    result = run_backfill(
        *GUARD, "--command", "true", "--start-date", "2024-01-01", "--end-date", "2024-01-02",
        "--split-on", "timeout", "--min-partition", "13h", "--no-progress", cwd=tmp_path, env=home,
    )  # fmt: skip
    assert result.returncode == 3, result.stdout + result.stderr
    assert "cannot split into halves of at least --min-partition 13h" in result.stdout + result.stderr


def _first_half_fails(tmp_path: Path, home: dict[str, str], *extra: str) -> Path:
    """A day that times out whole and splits; its first half fails (not a trigger) while ``fail-while`` exists."""
    (tmp_path / ".git").mkdir()
    (tmp_path / "fail-while").touch()
    command = child_command(
        "--hang-longer-than", "12", "--fail-while", str(tmp_path / "fail-while"), "--fail-on", "2024-01-01T00"
    )
    first = run_backfill(
        *GUARD, "--command", command, "--start-date", "2024-01-01", "--end-date", "2024-01-01", "--timeout", "2s",
        *SPLIT, *extra, "--no-progress", cwd=tmp_path, env=home, timeout=120,
    )  # fmt: skip
    assert first.returncode == 1, first.stdout + first.stderr
    return _backfill(tmp_path)


def _split_day(tmp_path: Path, home: dict[str, str]) -> Path:
    """One day that timed out whole and split in two 12-hour halves, both succeeded."""
    (tmp_path / ".git").mkdir()
    result = run_backfill(
        *GUARD, "--command", child_command("--hang-longer-than", "12"), "--start-date", "2024-01-01",
        "--end-date", "2024-01-01", "--timeout", "2s", *SPLIT, "--no-progress", cwd=tmp_path, env=home, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    return _backfill(tmp_path)


def test_a_mark_of_a_half_marks_it_and_its_partition_adds_up(tmp_path, home):
    """``backfill mark ID HALF`` (a prefix of a half's own ID) marks that leaf: its record takes a mark entry, the
    partition becomes what its leaves add up to (failed), the other half is untouched, and the audit names the half."""
    backfill = _split_day(tmp_path, home)
    [record] = records(backfill)
    first, second = (child["id"] for child in record["children"])
    marked = run_backfill(
        "mark", backfill.name, first[:10], "--status", "failed", "--reason", "bad source rows", cwd=tmp_path, env=home
    )
    assert marked.returncode == 0, marked.stderr
    [partition] = _show(tmp_path, backfill)["partitions"]
    assert partition["status"] == "failed"
    assert [(c["status"], [a["kind"] for a in c["attempts"]]) for c in partition["children"]] == [
        ("failed", ["run", "mark"]),
        ("succeeded", ["run"]),
    ]
    [line] = [json.loads(x) for x in (backfill / "audit.jsonl").read_text().splitlines() if '"MARK"' in x]
    assert (line["partition_id"], line["from_status"], line["to_status"]) == (first, "succeeded", "failed")
    half = orjson.loads((backfill / "splits" / f"{second}.json").read_bytes())
    assert [a.get("kind", "run") for a in half["attempts"]] == ["run"]


def test_a_mark_of_a_split_partition_marks_all_its_leaves(tmp_path, home):
    """``backfill mark ID PARTITION`` of a split partition marks each leaf (not the partition's own attempts);
    ``--rerun failed`` then runs both leaves, never the partition whole."""
    backfill = _split_day(tmp_path, home)
    [record] = records(backfill)
    marked = run_backfill(
        "mark", backfill.name, record["id"][:10], "--status", "failed", "--reason", "recheck", cwd=tmp_path, env=home
    )
    assert marked.returncode == 0, marked.stderr
    [partition] = _show(tmp_path, backfill)["partitions"]
    assert partition["status"] == "failed" and len(partition["attempts"]) == 1
    assert [c["status"] for c in partition["children"]] == ["failed", "failed"]
    again = run_backfill("--continue", backfill.name, "--rerun", "failed", "--no-progress", cwd=tmp_path, env=home)
    assert again.returncode == 0, again.stdout + again.stderr
    [partition] = _show(tmp_path, backfill)["partitions"]
    assert partition["status"] == "succeeded" and len(partition["attempts"]) == 1
    assert [[a["kind"] for a in c["attempts"]] for c in partition["children"]] == [["run", "mark", "run"]] * 2


def test_a_half_marked_with_rows_is_bad_input(tmp_path, home):
    """A half is marked whole: ``--rows`` on it is one line, exit 2, and nothing changes."""
    backfill = _split_day(tmp_path, home)
    [record] = records(backfill)
    half = record["children"][0]["id"]
    before = (backfill / "splits" / f"{half}.json").read_bytes()
    marked = run_backfill(
        "mark", backfill.name, half, "--status", "succeeded", "--rows", "5", "--reason", "r", cwd=tmp_path, env=home
    )
    assert marked.returncode == 2 and "--asset and --rows mean nothing for it" in marked.stderr, marked.stderr
    assert (backfill / "splits" / f"{half}.json").read_bytes() == before


def _date_keyed_pipeline(root: Path) -> Repo:
    repo = Repo(root)
    repo.sql(
        "mid.daily",
        "SELECT CAST('{{ start_date }}' AS DATE) AS day, 1 AS amount",
        materialization={"type": "table", "strategy": "time_interval", "incremental_key": "day",
                         "time_granularity": "date"},
        columns=[{"name": "day", "type": "date"}, {"name": "amount", "type": "integer"}],
    )  # fmt: skip
    return repo


def test_a_date_keyed_asset_refuses_to_split_a_day(tmp_path, home):
    """A real pipeline whose time_interval asset is keyed by a DATE column: ``--split-on`` over daily partitions is
    refused by the pre-flight (exit 3), naming the asset and its key; nothing is saved, the warehouse is untouched."""
    repo = _date_keyed_pipeline(tmp_path)
    result = run_backfill(
        *REASON, "p", "--start-date", "2024-01-01", "--end-date", "2024-01-03", "--split-on", "timeout",
        "--no-progress", cwd=tmp_path, env=home,
    )  # fmt: skip
    assert result.returncode == 3, result.stdout + result.stderr
    assert (
        "--split-on: mid.daily's incremental key day is a DATE, so a daily partition cannot split below a day"
        in result.stdout + result.stderr
    )
    assert not state_dirs(tmp_path / "logs" / "backfills") and not repo.database.exists()


def test_a_date_keyed_asset_splits_a_month_into_days_only(tmp_path, home):
    """The same asset over monthly partitions: the pre-flight warns that splits stop at whole days, and the run goes
    ahead (its months never fail here, so nothing splits)."""
    _date_keyed_pipeline(tmp_path)
    result = run_backfill(
        *REASON, "p", "--start-date", "2024-01-01", "--end-date", "2024-01-31", "--partition", "monthly",
        "--split-on", "timeout", "--dry-run", cwd=tmp_path, env=home,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "never below a day: mid.daily's incremental key day is a DATE" in result.stdout


def test_halves_are_verified_as_themselves(tmp_path, home):
    """``--verify-command`` runs after each half that succeeded with the half's own ID and window (the partition
    itself timed out: it is never verified)."""
    (tmp_path / ".git").mkdir()
    seen = tmp_path / "verified"
    verify = f"sh -c 'echo \"$0 $1\" >> {seen}' {{partition_id}} {{start}}"
    result = run_backfill(
        *GUARD, "--command", child_command("--hang-longer-than", "12"), "--start-date", "2024-01-01",
        "--end-date", "2024-01-01", "--timeout", "2s", *SPLIT, "--verify-command", verify, "--no-progress",
        cwd=tmp_path, env=home, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    [record] = records(_backfill(tmp_path))
    expected = {(child["id"], _micros(child["start"])) for child in record["children"]}
    lines = [line.split() for line in seen.read_text().splitlines()]
    assert {(half_id, _micros(start)) for half_id, start in lines} == expected and len(lines) == 2


def test_a_kill_mid_split_then_continue_never_runs_a_half_twice_at_once(tmp_path, home):
    """SIGKILL of the executor while both halves of a split day run (their children left alive, orphaned), then
    ``--continue``: the orphans are stopped before any half starts again (no two live children ever hold one hour of
    the window), the killed attempts are settled (not left running), and the resumed halves succeed."""
    (tmp_path / ".git").mkdir()
    locks, began, release = tmp_path / "locks", tmp_path / "began.jsonl", tmp_path / "release"
    locks.mkdir()
    command = child_command(
        "--hang-longer-than", "12", "--wait-for", str(release), "--exclusive-hours", str(locks), "--began", str(began)
    )
    env = {**home, "BACKFILL_STOP_GRACE": "2"}
    first = start_background(
        *GUARD, "--command", command, "--start-date", "2024-01-01", "--end-date", "2024-01-01", "--timeout", "2s",
        *SPLIT, "--max-parallel", "2", "--no-progress", cwd=tmp_path, env=env,
    )  # fmt: skip
    started = lambda: began.read_text().count("\n") if began.exists() else 0  # noqa: E731
    wait_for(lambda: started() >= 3, timeout=60)  # the day, then both halves
    orphans = [json.loads(line)["pid"] for line in began.read_text().splitlines()[1:]]
    first.send_signal(signal.SIGKILL)
    first.communicate(timeout=30)
    assert all(psutil.pid_exists(pid) for pid in orphans)  # the halves' children outlived their executor
    resumed = start_background("--continue", _backfill(tmp_path).name, "--no-progress", cwd=tmp_path, env=env)
    wait_for(lambda: started() >= 5, timeout=60)  # both halves started again
    assert not any(psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE for pid in orphans)
    release.touch()
    out, err = resumed.communicate(timeout=60)
    assert resumed.returncode == 0, out + err
    assert not (locks / "OVERLAP").exists(), (locks / "OVERLAP").read_text()
    [partition] = _show(tmp_path, _backfill(tmp_path))["partitions"]
    assert partition["status"] == "succeeded"
    for half in partition["children"]:
        assert [(a["status"], a["error"]) for a in half["attempts"]] == [
            ("cancelled", "previous executor interrupted"),
            ("succeeded", None),
        ]


def test_a_cancel_after_a_kill_mid_split_stops_both_halves_children(tmp_path, home):
    """SIGKILL of the executor while both halves of a split day run, then ``backfill cancel``: the halves'
    children (recorded in the split tree, not in the day's own attempts) are stopped and counted."""
    (tmp_path / ".git").mkdir()
    began, release = tmp_path / "began.jsonl", tmp_path / "release"
    command = child_command("--hang-longer-than", "12", "--wait-for", str(release), "--began", str(began))
    first = start_background(
        *GUARD, "--command", command, "--start-date", "2024-01-01", "--end-date", "2024-01-01", "--timeout", "2s",
        *SPLIT, "--max-parallel", "2", "--no-progress", cwd=tmp_path, env={**home, "BACKFILL_STOP_GRACE": "2"},
    )  # fmt: skip
    started = lambda: began.read_text().count("\n") if began.exists() else 0  # noqa: E731
    wait_for(lambda: started() >= 3, timeout=60)  # the day, then both halves
    orphans = [json.loads(line)["pid"] for line in began.read_text().splitlines()[1:]]
    halves = lambda: _show(tmp_path, _backfill(tmp_path))["partitions"][0]["children"]  # noqa: E731
    wait_for(lambda: all(half["attempts"] and half["attempts"][-1]["status"] == "running" for half in halves()))
    first.send_signal(signal.SIGKILL)
    first.communicate(timeout=30)
    assert all(psutil.pid_exists(pid) for pid in orphans)
    cancelled = run_backfill("cancel", _backfill(tmp_path).name, "--reason", "runaway", cwd=tmp_path, env=home)
    assert cancelled.returncode == 0, cancelled.stderr
    assert "cancelled; 2 running children stopped" in cancelled.stdout
    assert not any(psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE for pid in orphans)


def test_a_halt_leaves_a_split_partition_as_its_leaves_say(tmp_path, home):
    """``--on-failure stop``: the first half fails (not a split trigger), so its sibling never starts; the partition
    ends ``failed`` on disk and in the index — never left ``running`` with nothing running it — the sibling stays
    queued, and ``--continue`` runs only what is not done."""
    backfill = _first_half_fails(tmp_path, home)
    gate = tmp_path / "fail-while"
    [record] = records(backfill)
    assert record["status"] == "failed" and record["leaf_reason"] == "failing 2024-01-01 on purpose"
    [partition] = _show(tmp_path, backfill)["partitions"]
    assert [(c["status"], len(c["attempts"])) for c in partition["children"]] == [("failed", 1), ("queued", 0)]
    gate.unlink()
    again = run_backfill("--continue", backfill.name, "--no-progress", cwd=tmp_path, env=home)
    assert again.returncode == 0, again.stdout + again.stderr
    [partition] = _show(tmp_path, backfill)["partitions"]
    assert [(c["status"], len(c["attempts"])) for c in partition["children"]] == [("succeeded", 2), ("succeeded", 1)]


def test_a_resumed_half_killed_is_settled_by_the_next_takeover(tmp_path, home):
    """A resume runs a failed half again; its partition's record says ``running`` before that half starts, so when
    the executor is SIGKILLed meanwhile, the next ``--continue`` finds the half's attempt, stops its child and
    settles it (cancelled, "previous executor interrupted") instead of leaving it ``running`` forever."""
    (tmp_path / ".git").mkdir()
    gate, release, began = tmp_path / "fail-while", tmp_path / "release", tmp_path / "began.jsonl"
    gate.touch()
    release.touch()
    command = child_command(
        "--hang-longer-than", "12", "--fail-while", str(gate), "--fail-on", "2024-01-01T00", "--wait-for",
        str(release), "--began", str(began),
    )  # fmt: skip
    env = {**home, "BACKFILL_STOP_GRACE": "2"}
    first = run_backfill(
        *GUARD, "--command", command, "--start-date", "2024-01-01", "--end-date", "2024-01-01", "--timeout", "2s",
        *SPLIT, "--on-failure", "continue", "--no-progress", cwd=tmp_path, env=env, timeout=120,
    )  # fmt: skip
    assert first.returncode == 1, first.stdout + first.stderr
    backfill = _backfill(tmp_path)
    gate.unlink()
    release.unlink()
    resumed = start_background("--continue", backfill.name, "--no-progress", cwd=tmp_path, env=env)
    wait_for(lambda: began.read_text().count("\n") >= 4, timeout=60)  # the day, its halves, the half again
    [record] = records(backfill)
    assert record["status"] == "running"  # durable before the half started
    resumed.send_signal(signal.SIGKILL)
    resumed.communicate(timeout=30)
    release.touch()
    final = run_backfill("--continue", backfill.name, "--no-progress", cwd=tmp_path, env=env)
    assert final.returncode == 0, final.stdout + final.stderr
    [partition] = _show(tmp_path, backfill)["partitions"]
    assert [(a["status"], a["error"]) for a in partition["children"][0]["attempts"]] == [
        ("failed", "failing 2024-01-01 on purpose"),
        ("cancelled", "previous executor interrupted"),
        ("succeeded", None),
    ]
