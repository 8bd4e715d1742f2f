"""A pipeline edited while its backfill runs: the partitions that start later would run files nobody judged or
approved. Real backfills, a real edit between two partitions, the table read after it."""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

from tests.backfills import records, start_background, state_dirs, wait_for
from tests.builder import WAITER, Repo
from tests.conftest import run_backfill, tmpfs

DAY = {"type": "table", "strategy": "time_interval", "incremental_key": "day", "time_granularity": "date"}
THREE_DAYS = ("--start-date", "2024-01-01", "--end-date", "2024-01-03")


@pytest.fixture
def waiting(tmp_path: Path, home: dict[str, str]) -> tuple[Repo, dict[str, str]]:
    """Pipeline p: a day table (``v`` = 1) and a Python asset after it that waits for LIVE_GO."""
    repo = Repo(tmp_path / "repo")
    repo.sql("p.days", "SELECT DATE '{{ start_date }}' AS day, 1 AS v", materialization=DAY)
    repo.python("p.wait", WAITER, depends=["p.days"])
    env = {**home, "LIVE_STARTED": str(tmp_path / "started"), "LIVE_GO": str(tmp_path / "go")}
    return repo, env


@pytest.mark.parametrize("edit", ["asset", "macro", "run file"])
def test_a_file_edited_while_the_backfill_runs_starts_no_partition_unjudged(waiting, edit):
    """The first day runs (it waits in p.wait); meanwhile the asset's SQL is edited (``v`` = 2) in its own file or
    in the file its YAML's ``run:`` names, or a macro file is added. That day finishes, no other starts: exit 1,
    one line naming the file and the way on, the later days unwritten. ``--continue`` judges the new version and
    runs the rest with it."""
    repo, env = waiting
    if edit == "run file":  # the table defined in YAML, its SQL in the file `run:` names
        (repo.root / "p" / "assets" / "p.days.sql").unlink()
        repo.write("p/assets/days.sql", "SELECT DATE '{{ start_date }}' AS day, 1 AS v")
        repo.write("p/assets/days.asset.yml", json.dumps({"name": "p.days", "run": "days.sql", "materialization": DAY}))
    first = start_background("p", *THREE_DAYS, "--reason", "first", "--max-parallel", "1", "--launcher", "exec",
                             "--no-progress", cwd=repo.root, env=env)  # fmt: skip
    try:
        wait_for(lambda: Path(env["LIVE_STARTED"]).exists(), timeout=60)
        if edit == "asset":
            repo.sql("p.days", "SELECT DATE '{{ start_date }}' AS day, 2 AS v", materialization=DAY)
            changed = "assets/p.days.sql changed"
        elif edit == "run file":
            repo.write("p/assets/days.sql", "SELECT DATE '{{ start_date }}' AS day, 2 AS v")
            changed = "assets/days.sql changed"
        else:
            repo.write("p/macros/extra.sql", "{% macro extra() %}1{% endmacro %}")
            changed = "macros/extra.sql is new"
    finally:
        Path(env["LIVE_GO"]).write_text("go")
        out, err = first.communicate(timeout=120)
    [backfill] = state_dirs(repo.root / "logs" / "backfills")
    assert first.returncode == 1, out + err
    assert (
        f"stopped: the pipeline changed since this backfill was judged ({changed}); no partition starts on it "
        f"unjudged: `backfill --continue {backfill.name}` judges it again"
    ) in out + err
    assert [r["status"] for r in records(backfill)] == ["succeeded"]
    assert [(str(d), v) for d, v in repo.query("SELECT * FROM p.days ORDER BY day")] == [("2024-01-01", 1)]
    done = run_backfill("--continue", backfill.name, "--no-progress", cwd=repo.root, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    after = 1 if edit == "macro" else 2
    assert [(str(d), v) for d, v in repo.query("SELECT * FROM p.days ORDER BY day")] == [
        ("2024-01-01", 1), ("2024-01-02", after), ("2024-01-03", after)
    ]  # fmt: skip


@pytest.mark.parametrize("edit", ["changed", "new"])
def test_a_module_beside_a_python_asset_edited_while_the_backfill_runs_starts_no_partition(waiting, edit):
    """The Python asset imports ``helper.py`` from its own directory (first on its ``sys.path``): the helper edited
    during the first day, or a new module put beside it (a ``json.py`` would shadow the standard one), ran in the
    later days unjudged, exit 0. The backfill now stops before the next day, naming the file; ``--continue`` judges
    the new version and runs the rest."""
    repo, env = waiting
    helper = repo.write("p/assets/helper.py", "VALUE = 1\n")
    repo.python("p.wait", WAITER + "import helper\nprint('helper says', helper.VALUE)\n", depends=["p.days"])
    first = start_background("p", *THREE_DAYS, "--reason", "first", "--max-parallel", "1", "--launcher", "exec",
                             "--no-progress", cwd=repo.root, env=env)  # fmt: skip
    try:
        wait_for(lambda: Path(env["LIVE_STARTED"]).exists(), timeout=60)
        if edit == "changed":
            helper.write_text("VALUE = 2\n")
        else:
            repo.write("p/assets/json.py", "raise SystemExit('not the json you meant')\n")
    finally:
        Path(env["LIVE_GO"]).write_text("go")
        out, err = first.communicate(timeout=120)
    [backfill] = state_dirs(repo.root / "logs" / "backfills")
    assert first.returncode == 1, out + err
    changed = "assets/helper.py changed" if edit == "changed" else "assets/json.py is new"
    assert f"stopped: the pipeline changed since this backfill was judged ({changed}); no partition starts" in out + err
    assert [r["status"] for r in records(backfill)] == ["succeeded"]
    if edit == "new":
        (repo.root / "p" / "assets" / "json.py").unlink()
    done = run_backfill("--continue", backfill.name, "--no-progress", cwd=repo.root, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert len(repo.query("SELECT * FROM p.days")) == 3


def test_the_plan_digest_covers_the_modules_beside_a_python_asset(waiting):
    """A person approves a Python asset's plan by its digest: a helper module it imports edited since gives another
    digest, so the approval of the old one does not carry over; a module beside SQL assets only does not count."""
    repo, env = waiting
    helper = repo.write("p/assets/helper.py", "VALUE = 1\n")

    def digest() -> str:
        shown = run_backfill("p", *THREE_DAYS, "--dry-run", "--output", "json", cwd=repo.root, env=env)
        assert shown.returncode == 0, shown.stdout + shown.stderr
        return json.loads(shown.stdout)["preflight"]["digest"]

    judged = digest()
    helper.write_text("VALUE = 2\n")
    edited = digest()
    assert edited != judged
    repo.write("p/macros/../../other.py", "Z = 1\n")  # outside the pipeline's directory
    assert digest() == edited


@pytest.mark.parametrize("edit", ["connection", "password"])
def test_a_connection_pointed_elsewhere_while_the_backfill_runs_starts_no_partition(waiting, edit):
    """``.bruin.yml`` edited during the first day: its connection pointed at another DuckDB file (nothing judged or
    snapshotted it) stops the backfill before the next day, exit 1, the other file never created; its password
    rotated (secrets are left out of what is judged) lets every day run."""
    repo, env = waiting
    config = repo.root / ".bruin.yml"
    judged = config.read_text().replace("path: warehouse.duckdb", "path: warehouse.duckdb\n        password: s1")
    config.write_text(judged)
    first = start_background("p", *THREE_DAYS, "--reason", "first", "--max-parallel", "1", "--launcher", "exec",
                             "--no-progress", cwd=repo.root, env=env)  # fmt: skip
    try:
        wait_for(lambda: Path(env["LIVE_STARTED"]).exists(), timeout=60)
        if edit == "connection":
            config.write_text(judged.replace("path: warehouse.duckdb", "path: elsewhere.duckdb"))
        else:
            config.write_text(judged.replace("password: s1", "password: s2"))
    finally:
        Path(env["LIVE_GO"]).write_text("go")
        out, err = first.communicate(timeout=120)
    [backfill] = state_dirs(repo.root / "logs" / "backfills")
    if edit == "password":
        assert first.returncode == 0, out + err
        assert len(repo.query("SELECT * FROM p.days")) == 3
        return
    assert first.returncode == 1, out + err
    assert (
        "stopped: the pipeline changed since this backfill was judged (.bruin.yml's environment dev changed); "
        f"no partition starts on it unjudged: `backfill --continue {backfill.name}` judges it again"
    ) in out + err
    assert [r["status"] for r in records(backfill)] == ["succeeded"]
    assert not (repo.root / "elsewhere.duckdb").exists()
    assert [(str(d), v) for d, v in repo.query("SELECT * FROM p.days ORDER BY day")] == [("2024-01-01", 1)]


SCRIPT = """#!/bin/sh
echo "$1 {version}" >> out.txt
[ -e started ] || {{ touch started; while [ ! -e go ]; do sleep 0.02; done; }}
"""  # the first partition waits for the test's event (a file), not a guessed duration


def stopped_by_an_edit(work: Path, home: dict[str, str], template: str, edit) -> tuple[Path, str]:
    """A three-day command backfill, one day at a time, with ``edit`` made while its first day waits for the
    test's event: its state directory and all it printed, once it ended with exit 1."""
    first = start_background("--command", template, *THREE_DAYS, "--reason", "r", "--max-parallel", "1",
                             "--guardrails", "sandbox", "--no-progress", cwd=work, env=home)  # fmt: skip
    try:
        wait_for(lambda: (work / "started").exists(), timeout=60)
        edit()
    finally:
        (work / "go").write_text("go")
        out, err = first.communicate(timeout=120)
    [backfill] = state_dirs(work / "logs" / "backfills")
    assert first.returncode == 1, out + err
    return backfill, out + err


def command_files_changed(change: str, backfill: Path) -> str:
    return (
        f"stopped: the files the command names changed since this backfill was judged ({change}); no partition "
        f"starts on it unjudged: `backfill --continue {backfill.name}` judges it again"
    )


@pytest.mark.parametrize(
    "form",
    [
        "./load.sh {start_date}",
        "sh load.sh {start_date}",
        "sh -e -- load.sh {start_date}",
        "sh -c './load.sh {start_date} >> load.log'",
    ],
)
def test_a_script_a_command_names_edited_while_it_runs_starts_no_partition(work, home, form):
    """The script a command names (as its program, given to an interpreter, or in a shell's ``-c`` script) edited
    during the first day ran in the later days unjudged, exit 0. The backfill now stops before the next day naming
    the script, exit 1; ``--continue`` judges the new version and runs the rest with it."""
    script = work / "load.sh"
    script.write_text(SCRIPT.format(version="v1"))
    script.chmod(0o755)
    backfill, said = stopped_by_an_edit(work, home, form, lambda: script.write_text(SCRIPT.format(version="v2")))
    assert command_files_changed("load.sh changed", backfill) in said
    assert (work / "out.txt").read_text().splitlines() == ["2024-01-01 v1"]
    done = run_backfill("--continue", backfill.name, "--no-progress", cwd=work, env=home)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (work / "out.txt").read_text().splitlines() == ["2024-01-01 v1", "2024-01-02 v2", "2024-01-03 v2"]


def test_a_data_file_a_command_names_and_writes_stops_nothing(work, home):
    """``./load.sh {start_date} out.csv`` appends to ``out.csv`` in every partition: data, not code, so every
    partition runs (watched as the script is, the backfill would stop after its first); its record is named after
    the whole command."""
    script = work / "load.sh"
    script.write_text('#!/bin/sh\necho "$1" >> "$2"\n')
    script.chmod(0o755)
    (work / "out.csv").write_text("day\n")
    done = run_backfill("--command", "./load.sh {start_date} out.csv", *THREE_DAYS, "--reason", "r",
                        "--guardrails", "sandbox", "--no-progress", cwd=work, env=home)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert (work / "out.csv").read_text().splitlines() == ["day", "2024-01-01", "2024-01-02", "2024-01-03"]
    # The record is named after the whole command (it was "backfill-.-…yml", the text before its first slash).
    [record] = (work / ".context").glob("backfill-*.yml")
    assert record.name.startswith("backfill-load.sh-start_date-out.csv-"), record.name


SOURCING = """#!/bin/sh
[ -e "$2" ] && . "./$2"
echo "$1" >> out.txt
[ -e started ] || { touch started; while [ ! -e go ]; do sleep 0.02; done; }
"""


def test_a_script_a_command_names_that_appears_while_it_runs_starts_no_partition(work, home):
    """``sh load.sh {start_date} helpers.sh``: helpers.sh was not there when the backfill was judged, and
    appeared during the first day (another branch checked out); the later days sourced it unjudged, exit 0. Its
    absence is what was judged, so the backfill now stops before the next day naming it, exit 1."""
    (work / "load.sh").write_text(SOURCING)
    backfill, said = stopped_by_an_edit(
        work,
        home,
        "sh load.sh {start_date} helpers.sh",
        lambda: (work / "helpers.sh").write_text("echo x >> pwned.txt"),
    )
    assert command_files_changed("helpers.sh is new", backfill) in said
    assert (work / "out.txt").read_text().splitlines() == ["2024-01-01"]
    assert not (work / "pwned.txt").exists()


SOURCES = """#!/bin/sh
. ./lib/common.sh
[ -f env.sh ] && . ./env.sh
echo "$1 $VERSION" >> out.txt
[ -e started ] || { touch started; while [ ! -e go ]; do sleep 0.02; done; }
"""


@pytest.mark.parametrize(
    ("edit", "change"),
    [
        (lambda work: (work / "lib" / "common.sh").write_text("VERSION=v2\n"), "lib/common.sh changed"),
        (lambda work: (work / "env.sh").write_text("VERSION=pwned\n"), "env.sh is new"),
    ],
    ids=["library edited", "optional file appeared"],
)
def test_a_file_a_command_s_shell_script_sources_edited_while_it_runs_starts_no_partition(work, home, edit, change):
    """``./load.sh {start_date}``, load.sh sourcing ``./lib/common.sh`` and ``./env.sh`` when it is there: the
    library edited during the first day, or env.sh appearing, ran in the later days unjudged, exit 0 (the template
    names neither). What a named shell script sources is named with it: the backfill stops before the next day,
    naming the file, exit 1."""
    (work / "lib").mkdir()
    (work / "lib" / "common.sh").write_text("VERSION=v1\n")
    script = work / "load.sh"
    script.write_text(SOURCES)
    script.chmod(0o755)
    backfill, said = stopped_by_an_edit(work, home, "./load.sh {start_date}", lambda: edit(work))
    assert command_files_changed(change, backfill) in said
    assert (work / "out.txt").read_text().splitlines() == ["2024-01-01 v1"]


LOADER = """import json, os, sys, time
import helpers
with open("out.txt", "a") as out:
    out.write(f"{sys.argv[1]} {helpers.VERSION} {json.dumps(1)}\\n")
if not os.path.exists("started"):
    open("started", "w").close()
    while not os.path.exists("go"):
        time.sleep(0.02)
"""


@pytest.mark.parametrize(
    ("edit", "change"),
    [
        (lambda work: (work / "helpers.py").write_text("VERSION = 'v2'\n"), "helpers.py changed"),
        (lambda work: (work / "json.py").write_text("open('pwned.txt', 'w')\ndumps = str\n"), "json.py is new"),
    ],
    ids=["helper edited", "stdlib shadowed"],
)
def test_a_module_beside_a_command_s_python_script_edited_while_it_runs_starts_no_partition(work, home, edit, change):
    """``python load.py {start_date}``, load.py importing helpers.py beside it: helpers.py edited during the first
    day, or a new json.py put beside it (Python puts the script's directory first on ``sys.path``), ran in the
    later days unjudged, exit 0. The backfill now stops before the next day naming the module, exit 1."""
    (work / "load.py").write_text(LOADER)
    (work / "helpers.py").write_text("VERSION = 'v1'\n")
    backfill, said = stopped_by_an_edit(work, home, f"{sys.executable} load.py {{start_date}}", lambda: edit(work))
    assert command_files_changed(change, backfill) in said
    assert (work / "out.txt").read_text().splitlines() == ["2024-01-01 v1 1"]
    assert not (work / "pwned.txt").exists()


def test_a_module_edited_while_its_partition_runs_an_earlier_asset_is_not_imported_unjudged(waiting):
    """The executor looks before each partition starts, but a partition reads a Python asset's modules only when
    that asset runs: ``helper.py`` edited while the partition's first assets ran was imported by the asset after
    them, unjudged, and that partition succeeded. Each asset's run now asks the judged files again first: the asset
    is not run (its partition fails naming the file), the edited module never runs, and the backfill stops."""
    repo, env = waiting
    marker = repo.root / "imported-v2"
    helper = repo.write("p/assets/helper.py", "VALUE = 1\n")
    repo.python("p.use", "import helper\nprint('helper says', helper.VALUE)\n", depends=["p.wait"])
    first = start_background("p", *THREE_DAYS, "--reason", "first", "--max-parallel", "1", "--no-progress",
                             cwd=repo.root, env=env)  # fmt: skip
    try:
        wait_for(lambda: Path(env["LIVE_STARTED"]).exists(), timeout=60)
        helper.write_text(f"open({str(marker)!r}, 'w').close()\nVALUE = 2\n")
    finally:
        Path(env["LIVE_GO"]).write_text("go")
        out, err = first.communicate(timeout=120)
    [backfill] = state_dirs(repo.root / "logs" / "backfills")
    assert first.returncode == 1, out + err
    assert not marker.exists()
    [record] = records(backfill)
    assert record["status"] == "failed", record
    said = json.dumps(record) + out + err
    assert "not run: the pipeline changed since this backfill was judged (assets/helper.py changed)" in said, said


def test_a_pipeline_of_thousands_of_files_runs_its_partitions(tmp_path, home):
    """2,000 macros: the judged files each partition's run is given would pass the 128 KiB one argument may hold
    (every partition failing to start, "Argument list too long"); they are given in a file, and the days run."""
    repo = Repo(tmp_path / "repo")
    repo.sql("p.days", "SELECT DATE '{{ start_date }}' AS day, 1 AS v", materialization=DAY)
    for number in range(2_000):
        repo.write(
            f"p/macros/generated/macro_{number:04d}_with_a_long_descriptive_name.sql", "{% macro m() %}1{% endmacro %}"
        )
    done = run_backfill(
        "p", *THREE_DAYS, "--reason", "r", "--launcher", "exec", "--no-progress", cwd=repo.root, env=home
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert len(repo.query("SELECT * FROM p.days")) == 3


def test_a_dask_worker_that_cannot_see_the_state_directory_is_given_the_judged_files(waiting):
    """On a cluster the state directory need not be shared: the judged files each partition's run asks are sent
    with its task. Here ``judged-files.json`` and ``judged-sql.json`` are gone from the state directory after the
    first launch (a worker that does not see them), and the later days still run, each asset asking the judged
    files; the worker's copies are removed as each child ends."""
    repo, env = waiting
    scratch = Path(tempfile.mkdtemp(prefix="bf-tmp-"))  # short: the cluster makes AF_UNIX sockets in TMPDIR
    env = {**env, "TMPDIR": str(scratch)}
    first = start_background("p", *THREE_DAYS, "--reason", "r", "--max-parallel", "1", "--launcher", "dask-local:1",
                             "--no-progress", cwd=repo.root, env=env)  # fmt: skip
    try:
        wait_for(lambda: Path(env["LIVE_STARTED"]).exists(), timeout=120)
        [backfill] = state_dirs(repo.root / "logs" / "backfills")
        (backfill / "judged-files.json").unlink()
        (backfill / "judged-sql.json").unlink()
    finally:
        Path(env["LIVE_GO"]).write_text("go")
        out, err = first.communicate(timeout=180)
    assert first.returncode == 0, out + err
    assert [r["status"] for r in records(backfill)] == ["succeeded"] * 3
    assert not list(scratch.glob("backfill-given-*"))
    shutil.rmtree(scratch, ignore_errors=True)


def test_a_disk_too_full_for_the_judged_files_starts_nothing_and_says_so(tmp_path, home):
    """The state directory on a disk with room for the backfill but not for its judged files (2,000 macros): one
    line naming the file and the disk's error, exit 1, no partition started, no traceback; the backfill is kept."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root (CI runs as root)")
    repo = Repo(tmp_path / "repo")
    repo.sql("p.days", "SELECT DATE '{{ start_date }}' AS day, 1 AS v", materialization=DAY)
    for number in range(2_000):
        repo.write(
            f"p/macros/generated/macro_{number:04d}_with_a_long_descriptive_name.sql", "{% macro m() %}1{% endmacro %}"
        )
    with tmpfs(tmp_path / "disk", "256k") as disk:
        done = run_backfill("p", *THREE_DAYS, "--reason", "r", "--state-dir", str(disk), "--no-progress",
                            cwd=repo.root, env=home)  # fmt: skip
        [backfill] = state_dirs(disk)
        assert done.returncode == 1, done.stdout + done.stderr
        assert "Traceback" not in done.stderr
        line = f"cannot write {backfill / 'judged-files.json'} (No space left on device): nothing was started"
        assert line in done.stderr, done.stderr
        assert records(backfill) == [] and (backfill / "manifest.json").exists()
    assert not (repo.root / "warehouse.duckdb").exists()  # no partition ran


PAUSE_BEFORE_PARSE = """import os, sys
if "--judged-files" in sys.argv and os.path.exists(os.environ["PAUSE_FIFO"]):
    with open(os.environ["PAUSE_FIFO"]) as go:  # blocks until the test opens the other end, then until it closes it
        go.read()
"""


def test_an_edit_between_the_executor_s_look_and_the_partition_s_parse_runs_nothing_unjudged(waiting, tmp_path):
    """The executor looks at the files, starts a partition, and the partition parses the pipeline a moment later:
    an edit landing in between (here held open: each partition's interpreter waits on a FIFO before it parses) was
    parsed and run by that partition unjudged (``v`` = 2 written, then the backfill stopped). The partition now
    compares what it parsed with what was judged: it runs nothing, fails naming the file, and the backfill stops."""
    repo, env = waiting
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(PAUSE_BEFORE_PARSE)
    fifo = tmp_path / "pause"
    os.mkfifo(fifo)
    env = {**env, "PYTHONPATH": os.pathsep.join(filter(None, [str(site), env.get("PYTHONPATH")])),
           "PAUSE_FIFO": str(fifo)}  # fmt: skip
    Path(env["LIVE_GO"]).write_text("go")  # p.wait does not wait here
    two_days = ("--start-date", "2024-01-01", "--end-date", "2024-01-02")
    first = start_background("p", *two_days, "--reason", "first", "--max-parallel", "1", "--launcher", "exec",
                             "--no-progress", cwd=repo.root, env=env)  # fmt: skip
    try:
        go = wait_for(lambda: _writer_of(fifo), timeout=60)  # once the first partition waits there to parse
        repo.sql("p.days", "SELECT DATE '{{ start_date }}' AS day, 2 AS v", materialization=DAY)
        fifo.unlink()  # the next partition, if any, does not wait
        os.write(go, b"go")
        os.close(go)
    finally:
        out, err = first.communicate(timeout=120)
    [backfill] = state_dirs(repo.root / "logs" / "backfills")
    assert first.returncode == 1, out + err
    assert _rows_written(repo) == []
    [record] = records(backfill)
    said = json.dumps(record) + out + err
    assert record["status"] == "failed", said
    assert "not run: the pipeline changed since this backfill was judged (assets/p.days.sql changed)" in said, said


def _writer_of(fifo: Path) -> int | None:
    """The FIFO's write end once a reader holds the other (a partition's interpreter waiting there), else None."""
    try:
        return os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
    except OSError:  # ENXIO: no reader yet
        return None


def _rows_written(repo: Repo) -> list[tuple]:
    """p.days's rows, none when neither the warehouse nor the table was made."""
    if not repo.database.exists():
        return []
    tables = repo.query(
        "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'p' AND table_name = 'days'"
    )
    return repo.query("SELECT * FROM p.days") if tables[0][0] else []
