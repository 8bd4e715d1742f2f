"""What the record index cannot see, and where it is caught anyway: a record edited in place (not renamed in)
leaves the directory's time alone, so readers trust the index; the file is still read — and refused, naming it —
by whatever reads that partition: the executor before it runs it, and every reader once the index is gone."""

from __future__ import annotations

import json

from engine.store.manifest import spec_of
from engine.store.record_index import read_indexed
from engine.store.state_store import StateStore
from tests.backfills import records
from tests.conftest import run_backfill
from tests.functional.test_backfill_state import finished_backfill


def test_a_record_corrupted_in_place_is_refused_when_its_partition_is_run(work, home):
    """The failed partition's record garbled in place under a trusted index: --continue, which runs that
    partition again, reads its record first and stops with exit 5 naming the file; nothing else changes."""
    backfill = finished_backfill(work, home)
    assert (backfill / "partitions.idx").exists()
    [failed] = [r for r in records(backfill) if r["status"] == "failed"]
    victim = backfill / "partitions" / f"{failed['id']}.json"
    with open(victim, "r+b") as handle:  # in place: the same inode, the directory untouched
        handle.truncate(0)
        handle.write(b"{ not json")
    before = {p: p.read_bytes() for p in (backfill / "partitions").iterdir()}
    result = run_backfill("--continue", backfill.name, cwd=work, env=home)
    assert result.returncode == 5, result.stdout + result.stderr
    assert f"partition file {victim} is not valid JSON" in result.stderr
    assert "Traceback" not in result.stderr
    assert {p: p.read_bytes() for p in (backfill / "partitions").iterdir()} == before


def test_without_the_index_every_reader_reads_every_record_again(work, home):
    """A succeeded record garbled in place is invisible to a reader through the index (documented); with
    partitions.idx deleted, as docs/state.md says to after editing records by hand, show refuses it (exit 5)."""
    backfill = finished_backfill(work, home)
    [first, *_] = records(backfill)
    victim = backfill / "partitions" / f"{first['id']}.json"
    with open(victim, "r+b") as handle:
        handle.truncate(0)
        handle.write(b"[]")
    trusted = run_backfill("show", backfill.name, "--output", "json", "--limit", "1", "--status", "failed",
                           cwd=work, env=home)  # fmt: skip
    assert trusted.returncode == 0 and '"failing 2024-01-03 on purpose"' in trusted.stdout, trusted.stderr
    (backfill / "partitions.idx").unlink()
    strict = run_backfill("show", backfill.name, "--output", "json", cwd=work, env=home)
    assert strict.returncode == 5 and str(victim) in strict.stderr


def test_a_record_corrupted_in_place_on_the_page_leaves_a_whole_json_document(work, home):
    """Two records garbled in place under a trusted index, on the page `show --output json` lists: it stopped at
    the first, half a document on stdout (invalid JSON) and exit 5. The document is now whole, each damaged
    partition carrying ``record_error`` (its status from the index, no attempts), and stderr has one line naming
    the first file and how many more; exit 5."""
    backfill = finished_backfill(work, home)
    victims = [backfill / "partitions" / f"{r['id']}.json" for r in records(backfill)[:2]]
    for victim in victims:
        with open(victim, "r+b") as handle:  # in place: the index is still trusted
            handle.truncate(0)
    result = run_backfill("show", backfill.name, "--output", "json", cwd=work, env=home)
    assert result.returncode == 5, result.stdout + result.stderr
    partitions = json.loads(result.stdout)["partitions"]
    damaged = [(p["index"], p["status"], p["attempts"]) for p in partitions if "record_error" in p]
    assert damaged == [(0, "succeeded", []), (1, "succeeded", [])]
    assert f"partition file {victims[0]} is not valid JSON" in partitions[0]["record_error"]
    [line] = result.stderr.splitlines()
    assert line.startswith(f"backfill: error: partition file {victims[0]} is not valid JSON") and line.endswith(
        "(and 1 more damaged partition files on this page)"
    ), line


def test_a_real_run_leaves_an_index_that_is_trusted_and_true(work, home):
    """After a real backfill (records written by the executor's threads), a reader trusts the index, and it gives
    each partition's status and attempt count as the files do."""
    backfill = finished_backfill(work, home, "--retries", "1")
    spec = spec_of(StateStore(backfill).read_manifest())
    indexed = read_indexed(backfill, backfill / "partitions", len(spec.plan), writer_alive=False)
    assert indexed is not None
    board = indexed.board
    on_disk = {r["index"]: (r["status"], len(r["attempts"])) for r in records(backfill)}
    assert {i: (board.status(i).label, board.attempts(i)) for i in range(board.size)} == on_disk
    assert on_disk[2] == ("failed", 2)


def test_a_bulk_mark_through_the_real_cli_keeps_the_index_trusted_and_true(work, home):
    """`backfill mark` of 100 partitions (a bulk mark: one file, merged by readers) leaves an index that is still
    trusted — no reader falls back to reading every record after a mark — whose rows and reasons are the marked
    records'; `show --output json` groups the failures under the mark's reason."""
    from engine.store.failure_groups import failure_groups

    run = run_backfill("--command", "true", "--start-date", "2024-01-01", "--end-date", "2024-04-09", "--reason",
                       "test", "--guardrails", "sandbox", "--no-progress", cwd=work, env=home)  # fmt: skip
    assert run.returncode == 0, run.stderr
    [backfill] = [p for p in (work / "logs" / "backfills").iterdir() if not p.name.startswith(".")]
    marked = run_backfill("mark", backfill.name, "--status-filter", "succeeded", "--status", "failed", "--reason",
                          "the source was wrong", cwd=work, env=home)  # fmt: skip
    assert marked.returncode == 0 and "marked 100 partitions failed" in marked.stdout, marked.stdout + marked.stderr
    assert (backfill / "bulk-marks").is_dir()
    store = StateStore(backfill)
    spec = spec_of(store.read_manifest())
    indexed = read_indexed(backfill, backfill / "partitions", len(spec.plan), writer_alive=False)
    assert indexed is not None and indexed.to_read == []
    assert {i: (indexed.board.status(i).label, indexed.board.attempts(i)) for i in range(100)} == {
        i: ("failed", 2) for i in range(100)
    }
    [group] = failure_groups(spec, store, indexed.board)
    assert (group.count, group.example) == (100, f"marked failed by {marked_by(home)}: the source was wrong")
    shown = run_backfill("show", backfill.name, "--output", "json", "--limit", "1", cwd=work, env=home)
    assert '"count":100' in shown.stdout.replace(" ", ""), shown.stdout


def marked_by(home) -> str:
    import getpass
    import socket

    return f"{home.get('USER') or getpass.getuser()}@{socket.gethostname()}"
