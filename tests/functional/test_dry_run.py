"""``backfill ... --dry-run`` as a real process: JSON schema, pagination, text, IDs, no files, bad input."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.conftest import run_backfill
from tests.guard_flags import REASON

PIPELINE = "pipeline"
SUMMARY_KEYS = ["total", "queued", "running", "succeeded", "failed", "cancelled", "skipped", "not_selected"]


def dry_json(*args: str, cwd: Path, env: dict[str, str] | None = None) -> dict:
    result = run_backfill(*args, "--dry-run", "--output", "json", cwd=cwd, env=env)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def test_json_document_has_every_documented_field(shop, home):
    """The dry-run JSON holds backfill, options, summary, partitions, page and has_more as documented."""
    doc = dry_json(
        PIPELINE,
        "--start-date",
        "2024-03-09",
        "--end-date",
        "2024-03-11",
        "--timezone",
        "America/New_York",
        "--max-parallel",
        "4",
        "--workers",
        "2",
        "--retries",
        "2",
        "--on-failure",
        "continue",
        "--reverse",
        "--var",
        "one_order_in=12",
        "--tag",
        "raw",
        cwd=shop,
        env=home,
    )
    assert list(doc) == ["backfill", "options", "preflight", "summary", "partitions", "page", "has_more"]
    backfill = doc["backfill"]
    assert backfill["target"] == str((shop / PIPELINE).resolve())
    assert backfill["name"] == "shop" and backfill["environment"] == "default"
    assert backfill["start"] == "2024-03-09T00:00:00-05:00"
    assert backfill["end"] == "2024-03-12T00:00:00-04:00"
    assert backfill["timezone"] == "America/New_York" and backfill["partition"] == "daily"
    assert backfill["run_options"]["variables"] == {"one_order_in": 12}
    assert backfill["run_options"]["tags"] == ["raw"]
    assert backfill["run_options"]["config_file"] == str((shop / ".bruin.yml").resolve())
    assert doc["options"] == {
        "max_parallel": 4,
        "effective_max_parallel": 1,
        "parallelism_reason": "connection 'warehouse' is a writable DuckDB file (one writer process at a time)",
        "workers": 2,
        "retries": 2,
        "on_failure": "continue",
        "reverse": True,
        "timeout": None,
    }
    assert doc["summary"] == {
        "total": 3,
        "queued": 3,
        "running": 0,
        "succeeded": 0,
        "failed": 0,
        "cancelled": 0,
        "skipped": 0,
        "not_selected": 0,
    }
    spring = doc["partitions"][1]
    assert spring["index"] == 1
    assert spring["start"] == "2024-03-10T00:00:00-05:00" and spring["end"] == "2024-03-11T00:00:00-04:00"
    assert spring["child_start_date"] == "2024-03-10T00:00:00.000000-05:00"
    assert spring["child_end_date"] == "2024-03-10T23:59:59.999999-04:00"
    assert spring["status"] == "queued" and len(spring["id"]) == 64
    assert doc["page"] == {"offset": 0, "limit": 1000} and doc["has_more"] is False


def test_pagination_changes_the_listing_never_the_counts(home):
    """--offset/--limit page through partitions; --limit 0 lists all; counts always cover the plan."""
    args = ("--command", "true", "--start-date", "2024-01-01", "--end-date", "2024-12-31")
    everything = dry_json(*args, "--limit", "0", cwd=Path.cwd(), env=home)
    assert len(everything["partitions"]) == 366 and everything["has_more"] is False
    first = dry_json(*args, cwd=Path.cwd(), env=home)
    assert len(first["partitions"]) == 366 and first["page"] == {"offset": 0, "limit": 1000}
    page = dry_json(*args, "--offset", "100", "--limit", "50", cwd=Path.cwd(), env=home)
    assert [p["index"] for p in page["partitions"]] == list(range(100, 150))
    assert page["partitions"] == everything["partitions"][100:150]
    assert page["summary"]["total"] == 366 and page["has_more"] is True
    tail = dry_json(*args, "--offset", "360", "--limit", "50", cwd=Path.cwd(), env=home)
    assert len(tail["partitions"]) == 6 and tail["has_more"] is False
    beyond = dry_json(*args, "--offset", "5000", cwd=Path.cwd(), env=home)
    assert beyond["partitions"] == [] and beyond["summary"]["queued"] == 366


def test_partition_ids_are_deterministic_and_independent_of_order(shop, home, tmp_path):
    """IDs are equal across processes, working directories and --reverse, and change with run options."""
    args = (str(shop / PIPELINE), "--start-date", "2024-01-01", "--end-date", "2024-01-10")
    first = dry_json(*args, cwd=shop, env=home)
    again = dry_json(*args, "--reverse", "--timezone", "UTC", cwd=tmp_path, env=home)
    ids = [p["id"] for p in first["partitions"]]
    assert ids == [p["id"] for p in again["partitions"]]
    assert len(set(ids)) == len(ids)
    varied = dry_json(*args, "--var", "one_order_in=7", cwd=shop, env=home)
    assert not set(ids) & {p["id"] for p in varied["partitions"]}
    selected = dry_json(*args, "--selector", "tag:mart", cwd=shop, env=home)
    assert not set(ids) & {p["id"] for p in selected["partitions"]}
    # The same repository in another place on disk (another machine) gives the same IDs.
    moved = tmp_path / "elsewhere"
    os.rename(shop, moved)
    elsewhere = dry_json(
        str(moved / PIPELINE), "--start-date", "2024-01-01", "--end-date", "2024-01-10", cwd=moved, env=home
    )
    assert [p["id"] for p in elsewhere["partitions"]] == ids


def test_dry_run_creates_no_file_or_directory(shop, home):
    """Nothing is written: not in the repository, not in HOME, not even the state directory."""
    before_repo, before_home = tree(shop), tree(Path(home["HOME"]))
    result = run_backfill(
        PIPELINE, "--start-date", "2024-01-01", "--end-date", "2024-01-31", "--dry-run", cwd=shop, env=home
    )
    assert result.returncode == 0, result.stderr
    result = run_backfill(
        PIPELINE,
        "--start-date",
        "2024-01-01",
        "--end-date",
        "2024-01-31",
        "--dry-run",
        "--output",
        "json",
        "--state-dir",
        str(shop / "states"),
        cwd=shop,
        env=home,
    )
    assert result.returncode == 0, result.stderr
    assert tree(shop) == before_repo
    assert tree(Path(home["HOME"])) == before_home


def test_text_plan_is_static_and_paginated(shop, home):
    """Text output: header with inputs and parallelism, counts, rows, and the next-page hint."""
    result = run_backfill(
        PIPELINE,
        "--start-date",
        "2024-01-01",
        "--end-date",
        "2024-01-31",
        "--dry-run",
        "--limit",
        "10",
        "--max-parallel",
        "3",
        cwd=shop,
        env=home,
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "range        2024-01-01T00:00:00Z → 2024-02-01T00:00:00Z (end exclusive)" in out
    assert "parallelism  1 (requested 3; connection 'warehouse' is a writable DuckDB file" in out
    assert "file (one writer process at a time)) × 16 workers" in out
    assert "partitions: 31 (queued 31)" in out
    assert out.count(" queued ") == 10
    assert "showing 1–10 of 31; next page: repeat with --offset 10 --limit 10" in out


def test_command_targets_need_no_configuration(tmp_path, home):
    """A --command dry run works anywhere; effective parallelism is --max-parallel."""
    doc = dry_json(
        "--command",
        "echo {start} {end}",
        "--name",
        "echo",
        "--start-date",
        "2024-01-01T00:00:00Z",
        "--end-date",
        "2024-01-01T06:00:00Z",
        "--partition",
        "90m",
        "--max-parallel",
        "3",
        cwd=tmp_path,
        env=home,
    )
    assert doc["backfill"]["target"] == "echo {start} {end}" and doc["backfill"]["name"] == "echo"
    assert doc["backfill"]["partition"] == "1h30m" and doc["summary"]["total"] == 4
    assert doc["options"]["effective_max_parallel"] == 3 and doc["options"]["parallelism_reason"] is None
    text = run_backfill(
        "--command",
        "echo {start}",
        "--start-date",
        "2024-01-01",
        "--end-date",
        "2024-01-02",
        "--dry-run",
        "--max-parallel",
        "3",
        cwd=tmp_path,
        env=home,
    )
    assert "\n  parallelism  3\n" in text.stdout  # no "× 16 workers": a command runs no assets


def test_fall_back_overlap_shows_the_offset_chosen(home):
    """An ambiguous local start takes the earlier instant and the normalized start shows its offset."""
    doc = dry_json(
        "--command",
        "true",
        "--start-date",
        "2024-11-03T01:30:00",
        "--end-date",
        "2024-11-03T03:00:00",
        "--timezone",
        "America/New_York",
        "--partition",
        "30m",
        cwd=Path.cwd(),
        env=home,
    )
    assert doc["backfill"]["start"] == "2024-11-03T01:30:00-04:00"
    assert [p["start"] for p in doc["partitions"]] == [
        "2024-11-03T01:30:00-04:00",
        "2024-11-03T01:00:00-05:00",
        "2024-11-03T01:30:00-05:00",
        "2024-11-03T02:00:00-05:00",
        "2024-11-03T02:30:00-05:00",
    ]


BAD_INPUTS = [
    (("missing-dir", "--start-date", "2024-01-01", "--end-date", "2024-01-02"), "target 'missing-dir' does not exist"),
    ((PIPELINE, "--start-date", "2024-02-30", "--end-date", "2024-03-01"), "--start-date '2024-02-30'"),
    ((PIPELINE, "--start-date", "2024-01-01", "--end-date", "soon"), "--end-date 'soon' is not a date"),
    (
        (PIPELINE, "--start-date", "2024-01-01", "--end-date", "2024-01-02", "--timezone", "Moon/Base"),
        "unknown time zone 'Moon/Base'",
    ),
    (
        (PIPELINE, "--start-date", "2024-01-01", "--end-date", "2024-01-02", "--partition", "fortnightly"),
        "--partition 'fortnightly' is not a partition unit",
    ),
    (
        (PIPELINE, "--start-date", "2024-01-01", "--end-date", "2024-01-02", "--partition", "0s"),
        "--partition '0s' is zero",
    ),
    (
        (PIPELINE, "--start-date", "2024-01-01", "--end-date", "2024-01-02", "--partition", "-6h"),
        "--partition '-6h' is negative",
    ),
    (
        (PIPELINE, "--start-date", "2024-01-01", "--end-date", "2024-01-02", "--offset", "-1"),
        "--offset '-1' is negative",
    ),
    (
        (PIPELINE, "--start-date", "2024-01-01", "--end-date", "2024-01-02", "--limit", "x"),
        "--limit 'x' is not a whole number",
    ),
    ((PIPELINE, "--start-date", "2024-01-05", "--end-date", "2024-01-01"), "is before the start"),
    (
        (PIPELINE, "--start-date", "2024-03-10T02:30:00", "--end-date", "2024-03-11", "--timezone", "America/New_York"),
        "does not exist in America/New_York",
    ),
    (
        (PIPELINE, "--start-date", "2024-01-01", "--end-date", "2024-01-02", "--environment", "staging"),
        "environment 'staging' is not in",
    ),
    (
        (PIPELINE, "--start-date", "2024-01-01", "--end-date", "2024-01-02", "--config-file", "nope.yml"),
        "--config-file 'nope.yml' is not a file",
    ),
    ((PIPELINE, "--end-date", "2024-01-02"), "--start-date is required"),
    (
        (PIPELINE, "--start-date", "2024-01-01", "--end-date", "2024-01-02", "--rerun", "failed"),
        "--rerun is only accepted together with --continue",
    ),
    (
        (PIPELINE, "--start-date", "2024-01-01", "--end-date", "2024-01-02", "--max-parallel", "0"),
        "--max-parallel '0' is out of range: use 1 to 100,000",
    ),
]


@pytest.mark.parametrize(("args", "message"), BAD_INPUTS, ids=[m for _, m in BAD_INPUTS])
def test_bad_input_is_one_line_and_exit_2(shop, home, args, message):
    """Each bad input: exit 2, exactly one stderr line naming the value, no traceback, nothing on stdout."""
    result = run_backfill(*args, "--dry-run", cwd=shop, env=home)
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("backfill: error: ") and message in lines[0]
    assert "Traceback" not in result.stderr


def test_invalid_config_is_exit_2_naming_file_and_line(shop, home):
    """A broken .bruin.yml is one line naming the file and line."""
    (shop / ".bruin.yml").write_text("environments:\n  default:\n    connections: [\n")
    result = run_backfill(
        PIPELINE, "--start-date", "2024-01-01", "--end-date", "2024-01-02", "--dry-run", cwd=shop, env=home
    )
    assert result.returncode == 2 and len(result.stderr.splitlines()) == 1
    assert f"{(shop / '.bruin.yml').resolve()}:4: invalid YAML" in result.stderr


def test_production_needs_force(shop, home):
    """An environment named like production is refused (exit 3) until --force is given."""
    config = (
        (shop / ".bruin.yml")
        .read_text()
        .replace("default:", "production:")
        .replace("default_environment: production", "default_environment: production")
    )
    (shop / ".bruin.yml").write_text(config.replace("default_environment: default", "default_environment: production"))
    args = (PIPELINE, "--start-date", "2024-01-01", "--end-date", "2024-01-02", "--dry-run")
    refused = run_backfill(*REASON, *args, cwd=shop, env=home)
    assert refused.returncode == 3 and "looks like production: pass --force" in refused.stderr
    assert run_backfill(*REASON, *args, "--force", cwd=shop, env=home).returncode == 0


def test_large_counts_in_a_text_plan_are_thousands_separated_and_the_hint_stays_typable(tmp_path, home):
    """1,464 hourly partitions: the counts and the page read 1,464 and 1,000, while the next-page hint's values
    stay as a shell would take them (--offset 1000)."""
    hours = ("--start-date", "2024-01-01", "--end-date", "2024-03-01", "--partition", "hourly")
    result = run_backfill(*REASON, "--command", "true", *hours, "--dry-run", "--guardrails", "sandbox",
                          cwd=tmp_path, env=home)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "partitions: 1,464 (queued 1,464)" in result.stdout
    assert "showing 1–1,000 of 1,464; next page: repeat with --offset 1000 --limit 1000" in result.stdout
