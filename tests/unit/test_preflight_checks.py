"""The pre-flight's checks other than those of data (issue 22), over facts built by hand: the target, history,
the range's size and place in time, intervals against the schedule, upstream gaps and the gate's bypass, work
running beside, the estimate, row counts, quotas, the level, verification, and how ``run_checks`` turns an
error or a missing fact into "could not decide"."""

from __future__ import annotations

import shutil
from pathlib import Path
from types import SimpleNamespace
from zoneinfo import ZoneInfo

import pytest

from engine.dates.plan import Plan, parse_unit
from engine.guardrails import preflight_checks
from engine.guardrails.facts import AssetFacts, Facts
from engine.guardrails.history import AssetRun, History, PastRun
from engine.guardrails.preflight_checks import (
    connector_quotas,
    downstream_awareness,
    environment_level,
    history_exists,
    interval_count,
    interval_semantics,
    range_in_past,
    range_size,
    row_count_sanity,
    run_checks,
    size_and_duration,
    target_valid,
    upstream_coverage,
    verification_mode,
)
from engine.guardrails.request import GuardOptions
from engine.guardrails.settings import GuardrailSettings, Limits
from engine.guardrails.tiers import PreflightCheck, passed
from engine.guardrails.warehouse import Held
from engine.pipeline.assets import Asset, Materialization
from engine.pipeline.config import Connection
from engine.spec.backfill_spec import ExecutionOptions
from engine.store.live_work import LiveWork, WorkKind, command_key, pipeline_key

UTC = ZoneInfo("UTC")
HOUR = 3_600_000_000
DAY = 24 * HOUR
START = 1_704_067_200_000_000  # 2024-01-01T00:00:00Z
LATER = START + 400 * DAY  # "now" for a range well in the past


def fact(name: str, *, selected: bool = True, uses_interval: bool = True, type_: str = "duckdb.sql",
         table: bool = True, connection: str = "db", modifiers=None, sample_rows=None, sample_error=None,
         past_rows=()) -> AssetFacts:  # fmt: skip
    materialization = Materialization("table" if table else "view", "time_interval", "day", None)
    asset = Asset(name, type_, Path("t.sql"), "t.sql", 1, materialization=materialization, interval_modifiers=modifiers)
    link = Connection("duckdb", connection, Path("/w.duckdb"), False, None)
    return AssetFacts(asset=asset, selected=selected, strategy="time_interval", uses_interval=uses_interval,
                      layer="mid", layer_source="schema", connection=link, sample_rows=sample_rows,
                      sample_error=sample_error, past_rows=list(past_rows))  # fmt: skip


def pipeline_of(*names: str, schedule: str = "daily", upstream=None):
    graph = upstream or {}
    return SimpleNamespace(name="sales", assets=list(names), schedule=schedule, directory=Path("/p/sales"),
                           upstream=lambda name: graph.get(name, []), default_interval_modifiers=None)  # fmt: skip


def facts_of(*assets: AssetFacts, days: int = 5, unit: str = "daily", now: int = LATER, selected: int | None = None,
             span: tuple[int, int] | None = None, command: bool = False, template: str = "load {start}",
             guard: GuardOptions | None = None, settings: GuardrailSettings | None = None, pipeline=None,
             history: History | None = None, parallel: int = 1, environment: str | None = "dev",
             working_directory: Path = Path("/w"), live=(), held=(), database_bytes=None,
             options: ExecutionOptions | None = None) -> Facts:  # fmt: skip
    plan = Plan(START, START + days * DAY, UTC, parse_unit(unit))
    target = SimpleNamespace(is_command=command, template=template, name="load", identity={"template": template})
    spec = SimpleNamespace(target=target, zone=UTC, unit=plan.unit, plan=plan, start=plan.start,
                           run_options=SimpleNamespace(apply_interval_modifiers=True))  # fmt: skip
    request = SimpleNamespace(spec=spec, selected_count=len(plan) if selected is None else selected,
                              guard=guard or GuardOptions(), now=now, effective_parallel=parallel,
                              environment=SimpleNamespace(name=environment) if environment else None,
                              working_directory=working_directory, backfill_id="ours",
                              state_root=Path("/s"), options=options or ExecutionOptions())  # fmt: skip
    if pipeline is None and not command:
        pipeline = pipeline_of(*(a.asset.name for a in assets))
    first = plan.interval(0)
    return Facts(request, settings or GuardrailSettings(), span or (plan.start, plan.end), first, pipeline=pipeline,
                 assets={a.asset.name: a for a in assets}, history=history or History(), live=list(live),
                 held=list(held), database_bytes=database_bytes or {})  # fmt: skip


def run(assets: dict[str, tuple[int, int]] | None = None, *, status: str = "succeeded", ran: bool = True,
        started: int = START, duration: float = 2.0, environment: str | None = "dev",
        backfill: str | None = "b1") -> PastRun:  # fmt: skip
    parts = {name: AssetRun(status, s, e, None) for name, (s, e) in (assets or {}).items()}
    return PastRun("r", status, started, duration, environment, backfill, START, START + DAY, parts, ran)


REPORTED = {"target_valid", "history_exists", "range_size", "interval_count", "range_in_past", "interval_semantics",
            "upstream_coverage", "downstream_awareness", "size_and_duration", "row_count_sanity", "connector_quotas",
            "environment", "verification"}  # fmt: skip


def judged(check: PreflightCheck) -> tuple[str, str, str]:
    """The check's status, tier and line, after asserting it reports under its own name."""
    assert check.name in REPORTED
    return str(check.status), str(check.tier), check.detail


def limits(**values) -> GuardrailSettings:
    return GuardrailSettings(limits=Limits(**values))


# ---------------------------------------------------------------- target_valid


def test_a_command_s_program_is_found_on_the_path_or_refused(tmp_path):
    """A program on PATH passes with its full path; one that is nowhere, or an empty template, is never; a
    program chosen per partition cannot be checked (warned)."""
    found = target_valid(facts_of(command=True, template="true --flag {start}"))
    assert judged(found) == ("pass", "auto", "the program true exists and is executable")
    assert found.evidence == {"program": shutil.which("true")}
    missing = target_valid(facts_of(command=True, template="no-such-program-xyz {start}"))
    assert judged(missing) == (
        "fail", "never", "the program 'no-such-program-xyz' does not exist or is not executable",
    )  # fmt: skip
    assert missing.evidence == {"program": "no-such-program-xyz"}
    for blank in ("", "   ", None):
        assert judged(target_valid(facts_of(command=True, template=blank))) == (
            "fail", "never", "the program '' does not exist or is not executable",
        )  # fmt: skip
    chosen = target_valid(facts_of(command=True, template="{program} {start}"))
    assert judged(chosen) == (
        "warn",
        "auto",
        "the program '{program}' is chosen per partition: it cannot be checked now",
    )


def test_a_command_given_by_path_is_looked_for_there_relative_to_the_working_directory(tmp_path):
    """``./load.sh`` is the file in the working directory, executable or refused; an absolute path is itself;
    a file of that name on PATH does not stand in for it."""
    script = tmp_path / "load.sh"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    relative = target_valid(facts_of(command=True, template="./load.sh {start}", working_directory=tmp_path))
    assert judged(relative)[:2] == ("pass", "auto") and relative.evidence == {"program": str(tmp_path / "./load.sh")}
    absolute = target_valid(facts_of(command=True, template=f"{script} {{start}}", working_directory=Path("/")))
    assert absolute.evidence == {"program": str(script)}
    script.chmod(0o644)
    assert judged(target_valid(facts_of(command=True, template="./load.sh", working_directory=tmp_path)))[:2] == (
        "fail", "never",
    )  # fmt: skip
    elsewhere = target_valid(facts_of(command=True, template="./load.sh", working_directory=tmp_path / "nowhere"))
    assert elsewhere.status == "fail"
    on_path = target_valid(facts_of(command=True, template="bin/true", working_directory=Path("/")))
    assert on_path.status == "pass" and on_path.evidence == {"program": "/bin/true"}
    assert target_valid(facts_of(command=True, template="usr/true", working_directory=Path("/"))).status == "fail"


def test_a_command_s_target_names_the_code_judged_with_it(tmp_path):
    """What the digest covers besides the template, said where the program is checked: each file the command
    names, one not there yet said so, and the modules beside a Python script; none named, nothing said."""
    (tmp_path / "load.sh").write_text("echo")
    (tmp_path / "load.py").write_text("pass")
    facts = facts_of(
        command=True, template="sh -c './load.sh {start}; python load.py' later.sh", working_directory=tmp_path
    )
    facts.code = [tmp_path / "load.sh", tmp_path / "load.py", tmp_path / "later.sh"]
    check = target_valid(facts)
    assert judged(check) == (
        "pass", "auto", "the program sh exists and is executable; judged with it: later.sh (not there yet), load.py, "
        "load.sh and the modules beside each Python script",
    )  # fmt: skip
    assert check.evidence["code"] == ["load.sh", "load.py", "later.sh (not there yet)"]
    facts.code = [tmp_path / "load.sh"]
    assert judged(target_valid(facts))[2] == "the program sh exists and is executable; judged with it: load.sh"


def test_a_pipeline_target_names_its_assets_and_the_selection():
    """Passed, counting every asset of the pipeline and listing the selected ones sorted (downstream aside)."""
    facts = facts_of(fact("mid.b"), fact("mid.a"), fact("mid.d", selected=False),
                     pipeline=pipeline_of("mid.a", "mid.b", "mid.c", "mid.d"))  # fmt: skip
    check = target_valid(facts)
    assert judged(check) == ("pass", "auto", "pipeline 'sales' validates: 4 assets, 2 selected")
    assert check.evidence == {"assets": 4, "selected": ["mid.a", "mid.b"]}


# ---------------------------------------------------------------- history_exists


def test_a_command_s_history_counts_its_succeeded_partitions_and_their_backfills():
    """No earlier run: n/a; failed runs are not counted; the backfills are named once, sorted, without the
    runs that belong to none."""
    assert judged(history_exists(facts_of(command=True))) == (
        "n/a", "auto", "no earlier backfill of this command: nothing to compare with",
    )  # fmt: skip
    only_failed = History([run(status="failed")])
    assert history_exists(facts_of(command=True, history=only_failed)).status == "n/a"
    runs = [
        run(backfill="b2"),
        run(backfill="b1"),
        run(backfill="b2"),
        run(backfill=None),
        run(status="failed", backfill="b9"),
    ]
    check = history_exists(facts_of(command=True, history=History(runs)))
    assert judged(check) == ("pass", "auto", "4 succeeded partitions in earlier backfills")
    assert check.evidence == {"backfills": ["b1", "b2"]}


def test_an_asset_that_never_ran_has_no_back_to_fill():
    """Human-only, naming each selected asset without a real success (a mark is none, a downstream one is not
    asked about); one record or several are counted in the line."""
    window = (START, START + DAY)
    history = History(
        [run({"mid.a": window}), run({"mid.b": window}, ran=False), run({"mid.c": window}, status="failed")]
    )
    facts = facts_of(fact("mid.a"), fact("mid.b"), fact("mid.c"), fact("mid.d", selected=False), history=history)
    check = history_exists(facts)
    assert judged(check) == (
        "fail", "human-only",
        "never succeeded: mid.b, mid.c; there is no back to fill: run it once with `backfill run` first",
    )  # fmt: skip
    assert check.evidence == {"never_succeeded": ["mid.b", "mid.c"], "run_records": 3}
    one = history_exists(facts_of(fact("mid.a"), history=History([run({"mid.a": window})])))
    assert judged(one) == ("pass", "auto", "every selected asset has succeeded before (1 run record)")
    assert one.evidence == {"run_records": 1}
    two = history_exists(facts_of(fact("mid.a"), history=History([run({"mid.a": window})] * 2)))
    assert two.detail == "every selected asset has succeeded before (2 run records)"


# ---------------------------------------------------------------- range_size


@pytest.mark.parametrize(
    ("days", "expected"),
    [
        (5, ("pass", "auto", "5 days ≤ 7 days")),
        (7, ("pass", "auto", "7 days ≤ 7 days")),
        (8, ("fail", "approval", "8 days > 7 days")),
        (90, ("fail", "approval", "90 days > 7 days")),
        (91, ("fail", "human-only",
              "91 days > 90 days: split it, or pass --allow-long-range to make it approval")),
    ],
)  # fmt: skip
def test_a_range_longer_than_the_limits_needs_approval_then_a_person(days, expected):
    """At most 7 days: auto; up to 90: approval; beyond: human-only (both limits inclusive)."""
    check = range_size(facts_of(days=days))
    assert judged(check) == expected
    assert check.evidence == {"days": days, "approval_days": 7, "human_only_days": 90}


def test_a_long_range_allowed_on_purpose_needs_approval_and_limits_come_from_settings():
    """--allow-long-range turns human-only into approval, saying so; an environment's limits move both
    thresholds; a range shorter than a day is shown as a duration with its fraction of a day as evidence."""
    allowed = range_size(facts_of(days=91, guard=GuardOptions(allow_long_range=True)))
    assert judged(allowed) == ("fail", "approval", "91 days > 90 days (--allow-long-range given)")
    assert allowed.evidence == {"days": 91, "approval_days": 7, "human_only_days": 90}
    assert range_size(facts_of(days=7, guard=GuardOptions(allow_long_range=True))).status == "pass"
    custom = limits(approval_days=2, human_only_days=4)
    assert judged(range_size(facts_of(days=3, settings=custom))) == ("fail", "approval", "3 days > 2 days")
    assert judged(range_size(facts_of(days=5, settings=custom)))[1] == "human-only"
    short = range_size(facts_of(days=1, span=(START, START + 6 * HOUR)))
    assert judged(short) == ("pass", "auto", "6h ≤ 7 days")
    assert short.evidence["days"] == 0.25
    assert range_size(facts_of(days=1)).detail == "1 days ≤ 7 days"
    assert range_size(facts_of(days=2, span=(START, START + DAY + DAY // 2))).detail == "1.5 days ≤ 7 days"
    fraction = range_size(facts_of(days=1, span=(START, START + DAY // 3)))
    assert fraction.evidence["days"] == 0.333
    over = range_size(facts_of(days=9, span=(START, START + 7 * DAY + 1)))
    assert over.status == "fail" and over.detail.startswith("7 days > 7 days")


# ---------------------------------------------------------------- interval_count


def test_more_than_one_interval_needs_approval_unless_the_environment_raises_the_limit():
    """The seed's rule: one interval is auto, two need approval; a limit of 3 says so, with thousands
    separators; a limit below one is one, and a fractional one is cut down."""
    one = interval_count(facts_of(fact("mid.a"), days=1))
    assert judged(one) == ("pass", "auto", "1 interval ≤ 1 (auto_max_intervals)")
    assert one.evidence == {"intervals": 1, "auto_max_intervals": 1}
    two = interval_count(facts_of(fact("mid.a"), days=2))
    assert judged(two) == (
        "fail", "approval",
        "2 intervals > 1 (auto_max_intervals): a rerun touching more than one interval needs approval",
    )  # fmt: skip
    three = limits(auto_max_intervals=3)
    assert judged(interval_count(facts_of(fact("mid.a"), days=3, settings=three)))[0] == "pass"
    assert interval_count(facts_of(fact("mid.a"), days=5, settings=three)).detail == (
        "5 intervals > 3 (auto_max_intervals): a rerun touching more than 3 intervals needs approval"
    )
    many = interval_count(facts_of(fact("mid.a"), days=5, selected=1500, settings=limits(auto_max_intervals=1000)))
    assert many.detail.startswith("1,500 intervals > 1,000 (auto_max_intervals)")
    assert many.evidence == {"intervals": 1500, "auto_max_intervals": 1000}
    assert interval_count(facts_of(fact("mid.a"), days=1, settings=limits(auto_max_intervals=0))).status == "pass"
    cut = interval_count(facts_of(fact("mid.a"), days=3, settings=limits(auto_max_intervals=2.9)))
    assert cut.status == "fail" and cut.evidence["auto_max_intervals"] == 2
    fine = interval_count(facts_of(fact("mid.a"), days=2, settings=limits(auto_max_intervals=2)))
    assert fine.detail == "2 intervals ≤ 2 (auto_max_intervals)"


def test_partitions_coarser_than_the_schedule_are_never_run():
    """Weekly partitions of a daily pipeline run a week in one trigger: never; 25-hour days (daylight saving)
    are still days; a schedule without a fixed period, or a command, is not compared."""
    weekly = interval_count(facts_of(fact("mid.a"), days=14, unit="weekly"))
    assert judged(weekly) == (
        "fail", "never",
        "weekly partitions of a daily pipeline: each runs 7 days in one trigger when smaller meaningful intervals "
        "exist; use --partition daily",
    )  # fmt: skip
    assert weekly.evidence == {"intervals": 2, "auto_max_intervals": 1}
    assert interval_count(facts_of(fact("mid.a"), days=2, unit="25h")).status == "fail"
    assert interval_count(facts_of(fact("mid.a"), days=2, unit="25h")).tier == "approval"
    assert interval_count(facts_of(fact("mid.a"), days=2, unit="25h1s")).tier == "never"
    hourly = pipeline_of("mid.a", schedule="hourly")
    assert interval_count(facts_of(fact("mid.a"), days=1, unit="2h", pipeline=hourly)).tier == "never"
    assert interval_count(facts_of(fact("mid.a"), days=1, unit="hourly", pipeline=hourly)).tier == "approval"
    weekly_pipe = pipeline_of("mid.a", schedule="weekly")
    assert interval_count(facts_of(fact("mid.a"), days=14, unit="weekly", pipeline=weekly_pipe)).tier == "approval"
    assert interval_count(facts_of(fact("mid.a"), days=28, unit="monthly", pipeline=weekly_pipe)).tier == "never"
    cron = pipeline_of("mid.a", schedule="0 3 * * *")
    assert interval_count(facts_of(fact("mid.a"), days=14, unit="weekly", pipeline=cron)).tier == "approval"
    assert interval_count(facts_of(days=14, unit="weekly", command=True)).tier == "approval"


def test_the_first_partition_s_own_length_decides_and_without_one_the_unit_s_step():
    """A weekly plan whose first partition is cut short by the range start is still a week per trigger later;
    the first selected partition is what is measured, and without one, the unit's step."""
    facts = facts_of(fact("mid.a"), days=2, unit="30h")
    facts.first = facts.request.spec.plan.interval(0)._replace(end=START + DAY)
    assert interval_count(facts).tier == "approval"  # a first partition of one day: not coarse
    facts.first = None
    assert interval_count(facts).tier == "never"  # the unit's 30 hours


# ---------------------------------------------------------------- range_in_past


def test_a_range_reaching_past_now_is_never_run_and_counts_the_future_partitions():
    """Ending at now exactly is the past; a microsecond later is the future; the partitions from the one
    holding now are counted, all of them when now is before the start."""
    end = START + 5 * DAY
    assert judged(range_in_past(facts_of(fact("mid.a"), now=end))) == (
        "pass", "auto", "the range ends 2024-01-06T00:00:00Z, in the past",
    )  # fmt: skip
    assert range_in_past(facts_of(fact("mid.a"), now=end)).evidence == {"end": "2024-01-06T00:00:00Z"}
    late = range_in_past(facts_of(fact("mid.a"), now=end - 1))
    assert judged(late) == (
        "fail", "never", "the range ends 2024-01-06T00:00:00Z, after now: backfilling the future is always a mistake",
    )  # fmt: skip
    assert late.evidence == {"end": "2024-01-06T00:00:00Z", "future_partitions": 1}
    middle = range_in_past(facts_of(fact("mid.a"), now=START + 2 * DAY + HOUR))
    assert middle.evidence["future_partitions"] == 3
    at_a_boundary = range_in_past(facts_of(fact("mid.a"), now=START + 2 * DAY))
    assert at_a_boundary.evidence["future_partitions"] == 3
    before = range_in_past(facts_of(fact("mid.a"), now=START - DAY))
    assert before.evidence["future_partitions"] == 5
    at_start = range_in_past(facts_of(fact("mid.a"), now=START))
    assert at_start.evidence["future_partitions"] == 5
    just_after = range_in_past(facts_of(fact("mid.a"), now=START + 1))
    assert just_after.evidence["future_partitions"] == 5


def test_an_interval_modifier_that_moves_the_last_run_past_now_is_never_run():
    """The range ends in the past but an asset's end modifier reads after now: never, naming the asset that
    reaches furthest and where; one that stays in the past, or no modifier, passes."""
    end = START + 5 * DAY
    now = end + 12 * HOUR
    near = fact("mid.near", modifiers={"end": "6h"})
    far = fact("mid.far", modifiers={"end": "1d"})
    check = range_in_past(facts_of(near, far, fact("mid.plain"), now=now))
    assert judged(check) == (
        "fail", "never",
        "mid.far's interval modifier moves its last run's end to 2024-01-07T00:00:00Z, after now: backfilling the "
        "future is always a mistake",
    )  # fmt: skip
    assert check.evidence == {"end": "2024-01-06T00:00:00Z", "effective_end": "2024-01-07T00:00:00Z",
                              "asset": "mid.far"}  # fmt: skip
    order = range_in_past(facts_of(far, near, now=now))
    assert order.evidence["asset"] == "mid.far"
    assert range_in_past(facts_of(near, now=now)).status == "pass"
    assert range_in_past(facts_of(near, now=end + 6 * HOUR)).status == "pass"  # its end is now: the past
    assert range_in_past(facts_of(near, now=end + 6 * HOUR - 1)).status == "fail"
    assert range_in_past(facts_of(near, now=end)).detail.startswith("mid.near's interval modifier moves")
    microsecond = range_in_past(facts_of(fact("mid.us", modifiers={"end": "1000ns"}), now=end))
    assert microsecond.evidence["effective_end"] == "2024-01-06T00:00:00.000001Z"
    earlier = fact("mid.earlier", modifiers={"end": "-1d", "start": "-1d"})
    assert range_in_past(facts_of(earlier, now=end)).status == "pass"
    assert range_in_past(facts_of(far, command=True, now=now)).status == "pass"


def test_the_modifier_is_read_for_the_partition_holding_the_range_s_last_instant():
    """Only the last selected partition's run matters: its window is that partition's, shifted."""
    week = fact("mid.week", modifiers={"start": "-7d"})
    assert range_in_past(facts_of(week, now=START + 5 * DAY)).status == "pass"
    end_moved = fact("mid.end", modifiers={"end": "1h"})
    facts = facts_of(end_moved, now=START + 3 * DAY + 30 * 60_000_000, span=(START, START + 3 * DAY))
    check = range_in_past(facts)
    assert check.status == "fail" and check.evidence["effective_end"] == "2024-01-04T01:00:00Z"
    clipped = facts_of(end_moved, now=START + 2 * HOUR, unit="hourly", span=(START, START + HOUR + 1))
    clipped.request.spec.plan = Plan(START, START + HOUR + 1, UTC, parse_unit("hourly"))  # the last: 1 µs long
    assert range_in_past(clipped).evidence["effective_end"] == "2024-01-01T02:00:00.000001Z"
    empty = facts_of(end_moved, now=START, span=(START, START))
    assert range_in_past(empty).status == "pass"


# ---------------------------------------------------------------- interval_semantics


@pytest.mark.parametrize("placeholder", ["start", "end", "end_exclusive", "start_date", "end_date"])
def test_a_command_receives_the_interval_through_any_placeholder(placeholder):
    """Each of the five placeholders hands the interval to the command."""
    check = interval_semantics(facts_of(command=True, template=f"load --from {{{placeholder}}}"))
    assert judged(check) == ("pass", "auto", "the command template receives the interval")


def test_a_command_without_a_placeholder_must_read_the_environment():
    """Warned: it must read BACKFILL_START/BACKFILL_END itself; a placeholder of another name does not count."""
    for template in ("load --all", "load {region}", "load start end"):
        assert judged(interval_semantics(facts_of(command=True, template=template))) == (
            "warn", "auto",
            "the command template has no interval placeholder: it must read BACKFILL_START/BACKFILL_END itself",
        )  # fmt: skip


def test_assets_that_ignore_the_interval_are_named_and_all_of_them_refused():
    """All ignore it: human-only (slicing is meaningless); one: warned in the singular; two: in the plural;
    none: passed. Downstream assets are not judged."""
    every = interval_semantics(facts_of(fact("mid.a", uses_interval=False), fact("mid.b", uses_interval=False),
                                        fact("mid.down", selected=False)))  # fmt: skip
    assert judged(every) == (
        "fail", "human-only",
        "no selected asset uses the interval: every partition would compute the same thing, slicing is meaningless",
    )  # fmt: skip
    assert every.evidence == {"without_interval": ["mid.a", "mid.b"]}
    one = interval_semantics(facts_of(fact("mid.b", uses_interval=False), fact("mid.a")))
    assert judged(one) == (
        "warn", "auto",
        "mid.b ignores the interval: rerun once per partition for nothing; select it out (--exclude-tag, --selector)",
    )  # fmt: skip
    assert one.evidence == {"without_interval": ["mid.b"]}
    two = interval_semantics(facts_of(fact("mid.c", uses_interval=False), fact("mid.b", uses_interval=False),
                                      fact("mid.a")))  # fmt: skip
    assert two.detail == (
        "mid.b, mid.c ignore the interval: rerun once per partition for nothing; select them out "
        "(--exclude-tag, --selector)"
    )
    assert two.evidence == {"without_interval": ["mid.b", "mid.c"]}
    fine = interval_semantics(facts_of(fact("mid.a"), fact("mid.d", selected=False, uses_interval=False)))
    assert judged(fine) == ("pass", "auto", "every selected asset uses the interval")


# ---------------------------------------------------------------- upstream_coverage


def test_upstream_gaps_are_never_run_and_named_by_span():
    """An upstream asset outside the selection that did not succeed over the whole range: never, naming its
    missing spans (three at most, then an ellipsis); a selected upstream is not asked about."""
    graph = {"mid.a": ["raw.u", "mid.b"], "mid.b": ["raw.v"]}
    pipeline = pipeline_of("raw.u", "raw.v", "mid.a", "mid.b", upstream=graph)
    covered = [run({"raw.u": (START, START + 2 * DAY)}), run({"raw.u": (START + 3 * DAY, START + 5 * DAY)}),
               run({"raw.v": (START, START + 5 * DAY)})]  # fmt: skip
    check = upstream_coverage(facts_of(fact("mid.a"), fact("mid.b"), pipeline=pipeline, history=History(covered)))
    assert judged(check) == (
        "fail", "never", "missing upstream intervals: raw.u: 2024-01-03T00:00:00Z → 2024-01-04T00:00:00Z",
    )  # fmt: skip
    assert check.evidence == {"missing": {"raw.u": ["2024-01-03T00:00:00Z → 2024-01-04T00:00:00Z"]}}
    days = [run({"raw.u": (START + d * DAY, START + d * DAY + HOUR)}) for d in range(5)]
    many = upstream_coverage(facts_of(fact("mid.a"), pipeline=pipeline_of(upstream={"mid.a": ["raw.u", "raw.v"]}),
                                      history=History(days)))  # fmt: skip
    assert many.detail == (
        "missing upstream intervals: raw.u: 2024-01-01T01:00:00Z → 2024-01-02T00:00:00Z, 2024-01-02T01:00:00Z → "
        "2024-01-03T00:00:00Z, 2024-01-03T01:00:00Z → 2024-01-04T00:00:00Z …; raw.v: 2024-01-01T00:00:00Z → "
        "2024-01-06T00:00:00Z"
    )
    assert len(many.evidence["missing"]["raw.u"]) == 5
    three = [run({"raw.u": (START + d * DAY, START + d * DAY + HOUR)}) for d in (0, 1, 2, 4)]
    three.append(run({"raw.u": (START + 2 * DAY, START + 4 * DAY)}))
    only_u = pipeline_of(upstream={"mid.a": ["raw.u"]})
    exactly = upstream_coverage(facts_of(fact("mid.a"), pipeline=only_u, history=History(three)))
    assert exactly.detail.count("→") == 3 and not exactly.detail.endswith("…")
    four = [run({"raw.u": (START + d * DAY, START + d * DAY + HOUR)}) for d in range(4)]
    four.append(run({"raw.u": (START + 4 * DAY, START + 5 * DAY)}))
    cut = upstream_coverage(facts_of(fact("mid.a"), pipeline=only_u, history=History(four)))
    assert cut.detail.count("→") == 3 and cut.detail.endswith(" …") and len(cut.evidence["missing"]["raw.u"]) == 4


def test_an_upstream_that_succeeded_everywhere_passes_and_a_bypass_says_it_let_nothing_through():
    """Covered: passed; with --ignore-dependencies or dependency_gates warn/off the line says the bypass let
    nothing through; with no upstream at all there is nothing to say."""
    pipeline = pipeline_of(upstream={"mid.a": ["raw.u"]})
    history = History([run({"raw.u": (START - DAY, START + 6 * DAY)})])
    covered = upstream_coverage(facts_of(fact("mid.a"), pipeline=pipeline, history=history))
    assert judged(covered) == ("pass", "auto", "raw.u succeeded over the whole range")
    assert covered.evidence == {"upstream": ["raw.u"]}
    ignored = facts_of(fact("mid.a"), pipeline=pipeline, history=history, guard=GuardOptions(ignore_dependencies=True))
    assert upstream_coverage(ignored).detail == (
        "raw.u succeeded over the whole range (--ignore-dependencies let nothing through)"
    )
    for gates in ("warn", "off"):
        settings = GuardrailSettings(dependency_gates=gates)
        check = upstream_coverage(facts_of(fact("mid.a"), pipeline=pipeline, history=history, settings=settings))
        assert check.detail == f"raw.u succeeded over the whole range (dependency_gates: {gates} let nothing through)"
    alone = upstream_coverage(facts_of(fact("mid.a"), pipeline=pipeline_of()))
    assert judged(alone) == ("pass", "auto", "every upstream asset is in the selection")
    assert judged(upstream_coverage(facts_of(command=True))) == (
        "n/a", "auto", "a command's inputs are not known to backfill",
    )  # fmt: skip


def test_a_bypassed_gate_over_gaps_needs_approval_and_records_them():
    """--ignore-dependencies (which wins over the settings) or dependency_gates warn/off over a gap: approval,
    the gaps kept as the gate's bypass; enforce: never."""
    pipeline = pipeline_of(upstream={"mid.a": ["raw.u"]})
    gap = {"raw.u": ["2024-01-01T00:00:00Z → 2024-01-06T00:00:00Z"]}
    warn_gates = GuardrailSettings(dependency_gates="warn")
    bypass = GuardOptions(ignore_dependencies=True)
    ignored = upstream_coverage(facts_of(fact("mid.a"), pipeline=pipeline, settings=warn_gates, guard=bypass))
    assert judged(ignored) == (
        "fail", "approval",
        "--ignore-dependencies lets missing upstream intervals through: raw.u: 2024-01-01T00:00:00Z → "
        "2024-01-06T00:00:00Z",
    )  # fmt: skip
    assert ignored.evidence == {"missing": gap, "gate_bypass": gap}
    warn = upstream_coverage(
        facts_of(fact("mid.a"), pipeline=pipeline, settings=GuardrailSettings(dependency_gates="off"))
    )
    assert judged(warn)[:2] == ("fail", "approval")
    assert warn.detail.startswith("dependency_gates: off lets missing upstream intervals through: raw.u: ")
    enforce = upstream_coverage(
        facts_of(fact("mid.a"), pipeline=pipeline, settings=GuardrailSettings(dependency_gates="enforce"))
    )
    assert judged(enforce)[:2] == ("fail", "never") and "gate_bypass" not in enforce.evidence


# ---------------------------------------------------------------- downstream_awareness


def live(*, target: str, assets=(), files=(), windows=((START, START + DAY),), backfill_id="theirs") -> LiveWork:
    return LiveWork(kind=WorkKind.BACKFILL, target=target, shown="sales", backfill_id=backfill_id, assets=assets,
                    files=files, windows=windows, pid=4242, host="h1")  # fmt: skip


def test_nothing_running_beside_passes_naming_the_downstream_left_out():
    """No conflict: passed, naming the unselected downstream assets (sorted) or saying there are none; a
    command says so of its own kind."""
    facts = facts_of(fact("mid.a"), fact("mid.z", selected=False), fact("mid.y", selected=False))
    check = downstream_awareness(facts)
    assert judged(check) == (
        "pass", "auto",
        "nothing else is running on these assets or their warehouse; downstream not selected: mid.y, mid.z",
    )  # fmt: skip
    assert check.evidence == {"downstream": ["mid.y", "mid.z"]}
    alone = downstream_awareness(facts_of(fact("mid.a")))
    assert (
        alone.detail
        == "nothing else is running on these assets or their warehouse; no downstream asset outside the selection"
    )
    assert judged(downstream_awareness(facts_of(command=True))) == (
        "pass", "auto", "no other backfill of this command is running over these intervals",
    )  # fmt: skip


def test_work_running_on_the_same_target_or_a_held_file_blocks_the_run():
    """Another backfill of this pipeline over an overlapping window, and a DuckDB file open for writing: never,
    one sentence each, joined; our own entry (a crashed executor's) is not in our way."""
    ours = pipeline_key(Path("/p/sales"))
    other = live(target=ours)
    held = Held(Path("/w.duckdb"), "PID 77")
    check = downstream_awareness(facts_of(fact("mid.a"), fact("mid.d", selected=False), live=[other], held=[held]))
    first = (
        "wait for backfill theirs, PID 4242 on h1: it runs sales (the same target) over 2024-01-01T00:00:00Z → "
        "2024-01-02T00:00:00Z"
    )
    second = "/w.duckdb is open for writing by PID 77 (a `backfill run`?): wait for it to finish"
    assert judged(check) == ("fail", "never", f"{first}; {second}")
    assert check.evidence == {"downstream": ["mid.d"], "blockers": [first, second]}
    only_held = downstream_awareness(facts_of(fact("mid.a"), held=[held]))
    assert only_held.detail == second
    own = downstream_awareness(facts_of(fact("mid.a"), live=[live(target=ours, backfill_id="ours")]))
    assert own.status == "pass"
    elsewhere = downstream_awareness(facts_of(fact("mid.a"), live=[live(target="pipeline:/p/other")]))
    assert elsewhere.status == "pass"
    command = facts_of(command=True, live=[live(target=command_key({"template": "load {start}"}, "/w"))])
    assert downstream_awareness(command).tier == "never"


# ---------------------------------------------------------------- size_and_duration


def test_the_estimate_is_the_median_times_the_partitions_over_the_parallelism():
    """No succeeded run that ran: n/a with the tables' size; otherwise the estimate, its parts, and the tables'
    total size; over a minute it is a duration; a parallelism below one counts as one."""
    sizes = {"/a.duckdb": 1536, "/b.duckdb": 512}
    none = size_and_duration(facts_of(fact("mid.a"), database_bytes=sizes,
                                      history=History([run(ran=False), run(status="failed")])))  # fmt: skip
    assert judged(none) == ("n/a", "auto", "no succeeded run to estimate from; tables now 2.0 KiB")
    assert none.evidence == {"partitions": 5, "parallel": 1, "database_bytes": 2048}
    history = History([run(duration=1.0), run(duration=2.0), run(duration=9.0), run(duration=50.0, ran=False)])
    check = size_and_duration(facts_of(fact("mid.a"), parallel=2, history=history, database_bytes=sizes))
    assert judged(check) == ("pass", "auto", "~5.0s (5 × median 2.00s ÷ 2); tables 2.0 KiB")
    assert check.evidence == {"partitions": 5, "parallel": 2, "database_bytes": 2048, "median_seconds": 2.0,
                              "estimate_seconds": 5.0}  # fmt: skip
    long = size_and_duration(facts_of(fact("mid.a"), days=61, parallel=0, history=History([run(duration=1.23456)])))
    assert long.detail == "~1m15s (61 × median 1.23s ÷ 1); tables 0 B"
    assert long.evidence["median_seconds"] == 1.235 and long.evidence["estimate_seconds"] == 75.3
    just = size_and_duration(facts_of(fact("mid.a"), days=60, history=History([run(duration=1.0)])))
    assert just.detail.startswith("~1m (60 ×")
    under = size_and_duration(facts_of(fact("mid.a"), days=59, history=History([run(duration=1.0)])))
    assert under.detail.startswith("~59.0s (59 ×")


def test_a_long_or_large_backfill_needs_approval():
    """Above max_hours or max_gib: approval, naming both limits; exactly at them: passed."""
    hour = History([run(duration=720.0)])
    at = size_and_duration(facts_of(fact("mid.a"), history=hour))
    assert judged(at) == ("pass", "auto", "~1h (5 × median 720.00s ÷ 1); tables 0 B")
    over = size_and_duration(facts_of(fact("mid.a"), history=History([run(duration=720.2)])))
    assert judged(over) == (
        "fail",
        "approval",
        "large: ~1h1s (5 × median 720.20s ÷ 1); tables 0 B (limits 1 h, 1 GiB)",
    )
    assert over.evidence == {"partitions": 5, "parallel": 1, "database_bytes": 0, "median_seconds": 720.2,
                             "estimate_seconds": 3601.0}  # fmt: skip
    gib = 1024**3
    assert (
        size_and_duration(facts_of(fact("mid.a"), history=History([run()]), database_bytes={"/a": gib})).status
        == "pass"
    )
    big = size_and_duration(facts_of(fact("mid.a"), history=History([run()]), database_bytes={"/a": gib + 1}))
    assert judged(big)[:2] == ("fail", "approval") and big.detail.endswith("tables 1.0 GiB (limits 1 h, 1 GiB)")
    custom = limits(max_hours=0.5, max_gib=2.5)
    assert size_and_duration(facts_of(fact("mid.a"), history=hour, settings=custom)).detail.endswith(
        "(limits 0.5 h, 2.5 GiB)"
    )


# ---------------------------------------------------------------- row_count_sanity


def test_row_counts_are_sampled_only_for_sql_tables():
    """A command, or a selection without an SQL table (a view, Python, a downstream table): n/a."""
    assert judged(row_count_sanity(facts_of(command=True))) == (
        "n/a", "auto", "a command's output is not known to backfill",
    )  # fmt: skip
    others = facts_of(fact("mid.v", table=False), fact("mid.py", type_="python"), fact("mid.d", selected=False))
    assert judged(row_count_sanity(others)) == ("n/a", "auto", "no selected SQL table asset to sample")


def test_a_sample_far_above_history_needs_approval_and_one_without_history_a_person():
    """Above row_ratio × the historical mean (a mean below one counts as one): approval, whatever else is
    undecided; a failed sample or no history: human-only "could not decide"; within: passed, listing them."""
    high = fact("mid.high", sample_rows=1001, past_rows=[100, 100])
    edge = fact("mid.edge", sample_rows=1000, past_rows=[50, 150])
    tiny = fact("mid.tiny", sample_rows=10, past_rows=[0])
    failing = fact("mid.failing", sample_error="no such table")
    new = fact("mid.new", sample_rows=1200)
    check = row_count_sanity(facts_of(high, edge, tiny, failing, new))
    assert judged(check) == ("fail", "approval", "mid.high: 1,001 rows per partition vs 100 before (> 10×)")
    assert check.evidence == {"assets": {
        "mid.high": {"sample_rows": 1001, "estimated_rows": 5005, "historical_mean": 100.0},
        "mid.edge": {"sample_rows": 1000, "estimated_rows": 5000, "historical_mean": 100.0},
        "mid.tiny": {"sample_rows": 10, "estimated_rows": 50, "historical_mean": 0.0},
        "mid.failing": {"sample_error": "no such table"},
        "mid.new": {"sample_rows": 1200, "estimated_rows": 6000},
    }}  # fmt: skip
    thirds = row_count_sanity(facts_of(fact("mid.t", sample_rows=1, past_rows=[1, 2, 2])))
    assert thirds.evidence == {"assets": {"mid.t": {"sample_rows": 1, "estimated_rows": 5, "historical_mean": 1.667}}}
    two_high = row_count_sanity(facts_of(high, fact("mid.higher", sample_rows=5000, past_rows=[10])))
    assert two_high.detail == (
        "mid.high: 1,001 rows per partition vs 100 before (> 10×); mid.higher: 5,000 rows per partition vs 10 "
        "before (> 10×)"
    )
    over_one = row_count_sanity(facts_of(fact("mid.tiny", sample_rows=11, past_rows=[0, 1])))
    assert over_one.detail == "mid.tiny: 11 rows per partition vs 0 before (> 10×)"
    undecided = row_count_sanity(facts_of(edge, failing, new))
    assert judged(undecided) == (
        "fail", "human-only",
        "could not decide: mid.failing: sample failed (no such table); mid.new: no history to compare its sample "
        "of 1,200 rows with",
    )  # fmt: skip
    assert undecided.evidence == {"assets": {
        "mid.edge": {"sample_rows": 1000, "estimated_rows": 5000, "historical_mean": 100.0},
        "mid.failing": {"sample_error": "no such table"},
        "mid.new": {"sample_rows": 1200, "estimated_rows": 6000},
    }}  # fmt: skip
    fine = row_count_sanity(facts_of(edge, tiny, settings=limits(row_ratio=10)))
    assert judged(fine) == ("pass", "auto", "samples within 10× of history for mid.edge, mid.tiny")
    assert fine.evidence == {"assets": {
        "mid.edge": {"sample_rows": 1000, "estimated_rows": 5000, "historical_mean": 100.0},
        "mid.tiny": {"sample_rows": 10, "estimated_rows": 50, "historical_mean": 0.0},
    }}  # fmt: skip
    tight = row_count_sanity(facts_of(edge, settings=limits(row_ratio=2.5)))
    assert tight.detail == "mid.edge: 1,000 rows per partition vs 100 before (> 2.5×)"
    assert row_count_sanity(facts_of(fact("mid.zero", sample_rows=0))).status == "fail"


# ---------------------------------------------------------------- connector_quotas


def test_a_backfill_that_would_exhaust_a_connection_s_daily_quota_is_never_run():
    """Today's runs in this environment plus this backfill's partitions above the quota: never; at it: passed;
    runs of another day or environment are not counted; a quota on a connection no selected asset uses, or
    none at all, is n/a."""
    now = START + 10 * DAY + 12 * HOUR
    today = START + 10 * DAY + HOUR
    runs = [run(started=today), run(started=today + HOUR), run(started=today - 2 * HOUR),
            run(started=today, environment="prod")]  # fmt: skip
    quota = GuardrailSettings(quotas={"db": 7, "other": 1})
    at = connector_quotas(facts_of(fact("mid.a"), now=now, history=History(runs), settings=quota))
    assert judged(at) == ("pass", "auto", "within the daily quotas")
    assert at.evidence == {"quotas": {"db": {"quota": 7, "runs_today": 2, "this_backfill": 5}}}
    over = GuardrailSettings(quotas={"db": 6})
    refused = connector_quotas(facts_of(fact("mid.a"), now=now, history=History(runs), settings=over))
    assert judged(refused) == ("fail", "never", "would exhaust the day's quota: db: 2 runs today + 5 > quota 6")
    assert refused.evidence == {"quotas": {"db": {"quota": 6, "runs_today": 2, "this_backfill": 5}}}
    one_of_two = GuardrailSettings(quotas={"wh": 1, "db": 6})
    wh = connector_quotas(facts_of(fact("mid.a"), fact("mid.b", connection="wh"), now=now, settings=one_of_two))
    assert wh.detail == "would exhaust the day's quota: wh: 0 runs today + 5 > quota 1"
    assert list(wh.evidence["quotas"]) == ["db", "wh"]
    two = GuardrailSettings(quotas={"wh": 1, "db": 4})
    both = connector_quotas(facts_of(fact("mid.a"), fact("mid.b", connection="wh"), now=now, settings=two))
    assert both.detail == (
        "would exhaust the day's quota: db: 0 runs today + 5 > quota 4; wh: 0 runs today + 5 > quota 1"
    )
    first_unused = GuardrailSettings(quotas={"aaa": 1, "db": 6})
    assert (
        connector_quotas(facts_of(fact("mid.a"), now=now, history=History(runs), settings=first_unused)).status
        == "fail"
    )
    unused = connector_quotas(facts_of(fact("mid.a"), now=now, settings=GuardrailSettings(quotas={"other": 1})))
    assert judged(unused) == ("n/a", "auto", "no selected asset uses a connection with a quota")
    downstream_only = facts_of(fact("mid.a", connection="x"), fact("mid.d", selected=False), now=now, settings=quota)
    assert connector_quotas(downstream_only).status == "n/a"
    assert judged(connector_quotas(facts_of(fact("mid.a"), now=now))) == (
        "n/a", "auto", "no connection declares a daily_run_quota",
    )  # fmt: skip
    assert connector_quotas(facts_of(command=True, now=now, settings=quota)).status == "n/a"


def test_the_day_of_a_quota_is_the_backfill_s_zone_s_day_and_a_command_s_runs_have_no_environment():
    """Runs recorded without an environment count for a request without one; the day starts at midnight in
    the run's zone."""
    now = START + 10 * DAY + 9 * HOUR
    midnight = START + 10 * DAY
    runs = [run(started=midnight + 2 * HOUR, environment=None), run(started=midnight - 1, environment=None)]
    quota = GuardrailSettings(quotas={"db": 5})
    facts = facts_of(fact("mid.a"), now=now, history=History(runs), settings=quota, environment=None)
    assert connector_quotas(facts).evidence["quotas"]["db"]["runs_today"] == 1
    facts.request.spec.zone = ZoneInfo("Pacific/Kiritimati")  # UTC+14: the earlier run is the same local day
    assert connector_quotas(facts).evidence["quotas"]["db"]["runs_today"] == 2
    late = START + 10 * DAY + 12 * HOUR  # 02:00 on the 12th in Kiritimati, still the 11th in UTC
    facts.request.now = late
    facts.history = History([run(started=late - HOUR, environment=None)])  # 01:00 on the 12th there
    assert connector_quotas(facts).evidence["quotas"]["db"]["runs_today"] == 1


def test_a_run_seconds_after_midnight_is_today_s():
    """Microseconds are divided by exactly a million: a run 30 s into the day, seen 60 s into it, is today's."""
    midnight = START + 10 * DAY
    facts = facts_of(fact("mid.a"), now=midnight + 60_000_000, settings=GuardrailSettings(quotas={"db": 9}),
                     history=History([run(started=midnight + 30_000_000)]))  # fmt: skip
    assert connector_quotas(facts).evidence["quotas"]["db"]["runs_today"] == 1


# ---------------------------------------------------------------- environment_level and verification_mode


def test_production_needs_approval_for_every_run_and_other_levels_say_where_they_come_from():
    """production: approval, naming the environment; standard: passed with its source; a command is
    'command'."""
    production = GuardrailSettings(level="production", level_source="the environment's name")
    check = environment_level(facts_of(fact("mid.a"), settings=production, environment="prod-eu"))
    assert judged(check) == (
        "fail",
        "approval",
        ("prod-eu: production guardrails (the environment's name): every run needs approval"),
    )
    assert check.name == "environment"
    assert check.evidence == {"level": "production", "from": "the environment's name"}
    standard = environment_level(facts_of(command=True, environment=None))
    assert judged(standard) == ("pass", "auto", "command: standard guardrails (default)")
    assert standard.evidence == {"level": "standard", "from": "default"}


def test_verification_off_needs_approval_and_a_command_without_its_own_check_is_warned():
    """--verify off: approval for either target; a command with --verify-command passes naming the mode, one
    without is warned; a pipeline passes naming the mode."""
    off = verification_mode(facts_of(fact("mid.a"), guard=GuardOptions(verify="off")))
    assert judged(off) == ("fail", "approval", "--verify off: partitions are not verified")
    assert off.name == "verification"
    assert (
        verification_mode(facts_of(command=True, guard=GuardOptions(verify="off", verify_command="x"))).tier
        == "approval"
    )
    command = verification_mode(facts_of(command=True, guard=GuardOptions(verify="warn", verify_command="check")))
    assert judged(command) == ("pass", "auto", "--verify-command runs after each partition (warn)")
    assert judged(verification_mode(facts_of(command=True))) == (
        "warn", "auto", "no --verify-command: a command's partitions are verified by exit code only",
    )  # fmt: skip
    assert judged(verification_mode(facts_of(fact("mid.a"), guard=GuardOptions(verify="warn")))) == (
        "pass", "auto", "each partition verified against its run record and history (warn)",
    )  # fmt: skip


# ---------------------------------------------------------------- run_checks


def outcome(check: PreflightCheck) -> tuple[str, str, str]:
    return str(check.status), str(check.tier), check.detail


def test_every_check_runs_in_order_and_certainty_closes_the_list():
    """A command's checks under their report names, in their order, ending with certainty when every check
    could decide."""
    names = [check.name for check in run_checks(facts_of(command=True, template="true {start}"))]
    assert names == [
        "target_valid", "history_exists", "range_size", "interval_count", "range_in_past", "interval_semantics",
        "materialization", "reversibility", "layer_risk", "upstream_coverage", "downstream_awareness",
        "size_and_duration", "row_count_sanity", "connector_quotas", "environment", "verification", "splitting",
        "certainty",
    ]  # fmt: skip
    last = run_checks(facts_of(command=True, template="true {start}"))[-1]
    assert outcome(last) == ("pass", "auto", "every check could decide")


def test_a_check_that_errors_or_lacks_its_facts_could_not_decide(monkeypatch):
    """An exception is human-only "could not decide" with its first line (or its type when it has no text);
    a fact that could not be gathered turns a pass into the same, keeping the evidence, but never softens a
    failure; certainty then lists the undecided ones."""

    def exploding(facts):
        raise ValueError("the table is gone\nsecond line")

    def silent(facts):
        raise KeyError()

    def blank(facts):
        raise RuntimeError("   ")

    def fine(facts):
        return passed("fine", "ok", rows=3)

    def refusing(facts):
        from engine.guardrails.tiers import failed

        return failed("refusing", "never", "no")

    def environment_level(facts):
        raise OSError("the file vanished")

    monkeypatch.setattr(preflight_checks, "CHECKS", (exploding, silent, blank, fine, refusing, environment_level))
    facts = facts_of(command=True)
    facts.errors = {"fine": "the file is held", "refusing": "also missing"}
    results = run_checks(facts)
    assert [outcome(r) for r in results] == [
        ("fail", "human-only", "could not decide: the table is gone"),
        ("fail", "human-only", "could not decide: KeyError"),
        ("fail", "human-only", "could not decide: RuntimeError"),
        ("fail", "human-only", "could not decide: the file is held"),
        ("fail", "never", "no"),
        ("fail", "human-only", "could not decide: the file vanished"),
        ("fail", "human-only", "5 check(s) could not decide: exploding, silent, blank, fine, environment"),
    ]  # fmt: skip
    assert results[3].name == "fine" and results[3].evidence == {"rows": 3}
    assert results[-1].name == "certainty"
    assert results[-2].name == "environment"  # a check's report name, even when it raised
    assert results[-1].evidence == {"undecided": ["exploding", "silent", "blank", "fine", "environment"]}


def test_a_human_only_failure_that_decided_is_not_counted_as_undecided(monkeypatch):
    """Only a line starting "could not decide" makes certainty fail; a deliberate human-only refusal does not."""
    from engine.guardrails.tiers import failed

    monkeypatch.setattr(
        preflight_checks, "CHECKS", (lambda facts: failed("history_exists", "human-only", "never ran"),)
    )
    results = run_checks(facts_of(command=True))
    assert [r.name for r in results] == ["history_exists", "certainty"]
    assert outcome(results[-1]) == ("pass", "auto", "every check could decide")
