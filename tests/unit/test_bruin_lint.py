"""Bruin's lint rules on fields a run here does not act on (engine/pipeline/bruin_lint.py): a schedule as
robfig/cron's ParseStandard reads it after Bruin's own names, and notifications as validateNotifications reads
them."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.pipeline.bruin_lint import (
    _notification_problems,
    check_asset_notifications,
    check_notifications,
    check_pipeline,
    column_detail_problems,
    materialization_problems,
    name_problem,
    schedule_problem,
)
from engine.pipeline.problems import Problems
from engine.pipeline.yamlfile import parse_yaml

TAKEN = [
    "daily", "hourly", "weekly", "monthly", "continuous", "@continuous", "@daily", "@midnight", "@annually",
    "0 3 * * *", "*/15 * * * *", "5/10 * * * *", "0 0 1 jan-MAR mon-fri", "0 0 * * SUN", "0 0 31 12 6",
    "0-59/59 0-23 1-31 1-12 0-6", "0,30 9-17/2 1,15 * 1-5", "? ? ? ? ?", "+5 * * * *", "*-9 * * * *", "0 3 * * *  ",
    "TZ=Europe/Paris 0 3 * * *", "CRON_TZ=America/New_York @daily", "TZ=Local 0 3 * * *", "TZ= 0 3 * * *",
    "@every 1h30m", "@every 1.5h", "@every .5s", "@every 0", "@every 300ms",
]  # fmt: skip
REFUSED = [
    "Daily", " daily", "sometimes", "@reboot", "@Daily", "@every", "@every 5", "@every 5 s", "@every  5s", "5",
    "* * * *", "* * * * * *", "60 * * * *", "0 24 * * *", "0 0 0 * *", "0 0 32 * *", "0 0 * 0 *", "0 0 * 13 *",
    "0 0 * * 7", "5-1 * * * *", "*/0 * * * *", "1,,2 * * * *", "1, * * * *", "1-2-3 * * * *", "1/2/3 * * * *",
    "a * * * *", "0 0 * * L", "0 0 15W * *", "٥ * * * *", "1_0 * * * *", "-1 * * * *", "*/x * * * *",
    "0 0 * jan-foo *", "TZ=Nowhere/Else 0 3 * * *", "TZ=UTC",
]  # fmt: skip


@pytest.mark.parametrize("schedule", TAKEN)
def test_schedules_bruin_parses_are_taken(schedule):
    """Cron of five fields with names, steps, ranges and `?`, Bruin's names, descriptors, @every a Go duration,
    a TZ= or CRON_TZ= zone: what robfig/cron's ParseStandard takes."""
    assert schedule_problem(schedule) is None


@pytest.mark.parametrize("schedule", REFUSED)
def test_schedules_bruin_cannot_parse_are_refused(schedule):
    """Names with the wrong case, unknown descriptors, a field count other than five, values outside a field's
    range, empty list items, steps of zero, L and W, digits Go's Atoi does not read, a zone that does not exist."""
    assert schedule_problem(schedule) is not None


def test_the_refusal_names_the_field_and_why():
    """The message says which field and what is wrong with it, or what a schedule may be."""
    assert schedule_problem("0 0 * * 7") == "has day of week '7': outside 0-6"
    assert schedule_problem("0 0 5-1 * *") == "has day of month '5-1': its range begins after it ends"
    assert schedule_problem("*/0 * * * *") == "has minute '*/0': a step must be positive"
    assert schedule_problem("0 0 * foo *") == "has month 'foo': 'foo' is not a number or a name"
    assert schedule_problem("0 x * * *") == "has hour 'x': 'x' is not a number"
    assert schedule_problem("CRON_TZ=Mars/Base 0 0 * * *") == "names no time zone ('Mars/Base')"
    assert schedule_problem("0 0 * *").startswith("is not a cron expression of five fields")
    assert schedule_problem("1/2/3 * * * *") == "has minute '1/2/3': too many slashes"
    assert schedule_problem("1-2-3 * * * *") == "has minute '1-2-3': too many hyphens"


def test_notifications_need_their_target_once():
    """Slack channels (with or without #), Teams and Discord connections: given, and given once; emails: with
    recipients, none blank, no two to the same list. Webhooks are not checked (neither does Bruin)."""
    targets = {"slack": [{"channel": "#a"}, {"channel": "a"}, {}], "ms_teams": [{"connection": "t"}],
               "discord": [{"connection": "d"}, {"connection": "d"}], "webhook": [{}],
               "email": [{"recipients": ["x@y"]}, {"recipients": [" x@y "]}, {"recipients": []},
                         {"recipients": [""]}]}  # fmt: skip
    assert _notification_problems(targets) == [
        "slack channel 'a' is given twice",
        "every slack entry needs a channel",
        "discord connection 'd' is given twice",
        "two email entries have the same recipients",
        "every email entry needs at least one recipient",
        "an email recipient is blank",
    ]
    fine = {"slack": [{"channel": "a"}, {"channel": "b"}], "ms_teams": [{"connection": "#t"}, {"connection": "t"}],
            "discord": [], "webhook": [],
            "email": [{"recipients": ["x@y"]}, {"recipients": ["z@y"]}, {"recipients": ["x@y", "z@y"]}]}  # fmt: skip
    assert _notification_problems(fine) == []


@pytest.mark.parametrize(
    ("raw", "kind", "strategy", "fields"),
    [
        ({"incremental_key": "d", "partition_by": "d", "cluster_by": ["d"]}, "view", None,
         [("incremental_key", True), ("partition_by", True), ("cluster_by", True)]),
        ({"partition_by": "", "cluster_by": None}, "view", None, []),
        ({"incremental_key": "d"}, "table", "merge", [("incremental_key", False)]),
        ({"incremental_key": "d"}, "table", "append", [("incremental_key", False)]),
        ({"incremental_key": "d"}, "table", "create+replace", [("incremental_key", True)]),
        ({"incremental_key": "d"}, "table", "truncate+insert", [("incremental_key", True)]),
        ({"incremental_key": "d"}, "table", None, []),
        ({"incremental_key": "d"}, "table", "scd2_by_column", []),
        ({"incremental_key": "d"}, None, "append", []),
        ({"incremental_key": ""}, "table", "append", []),
    ],
)  # fmt: skip
def test_a_key_or_layout_bruin_refuses_is_named(raw, kind, strategy, fields):
    """A view takes no key, partitioning or clustering; a table's key only beside the strategies that read it
    (none given: Bruin checks nothing); beside append and merge, which our guardrails fence by it, a warning; no
    materialization type: nothing checked (as Bruin)."""
    assert [(name, fatal) for name, _, fatal in materialization_problems(raw, kind, strategy)] == fields


@pytest.mark.parametrize(
    ("column", "fields"),
    [
        ({"precision": 0, "length": -1, "scale": -1}, ["precision", "length", "scale"]),
        ({"precision": 1, "length": 1, "scale": 0}, []),
        ({"precision": 5, "scale": 5}, []),
        ({"precision": 5, "scale": 6}, ["scale"]),
        ({"precision": 1, "scale": 2}, ["scale"]),
        ({"precision": 0, "scale": 6}, ["precision"]),
        ({"precision": "5", "length": 2.5, "scale": True}, ["precision", "length", "scale"]),
    ],
)
def test_a_column_s_type_detail_bruin_refuses_is_named(column, fields):
    """Precision and length positive whole numbers, a scale not negative and not above a valid precision (one
    message for a bad precision, not two), as Bruin's valid-column-metadata."""
    assert [name for name, _ in column_detail_problems({"name": "x", **column})] == fields


def test_the_messages_name_the_value_the_column_and_what_bruin_takes():
    """Each message says the field, its value, its column and the rule; a key refused beside a strategy names the
    strategies that take one."""
    assert [message for _, message in column_detail_problems({"name": "amount", "precision": 0, "scale": -1})] == [
        "precision 0 of column 'amount' must be a positive whole number (as Bruin checks it)",
        "scale -1 of column 'amount' must be a whole number, not negative (as Bruin checks it)",
    ]
    [(_, message, fatal)] = materialization_problems({"incremental_key": "d"}, "table", "append")
    assert (message, fatal) == (
        "incremental_key applies only to strategies delete+insert, time_interval, scd2_by_time, scd2_by_column in "
        "Bruin, whose linter refuses it beside append: here it tells the guardrails which rows each partition owns",
        False,
    )
    [(_, message, fatal)] = materialization_problems({"incremental_key": "d"}, "table", "truncate+insert")
    assert (message, fatal) == (
        "incremental_key applies only to strategies delete+insert, time_interval, scd2_by_time, scd2_by_column in "
        "Bruin, whose linter refuses it beside truncate+insert",
        True,
    )


PIPELINE = """name: p
schedule: often
concurrency: -1
max_active_steps: 0
notifications:
  slack:
    - channel: ""
  email: none
default:
  hooks:
    post: []
    applicable_type: [python]
"""
ASSET = """name: mid.t
notifications:
  discord:
    - {}
custom_checks:
  - name: rows
    notifications: x
columns:
  - name: id
    checks:
      - name: unique
        notifications:
          email:
            - {}
"""


def test_pipeline_and_asset_fields_reach_their_checks():
    """pipeline.yml's schedule, concurrency, max_active_steps, default hooks and notifications, and an asset's,
    its custom checks' and its column checks' notifications: each problem names its file, its line and its owner;
    the values next to them Bruin takes (concurrency 0, max_active_steps 1, an empty schedule) give none."""
    data = parse_yaml(PIPELINE, "pipeline.yml")
    problems = Problems()
    check_pipeline(data, data["default"], Path("p/pipeline.yml"), problems)
    assert problems.items == [
        "p/pipeline.yml:3: concurrency -1 must be 1 or greater (as in Bruin)",
        "p/pipeline.yml:4: max_active_steps 0 must be a positive number (as in Bruin)",
        "p/pipeline.yml:12: default hooks' applicable_type 'python' is not an SQL asset type: hooks reach SQL assets "
        "only (as in Bruin)",
        f"p/pipeline.yml:2: schedule 'often' {schedule_problem('often')} (as Bruin reads it)",
        "p/pipeline.yml:8: notifications.email must be a list",
        "p/pipeline.yml:5: notifications: every slack entry needs a channel (as Bruin checks them)",
    ]
    problems = Problems()
    for schedule in ("", "daily"):
        check_pipeline({"schedule": schedule, "concurrency": 0, "max_active_steps": 1}, {}, Path("p.yml"), problems)
    assert problems.items == []
    assert name_problem("my pipe") == "pipeline name 'my pipe' must be letters, digits, _, . and - (as in Bruin)"
    assert name_problem("shop-2.eu_x") is None
    data = parse_yaml(ASSET, "a.sql")
    check_asset_notifications(data, Path("a.sql"), problems)
    assert problems.items == [
        "a.sql:2: notifications: every discord entry needs a connection (as Bruin checks them)",
        "a.sql:7: custom check 'rows': notifications must be a mapping of slack, ms_teams, discord, webhook, email",
        "a.sql:12: check 'unique' of column 'id': notifications: every email entry needs at least one recipient (as "
        "Bruin checks them)",
    ]
    problems = Problems()
    check_notifications({"notifications": {"webhook": "x", "slack": ["#ops"]}}, "", Path("p.yml"), problems)
    assert problems.items == [
        "p.yml: notifications.slack must be a list",
        "p.yml: notifications.webhook must be a list",
    ]
    problems = Problems()  # shapes other checks refuse are passed over here, not a crash
    check_asset_notifications({"columns": ["id", {"name": "x", "checks": "unique"}], "custom_checks": "c"},
                              Path("a.sql"), problems)  # fmt: skip
    assert problems.items == []


def test_a_schedule_s_zone_too_long_for_a_file_name_names_no_zone():
    """TZ= with a name longer than a file name may be is refused as naming no zone, not an error of ours."""
    zone = "Europe/" + "x" * 300
    assert schedule_problem(f"TZ={zone} 0 0 * * *") == f"names no time zone ({zone!r})"
