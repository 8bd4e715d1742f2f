"""Live controls from another terminal: ``backfill set --max-parallel`` and ``backfill cancel --ids``, against a
real executor with real children, checked in the children's own spans, the records and the audit log."""

from __future__ import annotations

import getpass
import itertools
import socket
from pathlib import Path

import orjson
import pytest

from tests.backfills import alive, child_command, child_running, records, start_background, state_dirs, wait_for
from tests.builder import Repo
from tests.conftest import run_backfill
from tests.functional.test_interventions import audit_lines, started
from tests.guard_flags import GUARD, REASON

WHO = f"{getpass.getuser()}@{socket.gethostname()}"


def plan(work: Path, days: int) -> tuple[str, ...]:
    command = child_command("--spans", str(work / "spans.jsonl"))
    return ("--command", command, "--start-date", "2024-01-01", "--end-date", f"2024-01-{days:02d}")


def spans(path: Path) -> list[dict]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


def running(backfill: Path, count: int) -> list[dict]:
    """Wait until exactly ``count`` partitions are recorded running; their records."""

    def found():
        now = [r for r in records(backfill) if child_running(r)]
        return now if len(now) == count else None

    return wait_for(found, timeout=30)


@pytest.fixture
def gated(home, work) -> dict[str, str]:
    """Children wait for the file ``released`` before they finish: the test decides when they may."""
    return {**home, "CHILD_WAIT_FOR": str(work / "released"), "BACKFILL_STOP_GRACE": "5"}


def test_set_max_parallel_takes_effect_live_both_ways_is_audited_and_kept_for_continue(work, gated):
    """From 1 at once to 3: three children run together within the poll; back to 1: none of those running is
    stopped, and what starts afterwards runs one at a time. SET is audited, control.json keeps it, and the
    next --continue starts from it unless its command line says otherwise."""
    # Each child takes 0.3 s after its release: two let run together overlap for sure.
    process, backfill = started(work, *plan(work, 9), "--max-parallel", "1", env={**gated, "CHILD_SLEEP": "0.3"})
    running(backfill, 1)
    raised = run_backfill(
        "set", backfill.name, "--max-parallel", "3", "--reason", "the warehouse is idle", cwd=work, env=gated
    )
    assert raised.returncode == 0, raised.stderr
    assert raised.stdout == f"backfill {backfill.name}: --max-parallel 1 → 3; 3 at once now\n"
    three = running(backfill, 3)
    same = run_backfill("set", backfill.name, "--max-parallel", "3", "--reason", "again", cwd=work, env=gated)
    assert same.returncode == 0 and "has --max-parallel 3 already: nothing changed" in same.stdout
    lowered = run_backfill(
        "set", backfill.name[:10], "--max-parallel", "1", "--reason", "peak hours", cwd=work, env=gated
    )
    assert lowered.returncode == 0, lowered.stderr
    assert all(alive(r["attempts"][-1]["pid"]) for r in three)  # none stopped for it
    (work / "released").touch()
    out, err = process.communicate(timeout=60)
    assert process.returncode == 0, out + err
    began = {s["partition"]: s for s in spans(work / "spans.jsonl")}
    first_three = {r["id"] for r in three}
    after = sorted((s for p, s in began.items() if p not in first_three), key=lambda s: s["began"])
    assert len(after) == 6  # 9 days: the three that ran together, and six after the lowering
    assert after[0]["began"] >= max(began[p]["ended"] for p in first_three), "one started beside the three"
    for earlier, next_one in itertools.pairwise(after):
        assert next_one["began"] >= earlier["ended"], "two ran at once after --max-parallel 1"
    sets = [line for line in audit_lines(backfill) if line["action"] == "SET"]
    assert [(s["from_status"], s["to_status"], s["reason"]) for s in sets] == [
        ("max-parallel 1", "max-parallel 3", "the warehouse is idle"),
        ("max-parallel 3", "max-parallel 1", "peak hours"),
    ]
    assert sets[0]["requested_by"] == WHO and sets[0]["applied_by"].startswith("executor generation 1 (PID ")
    control = orjson.loads((backfill / "control.json").read_bytes())
    assert control["max_parallel"]["value"] == 1 and control["max_parallel"]["reason"] == "peak hours"
    saved = run_backfill("set", backfill.name, "--max-parallel", "4", "--reason", "tonight", cwd=work, env=gated)
    assert saved.returncode == 0, saved.stderr
    assert saved.stdout.endswith("; nothing runs now: the next --continue starts from it\n")
    dry = orjson.loads(
        run_backfill("--continue", backfill.name, "--dry-run", "--output", "json", cwd=work, env=gated).stdout
    )
    assert dry["options"]["max_parallel"] == 4
    given = run_backfill(
        "--continue", backfill.name, "--max-parallel", "2", "--dry-run", "--output", "json", cwd=work, env=gated
    )
    assert orjson.loads(given.stdout)["options"]["max_parallel"] == 2


def test_cancel_ids_stops_one_running_partition_only_not_retried_exit_1_and_continue_runs_it(work, gated):
    """`cancel --ids P` on one of two running partitions: P's child is gone within the grace, P is recorded
    cancelled with who and why and not retried (--retries 2), the other goes on and the rest run; the run exits
    1 (incomplete), audited per partition; a plain --continue (no reason needed) runs P and completes."""
    process, backfill = started(work, *plan(work, 5), "--max-parallel", "2", "--retries", "2", env=gated)
    # The later of the two is stopped: not merely whichever runs first.
    second, first = sorted(running(backfill, 2), key=lambda r: r["start"])
    stopped = run_backfill(
        "cancel", backfill.name, "--ids", first["id"][:8], "--reason", "its source is corrupt", cwd=work, env=gated
    )
    assert stopped.returncode == 0, stopped.stderr
    assert stopped.stdout.startswith(f"partition {first['id'][:12]} of backfill {backfill.name} stopping")
    wait_for(lambda: not alive(first["attempts"][-1]["pid"]), timeout=10)
    assert alive(second["attempts"][-1]["pid"])
    (work / "released").touch()
    out, err = process.communicate(timeout=60)
    assert process.returncode == 1, out + err
    assert f"stepped in  stopped partition {first['id'][:12]} by {WHO}: its source is corrupt" in out
    assert f"backfill {backfill.name} incomplete" in out
    by_id = {r["id"]: r for r in records(backfill)}
    assert [a["status"] for a in by_id[first["id"]]["attempts"]] == ["cancelled"]  # not retried
    assert by_id[first["id"]]["attempts"][0]["error"] == (
        f"cancelled: stopped partition {first['id'][:12]} by {WHO}: its source is corrupt"
    )
    assert {r["status"] for i, r in by_id.items() if i != first["id"]} == {"succeeded"}
    [line] = audit_lines(backfill)
    assert (line["action"], line["partition_id"], line["from_status"], line["to_status"]) == (
        "CANCEL",
        first["id"],
        "running",
        "cancelled",
    )
    resumed = run_backfill("--continue", backfill.name, "--no-progress", cwd=work, env=gated)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert {r["status"] for r in records(backfill)} == {"succeeded"}


def test_cancel_ids_of_a_partition_that_does_not_run_is_refused_and_stops_nothing(work, gated):
    """Naming a queued partition beside a running one refuses the whole request (exit 3, the queued one named
    with its status): nothing is stopped, nothing audited. With no executor live it is refused too."""
    process, backfill = started(work, *plan(work, 4), "--max-parallel", "1", env=gated)
    [now] = running(backfill, 1)
    from engine.store.manifest import spec_of

    spec = spec_of(orjson.loads((backfill / "manifest.json").read_bytes()))
    others = [spec.ids.of(i.start, i.end) for i in spec.plan if spec.ids.of(i.start, i.end) != now["id"]]
    refused = run_backfill(
        "cancel", backfill.name, "--ids", now["id"][:8], others[0][:8], "--reason", "x", cwd=work, env=gated
    )
    assert refused.returncode == 3, refused.stderr
    assert f"partition {others[0][:12]} (queued) of backfill {backfill.name} is not running" in refused.stderr
    assert "nothing was stopped" in refused.stderr
    assert alive(now["attempts"][-1]["pid"]) and not audit_lines(backfill)
    (work / "released").touch()
    assert process.wait(timeout=60) == 0
    idle = run_backfill("cancel", backfill.name, "--ids", now["id"][:8], "--reason", "late", cwd=work, env=gated)
    assert idle.returncode == 3
    assert f"no executor runs backfill {backfill.name}: no partition of it runs, nothing to stop" in idle.stderr
    assert not audit_lines(backfill)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--max-parallel", "0"), "--max-parallel '0'"),
        (("--max-parallel", "٣"), "--max-parallel '٣'"),
        (("--max-parallel", "100001"), "--max-parallel '100001' is out of range: use 1 to 100,000"),
        (("--max-parallel", ""), "--max-parallel ''"),
        ((), "backfill set changes --max-parallel: give --max-parallel N"),
    ],
)
def test_bad_sets_are_one_line_exit_2_and_change_nothing(work, home, args, message):
    """A zero, a non-ASCII digit, an absurd number, an empty value or no control at all: exit 2, one line on
    stderr naming it, no control.json and no audit line."""
    first = run_backfill(*GUARD, "--command", child_command(), "--start-date", "2024-01-01", "--end-date", "2024-01-02",
                         "--no-progress", cwd=work, env=home)  # fmt: skip
    assert first.returncode == 0, first.stderr
    [backfill] = state_dirs(work / "logs" / "backfills")
    bad = run_backfill("set", backfill.name, *args, "--reason", "typo", cwd=work, env=home)
    assert bad.returncode == 2
    assert message in bad.stderr and len(bad.stderr.strip().splitlines()) == 1, bad.stderr
    assert not (backfill / "control.json").exists() and not audit_lines(backfill)


def test_a_raised_max_parallel_is_still_held_to_the_connections_cap(tmp_path, home):
    """A pipeline on a writable DuckDB file runs one partition at a time whatever is asked: `set --max-parallel
    3` says it is capped and why, saves 3, and the children never overlap."""
    repo = Repo(tmp_path / "repo")
    ledger, released = tmp_path / "ledger", tmp_path / "released"
    repo.python(
        "s.wait",
        "import os, time\n"
        f"open({str(ledger)!r}, 'a').write(f\"start {{time.time()}}\\n\")\n"
        f"while not os.path.exists({str(released)!r}):\n"
        "    time.sleep(0.02)\n"
        f"open({str(ledger)!r}, 'a').write(f\"end {{time.time()}}\\n\")\n",
    )
    process = start_background(*REASON, "p", "--start-date", "2024-01-01", "--end-date", "2024-01-04",
                               "--no-progress", cwd=repo.root, env=home)  # fmt: skip
    backfill = wait_for(lambda: (state_dirs(repo.root / "logs" / "backfills") or [None])[0], timeout=30)
    running(backfill, 1)
    raised = run_backfill("set", backfill.name, "--max-parallel", "3", "--reason", "faster", cwd=repo.root, env=home)
    assert raised.returncode == 0, raised.stderr
    assert raised.stdout == (
        f"backfill {backfill.name}: --max-parallel 1 → 3; 1 at once now (capped: writable DuckDB 'db')\n"
    )
    released.touch()
    out, err = process.communicate(timeout=120)
    assert process.returncode == 0, out + err
    events = [line.split() for line in ledger.read_text().splitlines()]
    assert [kind for kind, _ in events] == ["start", "end"] * 4  # one at a time, four days
    assert orjson.loads((backfill / "control.json").read_bytes())["max_parallel"]["value"] == 3
