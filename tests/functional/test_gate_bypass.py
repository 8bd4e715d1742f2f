"""Dependency gates stepped around on a real DuckDB pipeline: stand-in runs judged by the coverage check,
--ignore-dependencies and dependency_gates warn/off each leaving GATE_BYPASS lines in the audit log."""

from __future__ import annotations

import json

import orjson

from tests.backfills import state_dirs
from tests.conftest import run_backfill
from tests.functional.test_guardrails import check_row, configure, daily, digest_of, dry_checks  # noqa: F401 (fixture)

LATE = ("--selector", "mid.daily", "--start-date", "2024-01-06", "--end-date", "2024-01-12")


def audit_lines(repo) -> list[dict]:
    [backfill] = state_dirs(repo.root / "logs" / "backfills")
    path = backfill / "audit.jsonl"
    return [orjson.loads(line) for line in path.read_bytes().splitlines()] if path.exists() else []


def stand_in(repo, home, status: str, *extra: str):
    return run_backfill(
        "run", "p/assets/raw.events.sql", "--start-date", "2024-01-08", "--end-date", "2024-01-14 23:59:59.999999",
        "--stand-in", "--status", status, "--reason", "raw.events only runs in production", *extra,
        cwd=repo.root, env=home,
    )  # fmt: skip


def test_a_succeeded_stand_in_satisfies_the_coverage_gate_and_a_skipped_one_does_not(daily, home):  # noqa: F811
    """raw.events covers only up to Jan 7: a skipped stand-in for Jan 8–14 leaves mid.daily refused (exit 3); a
    succeeded stand-in (with rows, who and why in its run record, nothing run) lets it run."""
    skipped = stand_in(daily, home, "skipped")
    assert skipped.returncode == 0, skipped.stderr
    assert "recorded skipped without running" in skipped.stdout
    refused = run_backfill("p", *LATE, "--reason", "r", cwd=daily.root, env=home)
    assert refused.returncode == 3 and "raw.events: 2024-01-08T00:00:00Z" in check_row(
        refused.stdout, "upstream_coverage"
    )
    done = stand_in(daily, home, "succeeded", "--rows", "50", "--output", "json")
    assert done.returncode == 0, done.stderr
    record = json.loads(done.stdout)
    assert record["stand_in"] is True and record["requested_by"].count("@") == 1
    assert [(a["name"], a["status"], a["rows_in_interval"]) for a in record["assets"]] == [
        ("raw.events", "succeeded", 50)
    ]
    ran = run_backfill("p", *LATE, "--reason", "r", "--no-progress", cwd=daily.root, env=home)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "guard   auto" in ran.stdout
    logged = run_backfill("audit", "--output", "json", cwd=daily.root, env=home)  # the state root's own log
    stand_ins = [json.loads(line) for line in logged.stdout.splitlines()]
    assert [(x["action"], x["asset"], x["to_status"], x["target_count"], x["backfill_id"]) for x in stand_ins] == [
        ("STAND_IN", "raw.events", "skipped", None, None),
        ("STAND_IN", "raw.events", "succeeded", 50, None),
    ]


def test_bad_stand_ins_are_one_line_and_exit_2(daily, home):  # noqa: F811
    """A stand-in without a status or a reason, a failed one, rows for a skip, a status without --stand-in."""
    cases = [
        (("--stand-in", "--reason", "x"), "--status missing: a stand-in run is succeeded or skipped"),
        (("--stand-in", "--status", "failed", "--reason", "x"), "--status 'failed': a stand-in run is succeeded"),
        (("--stand-in", "--status", "succeeded"), "--reason is required for a stand-in run"),
        (("--stand-in", "--status", "skipped", "--reason", "x", "--rows", "5"), "--rows means nothing for a skipped"),
        (("--status", "succeeded"), "--status means nothing without --stand-in"),
    ]
    for flags, message in cases:
        result = run_backfill("run", "p", "--start-date", "2024-01-08", "--end-date", "2024-01-09", *flags,
                              cwd=daily.root, env=home)  # fmt: skip
        assert result.returncode == 2 and message in result.stderr, (flags, result.stderr)
        assert result.stderr.count("\n") == 1


def test_ignore_dependencies_lets_gaps_through_only_with_approval(daily, home):  # noqa: F811
    """--ignore-dependencies over missing upstream intervals: approval (exit 4 in a pipe) naming the
    intervals it lets through; approved, the backfill runs and the audit log holds one IGNORE_DEPENDENCIES line
    and one GATE_BYPASS line for raw.events with the intervals and the reason."""
    flags = ("--ignore-dependencies", "--reason", "raw is late, files in place", "--no-progress")
    held = run_backfill("p", *LATE, *flags, cwd=daily.root, env=home)
    assert held.returncode == 4, held.stdout + held.stderr
    row = check_row(held.stdout, "upstream_coverage")
    assert "approval" in row and "--ignore-dependencies lets missing upstream intervals through: raw.events" in row
    ran = run_backfill("p", *LATE, *flags, "--approve", digest_of(held.stdout), cwd=daily.root, env=home)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    lines = audit_lines(daily)
    assert [(x["action"], x["asset"], x["from_status"]) for x in lines] == [
        ("IGNORE_DEPENDENCIES", None, None),
        ("GATE_BYPASS", "raw.events", "missing"),
    ]
    assert lines[1]["reason"].startswith(
        "raw is late, files in place (--ignore-dependencies; let through raw.events: 2024-01-08T00:00:00Z → "
    )
    command = run_backfill("--command", "true", "--start-date", "2024-01-01", "--end-date", "2024-01-02",
                           "--ignore-dependencies", "--reason", "x", cwd=daily.root, env=home)  # fmt: skip
    assert command.returncode == 2 and "--ignore-dependencies means nothing for a --command backfill" in command.stderr


def test_gates_warn_and_off_let_gaps_through_only_with_approval(daily, home):  # noqa: F811
    """dependency_gates: warn or off over missing upstream intervals: approval naming them (no longer a
    warning, or not checked at all); approved, the run's summary names them and it records each let through in
    GATE_BYPASS."""
    for gates in ("warn", "off"):
        configure(daily, dependency_gates=gates)
        held = run_backfill("p", *LATE, "--reason", "dev run", "--no-progress", cwd=daily.root, env=home)
        assert held.returncode == 4, held.stdout + held.stderr
        assert f"dependency_gates: {gates} lets missing upstream intervals through" in check_row(
            held.stdout, "upstream_coverage"
        )
        ran = run_backfill("p", *LATE, "--reason", "dev run", "--approve", digest_of(held.stdout), "--no-progress",
                           cwd=daily.root, env=home)  # fmt: skip
        assert ran.returncode == 0, ran.stdout + ran.stderr
        assert (  # the run's own summary says what it let through, not only show and audit
            f"  gates       dependency_gates: {gates} lets missing upstream intervals through: raw.events: "
            "2024-01-08T00:00:00Z" in ran.stdout
        ), ran.stdout
        newest = sorted(state_dirs(daily.root / "logs" / "backfills"))[-1]
        [line] = [orjson.loads(x) for x in (newest / "audit.jsonl").read_bytes().splitlines()]
        assert (line["action"], line["asset"], line["from_status"], line["previous_message"]) == (
            "GATE_BYPASS", "raw.events", "missing", f"dependency_gates: {gates}"
        )  # fmt: skip
        assert f"dependency_gates: {gates}; let through raw.events: 2024-01-08T00:00:00Z" in line["reason"]


def test_a_stand_in_satisfies_the_gate_but_is_no_history_of_running(daily, home):  # noqa: F811
    """A stand-in run of a never-run asset covers its downstream's gate, but a backfill of the asset itself
    finds no history: it did not run (human-only)."""
    daily.sql("mid.never", "SELECT 1 AS x", materialization={"type": "view"})
    stood = run_backfill("run", "p", "--selector", "mid.never", "--start-date", "2024-01-01", "--end-date",
                         "2024-01-20", "--stand-in", "--status", "succeeded", "--reason", "loaded by hand",
                         cwd=daily.root, env=home)  # fmt: skip
    assert stood.returncode == 0, stood.stdout + stood.stderr
    checks = dry_checks(daily, home, "--selector", "mid.never")
    assert checks["history_exists"]["tier"] == "human-only", checks["history_exists"]
    assert "never succeeded: mid.never" in checks["history_exists"]["detail"]


def test_an_asset_reruns_with_its_downstream_inside_chosen_partitions(daily, home):  # noqa: F811
    """--continue --ids P --asset NAME runs only NAME again in P (a new attempt of kind rerun, its run record
    listing that asset alone), --with-downstream adds what depends on it; each leaves a RERUN audit line; bad
    combinations are one line, exit 2."""
    week = ("--start-date", "2024-01-08", "--end-date", "2024-01-10")
    assert run_backfill("p", *week, "--reason", "r", "--no-progress", cwd=daily.root, env=home).returncode == 0
    [backfill] = state_dirs(daily.root / "logs" / "backfills")
    first = sorted((orjson.loads(p.read_bytes()) for p in (backfill / "partitions").glob("*.json")),
                   key=lambda r: r["index"])[0]  # fmt: skip
    again = run_backfill("--continue", backfill.name, "--ids", first["id"][:8], "--asset", "mid.daily", "--reason",
                         "source resent", "--no-progress", cwd=daily.root, env=home)  # fmt: skip
    assert again.returncode == 0, again.stdout + again.stderr
    both = run_backfill("--continue", backfill.name, "--ids", first["id"][:8], "--asset", "raw.events",
                        "--with-downstream", "--reason", "view fixed", "--no-progress",
                        cwd=daily.root, env=home)  # fmt: skip
    assert both.returncode == 0, both.stdout + both.stderr
    record = orjson.loads((backfill / "partitions" / f"{first['id']}.json").read_bytes())
    attempts = record["attempts"]
    assert [(a["status"], a.get("kind", "run"), a.get("asset")) for a in attempts] == [
        ("succeeded", "run", None),
        ("succeeded", "rerun", "mid.daily"),
        ("succeeded", "rerun", "raw.events"),
    ]
    runs = daily.root / "logs" / "runs"
    assets_run = [
        sorted(a["name"] for a in orjson.loads((runs / f"{a['run_id']}.json").read_bytes())["assets"]) for a in attempts
    ]
    assert assets_run == [["mid.daily", "raw.events"], ["mid.daily"], ["mid.daily", "raw.events"]]
    reruns = [x for x in audit_lines(daily) if x["action"] == "RERUN"]
    assert [(x["partition_id"], x["asset"], x["reason"]) for x in reruns] == [
        (first["id"], "mid.daily", "source resent"),
        (first["id"], "raw.events", "view fixed"),
    ]
    for flags, message in [
        (("--asset", "mid.daily", "--reason", "x"), "--asset needs --ids"),
        (("--ids", first["id"][:8], "--with-downstream", "--reason", "x"), "--with-downstream means nothing without"),
        (("--ids", first["id"][:8], "--asset", "nope", "--reason", "x"), "--asset 'nope' is not an asset"),
        (("--ids", first["id"][:8], "--asset", "mid.daily"), "--reason is required to run asset mid.daily again"),
    ]:
        bad = run_backfill("--continue", backfill.name, *flags, "--no-progress", cwd=daily.root, env=home)
        assert bad.returncode == 2 and message in bad.stderr, (flags, bad.stderr)


def test_an_asset_marked_succeeded_satisfies_the_gate_only_with_rows(daily, home):  # noqa: F811
    """raw.events has no run over Jan 8–12. Marking it succeeded in an earlier backfill's partitions without
    --rows leaves a backfill of mid.daily refused (exit 3); with --rows 5 the gate passes."""
    flags = ("--ignore-dependencies", "--reason", "files in place", "--no-progress")
    held = run_backfill("p", *LATE, *flags, cwd=daily.root, env=home)
    assert held.returncode == 4, held.stdout + held.stderr  # the gap let through needs approval
    first = run_backfill("p", *LATE, *flags, "--approve", digest_of(held.stdout), cwd=daily.root, env=home)
    assert first.returncode == 0, first.stdout + first.stderr
    [backfill] = state_dirs(daily.root / "logs" / "backfills")
    ids = [orjson.loads(p.read_bytes())["id"] for p in (backfill / "partitions").glob("*.json")]

    def mark(*rows: str):
        result = run_backfill("mark", backfill.name, *ids, "--asset", "raw.events", "--status", "succeeded",
                              *rows, "--reason", "raw loaded by hand", cwd=daily.root, env=home)  # fmt: skip
        assert result.returncode == 0, result.stderr

    mark()
    refused = run_backfill("p", *LATE, "--reason", "r", "--dry-run", cwd=daily.root, env=home)
    assert "✗ fail  never" in check_row(refused.stdout, "upstream_coverage")
    mark("--rows", "5")
    allowed = run_backfill("p", *LATE, "--reason", "r", "--dry-run", cwd=daily.root, env=home)
    assert "✓ pass" in check_row(allowed.stdout, "upstream_coverage"), allowed.stdout


def test_a_rows_mark_retracted_no_longer_satisfies_the_gate(daily, home):  # noqa: F811
    """A mark of raw.events succeeded with --rows lets a backfill of mid.daily through; the same partitions
    marked failed afterwards (the audit still holds the rows mark) leave it refused again."""
    flags = ("--ignore-dependencies", "--reason", "files in place", "--no-progress")
    held = run_backfill("p", *LATE, *flags, cwd=daily.root, env=home)
    first = run_backfill("p", *LATE, *flags, "--approve", digest_of(held.stdout), cwd=daily.root, env=home)
    assert first.returncode == 0, first.stdout + first.stderr
    [backfill] = state_dirs(daily.root / "logs" / "backfills")
    ids = [orjson.loads(p.read_bytes())["id"] for p in (backfill / "partitions").glob("*.json")]

    def mark(status: str, *rows: str, asset: tuple[str, ...] = ("--asset", "raw.events")):
        result = run_backfill("mark", backfill.name, *ids, *asset, "--status", status,
                              *rows, "--reason", "by hand", cwd=daily.root, env=home)  # fmt: skip
        assert result.returncode == 0, result.stderr

    mark("succeeded", "--rows", "5")
    allowed = run_backfill("p", *LATE, "--reason", "r", "--dry-run", cwd=daily.root, env=home)
    assert "✓ pass" in check_row(allowed.stdout, "upstream_coverage"), allowed.stdout
    mark("failed")
    refused = run_backfill("p", *LATE, "--reason", "r", "--dry-run", cwd=daily.root, env=home)
    assert "✗ fail  never" in check_row(refused.stdout, "upstream_coverage"), refused.stdout
    mark("succeeded", "--rows", "5", asset=())
    whole = run_backfill("p", *LATE, "--reason", "r", "--dry-run", cwd=daily.root, env=home)
    assert "✗ fail  never" in check_row(whole.stdout, "upstream_coverage"), "raw.events never ran in it"
