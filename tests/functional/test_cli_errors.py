"""The command line as a newcomer types it: suggestions for typos, one clean line per mistake, exact commands."""

from __future__ import annotations

import pytest

from tests.backfills import rewrite, state_dirs
from tests.conftest import run_backfill
from tests.guard_flags import GUARD, REASON

DAY = ("--start-date", "2024-01-01", "--end-date", "2024-01-02")


def one_line(result) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def test_a_mistyped_verb_is_named_with_a_suggestion_unless_such_a_path_exists(work, home):
    """backfill lst → did you mean 'list'; a directory really called lst is a target, not a typo."""
    result = run_backfill("lst", *REASON, cwd=work, env=home)
    assert result.returncode == 2
    assert one_line(result) == (
        "backfill: error: unknown command 'lst' — did you mean 'list'? (a target must be an existing path)"
    )
    (work / "lst").mkdir()
    result = run_backfill("lst", *DAY, "--dry-run", cwd=work, env=home)
    assert "did you mean" not in result.stderr


@pytest.mark.parametrize(("flag", "suggestion"), [("--partiton", "--partition"), ("--max-paralel", "--max-parallel")])
def test_a_mistyped_flag_gets_the_flag_it_resembles(work, home, flag, suggestion):
    """An unknown option names itself and the closest real one."""
    result = run_backfill(*GUARD, "--command", "true", *DAY, flag, "daily", cwd=work, env=home)
    assert result.returncode == 2
    assert one_line(result) == f"backfill: error: unknown option {flag} — did you mean {suggestion}?"


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("0", "--max-parallel '0' is out of range: use 1 to 100,000"),
        ("٣", "--max-parallel '٣' is not a whole number in ASCII digits: use 1 to 100,000"),
        ("１２", "--max-parallel '１２' is not a whole number in ASCII digits: use 1 to 100,000"),
        ("1_0", "--max-parallel '1_0' is not a whole number in ASCII digits: use 1 to 100,000"),
        ("1" + "0" * 20, "--max-parallel '1" + "0" * 20 + "' is out of range: use 1 to 100,000"),
        ("", "--max-parallel '' is not a whole number in ASCII digits: use 1 to 100,000"),
    ],
)
def test_bad_counts_are_one_clean_line(work, home, value, problem):
    """No 'argument --max-parallel: --max-parallel' repetition, no traceback, non-ASCII digits refused."""
    result = run_backfill(*GUARD, "--command", "true", *DAY, "--max-parallel", value, cwd=work, env=home)
    assert result.returncode == 2
    assert one_line(result) == f"backfill: error: {problem}"


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        (("--max-parallel", "2", "--max-parallel", "3"), "--max-parallel is given twice (2, then 3): give it once"),
        (("--partition", "daily", "--partition=hourly"), "--partition is given twice ('daily', then 'hourly')"),
        (("--on-failure", "stop", "--on-failure", "continue"), "--on-failure is given twice ('stop', then 'continue')"),
    ],
)
def test_an_option_given_twice_with_two_values_is_one_clean_line(work, home, args, problem):
    """argparse keeps the last of two values in silence; which one the user meant is not guessed: exit 2, one
    line naming both. The same value twice is the same ask, and runs."""
    result = run_backfill(*GUARD, "--command", "true", *DAY, *args, "--dry-run", cwd=work, env=home)
    assert result.returncode == 2, result.stdout + result.stderr
    assert one_line(result).startswith(f"backfill: error: {problem}")
    same = run_backfill(*GUARD, "--command", "true", *DAY, *args[:2], *args[:2], "--dry-run", cwd=work, env=home)
    assert same.returncode == 0, same.stdout + same.stderr


def test_show_searches_every_store_and_lists_candidates(work, home):
    """A prefix found only in --state-dir is not found without it: one line naming the stores searched (none of
    them holds a backfill to list); an ambiguous prefix lists the candidates; with --state-dir it is found."""
    for _ in range(2):
        assert (
            run_backfill(*GUARD, "--command", "true", *DAY, "--state-dir", "elsewhere", cwd=work, env=home).returncode
            == 0
        )
    names = sorted(p.name for p in state_dirs(work / "elsewhere"))
    result = run_backfill("show", "2", "--output", "text", cwd=work, env=home)
    assert result.returncode == 2
    assert result.stderr.startswith("backfill: error: no backfill '2' in ") and result.stderr.count("\n") == 1
    assert str(work / "logs" / "backfills") in result.stderr and "state" in result.stderr
    ambiguous = run_backfill("show", names[0][:8], "--state-dir", "elsewhere", "--output", "text", cwd=work, env=home)
    assert ambiguous.returncode == 2
    assert f"backfill ID {names[0][:8]!r} is ambiguous" in ambiguous.stderr
    assert all(f"  {name}  true  created " in ambiguous.stderr for name in names)
    found = run_backfill("show", names[1], "--state-dir", "elsewhere", "--output", "text", cwd=work, env=home)
    assert found.returncode == 0 and names[1] in found.stdout


def test_the_printed_resume_command_names_the_state_dir_when_continue_would_not_find_it(work, home):
    """Started with --state-dir: the summary's resume command carries it (absolute); run as printed, it works."""
    failing = run_backfill(*GUARD, "--command", "false", *DAY, "--state-dir", "elsewhere", cwd=work, env=home)
    [backfill] = state_dirs(work / "elsewhere")
    expected = f"backfill --continue {backfill.name} --state-dir {work / 'elsewhere'}"
    assert f"  resume      {expected}" in failing.stdout
    default = run_backfill(*GUARD, "--command", "false", *DAY, cwd=work, env=home)
    [own] = state_dirs(work / "logs" / "backfills")
    assert f"  resume      backfill --continue {own.name}\n" in default.stdout


def test_every_saved_execution_control_can_be_undone_on_resume(work, home):
    """--reverse and --timeout saved at the start are undone with --no-reverse and --timeout none."""
    first = run_backfill(
        *GUARD,
        "--command",
        "false",
        *DAY,
        "--reverse",
        "--timeout",
        "10m",
        "--on-failure",
        "continue",
        cwd=work,
        env=home,
    )
    [backfill] = state_dirs(work / "logs" / "backfills")
    assert first.returncode == 1
    shown = run_backfill("--continue", backfill.name, "--dry-run", cwd=work, env=home)
    assert "newest first, timeout 10m" in shown.stdout
    undone = run_backfill(
        "--continue", backfill.name, "--no-reverse", "--timeout", "none", "--dry-run", cwd=work, env=home
    )
    assert undone.returncode == 0, undone.stderr
    assert "oldest first" in undone.stdout and "timeout" not in undone.stdout.split("controls")[1].splitlines()[0]
    empty = run_backfill("--continue", backfill.name, "--timeout", "", "--dry-run", cwd=work, env=home)
    assert one_line(empty) == "backfill: error: --timeout '' is empty: give a Go duration such as 30m, or none"


def test_list_text_fits_100_columns(work, home):
    """backfill list as text: every line within 100 columns, names cut with an ellipsis, times relative."""
    for name in ("a very long name for a backfill that would never fit in any sensible column at all", "short"):
        assert run_backfill(*GUARD, "--command", "true", *DAY, "--name", name, cwd=work, env=home).returncode == 0
    result = run_backfill("list", "--output", "text", cwd=work, env=home)
    lines = [line for line in result.stdout.splitlines() if " under " not in line]  # the store's path is a path
    assert all(len(line) <= 100 for line in lines), lines
    assert any(line.endswith("…") for line in lines) and "just now" in result.stdout


def test_list_shows_ranges_says_how_to_see_names_whole_and_marks_what_cannot_be_read(work, home):
    """backfill list: each backfill's range (end exclusive) and last activity; a cut name points at --wide, which
    shows it whole with when each was created; a backfill whose partition file, control file or manifest cannot
    be read is listed unreadable, with a warning naming the file."""
    long_name = "a very long name for a backfill that would never fit in any sensible column at all"
    for name in (long_name, "short", "broken records", "broken manifest"):
        assert run_backfill(*GUARD, "--command", "true", *DAY, "--name", name, cwd=work, env=home).returncode == 0
    broken_records, broken_manifest = sorted((work / "logs" / "backfills").iterdir())[2:]
    rewrite(next(broken_records.glob("partitions/*.json")), "{")
    (broken_records / ".summary.json").unlink(missing_ok=True)
    (broken_manifest / "manifest.json").write_text("{")
    result = run_backfill("list", "--output", "text", cwd=work, env=home)
    header, *rows = result.stdout.split("\n\n")[0].splitlines()
    assert header.split() == ["ID", "STATE", "ACTIVITY", "RANGE", "UNIT", "PARTITIONS", "NAME"]
    by_id = {row.split()[0]: row for row in rows}
    assert (
        by_id[broken_records.name].split()[1] == "unreadable" and by_id[broken_manifest.name].split()[1] == "unreadable"
    )
    assert "2024-01-01 → 01-03  daily" in result.stdout  # two days, the end exclusive
    assert "backfill list --wide shows them whole" in result.stdout and long_name not in result.stdout
    assert f"warning: {broken_records.name}: partition file " in result.stderr
    assert f"warning: {broken_manifest.name}: manifest " in result.stderr
    wide = run_backfill("list", "--output", "text", "--wide", cwd=work, env=home)
    assert wide.stdout.splitlines()[0].split()[:4] == ["ID", "STATE", "CREATED", "ACTIVITY"]
    assert long_name in wide.stdout and "--wide shows them whole" not in wide.stdout


def test_help_lists_every_verb_and_every_documented_exit_code():
    """`backfill --help` (a real process) names each implemented verb and each exit code of docs/cli.md's table,
    with its meaning: 4 is 'needs approval', 5 'unreadable state'."""
    import re

    from tests.conftest import ROOT
    from tui.cli.arguments import IMPLEMENTED_VERBS

    result = run_backfill("--help")
    assert result.returncode == 0, result.stderr
    for verb in IMPLEMENTED_VERBS:
        assert re.search(rf"^  backfill {verb}\b", result.stdout, re.MULTILINE), verb
    docs = (ROOT / "docs" / "cli.md").read_text()
    table = docs[docs.index("## Exit codes") :]
    codes = [int(code) for code in re.findall(r"^\| (\d+) \|", table, re.MULTILINE)]
    assert codes == [0, 1, 2, 3, 4, 5, 22, 130]
    shown = dict(re.findall(r"^\s+(\d+)  (.+)$", result.stdout[result.stdout.index("exit codes:") :], re.MULTILINE))
    assert sorted(int(code) for code in shown) == codes
    assert shown["4"] == "needs approval" and shown["5"] == "unreadable state"
