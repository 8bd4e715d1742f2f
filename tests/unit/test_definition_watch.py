"""The watch over what a pipeline backfill was judged on, in-process over real files: what it names as changed,
gone or new, what it passes over, and that it trusts the plan digest's hashes over the files as they are now."""

from __future__ import annotations

import os
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from engine.guardrails import definition_watch
from engine.guardrails.definition_watch import READS, DefinitionWatch, Unjudged, read_definition
from engine.guardrails.digest import file_component, file_hash
from engine.guardrails.facts import command_files
from engine.pipeline.assets import Asset
from engine.pipeline.config import load_config

CONFIG = """default_environment: dev
environments:
  dev:
    connections:
      duckdb:
        - name: db
          path: warehouse.duckdb
  other:
    connections:
      duckdb:
        - name: db
          path: other.duckdb
"""


def pipeline(tmp_path: Path) -> SimpleNamespace:
    """A pipeline directory with pipeline.yml, two assets (one selected, with a seed), a macro in a subdirectory."""
    base = tmp_path / "p"
    files = {"pipeline.yml": "name: p\n", "assets/a.sql": "SELECT 1", "assets/b.sql": "SELECT 2",
             "assets/s.csv": "x\n1\n", "macros/sub/m.sql": "{% macro m() %}1{% endmacro %}",
             "assets/py/job.py": "import lib.helper", "assets/py/lib/helper.py": "X = 1",
             "assets/util.py": "Y = 1"}  # fmt: skip
    for name, text in files.items():
        (base / name).parent.mkdir(parents=True, exist_ok=True)
        (base / name).write_text(text)
    selected = [
        SimpleNamespace(
            asset=Asset("a", "duckdb.sql", base / "assets/a.sql", "a.sql", 1, seed_path=base / "assets/s.csv")
        ),
        SimpleNamespace(asset=Asset("job", "python", base / "assets/py/job.py", "py/job.py", 1)),
    ]
    (tmp_path / ".bruin.yml").write_text(CONFIG)
    request = SimpleNamespace(config=load_config(tmp_path / ".bruin.yml"), environment=SimpleNamespace(name="dev"))
    facts = SimpleNamespace(
        pipeline=SimpleNamespace(directory=base, file=base / "pipeline.yml"), selected=selected, request=request
    )
    return SimpleNamespace(facts=facts, components={}, base=base)


@pytest.fixture
def settled(monkeypatch):
    """The files written by the test are looked at as if a second had passed since: settled on any file clock."""
    monkeypatch.setattr(definition_watch, "_clock", lambda: time.time_ns() + 1_000_000_000)


def test_what_the_partitions_run_is_watched_and_nothing_else(tmp_path, settled):
    """pipeline.yml, the selected assets, a seed, every macro (in subdirectories too) and every module under a
    Python asset's directory (it imports them) are watched; an asset not selected, and a module beside SQL assets
    only, are not. Touched with the same content: no change, and the next look is a stat."""
    judged = pipeline(tmp_path)
    watch = DefinitionWatch.of(judged)
    base = judged.base
    assert sorted(p.relative_to(base).as_posix() for p in watch.judged) == [
        "assets/a.sql", "assets/py/job.py", "assets/py/lib/helper.py", "assets/s.csv", "macros/sub/m.sql",
        "pipeline.yml",
    ]  # fmt: skip
    (base / "assets/util.py").write_text("Y = 2")  # no Python asset runs beside it
    assert watch.changes() == []
    (base / "assets/b.sql").write_text("SELECT 3")  # not selected: its partitions do not run it
    os.utime(base / "assets/a.sql", ns=(1, 1))  # a new stat, the same text
    assert watch.changes() == []
    assert watch._seen == watch._signature()


def test_a_change_a_removal_and_a_new_macro_are_named(tmp_path, settled):
    """Each file that differs is named under the pipeline's directory, in order; the change stays said until the
    file is as judged again."""
    judged = pipeline(tmp_path)
    watch = DefinitionWatch.of(judged)
    base = judged.base
    (base / "assets/a.sql").write_text("SELECT 10")
    (base / "assets/s.csv").unlink()
    (base / "macros/new.sql").write_text("")
    assert watch.changes() == ["assets/a.sql changed", "assets/s.csv is gone", "macros/new.sql is new"]
    assert watch.changes() == ["assets/a.sql changed", "assets/s.csv is gone", "macros/new.sql is new"]
    (base / "assets/a.sql").write_text("SELECT 1")
    (base / "assets/s.csv").write_text("x\n1\n")
    (base / "macros/new.sql").unlink()
    assert watch.changes() == []


def test_an_edit_after_a_clean_look_is_seen(tmp_path, settled):
    """The executor looks before every turn: a look that found nothing keeps the files' stat, and an edit made
    after it — to any file, also one sorted after a file missing since the pre-flight — is named at the next."""
    judged = pipeline(tmp_path)
    base = judged.base
    (base / "assets/s.csv").unlink()  # missing when judged, and still: no change
    judged.components = {file_component(base / "assets/s.csv", base): file_hash(base / "assets/s.csv")}
    watch = DefinitionWatch.of(judged)
    assert watch.changes() == []
    (base / "assets/a.sql").write_text("SELECT 100")
    assert watch.changes() == ["assets/a.sql changed"]
    (base / "assets/a.sql").write_text("SELECT 1")
    assert watch.changes() == []
    (base / "pipeline.yml").write_text("name: q\n")
    assert watch.changes() == ["pipeline.yml changed"]


def test_a_partition_parses_the_files_as_judged_or_runs_nothing(tmp_path):
    """A partition's parse goes through the watch: clean, it reads once; a file edited before it (after the
    executor's look) is named and nothing is read; a file written during the read — even back to the judged text,
    which no hash would tell — is read again, and one that never settles is refused after a few reads."""
    judged = pipeline(tmp_path)
    base = judged.base
    watch = DefinitionWatch.of(judged)
    reads: list[str] = []

    def parse() -> str:
        reads.append((base / "assets/a.sql").read_text())
        return reads[-1]

    assert watch.read_as_judged(parse) == "SELECT 1" and reads == ["SELECT 1"]

    def parse_while_edited() -> str:
        text = parse()
        if len(reads) == 1:  # an edit and its undo land during the first read: what it parsed is not known
            (base / "assets/a.sql").write_text("SELECT 666")
            (base / "assets/a.sql").write_text("SELECT 1")
        return text

    reads.clear()
    assert watch.read_as_judged(parse_while_edited) == "SELECT 1" and len(reads) == 2

    def parse_never_settled() -> str:
        os.utime(base / "assets/a.sql")  # a new stat each time
        return parse()

    reads.clear()
    with pytest.raises(Unjudged, match=rf"not run: the pipeline kept changing while this partition read it \({READS}"):
        watch.read_as_judged(parse_never_settled)
    assert len(reads) == READS

    (base / "assets/a.sql").write_text("SELECT 2")
    (base / "macros/new.sql").write_text("")
    reads.clear()
    with pytest.raises(Unjudged) as refused:
        watch.read_as_judged(parse)
    said = "not run: the pipeline changed since this backfill was judged (assets/a.sql changed, macros/new.sql is new)"
    assert str(refused.value) == said
    assert reads == [] and refused.value.exit_code == 1


def test_a_look_at_a_file_written_a_moment_ago_is_not_kept_as_clean(tmp_path, monkeypatch):
    """On a coarse file clock a second write within one tick can leave a file's stat as the first left it, so a
    clean look that saw a file changed within SETTLED_NS of it (by its change time: a modification time can be set)
    is not kept: the next look reads the files again, and a partition waits that long before it parses (then
    parses once)."""
    judged = pipeline(tmp_path)
    watch = DefinitionWatch.of(judged)
    assert watch.changes() == [] and watch._seen is None  # the fixture's files were just written
    waits: list[float] = []
    clock = [time.time_ns()]
    monkeypatch.setattr(definition_watch, "_clock", lambda: clock[0])

    def wait(seconds: float) -> None:
        waits.append(seconds)
        clock[0] += int(seconds * 1e9) + 1

    monkeypatch.setattr(definition_watch.time, "sleep", wait)
    clock[0] += definition_watch.SETTLED_NS + 1_000_000
    assert watch.changes() == [] and watch._seen == watch._signature()
    future = 4_000_000_000 * 10**9  # a modification time set ahead (tar, `touch -d`): the change time is what counts
    os.utime(judged.base / "assets/a.sql", ns=(future, future))
    clock[0] = time.time_ns() + definition_watch.SETTLED_NS + 1_000_000
    assert watch.changes() == [] and watch._seen == watch._signature()
    (judged.base / "assets/a.sql").write_text("SELECT 1")  # the same text, just written
    clock[0] = time.time_ns()
    reads = []
    assert watch.read_as_judged(lambda: reads.append(1) or "parsed") == "parsed"
    assert waits == [definition_watch.SETTLED_NS / 1e9] and reads == [1]


def test_the_hashes_judged_are_the_plan_digest_s(tmp_path):
    """A file edited between the pre-flight and the watch's making is a change: the hash the digest covered is
    what counts, not the file as the watch first reads it; a file the digest did not cover is hashed as found."""
    judged = pipeline(tmp_path)
    base = judged.base
    judged.components = {file_component(base / "assets/a.sql", base): file_hash(base / "assets/a.sql")}
    (base / "assets/a.sql").write_text("SELECT 'edited after the approval'")
    watch = DefinitionWatch.of(judged)
    assert watch.changes() == ["assets/a.sql changed"]
    assert watch.judged[base / "pipeline.yml"] == file_hash(base / "pipeline.yml")


def test_a_command_is_watched_over_the_code_it_names_and_no_more(tmp_path):
    """A command naming no code (``echo {start}``) has no watch; ``./load.sh`` and a ``--verify-command`` script
    are watched as the digest judged them, named from the working directory."""

    def watch_of(template: str, verify: str | None = None) -> DefinitionWatch | None:
        spec = SimpleNamespace(target=SimpleNamespace(template=template))
        request = SimpleNamespace(spec=spec, guard=SimpleNamespace(verify_command=verify), working_directory=tmp_path)
        facts = SimpleNamespace(pipeline=None, request=request, code=command_files(request))
        return DefinitionWatch.of(SimpleNamespace(facts=facts, components={}))

    (tmp_path / "load.sh").write_text("echo 1")
    (tmp_path / "check.sql").write_text("SELECT 1")
    assert watch_of("echo {start}") is None
    watch = watch_of("./load.sh {start}", "duckdb w.duckdb -f check.sql")
    assert (sorted(watch.judged), watch.changes()) == ([tmp_path / "check.sql", tmp_path / "load.sh"], [])
    (tmp_path / "check.sql").write_text("SELECT 0")
    assert watch.changes() == ["check.sql changed"]
    assert watch.what == "the files the command names"
    # A script named but not there when judged: its appearing is news; a judged script removed is gone.
    watch = watch_of("sh load.sh {start} helpers.sh")
    assert (sorted(watch.judged), watch.changes()) == ([tmp_path / "helpers.sh", tmp_path / "load.sh"], [])
    (tmp_path / "helpers.sh").write_text("echo unjudged")
    (tmp_path / "load.sh").unlink()
    assert watch.changes() == ["helpers.sh is new", "load.sh is gone"]
    # A Python script's own directory: its modules (imported unnamed), not its subdirectories nor other files.
    (tmp_path / "job").mkdir()
    for name in ("load.py", "helpers.py", "notes.txt"):
        (tmp_path / "job" / name).write_text("pass")
    (tmp_path / "job" / "venv").mkdir()
    (tmp_path / "job" / "venv" / "site.py").write_text("pass")
    watch = watch_of("python job/load.py {start}")
    assert (sorted(watch.judged), watch.changes()) == ([tmp_path / "job/helpers.py", tmp_path / "job/load.py"], [])
    (tmp_path / "job" / "json.py").write_text("dumps = str")
    (tmp_path / "job" / "venv" / "site.py").write_text("changed")
    assert watch.changes() == ["job/json.py is new"]
    (tmp_path / "job" / "run.sh").write_text("echo")
    assert sorted(watch_of("sh job/run.sh").judged) == [tmp_path / "job/run.sh"]  # a shell script imports nothing


def test_the_environment_in_bruin_yml_is_watched_without_its_secrets(tmp_path, settled):
    """``.bruin.yml``: the backfill's environment pointed elsewhere is a change, and so are its default environment
    and a password taken away; a password rotated, and another environment edited, are not (secrets are not
    judged); a file gone or no longer a configuration is named unreadable; as judged again, nothing is said."""
    config = tmp_path / ".bruin.yml"
    judged = pipeline(tmp_path)
    with_password = CONFIG.replace("path: warehouse.duckdb", "path: warehouse.duckdb\n          password: a")
    config.write_text(with_password)
    judged.facts.request.config = load_config(config)
    watch = DefinitionWatch.of(judged)
    assert watch.changes() == []
    config.write_text(with_password.replace("password: a", "password: b"))
    assert watch.changes() == []
    config.write_text(with_password.replace("other.duckdb", "third.duckdb"))
    assert watch.changes() == []
    for edited in (
        with_password.replace("path: warehouse.duckdb", "path: elsewhere.duckdb"),
        with_password.replace("default_environment: dev", "default_environment: other"),
        CONFIG,
    ):
        config.write_text(edited)
        assert watch.changes() == [".bruin.yml's environment dev changed"]
    config.write_text("environments: [")
    assert watch.changes() == [".bruin.yml is unreadable"]
    config.unlink()
    assert watch.changes() == [".bruin.yml is unreadable"]
    config.write_text(with_password.replace("password: a", "password: c"))
    assert watch.changes() == []


def test_the_environment_judged_is_the_one_the_pre_flight_read(tmp_path):
    """``.bruin.yml`` edited between the pre-flight's reading it and the watch's making is a change: what the
    pre-flight judged (and the digest covers) counts, not the file as the watch first finds it."""
    judged = pipeline(tmp_path)
    (tmp_path / ".bruin.yml").write_text(CONFIG.replace("warehouse.duckdb", "elsewhere.duckdb"))
    watch = DefinitionWatch.of(judged)
    assert watch.changes() == [".bruin.yml's environment dev changed"]


def test_without_a_configuration_or_an_environment_only_the_files_are_watched(tmp_path, settled):
    """A request without ``.bruin.yml`` read, or without an environment chosen, watches no configuration: the
    pipeline's files are still watched."""
    for config, environment in ((None, SimpleNamespace(name="dev")), ("set", None)):
        judged = pipeline(tmp_path)
        request = judged.facts.request
        request.config = request.config if config == "set" else None
        request.environment = environment
        watch = DefinitionWatch.of(judged)
        assert watch.config is None and watch.changes() == []
        (tmp_path / ".bruin.yml").write_text("environments: [")
        assert watch.changes() == []
        (judged.base / "pipeline.yml").write_text("name: changed\n")
        assert watch.changes() == ["pipeline.yml changed"]


def test_what_a_worker_reads_is_compared_with_what_was_judged(tmp_path):
    """A worker asked to read the watched files and ``.bruin.yml``: read as judged, nothing differs; a file that
    differs or is missing there, and an environment pointed elsewhere or unreadable, are named."""
    judged = pipeline(tmp_path)
    watch = DefinitionWatch.of(judged)
    paths, config = watch.on_worker()
    assert paths == sorted(str(path) for path in watch.judged) and config == (str(tmp_path / ".bruin.yml"), "dev")
    assert watch.differences(read_definition(paths, config)) == []
    assert "unreadable: " in read_definition([str(tmp_path / "nope.sql")], None)[str(tmp_path / "nope.sql")]
    (judged.base / "assets/a.sql").write_text("SELECT 10")
    (judged.base / "assets/s.csv").unlink()
    (tmp_path / ".bruin.yml").write_text(CONFIG.replace("warehouse.duckdb", "elsewhere.duckdb"))
    assert watch.differences(read_definition(paths, config)) == [
        "assets/a.sql", "assets/s.csv", ".bruin.yml's environment dev"
    ]  # fmt: skip
    (tmp_path / ".bruin.yml").write_text("environments: [")
    seen = read_definition(paths, config)
    assert seen[".bruin.yml"].startswith("unreadable: ")
    assert watch.differences({**seen, ".bruin.yml": watch.config.judged}) == ["assets/a.sql", "assets/s.csv"]
    assert watch.differences({}) == [
        *(watch._name(path) for path in sorted(watch.judged)),
        ".bruin.yml's environment dev",
    ]


def test_a_partition_s_run_is_given_the_watch_whole(tmp_path, settled):
    """``--judged-files``: the watch a partition's run asks before each asset reads back the same files, trees,
    configuration and wording, and sees the same change; text that is not one is a ValueError naming why."""
    judged = pipeline(tmp_path)
    watch = DefinitionWatch.of(judged)
    again = DefinitionWatch.from_argument(watch.argument())
    assert (again.judged, again.trees, again.what, again.directory) == (
        watch.judged, watch.trees, watch.what, watch.directory,
    )  # fmt: skip
    assert (again.config.path, again.config.environment, again.config.judged) == (
        watch.config.path, watch.config.environment, watch.config.judged,
    )  # fmt: skip
    assert again._seen is not None and again._seen == watch._seen  # the executor's clean look, carried over
    assert again.changes() == []
    (judged.base / "macros" / "new.sql").write_text("{% macro x() %}1{% endmacro %}")
    assert again.changes() == watch.changes() == ["macros/new.sql is new"]
    # A watch without a configuration (a command's), and one whose look found a change (no clean look to hand on).
    (tmp_path / "load.sh").write_text("echo")
    request = SimpleNamespace(
        spec=SimpleNamespace(target=SimpleNamespace(template="./load.sh")), working_directory=tmp_path
    )
    request.guard = SimpleNamespace(verify_command=None)
    facts = SimpleNamespace(pipeline=None, request=request, code=command_files(request))
    command = DefinitionWatch.of(SimpleNamespace(facts=facts, components={}))
    (tmp_path / "load.sh").write_text("echo 2")
    copied = DefinitionWatch.from_argument(command.argument())
    assert (copied.config, copied.what, copied._seen) == (None, "the files the command names", None)
    assert copied.changes() == ["load.sh changed"]
    bad = '{"directory": "/", "judged": {}, "trees": [1], "config": null, "what": "w", "seen": null}'
    for text in ("{", "[]", '{"directory": "/"}', bad):
        with pytest.raises(ValueError, match="not a judged watch"):
            DefinitionWatch.from_argument(text)


def test_an_asset_asks_only_what_it_reads_when_it_runs(tmp_path):
    """Before an asset of a partition runs: a Python asset is asked about its script and every module under its
    directory, a seed about its file; a SQL asset about nothing (its partition read it when its run began). An
    asset's look sees a change the executor's would, but is no clean look for the executor's watch."""
    judged = pipeline(tmp_path)
    watch = DefinitionWatch.of(judged)
    sql, job = (entry.asset for entry in judged.facts.selected)
    base = judged.base
    (base / "assets/a.sql").write_text("SELECT 3")
    (base / "assets/util.py").write_text("Y = 2")  # beside SQL assets, not under the Python asset's directory
    plain = Asset("b", "duckdb.sql", base / "assets/b.sql", "b.sql", 1)
    (tmp_path / ".bruin.yml").write_text(CONFIG.replace("path: warehouse.duckdb", "path: elsewhere.duckdb"))
    assert watch.changes_for(sql) == watch.changes_for(job) == watch.changes_for(plain) == []
    (base / "assets/py/lib/helper.py").write_text("X = 2")
    (base / "assets/py/lib/new.py").write_text("Z = 1")
    assert watch.changes_for(job) == ["assets/py/lib/helper.py changed", "assets/py/lib/new.py is new"]
    (base / "assets/s.csv").write_text("x\n2\n")
    assert watch.changes_for(sql) == ["assets/s.csv changed"]
    assert watch._seen is None
    assert {"assets/a.sql changed", ".bruin.yml's environment dev changed"} <= set(watch.changes())
