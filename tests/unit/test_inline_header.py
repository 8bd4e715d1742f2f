"""Inline comment headers read as Bruin's commentRowsToTask reads them (pkg/pipeline/comment.go)."""

from __future__ import annotations

from engine.pipeline.inline_header import inline_header


def test_every_row_bruin_reads_becomes_the_field_a_block_header_gives():
    """Comma lists, Go booleans, integers, parameters, materialization and columns land where a @bruin block
    puts them, with their lines; rows Bruin skips are warnings; the body keeps its line numbers."""
    text = (
        "-- @bruin.name: a.b\n"
        "-- @bruin.secrets: conn:TOKEN, other\n"
        "-- @bruin.enabled: false\n"
        "-- @bruin.full_refresh_restricted: t\n"
        "-- @bruin.retries: 3\n"
        "-- @bruin.timeout: 1h\n"
        "-- @bruin.parameters.region: eu\n"
        "-- @bruin.materialization.Strategy: Merge\n"
        "-- @bruin.materialization.cluster_by: a, b\n"
        "-- @bruin.columns.id.primary_key: true\n"
        "-- @bruin.columns.id.checks: not_null,unique\n"
        "-- @bruin.tags: x\n"
        "-- @bruin.nocolon\n"
        "--@bruin.connection: db\n"
        " -- @bruin.depends: not.read\n"
        "SELECT 1\n"
    )
    data, body, skipped = inline_header(text, ".sql")
    assert data["name"] == "a.b" and data.line == 1
    assert [(s["key"], s["inject_as"]) for s in data["secrets"]] == [("conn", "TOKEN"), ("other", "other")]
    assert data["enabled"] is False and data["full_refresh_restricted"] is True and data["retries"] == 3
    assert data["timeout"] == "1h" and data["parameters"] == {"region": "eu"}
    assert data["materialization"] == {"strategy": "merge", "cluster_by": ["a", "b"]}
    assert data["connection"] == "db" and "depends" not in data  # a row must start in the first column
    [column] = data["columns"]
    assert column["name"] == "id" and column["primary_key"] is True
    assert [c["name"] for c in column["checks"]] == ["not_null", "unique"]
    assert data.line_of("retries") == 5 and column.line_of("checks") == 11
    assert [line for line, _ in skipped] == [12, 13]
    assert body.split("\n")[15] == "SELECT 1" and body.split("\n")[0] == ""
    assert inline_header("-- a comment\nSELECT 1\n", ".sql") is None
    assert inline_header("# @bruin.name: x\n", ".r") is None
    assert inline_header("# @bruin.name: p.y\nprint(1)\n", ".py")[0]["name"] == "p.y"
