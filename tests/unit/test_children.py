"""What each partition's child receives: placeholders, argv of pipeline children, environment."""

from __future__ import annotations

import pytest

from engine.base.errors import BadInput
from engine.execute.children import ChildFactory
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
    planned = plan_request(
        target=str(shop / "pipeline"),
        command=None,
        name=None,
        start="2024-01-01",
        end="2024-01-02",
        timezone="UTC",
        partition="daily",
        environment=None,
        config_file=None,
        run_options=RunOptions(
            selector=("tag:raw+",),
            tags=("raw",),
            exclude_tags=("pii",),
            only="main",
            variables={"one_order_in": 12},
            apply_interval_modifiers=True,
        ),
        options=ExecutionOptions(workers=4),
        force=False,
    )
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


@pytest.mark.parametrize("template", ["echo {start_dte}", "echo --day={Start}", "echo {}", "echo '{run id}'"])
def test_an_unknown_placeholder_is_bad_input_naming_the_ones_that_exist(template):
    """A typo in a placeholder is refused at planning with the placeholders that exist and how to write braces."""
    with pytest.raises(BadInput) as error:
        factory_for(template)
    message = str(error.value)
    assert message.startswith("--command has an unknown placeholder {")
    assert "{start}, {end}, {end_exclusive}, {start_date}, {end_date}, {partition_id}, {run_id}" in message
    assert "{{ and }}" in message
