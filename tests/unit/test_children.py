"""What each partition's child receives: placeholders, argv of pipeline children, environment."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest

from engine.base.errors import BadInput
from engine.execute import children
from engine.execute.children import ChildFactory
from engine.execute.rerun import AssetRerun
from engine.pipeline.options import RunOptions
from engine.spec.backfill_spec import ExecutionOptions
from engine.spec.command_template import split_template
from engine.spec.planning import plan_request


def factory_for(template: str, zone: str = "America/New_York") -> ChildFactory:
    planned = plan_request(
        target=None,
        command=template,
        name=None,
        start="2024-03-09",
        end="2024-03-11",
        timezone=zone,
        partition="daily",
        environment=None,
        config_file=None,
        run_options=RunOptions(),
        options=ExecutionOptions(),
        force=False,
    )
    return ChildFactory(planned.spec, backfill_id="bf", working_directory="/tmp", workers=3, inherit_fds=())


def test_every_placeholder_is_substituted_inside_arguments(tmp_path):
    """{start} {end} {end_exclusive} {start_date} {end_date} {partition_id} {run_id}, within words; {{ and }}
    are literal braces."""
    factory = factory_for(
        "echo --from={start} --to={end} --until {end_exclusive} {start_date}..{end_date} "
        "{partition_id} {run_id} '{{not_a_placeholder}}' 'x y' '{{\"json\": 1}}'"
    )
    interval = factory.spec.plan.interval(1)  # the spring-forward day
    child = factory.child(interval, "abc123", "bf-p1-a1", tmp_path / "log", 3)
    assert child.argv == [
        "echo",
        "--from=2024-03-10T00:00:00.000000-05:00",
        "--to=2024-03-10T23:59:59.999999-04:00",
        "--until",
        "2024-03-11T00:00:00.000000-04:00",
        "2024-03-10..2024-03-10",
        "abc123",
        "bf-p1-a1",
        "{not_a_placeholder}",
        "x y",
        '{"json": 1}',
    ]
    assert child.env["BACKFILL_START"] == "2024-03-10T00:00:00.000000-05:00"
    assert child.env["BACKFILL_END"] == "2024-03-10T23:59:59.999999-04:00"
    assert child.env["BACKFILL_END_EXCLUSIVE"] == "2024-03-11T00:00:00.000000-04:00"
    assert child.env["BACKFILL_ID"] == "bf" and child.env["BACKFILL_RUN_ID"] == "bf-p1-a1"
    assert "BRUIN_VARS" not in child.env


def test_templates_that_cannot_be_split_are_bad_input():
    """Unbalanced quotes or an empty template are errors naming the template."""
    with pytest.raises(BadInput, match="cannot be split"):
        split_template("echo 'unbalanced")
    with pytest.raises(BadInput, match="is empty"):
        split_template("   ")


def test_pipeline_children_run_backfill_run_with_the_saved_options(shop, home, monkeypatch):
    """A pipeline child is `backfill run TARGET` with both dates (microseconds, offset), zone, workers, backfill
    ID and count, and every saved run option."""
    for key, value in home.items():
        monkeypatch.setenv(key, value)
    run_options = RunOptions(
        selector=("tag:raw+",),
        tags=("raw",),
        exclude_tags=("pii",),
        only="main",
        variables={"one_order_in": 12},
        apply_interval_modifiers=True,
    )
    planned = planned_pipeline(shop, run_options, timezone="UTC", options=ExecutionOptions(workers=4))
    factory = ChildFactory(planned.spec, backfill_id="bf", working_directory=str(shop), workers=4, inherit_fds=())
    argv = factory.child(planned.spec.plan.interval(0), "pid", "bf-p0-a1", shop / "log", 2).argv
    joined = " ".join(argv)
    assert argv[argv.index("run") + 1] == str(shop / "pipeline")
    for expected in (
        "--start-date 2024-01-01T00:00:00.000000Z",
        "--end-date 2024-01-01T23:59:59.999999Z",
        "--timezone UTC",
        "--workers 4",
        "--backfill-id bf",
        "--backfill-total 2",
        "--run-id bf-p0-a1",
        "--environment default",
        "--selector tag:raw+",
        "--tag raw",
        "--exclude-tag pii",
        "--only main",
        "--var one_order_in=12",
        "--apply-interval-modifiers",
        "--partition-id pid",
    ):
        assert expected in joined


def test_every_date_a_child_is_given_has_its_microseconds_even_on_a_whole_second(tmp_path):
    """A partition of 1.000001 s whose last microsecond falls on a whole second: its {end} is written with its six
    digits, as every other partition's, so a child parsing one form reads them all."""
    planned = plan_request(
        target=None,
        command="echo {start} {end}",
        name=None,
        start="2024-01-01T00:00:00Z",
        end="2024-01-01T00:00:03.000003Z",
        timezone="UTC",
        partition="1000001us",
        environment=None,
        config_file=None,
        run_options=RunOptions(),
        options=ExecutionOptions(),
        force=False,
    )
    factory = ChildFactory(planned.spec, backfill_id="bf", working_directory="/tmp", workers=1, inherit_fds=())
    ends = [factory.child(planned.spec.plan.interval(i), "p", "r", tmp_path / "log", 3).argv[2] for i in range(3)]
    assert ends == ["2024-01-01T00:00:01.000000Z", "2024-01-01T00:00:02.000001Z", "2024-01-01T00:00:03.000002Z"]


@pytest.mark.parametrize("template", ["echo {start_dte}", "echo --day={Start}", "echo {}", "echo '{run id}'"])
def test_an_unknown_placeholder_is_bad_input_naming_the_ones_that_exist(template):
    """A typo in a placeholder is refused at planning with the placeholders that exist and how to write braces."""
    with pytest.raises(BadInput) as error:
        factory_for(template)
    message = str(error.value)
    assert message.startswith("--command has an unknown placeholder {")
    assert "{start}, {end}, {end_exclusive}, {start_date}, {end_date}, {partition_id}, {run_id}" in message
    assert "{{ and }}" in message


def planned_pipeline(
    shop: Path,
    run_options: RunOptions | None = None,
    config_file: str | None = None,
    timezone: str = "Europe/London",
    options: ExecutionOptions | None = None,
):
    """The example pipeline planned over two days."""
    return plan_request(
        target=str(shop / "pipeline"),
        command=None,
        name=None,
        start="2024-01-01",
        end="2024-01-02",
        timezone=timezone,
        partition="daily",
        environment=None,
        config_file=config_file,
        run_options=run_options or RunOptions(),
        options=options or ExecutionOptions(),
        force=False,
    )


def test_a_child_gets_the_operators_environment_less_what_would_change_what_it_runs(tmp_path, monkeypatch):
    """An operator's own variables reach every child; BRUIN_VARS, BRUIN_CONFIG_FILE and BRUIN_QUERY_ANNOTATIONS
    left in the operator's shell do not (they would change what a partition runs, past what was judged); a
    BACKFILL_* left by an outer backfill is replaced by this one's, and its reason removed when none was given."""
    monkeypatch.setenv("OPERATOR_SETTING", "kept")
    for stale in ("BRUIN_VARS", "BRUIN_CONFIG_FILE", "BRUIN_QUERY_ANNOTATIONS"):
        monkeypatch.setenv(stale, '{"stale": 1}')
    for outer in ("BACKFILL_REASON", "BACKFILL_ID", "BACKFILL_PARTITION_ID", "BACKFILL_RUN_ID", "BACKFILL_START"):
        monkeypatch.setenv(outer, "outer")
    spec = factory_for("echo {start}").spec
    interval = spec.plan.interval(0)
    for reason, expected in (("the fix of #12", "the fix of #12"), (None, None)):
        factory = ChildFactory(
            spec, backfill_id="bf", working_directory="/srv/jobs", workers=1, inherit_fds=(7, 9), reason=reason
        )
        child = factory.child(interval, "part0", "bf-p0-a1", tmp_path / "p0.log", 2)
        assert child.env["OPERATOR_SETTING"] == "kept"
        assert not {"BRUIN_VARS", "BRUIN_CONFIG_FILE", "BRUIN_QUERY_ANNOTATIONS"} & child.env.keys()
        assert child.env.get("BACKFILL_REASON") == expected
        assert child.env["BACKFILL_ID"] == "bf"
        assert (child.env["BACKFILL_PARTITION_ID"], child.env["BACKFILL_RUN_ID"]) == ("part0", "bf-p0-a1")
        assert child.env["BACKFILL_START"] == "2024-03-09T00:00:00.000000-05:00"
        assert (child.cwd, child.log_path, child.inherit_fds) == ("/srv/jobs", tmp_path / "p0.log", (7, 9))


def test_query_annotations_reach_pipeline_children_only_as_saved(shop, home, monkeypatch):
    """The saved query annotations are the pipeline child's BRUIN_QUERY_ANNOTATIONS (the operator's own value is
    not); without saved annotations the child has none, and a command's child never has them."""
    for key, value in home.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("BRUIN_QUERY_ANNOTATIONS", '{"from": "the shell"}')
    annotated = planned_pipeline(shop, RunOptions(query_annotations={"team": "data", "ticket": 12}))
    plain = planned_pipeline(shop)
    command = factory_for("echo {start}").spec
    command = dataclasses.replace(command, run_options=RunOptions(query_annotations={"team": "data"}))
    expected = ('{"team":"data","ticket":12}', None, None)
    for spec, wanted in zip((annotated.spec, plain.spec, command), expected, strict=True):
        factory = ChildFactory(spec, backfill_id="bf", working_directory=str(shop), workers=1, inherit_fds=())
        child = factory.child(spec.plan.interval(0), "pid", "bf-p0-a1", shop / "log", 1)
        assert child.env.get("BRUIN_QUERY_ANNOTATIONS") == wanted


def test_a_pipeline_child_is_given_the_files_its_run_is_judged_against(shop, home, monkeypatch):
    """The config file the backfill was planned with (here not the repository's default), the snapshot to measure
    row changes against, the judged SQL and the judged files are each passed as the flag that names them; the last
    three not at all when the backfill has none; the zone by the name it was planned in."""
    for key, value in home.items():
        monkeypatch.setenv(key, value)
    (shop / "other.yml").write_bytes((shop / ".bruin.yml").read_bytes())
    spec = planned_pipeline(shop, config_file=str(shop / "other.yml")).spec
    given = {
        "row_changes_from": "/state/snapshot.json",
        "judged_sql": "/state/judged-sql.json",
        "judged_files": "/state/judged-files.json",
    }
    factory = ChildFactory(spec, backfill_id="bf", working_directory=str(shop), workers=1, inherit_fds=(), **given)
    argv = factory.child(spec.plan.interval(0), "pid", "bf-p0-a1", shop / "log", 1).argv
    pairs = {argv[i]: argv[i + 1] for i in range(len(argv) - 1) if argv[i].startswith("--")}
    assert pairs["--config-file"] == str(shop / "other.yml")
    assert pairs["--row-changes-from"] == "/state/snapshot.json"
    assert pairs["--judged-sql"] == "/state/judged-sql.json"
    assert pairs["--judged-files"] == "/state/judged-files.json"
    assert pairs["--timezone"] == "Europe/London"
    bare = ChildFactory(
        planned_pipeline(shop).spec, backfill_id="bf", working_directory=str(shop), workers=1, inherit_fds=()
    )
    argv = bare.child(spec.plan.interval(0), "pid", "bf-p0-a1", shop / "log", 1).argv
    assert not {"--row-changes-from", "--judged-sql", "--judged-files"} & set(argv)


def selectors(argv: list[str]) -> list[str]:
    return [argv[i + 1] for i, word in enumerate(argv) if word == "--selector"]


def test_a_rerun_of_one_asset_replaces_the_selection_and_keeps_the_other_options(shop, home, monkeypatch):
    """An operator's rerun of an asset runs that asset (``+``: and its downstream) in place of the spec's selection,
    tags and steps, in every partition, and keeps the options that do not select (variables, the variant)."""
    for key, value in home.items():
        monkeypatch.setenv(key, value)
    options = RunOptions(selector=("tag:raw+",), tags=("raw",), only="main", variables={"one_order_in": 12})
    spec = planned_pipeline(shop, options).spec
    for rerun, expected in (
        (AssetRerun("shop.orders", downstream=True), "fqn:shop.orders+"),
        (AssetRerun("shop.orders"), "fqn:shop.orders"),
    ):
        factory = ChildFactory(
            spec, backfill_id="bf", working_directory=str(shop), workers=1, inherit_fds=(), rerun_asset=rerun
        )
        for index in (0, 1):
            argv = factory.child(spec.plan.interval(index), "pid", "bf-p0-a1", shop / "log", 2).argv
            assert argv[argv.index("run") + 1] == str(shop / "pipeline")
            assert selectors(argv) == [expected]
            assert "--tag" not in argv and "--only" not in argv
            assert argv[argv.index("--var") + 1] == "one_order_in=12"


def test_an_asset_level_resume_runs_exactly_its_assets_within_the_spec_s_other_selectors(shop, home, monkeypatch):
    """A resume of some assets of a partition names each as a selector of its own in place of the spec's
    selectors; the spec's tags and steps still apply; a partition without such a list keeps the spec's
    selection."""
    for key, value in home.items():
        monkeypatch.setenv(key, value)
    options = RunOptions(selector=("tag:raw+",), tags=("raw",), only="main")
    spec = planned_pipeline(shop, options).spec
    factory = ChildFactory(spec, backfill_id="bf", working_directory=str(shop), workers=1, inherit_fds=())
    interval = spec.plan.interval(0)
    resumed = factory.child(interval, "pid", "bf-p0-a2", shop / "log", 2, assets=("shop.a", "shop.b")).argv
    assert selectors(resumed) == ["fqn:shop.a", "fqn:shop.b"]
    assert resumed[resumed.index("--tag") + 1] == "raw" and resumed[resumed.index("--only") + 1] == "main"
    whole = factory.child(interval, "pid", "bf-p0-a1", shop / "log", 2).argv
    assert selectors(whole) == ["tag:raw+"]
    assert resumed[: resumed.index("run") + 2] == whole[: whole.index("run") + 2]


def test_a_child_runs_this_installations_backfill_or_this_interpreter_with_the_package(tmp_path, monkeypatch):
    """The ``backfill`` script beside this interpreter when there is one; otherwise this interpreter running the
    package, a command line that really starts ``backfill``."""
    real_interpreter = sys.executable
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    monkeypatch.setattr(sys, "executable", str(bin_dir / "python3"))
    fallback = children.backfill_program()
    assert fallback[0] == str(bin_dir / "python3")
    (bin_dir / "backfill").write_text("#!/bin/sh\n")
    assert children.backfill_program() == [str(bin_dir / "backfill")]
    done = subprocess.run([real_interpreter, *fallback[1:], "--help"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: backfill")
