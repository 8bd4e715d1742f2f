"""What each partition changed, through the real command: row changes recorded per partition against the
snapshot, and ``backfill diff`` listing exactly the rows a hand-written SQL diff finds (docs/diff.md)."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import duckdb
import yaml

from tests.backfills import records, state_dirs
from tests.builder import Repo
from tests.conftest import run_backfill
from tests.guard_flags import REASON

ORDERS = "SELECT id, day, amount FROM raw.src WHERE day BETWEEN '{{ start_date }}' AND '{{ end_date }}'"
COLUMNS = [
    {"name": "id", "type": "integer", "primary_key": True},
    {"name": "day", "type": "date"},
    {"name": "amount", "type": "integer"},
]
TIME_INTERVAL = {"type": "table", "strategy": "time_interval", "incremental_key": "day", "time_granularity": "date"}


MERGE = {"type": "table", "strategy": "merge", "incremental_key": "day", "time_granularity": "date"}


def _orders(root: Path, *, keyed: bool = True, materialization: dict | None = None, resent: bool = False) -> Repo:
    """mid.orders (time_interval on day) loaded from raw.src for two days; then raw.src changes on the first day:
    id 2's amount, id 3 gone, id 7 new (``resent``: and id 1's row sent a second time). The second day is
    unchanged."""
    repo = Repo(root)
    columns = COLUMNS if keyed else [{**c, "primary_key": False} for c in COLUMNS]
    if materialization is MERGE:  # Bruin's merge updates only the columns marked update_on_merge
        columns = [{**c, "update_on_merge": c["name"] == "amount"} for c in columns]
    repo.sql("mid.orders", ORDERS, materialization=materialization or TIME_INTERVAL, columns=columns)
    repo.execute(
        "CREATE SCHEMA raw",
        "CREATE TABLE raw.src (id INTEGER, day DATE, amount INTEGER)",
        "INSERT INTO raw.src VALUES (1, '2024-01-01', 10), (2, '2024-01-01', 20), (3, '2024-01-01', 30), "
        "(4, '2024-01-02', 40), (5, '2024-01-02', 50)",
    )
    repo.run_ok("--start-date", "2024-01-01", "--end-date", "2024-01-02")
    repo.execute(
        "UPDATE raw.src SET amount = 25 WHERE id = 2",
        "DELETE FROM raw.src WHERE id = 3",
        "INSERT INTO raw.src VALUES (7, '2024-01-01', 70)",
        *(["INSERT INTO raw.src VALUES (1, '2024-01-01', 10)"] if resent else []),
    )
    return repo


def _backfill(repo: Repo, home: dict[str, str]) -> Path:
    shutil.copy(repo.database, repo.root / "before.duckdb")
    result = run_backfill(
        *REASON, "p", "--start-date", "2024-01-01", "--end-date", "2024-01-02", "--no-progress",
        cwd=repo.root, env=home,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    [backfill] = state_dirs(repo.root / "logs" / "backfills")
    return backfill


def _hand_written_diff(repo: Repo, day: str) -> dict[str, list]:
    """The keys added, removed and changed on ``day``, by a plain SQL diff of the file before and after."""
    with duckdb.connect(str(repo.database), read_only=True) as db:
        db.execute(f"ATTACH '{repo.root / 'before.duckdb'}' AS old (READ_ONLY)")
        pairs = db.execute(
            "SELECT b.id, a.id, b.amount, a.amount FROM (SELECT * FROM old.mid.orders WHERE day = ?) b "
            "FULL OUTER JOIN (SELECT * FROM mid.orders WHERE day = ?) a ON a.id = b.id",
            [day, day],
        ).fetchall()
    return {
        "added": sorted(a for b, a, _, _ in pairs if b is None),
        "removed": sorted(b for b, a, _, _ in pairs if a is None),
        "changed": sorted(a for b, a, old, new in pairs if a is not None and b is not None and old != new),
    }


def test_each_partition_records_what_it_changed_by_key(tmp_path, home):
    """The first day's record says +1 −1 ~1 for mid.orders (by its key id), the second day's nothing; show's JSON
    has them per partition, and the backfill record totals them."""
    repo = _orders(tmp_path)
    backfill = _backfill(repo, home)
    first, second = records(backfill)
    assert first["attempts"][-1]["row_changes"] == {
        "mid.orders": {"key": ["id"], "before": 3, "after": 3, "added": 1, "removed": 1, "changed": 1}
    }
    assert second["attempts"][-1]["row_changes"] == {
        "mid.orders": {"key": ["id"], "before": 2, "after": 2, "added": 0, "removed": 0, "changed": 0}
    }
    shown = json.loads(run_backfill("show", backfill.name, "--output", "json", cwd=repo.root, env=home).stdout)
    assert [p["row_changes"]["mid.orders"]["added"] for p in shown["partitions"]] == [1, 0]
    [copy] = (backfill / "records").glob("backfill-*.yml")
    assert yaml.safe_load(copy.read_text())["row_changes"] == {"mid.orders": {"added": 1, "removed": 1, "changed": 1}}


def test_diff_lists_exactly_the_keys_a_hand_written_sql_diff_finds(tmp_path, home):
    """``backfill diff ID --output json`` of the first day: the added, removed and changed keys are those of a
    plain FULL OUTER JOIN of the file before and after, the changed row shows amount 20 → 25; the second day
    is not listed (it recorded no change); and the diff writes nothing (the files are byte-identical, and it reads
    while another process holds the warehouse open read-only, which a writer could not)."""
    repo = _orders(tmp_path)
    backfill = _backfill(repo, home)
    files = [repo.database, *backfill.glob("snapshot-*.duckdb")]
    digests = [hashlib.sha256(path.read_bytes()).hexdigest() for path in files]
    with duckdb.connect(str(repo.database), read_only=True):  # another reader: a writer could not open the file
        result = run_backfill("diff", backfill.name, "--output", "json", cwd=repo.root, env=home)
    assert result.returncode == 0, result.stderr
    [partition] = json.loads(result.stdout)["partitions"]
    [table] = partition["tables"]
    expected = _hand_written_diff(repo, "2024-01-01")
    assert sorted(row["id"] for row in table["added"]) == expected["added"] == [7]
    assert sorted(row["id"] for row in table["removed"]) == expected["removed"] == [3]
    assert sorted(change["key"]["id"] for change in table["changed"]) == expected["changed"] == [2]
    [change] = table["changed"]
    assert (change["before"]["amount"], change["after"]["amount"], change["columns"]) == (20, 25, ["amount"])
    assert [hashlib.sha256(path.read_bytes()).hexdigest() for path in files] == digests
    text = run_backfill("diff", backfill.name, cwd=repo.root, env=home).stdout
    assert "mid.orders  by key id: +1 added, -1 removed, ~1 changed (3 rows before, 3 after)" in text
    assert "    ~ id=2: amount: 20 → 25" in text and "    + id=7 day='2024-01-01' amount=70" in text


def test_without_a_key_rows_are_compared_as_multisets(tmp_path, home):
    """The same table with no primary key: the changed row is one removed and one added (and no changed count)."""
    repo = _orders(tmp_path, keyed=False)
    backfill = _backfill(repo, home)
    first, _ = records(backfill)
    assert first["attempts"][-1]["row_changes"]["mid.orders"] == {
        "key": None, "before": 3, "after": 3, "added": 2, "removed": 2, "changed": None
    }  # fmt: skip
    result = run_backfill("diff", backfill.name, "--ids", first["id"][:8], "--output", "json", cwd=repo.root, env=home)
    [table] = json.loads(result.stdout)["partitions"][0]["tables"]
    assert sorted((r["id"], r["amount"]) for r in table["added"]) == [(2, 25), (7, 70)]
    assert sorted((r["id"], r["amount"]) for r in table["removed"]) == [(2, 20), (3, 30)]


def test_a_row_sent_twice_under_a_declared_key_is_shown_not_matched_away(tmp_path, home):
    """The source re-sent id 1's row, so the day's table holds id 1 twice under a declared primary key. Matched by
    that key the copy would vanish (+1 −1 ~1, as if nothing were duplicated); instead the record, ``diff`` and the
    preview compare the rows as multisets, count the copy as added, and say the key does not hold."""
    repo = _orders(tmp_path, resent=True)
    preview = run_backfill(
        *REASON, "p", "--start-date", "2024-01-01", "--end-date", "2024-01-02", "--dry-run", "--preview",
        cwd=repo.root, env=home,
    )  # fmt: skip
    assert preview.returncode == 0, preview.stdout + preview.stderr
    multisets = (
        "mid.orders  as multisets (its key id is repeated or null in 0 rows before, 1 after): +3 added, -2 removed"
    )
    assert multisets in preview.stdout
    backfill = _backfill(repo, home)
    first, second = records(backfill)
    assert first["attempts"][-1]["row_changes"]["mid.orders"] == {
        "key": None, "declared_key": ["id"], "key_breaks": {"before": 0, "after": 1},
        "before": 3, "after": 4, "added": 3, "removed": 2, "changed": None,
    }  # fmt: skip
    assert second["attempts"][-1]["row_changes"]["mid.orders"]["key"] == ["id"]  # the key holds there
    result = run_backfill("diff", backfill.name, "--output", "json", cwd=repo.root, env=home)
    assert result.returncode == 0, result.stderr
    [table] = json.loads(result.stdout)["partitions"][0]["tables"]
    assert (table["key"], table["declared_key"], table["key_breaks"]) == (None, ["id"], {"before": 0, "after": 1})
    assert [(r["id"], r["amount"]) for r in table["added"]] == [(1, 10), (2, 25), (7, 70)]
    assert [(r["id"], r["amount"]) for r in table["removed"]] == [(2, 20), (3, 30)]
    assert multisets in run_backfill("diff", backfill.name, cwd=repo.root, env=home).stdout


def test_diff_bad_input(tmp_path, home):
    """A table the snapshot does not hold, and a command backfill (no snapshot), are one line each, exit 2."""
    repo = _orders(tmp_path)
    backfill = _backfill(repo, home)
    result = run_backfill("diff", backfill.name, "--table", "mid.nope", cwd=repo.root, env=home)
    assert result.returncode == 2 and "--table 'mid.nope' is not a windowed table" in result.stderr
    assert result.stderr.count("\n") == 1
    result = run_backfill("diff", backfill.name, "--limit", "0", cwd=repo.root, env=home)
    assert result.returncode == 2 and "--limit" in result.stderr


def _digests(repo: Repo) -> dict[str, str]:
    """Every file of the repository (the warehouse, run records, logs) by its bytes (not the test's HOME)."""
    return {
        str(path.relative_to(repo.root)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(repo.root.rglob("*"))
        if path.is_file() and path.relative_to(repo.root).parts[0] != "home"
    }


def test_a_preview_shows_the_first_partitions_diff_and_changes_nothing(tmp_path, home):
    """``--dry-run --preview`` runs the first day into a scratch copy: its JSON lists exactly the keys a hand-written
    diff of the real run finds; afterwards every file of the repository — the warehouse included — is
    byte-identical, no backfill is saved and no run record is left behind."""
    repo = _orders(tmp_path)
    before = _digests(repo)
    result = run_backfill(
        *REASON, "p", "--start-date", "2024-01-01", "--end-date", "2024-01-02", "--dry-run", "--preview",
        "--output", "json", cwd=repo.root, env=home,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert _digests(repo) == before
    assert not state_dirs(repo.root / "logs" / "backfills")
    assert not list(Path(home["XDG_STATE_HOME"]).rglob("runs/*.json"))  # no run record anywhere but in scratch
    preview = json.loads(result.stdout)["preview"]
    assert (preview["index"], preview["exit_code"]) == (0, 0)
    [table] = preview["tables"]
    assert [r["id"] for r in table["added"]] == [7] and [r["id"] for r in table["removed"]] == [3]
    [change] = table["changed"]
    assert (change["key"], change["before"]["amount"], change["after"]["amount"]) == ({"id": 2}, 20, 25)
    _backfill(repo, home)  # the real run: its first day changed exactly what the preview said
    expected = _hand_written_diff(repo, "2024-01-01")
    assert (expected["added"], expected["removed"], expected["changed"]) == ([7], [3], [2])


def test_a_preview_in_text_and_one_that_fails(tmp_path, home):
    """The text preview prints the diff after the pre-flight; a first partition whose run fails exits 1 with its
    last lines, and still changes nothing."""
    repo = _orders(tmp_path)
    text = run_backfill(
        *REASON, "p", "--start-date", "2024-01-01", "--end-date", "2024-01-02", "--dry-run", "--preview",
        cwd=repo.root, env=home,
    )  # fmt: skip
    assert text.returncode == 0, text.stdout + text.stderr
    assert "preview: partition 0 run into a scratch copy" in text.stdout
    assert "mid.orders  by key id: +1 added, -1 removed, ~1 changed (3 rows before, 3 after)" in text.stdout
    repo.sql("mid.orders", "SELECT id, day, amount FROM raw.missing", materialization=TIME_INTERVAL, columns=COLUMNS)
    before = _digests(repo)
    failed = run_backfill(
        *REASON, "p", "--start-date", "2024-01-01", "--end-date", "2024-01-02", "--dry-run", "--preview",
        cwd=repo.root, env=home,
    )  # fmt: skip
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert "the run failed (exit 1)" in failed.stdout and "missing does not exist" in failed.stdout, failed.stdout[
        -600:
    ]
    assert _digests(repo) == before


def test_preview_bad_input(tmp_path, home):
    """``--preview`` without ``--dry-run``, or for a command, is one line, exit 2."""
    repo = _orders(tmp_path)
    alone = run_backfill(*REASON, "p", "--start-date", "2024-01-01", "--preview", cwd=repo.root, env=home)
    assert alone.returncode == 2 and "--preview goes with --dry-run" in alone.stderr
    command = run_backfill(
        *REASON, "--command", "true", "--start-date", "2024-01-01", "--dry-run", "--preview", cwd=repo.root, env=home
    )
    assert command.returncode == 2 and "--preview" in command.stderr and command.stderr.count("\n") == 1


def test_a_merge_backfill_lists_exactly_the_changed_keys(tmp_path, home):
    """A merge (upsert by key) backfill over the keyed table: it adds id 7 and changes id 2, and removes nothing
    (a merge never deletes id 3): the recorded counts and ``backfill diff`` agree with the hand-written SQL diff."""
    repo = _orders(tmp_path, materialization=MERGE)
    backfill = _backfill(repo, home)
    expected = _hand_written_diff(repo, "2024-01-01")
    assert (expected["added"], expected["removed"], expected["changed"]) == ([7], [], [2])
    first, _ = records(backfill)
    change = first["attempts"][-1]["row_changes"]["mid.orders"]
    assert (change["added"], change["removed"], change["changed"]) == (1, 0, 1)
    result = run_backfill("diff", backfill.name, "--output", "json", cwd=repo.root, env=home)
    [partition] = json.loads(result.stdout)["partitions"]
    [table] = partition["tables"]
    assert [r["id"] for r in table["added"]] == expected["added"]
    assert [r["id"] for r in table["removed"]] == expected["removed"]
    assert [c["key"]["id"] for c in table["changed"]] == expected["changed"]


def test_a_table_new_to_the_warehouse_is_all_added(tmp_path, home):
    """A backfill whose table did not exist before (the snapshot holds no copy of it): each day records every row
    as added, and ``backfill diff`` lists them. (A warehouse file that did not exist at all, so that no snapshot
    file was made, is the example pipeline's case in tests/functional/test_warm_launcher.py.)"""
    repo = Repo(tmp_path)
    repo.sql("mid.orders", ORDERS, materialization=TIME_INTERVAL, columns=COLUMNS)
    repo.execute(
        "CREATE SCHEMA raw",
        "CREATE TABLE raw.src (id INTEGER, day DATE, amount INTEGER)",
        "INSERT INTO raw.src VALUES (1, '2024-01-01', 10), (2, '2024-01-01', 20), (4, '2024-01-02', 40)",
    )
    backfill = _backfill(repo, home)
    changes = [r["attempts"][-1]["row_changes"]["mid.orders"] for r in records(backfill)]
    assert [(c["before"], c["after"], c["added"], c["removed"], c["changed"]) for c in changes] == [
        (0, 2, 2, 0, 0),
        (0, 1, 1, 0, 0),
    ]
    result = run_backfill("diff", backfill.name, "--output", "json", cwd=repo.root, env=home)
    assert [[r["id"] for r in p["tables"][0]["added"]] for p in json.loads(result.stdout)["partitions"]] == [
        [1, 2],
        [4],
    ]


def test_a_preview_never_runs_code_it_cannot_keep_in_the_scratch_copy(tmp_path, home):
    """A dry run ran a Python asset for real: one that opens the warehouse by its absolute path deleted
    raw.src's rows and wrote a file outside the repository, and a hook's ``COPY … TO '/abs/path'`` wrote there
    too, all with exit 0. Neither runs in the preview now: each is named as not run (text and JSON), the rest of
    the selection is still previewed, and the warehouse keeps its rows; every file is byte-identical after."""
    repo = _orders(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    repo.python("mid.cleanup", f"import duckdb\nopen({str(outside / 'py.txt')!r}, 'w').write('ran')\n"
                f"duckdb.connect({str(repo.database)!r}).execute('DELETE FROM raw.src')\n",
                depends=["mid.orders"])  # fmt: skip
    copy_to = f"COPY (SELECT 1 AS x) TO '{outside / 'hook.csv'}'"
    repo.sql("mid.export", "SELECT 1 AS x", materialization={"type": "table"}, hooks={"post": [{"query": copy_to}]})
    before = _digests(repo)
    result = run_backfill(
        *REASON, "p", "--start-date", "2024-01-01", "--end-date", "2024-01-02", "--dry-run", "--preview",
        "--output", "json", cwd=repo.root, env=home,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert not list(outside.iterdir())
    assert repo.query("SELECT count(*) FROM raw.src") == [(5,)]
    assert _digests(repo) == before
    preview = json.loads(result.stdout)["preview"]
    assert preview["not_run"] == {
        "mid.cleanup": "Python code can write outside the scratch copy",
        "mid.export": "runs SQL that cannot be classified (COPY (SELECT 1 AS x) TO '')",  # its text blanked
    }
    assert [table["table"] for table in preview["tables"]] == ["mid.orders"]
    text = run_backfill(  # a selection of its own: replaced by the assets left, not added to
        *REASON, "p", "--selector", "mid.orders+", "--start-date", "2024-01-01", "--end-date", "2024-01-02",
        "--dry-run", "--preview", cwd=repo.root, env=home,
    )  # fmt: skip
    assert text.returncode == 0, text.stdout + text.stderr
    assert (
        "not run in the preview: mid.cleanup (Python code can write outside the scratch copy); what runs after it "
        "reads its table as it is"
    ) in text.stdout
    assert "mid.orders  by key id: +1 added, -1 removed, ~1 changed" in text.stdout
    assert not list(outside.iterdir()) and repo.query("SELECT count(*) FROM raw.src") == [(5,)]
    repo.sql("mid.after", "SELECT 2 AS y", materialization={"type": "table"}, depends=["mid.cleanup"])
    one_file = run_backfill(  # the Python asset's file as the target, with its downstream: only that runs
        *REASON, "p/assets/mid_cleanup.py", "--downstream", "--start-date", "2024-01-01", "--end-date",
        "2024-01-02", "--dry-run", "--preview", cwd=repo.root, env=home,
    )  # fmt: skip
    assert one_file.returncode == 0, one_file.stdout + one_file.stderr
    assert "not run in the preview: mid.cleanup" in one_file.stdout
    assert "mid.after  as multisets (no primary key): +1 added" in one_file.stdout
    assert not list(outside.iterdir()) and repo.query("SELECT count(*) FROM raw.src") == [(5,)]
    only_python = run_backfill(
        *REASON, "p", "--selector", "mid.cleanup", "--start-date", "2024-01-01", "--end-date", "2024-01-02",
        "--dry-run", "--preview", cwd=repo.root, env=home,
    )  # fmt: skip
    assert only_python.returncode == 0, only_python.stdout + only_python.stderr
    assert "preview: partition 0 not run into a scratch copy" in only_python.stdout
    assert "nothing else was selected: nothing ran, no changes to show" in only_python.stdout
    assert not list(outside.iterdir()) and repo.query("SELECT count(*) FROM raw.src") == [(5,)]


def test_a_preview_reads_run_files_outside_the_pipeline(tmp_path, home):
    """YAML assets whose `run:` files are outside the pipeline directory, beside it and above the repository: the
    scratch copy held only the pipeline, so the preview's run failed validation (exit 1). The copies of their
    YAML now name the real files (read, never written), and both tables are previewed."""
    repo = Repo(tmp_path / "repo")
    repo.write("shared/one.sql", "SELECT 1 AS x")
    repo.write("p/assets/one.asset.yml", yaml.safe_dump({"name": "mid.one", "type": "duckdb.sql",
                                                        "run": "../../shared/one.sql",
                                                        "materialization": {"type": "table"}}))  # fmt: skip
    (tmp_path / "far.sql").write_text("SELECT 2 AS y")
    repo.write("p/assets/far.asset.yml", yaml.safe_dump({"name": "mid.far", "type": "duckdb.sql",
                                                        "run": "../../../far.sql",
                                                        "materialization": {"type": "table"}}))  # fmt: skip
    result = run_backfill(
        *REASON, "p", "--start-date", "2024-01-01", "--end-date", "2024-01-01", "--dry-run", "--preview",
        "--output", "json", cwd=repo.root, env=home,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    preview = json.loads(result.stdout)["preview"]
    assert preview["not_run"] == {}
    assert [(table["table"], table["added"]) for table in preview["tables"]] == [
        ("mid.far", [{"y": 2}]), ("mid.one", [{"x": 1}])
    ]  # fmt: skip
    assert (tmp_path / "far.sql").read_text() == "SELECT 2 AS y"
