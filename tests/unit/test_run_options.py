"""The table of run options: every option declared once, and every reader of the table agreeing with it."""

from __future__ import annotations

from dataclasses import fields

import pytest

from engine.pipeline.options import RUN_OPTIONS, RunOptions
from tui.cli.arguments import backfill_parser, run_options_from, run_parser
from tui.cli.backfill_command import PIPELINE_ONLY
from tui.cli.resume import PLAN_INPUTS

GIVEN = [
    "--selector", "tag:daily", "--selector", "+mart.x", "--tag", "t1", "--tag", "t2", "--exclude-tag", "slow",
    "--downstream", "--only", "checks", "--var", 'region="eu"', "--var", "days=7", "--apply-interval-modifiers",
    "--variant", "eu-west",
]  # fmt: skip
NOT_GIVEN_ON_THE_COMMAND_LINE = {"config_file", "query_annotations"}  # saved from the environment and files


def test_every_field_of_run_options_a_person_gives_is_in_the_table():
    """A RunOptions field given on the command line without a row in RUN_OPTIONS would not reach children."""
    declared = {option.attribute for option in RUN_OPTIONS}
    assert {f.name for f in fields(RunOptions)} - NOT_GIVEN_ON_THE_COMMAND_LINE == declared


@pytest.mark.parametrize("parser", [backfill_parser, run_parser], ids=["backfill", "run"])
def test_the_child_argv_gives_a_child_exactly_the_options_the_parent_was_given(parser, monkeypatch):
    """Parsed by the parent, written into a child's argv, parsed by the child: the same options (every kind)."""
    monkeypatch.delenv("BRUIN_VARS", raising=False)
    monkeypatch.delenv("BRUIN_QUERY_ANNOTATIONS", raising=False)
    options = run_options_from(parser().parse_args(["target", *GIVEN]))
    assert options.tags == ("t1", "t2") and options.variables == {"region": "eu", "days": 7}
    assert options.downstream and options.apply_interval_modifiers and options.variant == "eu-west"
    argv = [word for option in RUN_OPTIONS for word in option.child_argv(getattr(options, option.attribute))]
    assert run_options_from(run_parser().parse_args(["target", *argv])) == options


def test_an_unset_option_adds_nothing_to_the_child_argv():
    """Defaults pass nothing on: a child of a plain backfill gets no run-option words at all."""
    default = RunOptions()
    assert [word for option in RUN_OPTIONS for word in option.child_argv(getattr(default, option.attribute))] == []


def test_every_run_option_is_a_plan_input_and_means_nothing_for_a_command():
    """Resume refuses every run option (a plan input); a --command backfill refuses every one too."""
    for option in RUN_OPTIONS:
        assert PLAN_INPUTS[option.dest] == option.flag
        assert (option.flag, option.dest) in PIPELINE_ONLY


def test_a_variant_name_is_checked_where_it_is_parsed():
    """The table's check runs when the command line is read: a bad variant is one clear error."""
    from engine.base.errors import BadInput

    with pytest.raises(BadInput, match="--variant 'eu west' is not a variant name"):
        run_options_from(run_parser().parse_args(["target", "--variant", "eu west"]))


@pytest.mark.parametrize(
    ("pair", "says"),
    [
        ("n=" + "[" * 5000 + "]" * 5000, "--var 'n': its value of 10,000 characters, starting '[[[["),
        ("n=" + "1" * 5000, "is not JSON (number is infinity when parsed as double)"),
        ('{"a":1,' * 3000, "'… is not a JSON object: use name=<json>"),
    ],
)
def test_a_huge_bad_var_is_quoted_in_part_on_one_line(pair, says):
    """A --var value of thousands of characters that is not JSON was quoted whole, three times, on one line; the
    line now quotes its first 80 characters, its length and why it is not JSON."""
    from engine.base.errors import BadInput
    from engine.pipeline.options import parse_variables

    with pytest.raises(BadInput) as refused:
        parse_variables([pair], None)
    assert says in str(refused.value) and len(str(refused.value)) < 300
