"""Bad input is one line and exit 2 before anything is saved: never a traceback, never silently the default."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from tests.backfills import records
from tests.conftest import backfill_argv, run_backfill
from tests.guard_flags import GUARD, REASON

DAY = ("--start-date", "2024-01-01", "--end-date", "2024-01-02")


def refused(work, home, *args, env=None) -> str:
    result = run_backfill(*REASON, *args, cwd=work, env={**home, **(env or {})})
    assert result.returncode == 2, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert not (work / "logs" / "backfills").exists() or not any((work / "logs" / "backfills").iterdir())
    return lines[0]


@pytest.mark.parametrize("date", ["١٢٣٤-01-01", "１２３４-01-01", "2024-０1-01"])
def test_dates_in_non_ascii_digits_are_refused(work, home, date):
    """Python's \\d matches Arabic-Indic and full-width digits; a date never does here."""
    line = refused(work, home, "--command", "echo {start}", "--start-date", date, "--end-date", "2024-01-02")
    assert f"--start-date {date!r} is not a date or timestamp" in line


@pytest.mark.parametrize(
    ("flag", "expected"),
    [
        ("--timezone", "unknown time zone ''"),
        ("--partition", "--partition '' is not a partition unit"),
        ("--name", "--name '' is empty"),
        ("--timeout", "--timeout '' is empty"),
    ],
)
def test_an_empty_value_is_refused_rather_than_taken_as_the_default(work, home, flag, expected):
    """--timezone '', --partition '', --name '', --timeout '' are mistakes, not 'use the default'."""
    assert expected in refused(work, home, "--command", "echo {start}", *DAY, flag, "")


@pytest.mark.parametrize(
    ("flag", "expected"),
    [("--asset", "--asset is only accepted together with --continue ID"), ("--ids-from", "--ids-from '' is empty")],
)
def test_an_empty_value_of_an_option_of_continue_is_refused_without_continue(work, home, flag, expected):
    """--asset '' or --ids-from '' on a new backfill is refused, not taken as not given (--asset '' ran)."""
    assert expected in refused(work, home, "--command", "echo {start}", *DAY, flag, "")


def test_a_time_zone_name_too_long_for_a_file_name_is_an_unknown_zone(work, home):
    """A zone name the zone database cannot even look up (longer than a file name may be) is bad input, exit 2."""
    name = "Europe/" + "x" * 300
    line = refused(work, home, "--command", "echo {start}", *DAY, "--timezone", name)
    assert line.startswith(f"backfill: error: unknown time zone {name!r}: use UTC or an IANA name"), line


@pytest.mark.parametrize(
    "args",
    [
        ("list", "--state-dir", "s" * 300),
        ("show", "x", "--state-dir", "s" * 300),
        ("audit", "x", "--state-dir", "s" * 300),
        ("mark", "x", "--status", "skipped", "--reason", "r", "--state-dir", "s" * 300),
        ("reconcile", "--state-dir", "s" * 300),
        ("--command", "echo {start}", *DAY, "--config-file", "c" * 300),
        ("--continue", "x", "--ids-from", "i" * 300),
    ],
    ids=["list", "show", "audit", "mark", "reconcile", "config-file", "ids-from"],
)
def test_a_path_too_long_for_a_file_name_is_refused_by_every_verb(work, home, args):
    """A path option whose name the system cannot look up is bad input (exit 2) naming it, not an internal error
    (show, list, audit, mark and reconcile exited 1 with "File name too long")."""
    flag = next(arg for arg in args if arg in ("--state-dir", "--config-file", "--ids-from"))
    result = run_backfill(*args, cwd=work, env=home)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr, result.stderr
    assert f"{flag} '" in result.stderr and "names no file (File name too long): give a path" in result.stderr


@pytest.mark.parametrize("verb", [("run", "pipeline"), ("pipeline", "--dry-run", *REASON)], ids=["run", "backfill"])
def test_a_config_file_in_the_environment_too_long_to_look_up_is_refused(shop, home, verb):
    """BRUIN_CONFIG_FILE of 300 characters: one line naming it, exit 2 (it was an internal error, exit 1)."""
    result = run_backfill(*verb, *DAY, cwd=shop, env={**home, "BRUIN_CONFIG_FILE": "c" * 300})
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.count("\n") == 1, result.stderr
    assert f"BRUIN_CONFIG_FILE '{'c' * 77}...' cannot be looked up (File name too long)" in result.stderr


def test_an_empty_environment_is_refused(shop, home):
    """--environment '' on a pipeline target is bad input, not the default environment."""
    assert "--environment '' is empty" in refused(shop, home, "pipeline", *DAY, "--environment", "")


@pytest.mark.parametrize(
    "options",
    [
        ("--selector", "raw.orders"),
        ("--tag", "x"),
        ("--var", "x=1"),
        ("--environment", "dev"),
        ("--workers", "3"),
        ("--config-file", ".bruin.yml"),
        ("--downstream",),
        ("--only", "main"),
        ("--launcher", "warm"),
        ("--launcher", "exec"),
        ("--force",),
    ],
)
def test_pipeline_options_mean_nothing_for_a_command_and_are_refused(work, home, options):
    """Options of pipeline runs given to a --command backfill are named and refused (they used to change IDs);
    --force, which allows an environment named like production, was accepted in silence (a command has none)."""
    line = refused(work, home, "--command", "echo {start}", *DAY, *options)
    assert f"{options[0]} means nothing for a --command backfill" in line


@pytest.mark.parametrize("option", [("--launcher", "warm"), ("--workers", "4")])
def test_pipeline_controls_are_refused_when_resuming_a_command_backfill(work, home, option):
    """--continue of a command backfill with --launcher or --workers: one line, exit 2, nothing run."""
    assert run_backfill(*GUARD, "--command", "true", *DAY, cwd=work, env=home).returncode == 0
    [backfill] = list((work / "logs" / "backfills").iterdir())
    result = run_backfill(*REASON, "--continue", backfill.name, "--rerun", "all", *option, cwd=work, env=home)
    assert result.returncode == 2
    assert result.stderr == (
        f"backfill: error: {option[0]} means nothing for a --command backfill (pipeline partitions only): "
        "leave it out\n"
    )


def test_bruin_vars_in_the_environment_do_not_change_a_command_backfills_partition_ids(work, home):
    """BRUIN_VARS is a pipeline input: a command backfill's partition IDs are the same with or without it."""
    import json

    def ids(env):
        result = run_backfill(
            "--command", "echo {start}", *DAY, "--dry-run", "--output", "json", cwd=work, env={**home, **env}
        )
        return [p["id"] for p in json.loads(result.stdout)["partitions"]]

    assert ids({}) == ids({"BRUIN_VARS": '{"region": "eu"}'})


@pytest.mark.parametrize("grace", ["nan", "inf", "-1", "1e9", "٣", ""])
def test_a_stop_grace_that_would_disable_sigkill_is_refused(work, home, grace):
    """BACKFILL_STOP_GRACE nan/inf would never SIGKILL; out of range or non-ASCII is refused before saving."""
    if grace == "":
        result = run_backfill(*GUARD, "--command", "true", *DAY, cwd=work, env={**home, "BACKFILL_STOP_GRACE": ""})
        assert result.returncode == 0  # unset or empty: the default 30 s
        return
    line = refused(work, home, "--command", "true", *DAY, env={"BACKFILL_STOP_GRACE": grace})
    assert line == f"backfill: error: BACKFILL_STOP_GRACE {grace!r} is not a number of seconds from 0 to 3600"


def test_a_plan_over_the_limit_is_refused_with_its_count_dry_runs_too(work, home):
    """--partition 1us over two days (1.7e11 partitions): refused with the count and the limit, a dry run too,
    before any directory is written; BACKFILL_MAX_PARTITIONS raises the limit (up to what the status arrays
    hold) and a bad value of it is refused; list keeps working."""
    args = ("--command", "echo {start}", "--start-date", "2024-01-01", "--end-date", "2024-01-02", "--partition", "1us")
    expected = (
        "backfill: error: the plan has 172,800,000,000 partitions, over the limit of 10,000,000 "
        "(BACKFILL_MAX_PARTITIONS, at most 50,000,000): use a coarser --partition or a shorter range"
    )
    assert refused(work, home, *args) == expected
    assert refused(work, home, *args, "--dry-run") == expected
    seconds = (
        "--command",
        "echo {start}",
        "--start-date",
        "2024-01-01",
        "--end-date",
        "2024-01-02",
        "--partition",
        "1s",
    )
    lowered = refused(work, home, *seconds, "--dry-run", env={"BACKFILL_MAX_PARTITIONS": "1000"})
    assert "the plan has 172,800 partitions, over the limit of 1,000" in lowered
    raised = run_backfill(
        *seconds, "--dry-run", "--limit", "1", cwd=work, env={**home, "BACKFILL_MAX_PARTITIONS": "200000"}
    )
    assert raised.returncode == 0, raised.stderr
    too_high = refused(work, home, *seconds, "--dry-run", env={"BACKFILL_MAX_PARTITIONS": "50000001"})
    assert "BACKFILL_MAX_PARTITIONS '50000001' is not a whole number of partitions from 1 to 50,000,000" in too_high
    assert run_backfill("list", "--output", "text", cwd=work, env=home).returncode == 0


COMMAND = ("--command", "echo {start}")


@pytest.mark.parametrize(
    ("args", "says"),
    [
        ((*COMMAND, "--start-date", " 2024-01-01", "--end-date", "2024-01-02"),
         "--start-date ' 2024-01-01' has spaces around it"),
        ((*COMMAND, "--start-date", "2024-01-01", "--end-date", "2024-01-02\t"),
         "--end-date '2024-01-02\\t' has spaces around it"),
        ((*COMMAND, *DAY, "--max-parallel", " 4"), "--max-parallel ' 4' has spaces around it: use 1 to"),
        ((*COMMAND, *DAY, "--retries", "2 "), "--retries '2 ' has spaces around it"),
        ((*COMMAND, *DAY, "--partition", " 6h"), "--partition ' 6h' has spaces around it"),
        ((*COMMAND, *DAY, "--partition", "6h "), "--partition '6h ' has spaces around it"),
        ((*COMMAND, *DAY, "--timeout", " 5s"), "--timeout ' 5s' has spaces around it"),
        ((*COMMAND, *DAY, "--partition", "9223372036854775807h"),
         "--partition '9223372036854775807h' is longer than 100 years"),
        ((*COMMAND, *DAY, "--timezone", "localtime"), "time zone 'localtime' is this machine's zone file"),
        (("--command", "echo {start", *DAY), "--command argument '{start' has an unbalanced brace"),
        (("--command", "echo start}", *DAY), "--command argument 'start}' has an unbalanced brace"),
        (("--command", "echo {{start}", *DAY), "--command argument '{{start}' has an unbalanced brace"),
    ],
    ids=["start-space", "end-tab", "parallel", "retries", "unit-lead", "unit-trail", "timeout", "huge-unit",
         "localtime", "open-brace", "close-brace", "half-escaped"],
)  # fmt: skip
def test_nonsense_that_used_to_pass_is_one_line_and_exit_2(work, home, args, says):
    """Whitespace around dates, numbers and units, an absurd unit, a machine's zone file for a zone name and an
    unbalanced brace in the template: refused in one line naming the value, in a dry run as in a run."""
    assert says in refused(work, home, *args)
    assert says in refused(work, home, *args, "--dry-run")


@pytest.mark.parametrize(
    ("args", "says"),
    [
        ((*COMMAND, *DAY, "--state-dir", ""), "--state-dir '' is empty: give a path"),
        ((*COMMAND, *DAY, "--state-dir", " "), "--state-dir ' ' is empty: give a path"),
        ((*COMMAND, *DAY, "--state-dir", "\t"), "--state-dir '\\t' is empty: give a path"),
        ((*COMMAND, *DAY, "--state-dir", "state "), "--state-dir 'state ' has spaces around it: give 'state'"),
        ((*COMMAND, *DAY, "--ids-from", ""), "--ids-from '' is empty: give a path"),
        ((*COMMAND, *DAY, "--config-file", ""), "--config-file '' is empty: give a path"),
        (("--continue", ""), "--continue '' is empty"),
        ((*COMMAND, *DAY, "--dry-run", "--output", "json", "--offset", "9" * 20),
         "--offset '99999999999999999999' is out of range: use 0 to 50,000,000"),
        ((*COMMAND, *DAY, "--dry-run", "--output", "json", "--limit", "50000001"),
         "--limit '50000001' is out of range: use 0 to 50,000,000"),
        ((*COMMAND, *DAY, ""), "target '' is empty: give a pipeline directory or asset file"),
        ((*COMMAND, *DAY, "x", ""), "unexpected argument ''"),
    ],
    ids=["state-empty", "state-space", "state-tab", "state-trailing", "ids-from-empty", "config-empty",
         "continue-empty", "offset-huge", "limit-huge", "empty-target", "empty-extra"],
)  # fmt: skip
def test_an_empty_or_padded_path_or_id_and_an_absurd_page_are_refused(work, home, args, says):
    """Found by fuzzing: an empty --state-dir or --ids-from was read as not given, `--state-dir ' '` made a
    directory named by a space, `reconcile ''` reconciled every backfill, and a 20-digit --offset was a
    traceback; each is now one line naming the value, exit 2, and nothing made."""
    before = sorted(path.name for path in work.iterdir())
    assert says in refused(work, home, *args)
    assert sorted(path.name for path in work.iterdir()) == before


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("pipeline", *DAY, "--exclude-tag", ""), "--exclude-tag '' is empty: give a tag or a glob of tags"),
        (("pipeline", *DAY, "-x", "raw "), "--exclude-tag 'raw ' has spaces around it: give 'raw'"),
        (("pipeline", *DAY, "--selector", " raw"), "--selector ' raw' has spaces around it: give 'raw'"),
        (("pipeline", *DAY, "--launcher", ""), "--launcher '' is empty: give warm, exec, dask or dask-local:N"),
        (("run", "pipeline", *DAY, "--environment", ""), "--environment '' is empty"),
        (("run", "pipeline", *DAY, "--exclude-tag", ""), "--exclude-tag '' is empty"),
    ],
    ids=["exclude-empty", "exclude-padded", "selector-padded", "launcher-empty", "run-environment", "run-exclude"],
)
def test_an_empty_or_padded_selection_launcher_or_environment_is_refused(shop, home, args, says):
    """Found by fuzzing: `--exclude-tag ''` (an unset variable) excluded nothing with only a warning and ran every
    asset, `--launcher ''` was the warm launcher, `run --environment ''` the default environment."""
    result = run_backfill(*args, cwd=shop, env=home)
    assert result.returncode == 2, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"backfill: error: {says}"), result.stderr
    assert not (shop / "logs").exists()


def test_a_dry_run_checks_its_approve_and_says_what_a_run_with_it_would_do(work, home):
    """`--dry-run --approve zz` was accepted and the digest never looked at (new and --continue alike); now it is
    checked as a run checks it, and the report says whether it matches (text and JSON)."""
    args = ("--command", "true", *DAY, "--guardrails", "sandbox", "--dry-run")
    assert "--approve 'zz' is not a plan digest" in refused(work, home, *args, "--approve", "zz")
    plan = run_backfill(*args, "--output", "json", cwd=work, env=home)
    digest = json.loads(plan.stdout)["preflight"]["digest"]
    wrong = "0" * 8 if not digest.startswith("0" * 8) else "1" * 8
    for given, matches in ((digest[:8], True), (wrong, False)):
        text = run_backfill(*args, "--approve", given, cwd=work, env=home)
        assert text.returncode == 0, text.stderr
        said = text.stdout.strip().splitlines()[-1]
        if matches:
            assert said == f"--approve {given}: matches this plan's digest: a run with it goes ahead"
        else:
            assert said.startswith(f"--approve {given}: does not match this plan's digest {digest[:12]}")
        document = run_backfill(*args, "--approve", given.upper(), "--output", "json", cwd=work, env=home)
        assert json.loads(document.stdout)["approve"] == {"given": given, "matches": matches}
    ran = run_backfill(
        "--command", "false", *DAY, "--guardrails", "sandbox", *REASON, "--no-progress", cwd=work, env=home
    )
    backfill_id = ran.stdout.split()[1].rstrip(":")
    resumed = ("--continue", backfill_id, "--dry-run")
    malformed = run_backfill(*resumed, "--approve", "zz", cwd=work, env=home)
    assert malformed.returncode == 2 and "--approve 'zz' is not a plan digest" in malformed.stderr
    document = json.loads(run_backfill(*resumed, "--output", "json", cwd=work, env=home).stdout)
    given = document["preflight"]["digest"][:8]
    text = run_backfill(*resumed, "--approve", given, cwd=work, env=home)
    assert (
        text.stdout.strip().splitlines()[-1]
        == f"--approve {given}: matches this plan's digest: a run with it goes ahead"
    )
    document = json.loads(run_backfill(*resumed, "--approve", given, "--output", "json", cwd=work, env=home).stdout)
    assert document["approve"] == {"given": given, "matches": True}


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("reconcile", ""), "backfill ID '' is empty: give a backfill ID"),
        (("show", " 2024"), "backfill ID ' 2024' has spaces around it: give '2024'"),
        (("list", "--state-dir", ""), "--state-dir '' is empty: give a path"),
        (("pause", "x", "--reason", "r", "--state-dir", " "), "--state-dir ' ' is empty: give a path"),
    ],
    ids=["reconcile-empty", "show-padded", "list-state-empty", "pause-state-space"],
)
def test_the_verbs_refuse_an_empty_or_padded_id_or_state_directory(work, home, args, says):
    """`reconcile ''` reconciled every backfill (an empty ID read as none given); the verbs' IDs and --state-dir
    are checked as the main command's are."""
    before = sorted(path.name for path in work.iterdir())
    result = run_backfill(*args, cwd=work, env=home)
    assert result.returncode == 2, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"backfill: error: {says}"), result.stderr
    assert result.stdout == ""
    assert sorted(path.name for path in work.iterdir()) == before


def test_a_wrong_approve_on_an_auto_plan_is_never_ignored(work, home):
    """A plan that would run unattended (sandbox), given an --approve for another plan: held (exit 4) saying the
    plan is not the one approved; the right digest runs it."""
    flags = ("--command", "echo {start}", "--start-date", "2024-01-01", "--end-date", "2024-01-01", "--reason", "r",
             "--reversible", "--guardrails", "sandbox", "--no-progress")  # fmt: skip
    wrong = run_backfill(*flags, "--approve", "deadbeef", cwd=work, env=home)
    assert wrong.returncode == 4, wrong.stdout + wrong.stderr
    assert "the plan changed since it was approved" in wrong.stderr and "Approved deadbeef" in wrong.stderr
    assert not (work / "logs" / "backfills").exists() or not any((work / "logs" / "backfills").iterdir())
    import re

    digest = re.search(r"plan digest ([0-9a-f]{12})", run_backfill(*flags, "--dry-run", cwd=work, env=home).stdout)
    right = run_backfill(*flags, "--approve", digest.group(1), cwd=work, env=home)
    assert right.returncode == 0, right.stdout + right.stderr


def test_listing_a_state_directory_that_does_not_exist_is_bad_input(work, home):
    """list --state-dir /nonexistent: one line naming it, exit 2 (not an empty listing and exit 0)."""
    result = run_backfill("list", "--state-dir", str(work / "nope"), "--output", "text", cwd=work, env=home)
    assert result.returncode == 2
    assert result.stderr.strip() == (
        f"backfill: error: --state-dir {str(work / 'nope')!r} is not a directory: give the state root backfills "
        "were saved in"
    )


@pytest.mark.parametrize("run_id", ["../../x", "a/b", ".hidden", "", "x" * 201, "rün"])
def test_a_run_id_that_is_not_a_plain_name_is_refused(shop, home, run_id):
    """backfill run --run-id names a file under logs/runs: a path, a hidden name or an empty one is refused
    and nothing is written outside (or inside) the runs directory."""
    result = run_backfill(
        "run",
        "pipeline",
        "--start-date",
        "2024-01-05",
        "--end-date",
        "2024-01-05",
        "--run-id",
        run_id,
        cwd=shop,
        env=home,
    )
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.strip() == (
        f"backfill: error: --run-id {run_id!r} is not a plain name: use letters, digits, '.', '_' and '-' "
        "(at most 200, not starting with '.'): it names the run's record file"
    )
    assert not (shop / "logs").exists() and not (shop.parent / "x.json").exists()


def test_unusable_files_and_paths_are_one_line_not_a_traceback(work, home, shop, tmp_path):
    """An empty or binary --config-file, a binary --ids-from, a --state-dir that is /dev/null, a file, /proc or
    too long, and a 5000-character target: each is one line, exit 2, nothing saved."""
    empty, binary = tmp_path / "empty.yml", tmp_path / "binary.yml"
    empty.write_text("")
    binary.write_bytes(b"\xda\x00\xff" * 30)
    pipeline_day = ("pipeline", *DAY, "--dry-run")
    assert "'environments' must map names to settings" in refused(
        shop, home, *pipeline_day, "--config-file", str(empty)
    )
    assert "is not UTF-8 text" in refused(shop, home, *pipeline_day, "--config-file", str(binary))
    (work / "a-file").write_text("x")
    for state_dir in ("/dev/null", str(work / "a-file"), "/proc"):
        line = refused(work, home, "--command", "true", *DAY, "--state-dir", state_dir)
        assert line.startswith("backfill: error: state directory ") and "writable" in line
    line = refused(work, home, "--command", "true", *DAY, "--state-dir", str(tmp_path / ("x" * 300)))
    assert line.startswith("backfill: error: --state-dir '") and "names no file (File name too long)" in line
    line = refused(work, home, "p" * 5000, *DAY, "--dry-run")
    assert "is not a usable path (File name too long)" in line and len(line) < 400
    assert run_backfill(*GUARD, "--command", "false", *DAY, cwd=work, env=home).returncode == 1
    backfill = next((work / "logs" / "backfills").iterdir()).name
    ids = run_backfill(*REASON, "--continue", backfill, "--ids-from", str(binary), cwd=work, env=home)
    assert ids.returncode == 2 and ids.stderr.strip().endswith(
        "is not text: give a file of partition IDs, one per line"
    )


def test_an_ids_file_without_end_or_not_of_ids_is_refused_as_it_is_read(work, home):
    """--ids-from /dev/zero (no line ever ends), a stream of one ID without end (`yes ID` on /dev/stdin) and a
    line that is no ID: each refused at once, one line naming the line or the count, exit 2; before, /dev/zero
    was read until memory ran out. A file of IDs and comments still selects its partitions."""
    assert run_backfill(*GUARD, "--command", "false", *DAY, cwd=work, env=home).returncode == 1
    backfill = next((work / "logs" / "backfills").iterdir())
    [record] = records(backfill)
    resume = (*REASON, "--continue", backfill.name, "--dry-run")
    zero = run_backfill(*resume, "--ids-from", "/dev/zero", cwd=work, env=home, timeout=60)
    assert zero.returncode == 2
    assert zero.stderr == (
        "backfill: error: --ids-from '/dev/zero' line 1 is over 1,024 characters: give partition IDs, one per line\n"
    )
    endless = subprocess.Popen(["yes", record["id"][:8]], stdout=subprocess.PIPE)
    try:
        streamed = subprocess.run(
            [*backfill_argv(), *resume, "--ids-from", "/dev/stdin"], stdin=endless.stdout, capture_output=True,
            text=True, cwd=work, env={**os.environ, **home}, timeout=60,
        )  # fmt: skip
    finally:
        endless.kill()
        endless.wait()
    assert streamed.returncode == 2
    assert streamed.stderr.endswith("names over 10,002 partitions, and the backfill has 2: give each ID once\n")
    listed = work / "ids.txt"
    listed.write_text(f"# the failed day\n\n{record['id'][:8]}\n  {record['id']}  \nnot-an-id\n")
    wrong = run_backfill(*resume, "--ids-from", str(listed), cwd=work, env=home)
    assert wrong.returncode == 2
    assert wrong.stderr.endswith("line 5: 'not-an-id' is not a partition ID: give the hex ID (at least its first 6 "
                                 "characters), one per line; # starts a comment\n")  # fmt: skip
    listed.write_text(f"# the failed day\n\n{record['id'][:8]}\n  {record['id']}  \n")
    selected = run_backfill(*resume, "--ids-from", str(listed), "--output", "json", cwd=work, env=home)
    assert selected.returncode == 0, selected.stderr
    assert json.loads(selected.stdout)["summary"]["not_selected"] == 1  # of the 2 partitions


@pytest.mark.parametrize(
    ("args", "says"),
    [
        ((*COMMAND, *DAY, "--limit", "1", "--no-progress"),
         "--limit pages the partitions --dry-run or --output json lists; it does not choose which run: narrow "
         "--start-date and --end-date (on --continue, give --ids)"),
        ((*COMMAND, *DAY, "--offset", "1", "--no-progress"), "--offset pages the partitions --dry-run or --output"),
        ((*COMMAND, *DAY, "--dry-run", "--preview-limit", "5"),
         "--preview-limit goes with --preview: it is how many rows the preview shows per table"),
        (("--continue", "20240101-000000-abcdef", "--dry-run", "--preview"),
         "--preview runs a new backfill's first partition into a scratch copy: with --continue, --dry-run lists"),
        (("--continue", "20240101-000000-abcdef", "--force"),
         "--force means nothing with --continue: the backfill's environment was allowed when it was started"),
    ],
    ids=["limit-on-a-run", "offset-on-a-run", "preview-limit-alone", "preview-on-continue", "force-on-continue"],
)  # fmt: skip
def test_options_that_mean_nothing_for_this_run_are_refused(work, home, args, says):
    """`--limit 1` on a run reads as "run one partition", but it pages a listing: the whole range ran, exit 0.
    It is now one line saying how to choose what runs, exit 2, nothing saved; with --dry-run or --output json it
    still pages. --preview-limit without --preview, --preview on a --continue dry run and --force on a --continue
    were accepted in silence."""
    assert says in refused(work, home, *args)
    listed = run_backfill(*REASON, *COMMAND, *DAY, "--limit", "1", "--dry-run", "--output", "json", cwd=work, env=home)
    assert listed.returncode == 0, listed.stdout + listed.stderr
    assert len(json.loads(listed.stdout)["partitions"]) == 1


def test_a_name_longer_than_a_label_is_refused(work, home):
    """A 100,000-character --name was saved and headed every listing; over 200 characters is one line, exit 2,
    and 200 are taken."""
    assert refused(work, home, "--command", "true", "--name", "x" * 201, *DAY) == (
        "backfill: error: --name is 201 characters long: keep it to 200 (it heads every listing)"
    )
    taken = run_backfill(*REASON, "--command", "true", "--name", "x" * 200, *DAY, "--dry-run", cwd=work, env=home)
    assert taken.returncode == 0, taken.stderr


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("--command", "echo \x1b]0;CMD\x07 {start}", *DAY),
         "--command 'echo \\x1b]0;CMD\\x07 {start}' contains control characters: give printable text"),
        (("--command", "echo {start}", "--name", "n\x9b2J", *DAY),
         "--name 'n\\x9b2J' contains control characters: give printable text"),
        (("--command", "echo {start}", "--name", "two\nlines", *DAY),
         "--name 'two\\nlines' contains control characters: give printable text"),
    ],
    ids=["command-osc", "name-c1", "name-newline"],
)  # fmt: skip
def test_a_name_or_command_with_control_characters_is_refused(work, home, args, says):
    """A --command or --name holding an escape sequence was saved and printed raw by `list` and `show`: to every
    operator who lists the shared state, a window title set or a screen cleared. One line, exit 2, nothing
    saved; a tab is text, and a command may span lines (a `python -c` script)."""
    assert says in refused(work, home, *args)
    for command in ("echo\t{start}", "sh -c 'echo one\necho {start}'"):
        spaced = run_backfill(*REASON, "--command", command, *DAY, "--dry-run", cwd=work, env=home)
        assert spaced.returncode == 0, spaced.stdout + spaced.stderr


@pytest.mark.parametrize(
    ("verb", "args"),
    [
        ("__warm-runner", []),
        ("__warm-runner", ["x", "y", "z"]),
        ("__warm-runner", ["٣", "4", "5"]),
        ("__warm-runner", ["1", "2"]),
        ("__warm-runner", ["97", "98", "1"]),  # descriptors this process does not have
        ("__warm-runner", ["99999999999999999999", "1", "1"]),
        ("__local-cluster", []),
        ("__local-cluster", ["two", "1"]),
    ],
)
def test_the_engines_internal_verbs_typed_by_hand_get_one_line(work, home, verb, args):
    """The verbs the engine starts its runners and clusters with, typed by hand with what they cannot take: one
    line naming what they take, exit 2, never a traceback."""
    result = run_backfill(verb, *args, cwd=work, env=home)
    assert result.returncode == 2
    assert result.stderr.startswith(f"backfill: error: {verb} takes ") and result.stderr.count("\n") == 1
    assert "Traceback" not in result.stderr + result.stdout


@pytest.mark.parametrize("taken", ["", "backfill/live"])
def test_a_state_home_that_cannot_hold_the_registry_is_named_with_its_fix(work, home, tmp_path, taken):
    """XDG_STATE_HOME naming a file (or a file where the registry's directory goes) was "No such file or directory
    (…)", exit 1, naming neither the registry of running backfills nor the variable: one line, exit 2, nothing
    saved."""
    state_home = tmp_path / "state-home"
    (state_home / taken).parent.mkdir(parents=True, exist_ok=True)
    (state_home / taken).write_text("")
    line = refused(work, home, *GUARD, "--command", "true", *DAY, env={"XDG_STATE_HOME": str(state_home)})
    assert line.startswith(f"backfill: error: the registry of running backfills, {state_home}/backfill/live, cannot "
                           "be used (")  # fmt: skip
    assert line.endswith("point XDG_STATE_HOME at a writable directory")


def test_a_state_home_that_cannot_hold_the_paused_pipelines_is_named_with_its_fix(shop, home, tmp_path):
    """``pause --target`` with XDG_STATE_HOME naming a file: the same one line, naming the list of paused pipelines."""
    state_home = tmp_path / "state-home"
    state_home.write_text("")
    result = run_backfill("pause", "--target", str(shop / "pipeline"), *REASON, cwd=shop,
                          env={**home, "XDG_STATE_HOME": str(state_home)})  # fmt: skip
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr == (
        f"backfill: error: the list of paused pipelines, {state_home}/backfill/paused-targets, cannot be used (Not a "
        "directory): it is under XDG_STATE_HOME (else ~/.local/state); point XDG_STATE_HOME at a writable directory\n"
    )
