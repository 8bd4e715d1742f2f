"""Command-line grammar: the backfill command, its verbs, and argument types with clear errors.

Verbs (``run``, ``list``, ``show``, and those reserved for later) are only
recognised in first position; anything else there is a target path.
"""

from __future__ import annotations

import argparse
import difflib
import errno
import os
import re
import sys
from typing import Any, NoReturn

from engine.base.printable import shortened
from engine.base.settings import MAX_PARTITIONS_CEILING
from engine.pipeline.options import RUN_OPTIONS, Kind, RunOptions, environ_run_inputs, run_options_of
from engine.spec.split_policy import parse_min_partition, parse_split_on

VERBS = (
    "run",
    "list",
    "show",
    "restore",
    "diff",
    "mark",
    "cancel",
    "pause",
    "resume",
    "set",
    "rerun",
    "reconcile",
    "audit",
    "watch",
    "validate",
)
IMPLEMENTED_VERBS = (
    "run", "list", "show", "watch", "restore", "diff", "mark", "cancel", "pause", "resume", "set", "reconcile", "audit",
)  # fmt: skip


class UsageError(Exception):
    """A command-line problem: one line for stderr, exit code 2."""


class Parser(argparse.ArgumentParser):
    """argparse that reports one line (no usage dump) and never exits on its own.

    Values starting with a minus and a digit (``-6h``, ``-1``) are values, not
    flags, so that they reach our validation and get a helpful message.
    """

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._negative_number_matcher = re.compile(r"^-\d")
        self.register("action", None, _StoreOnce)
        self.register("action", "store", _StoreOnce)
        self.given: dict[str, Any] = {}  # each single-valued option's value, as first given (a parser parses once)

    def error(self, message: str) -> NoReturn:
        raise UsageError(self._clean(message))

    def _clean(self, message: str) -> str:
        """One clean line: no 'argument --x: --x …' repetition, and a suggestion for a mistyped flag."""
        repeated = re.match(r"argument ([^:]+): (.*)", message, re.S)
        if repeated:
            flags = repeated.group(1).split("/")
            if any(repeated.group(2).startswith(flag) for flag in flags) or not flags[0].startswith("-"):
                return repeated.group(2)  # a positional's name says nothing the message does not
        unknown = re.match(r"unrecognized arguments: (.*)", message)
        if unknown:
            words = unknown.group(1).split()
            flag = next((w.split("=")[0] for w in words if w.startswith("--")), None)
            if flag is not None:
                known = [o for action in self._actions for o in action.option_strings if o.startswith("--")]
                close = difflib.get_close_matches(flag, known, n=1, cutoff=0.75)
                hint = f" — did you mean {close[0]}?" if close else f": see {self.prog} --help"
                return f"unknown option {flag}{hint}"
            first = words[0] if words else unknown.group(1)  # an empty argument splits into no word
            return f"unexpected argument {first!r}: see {self.prog} --help"
        return message

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        if message:
            sys.stderr.write(message)
        raise SystemExit(status)


class _StoreOnce(argparse._StoreAction):
    """An option that takes one value: given again with another value (``--rerun failed --rerun all``), it is
    bad input naming both, where argparse would keep the last in silence. The same value twice is the same ask."""

    def __call__(self, parser, namespace, values, option_string=None) -> None:  # type: ignore[no-untyped-def]
        if option_string is not None:  # registered by Parser only: it keeps ``given``
            if self.dest in parser.given and parser.given[self.dest] != values:
                first = parser.given[self.dest]
                parser.error(f"{option_string} is given twice ({first!r}, then {values!r}): give it once")
            parser.given[self.dest] = values
        super().__call__(parser, namespace, values, option_string)


MAX_TIMEOUT_HOURS = 8_784  # a leap year: a longer per-child timeout is a typo
MAX_COUNT = 100_000  # parallelism, workers, retries: anything above is a typo, not a plan
_ASCII_INT = re.compile(r"[0-9]+")


def _whole_number(flag: str, text: str, minimum: int, maximum: int | None) -> int:
    """ASCII digits only (not ``١٢``, ``１２`` or ``1_0``, which ``int()`` would take), within the range."""
    accepted = f"{minimum} to {maximum:,}" if maximum is not None else f"{minimum} or more"
    if text != text.strip():
        raise argparse.ArgumentTypeError(f"{flag} {text!r} has spaces around it: use {accepted}")
    stripped = text
    if stripped.startswith("-") and _ASCII_INT.fullmatch(stripped[1:]):
        raise argparse.ArgumentTypeError(f"{flag} {text!r} is negative: use {accepted}")
    if not _ASCII_INT.fullmatch(stripped):
        raise argparse.ArgumentTypeError(f"{flag} {text!r} is not a whole number in ASCII digits: use {accepted}")
    value = int(stripped)
    if value < minimum or (maximum is not None and value > maximum):
        raise argparse.ArgumentTypeError(f"{flag} {text!r} is out of range: use {accepted}")
    return value


def non_negative_int(flag: str, maximum: int | None = None):
    def convert(text: str) -> int:
        return _whole_number(flag, text, 0, maximum)

    return convert


def positive_int(flag: str, maximum: int | None = MAX_COUNT):
    def convert(text: str) -> int:
        return _whole_number(flag, text, 1, maximum)

    return convert


def given_text(flag: str, what: str):
    """A path or an ID on the command line: an empty one, or one with spaces around it, is a slip of the shell (an
    unset variable, a stray quote), never the name meant — refused rather than read as "none given" or as the
    working directory."""

    def convert(text: str) -> str:
        if not text.strip():
            raise argparse.ArgumentTypeError(f"{flag} {text!r} is empty: give {what}")
        if text != text.strip():
            raise argparse.ArgumentTypeError(f"{flag} {text!r} has spaces around it: give {text.strip()!r}")
        return text

    return convert


def path_arg(flag: str):
    """A path flag's value: given (see :func:`given_text`), and a name the system can look up — one too long for
    a file name (or for a path) is refused here, as a missing one is refused where it is read."""
    given = given_text(flag, "a path")

    def convert(text: str) -> str:
        text = given(text)
        try:
            os.stat(text)
        except OSError as error:
            if error.errno == errno.ENAMETOOLONG:
                shown = shortened(text)
                why = f"{flag} {shown!r} names no file ({error.strerror}): give a path"
                raise argparse.ArgumentTypeError(why) from None
        return text

    return convert


TARGET = given_text("target", "a pipeline directory or asset file")
BACKFILL_ID = given_text("backfill ID", "a backfill ID or a unique prefix of one (backfill list shows them)")


def state_dir_flag(parser: argparse.ArgumentParser, help_text: str = "root of the state store") -> None:
    parser.add_argument("--state-dir", type=path_arg("--state-dir"), help=help_text)


def timeout_arg(text: str | None) -> tuple[bool, int | None]:
    """``--timeout``: (given, microseconds); ``none`` is given and means no timeout (undoes a saved one)."""
    from engine.base.errors import BadInput
    from engine.dates.durations import parse_duration

    if text is None:
        return False, None
    if text.strip().lower() == "none":
        return True, None
    if not text.strip():
        raise BadInput("--timeout '' is empty: give a Go duration such as 30m, or none")
    if _ASCII_INT.fullmatch(text):  # Bruin's --timeout: whole seconds
        text = f"{text}s"
    value = parse_duration(text, "--timeout")
    if value > MAX_TIMEOUT_HOURS * 3_600_000_000:
        raise BadInput(f"--timeout {text!r} is out of range: use at most {MAX_TIMEOUT_HOURS}h (a year), or none")
    return True, value


def _output_flags(parser: argparse.ArgumentParser, *, paged: bool) -> None:
    parser.add_argument(
        "--output", choices=("text", "json"), default=None, help="text (default) or one JSON object on stdout"
    )
    if paged:
        parser.add_argument(
            "--offset",
            type=non_negative_int("--offset", MAX_PARTITIONS_CEILING),
            default=0,
            help="first partition to list (default 0)",
        )
        parser.add_argument(
            "--limit",
            type=non_negative_int("--limit", MAX_PARTITIONS_CEILING),
            default=1000,
            help="partitions to list (default 1000, 0 = all)",
        )


def _run_option_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--environment",
        "-e",
        type=given_text("--environment", "an environment of .bruin.yml"),
        help="environment from .bruin.yml (default: its default_environment)",
    )
    parser.add_argument(
        "--config-file",
        type=path_arg("--config-file"),
        help="path of .bruin.yml (default: BRUIN_CONFIG_FILE or discovered)",
    )
    for option in RUN_OPTIONS:
        extra: dict = {"help": option.help}
        if option.kind in (Kind.REPEATED, Kind.VARIABLES, Kind.STEPS):
            extra.update(action="append", default=[])
        elif option.kind is Kind.FLAG:
            extra.update(action="store_true")
        if option.kind is Kind.REPEATED:  # a selector or tag pattern: '' or ' x' selects or excludes nothing
            what = "a selector expression" if option.attribute == "selector" else "a tag or a glob of tags"
            extra["type"] = given_text(option.flag, what)
        if option.choices is not None:
            extra["choices"] = option.choices
        if option.metavar is not None:
            extra["metavar"] = option.metavar
        parser.add_argument(option.flag, *option.aliases, **extra)
    parser.add_argument("--full-refresh", "-r", action="store_true", help="drop and rebuild incremental tables")
    parser.add_argument(
        "--workers",
        type=positive_int("--workers"),
        default=None,
        help="assets run at once inside each run (default 16)",
    )
    parser.add_argument(
        "--timeout", metavar="DURATION", help="stop a run after this Go duration (e.g. 30m); none: no timeout"
    )


def split_args(args: argparse.Namespace) -> dict[str, Any]:
    """``--split-on`` and ``--min-partition`` as ExecutionOptions fields (only those given)."""
    changes: dict[str, Any] = {}
    if args.split_on is not None:
        changes["split_on"], changes["split_pattern"] = parse_split_on(args.split_on)
    if args.min_partition is not None:
        changes["min_partition"] = parse_min_partition(args.min_partition)
    return changes


def run_options_from(args: argparse.Namespace) -> RunOptions:
    """The run options both `backfill` and `backfill run` take, with BRUIN_VARS and BRUIN_QUERY_ANNOTATIONS
    (``--query-annotations``, where given, wins over the variable)."""
    variables, annotations = environ_run_inputs()
    given = getattr(args, "query_annotations", None)
    return run_options_of(args, variables, given if given is not None else annotations)


# What `backfill --help` ends with: every verb of IMPLEMENTED_VERBS and every exit code of docs/cli.md
# (tests/functional/test_cli_errors.py holds the three to each other).
VERB_HELP = (
    ("run TARGET --start-date S --end-date E", "one run of a pipeline over one interval (what a partition runs)"),
    ("list", "saved backfills and paused pipelines (the browser on a terminal)"),
    ("show ID", "one saved backfill: its partitions, attempts and logs"),
    ("watch ID", "a backfill's live dashboard, read-only: for a second operator (a terminal)"),
    ("restore ID --reason TEXT", "put back what a backfill changed, from its snapshot (--prune: old ones)"),
    ("diff ID [--ids P...] [--table T]", "rows each partition changed, before → after, against the snapshot"),
    ("mark ID [PARTITION...] --status S --reason TEXT", "set partitions, or the backfill, succeeded/failed/skipped"),
    ("cancel ID [--ids P...] --reason TEXT", "stop a backfill now, or only these running partitions; resumable"),
    ("pause ID|--target PATH --reason TEXT", "hold a backfill, or a whole pipeline"),
    ("resume ID|--target PATH --reason TEXT", "let it go on"),
    ("set ID --max-parallel N --reason TEXT", "change how many partitions run at once, live; kept for --continue"),
    ("reconcile [ID]", "settle backfills whose executor's lease expired"),
    ("audit [ID]", "every intervention, oldest first"),
)
EXIT_HELP = (
    (0, "ok; a dry run; a paused backfill or pipeline, which starts nothing"),
    (1, "partitions failed, or an operator cancelled or marked it failed"),
    (2, "bad input"),
    (3, "refused (never allowed, already running, production without --force)"),
    (4, "needs approval"),
    (5, "unreadable state"),
    (22, "paused (incomplete)"),
    (130, "interrupted (Ctrl+C, SIGTERM, a closed terminal)"),
)
HELP_EPILOG = (
    "verbs:\n"
    + "".join(f"  backfill {usage}\n      {what}\n" for usage, what in VERB_HELP)
    + "\nexit codes:\n"
    + "".join(f"  {code:>3}  {what}\n" for code, what in EXIT_HELP)
    + "\ndocs/cli.md has every flag of every verb."
)


def backfill_parser() -> Parser:
    parser = Parser(
        prog="backfill",
        description="Split a date range into partitions and run each as a child process, resumably.",
        epilog=HELP_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("target", nargs="?", type=TARGET, help="pipeline directory or asset file")
    parser.add_argument(
        "--command",
        help="run this command per partition instead of a pipeline; "
        "{start} {end} {end_exclusive} {start_date} {end_date} {partition_id} {run_id}",
    )
    parser.add_argument("--name", help="a readable name for a --command backfill")
    parser.add_argument("--start-date", help="first instant: date, local timestamp or timestamp with offset")
    parser.add_argument("--end-date", help="end: a date is inclusive, a timestamp is exclusive")
    parser.add_argument("--timezone", "--tz", default=None, help="IANA zone for calendar boundaries (default UTC)")
    parser.add_argument(
        "--partition", default=None, help="hourly, daily (default), weekly, monthly, yearly, or a Go duration like 6h"
    )
    _run_option_flags(parser)
    parser.add_argument(
        "--max-parallel",
        type=positive_int("--max-parallel"),
        default=None,
        help="partitions at once (default 1; capped by connection limits)",
    )
    parser.add_argument(
        "--retries",
        type=non_negative_int("--retries", MAX_COUNT),
        default=None,
        help="extra attempts per partition in this invocation (default 0)",
    )
    parser.add_argument(
        "--on-failure",
        choices=("stop", "continue", "fail-fast"),
        default=None,
        help="after a partition exhausts its retries (default stop)",
    )
    parser.add_argument(
        "--reverse",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="newest partitions first (--no-reverse: oldest first, undoing a saved --reverse)",
    )
    parser.add_argument(
        "--launcher",
        default=None,
        type=given_text("--launcher", "warm, exec, dask or dask-local:N"),
        help="pipeline partitions: warm runners that serve one partition after another (default), "
        "or exec, a new process each; dask: each attempt a task on a Dask cluster (--dask-scheduler); "
        "dask-local:N: a local cluster of N worker processes",
    )
    parser.add_argument(
        "--dask-scheduler",
        metavar="ADDRESS",
        default=None,
        help="--launcher dask: the scheduler (default: DASK_SCHEDULER_ADDRESS or Dask's configuration)",
    )
    parser.add_argument(
        "--split-on",
        metavar="WHY",
        default=None,
        help="split a partition in two when it fails by timeout, oom or a reason matching a regular expression "
        "(comma-separated: timeout,oom,REGEX); none: undo a saved one (docs/splitting.md)",
    )
    parser.add_argument(
        "--min-partition",
        metavar="DURATION",
        default=None,
        help="with --split-on: the shortest half a split may make (a Go duration, default 1h)",
    )
    parser.add_argument("--force", action="store_true", help="allow production environments")
    guard = parser.add_argument_group("guardrails (docs/guardrails.md)")
    guard.add_argument("--reason", help="why this backfill runs (required to run; saved and recorded)")
    guard.add_argument("--approve", metavar="DIGEST", help="run a plan needing approval: its digest (≥ 8 characters)")
    guard.add_argument(
        "--allow-long-range", action="store_true", help="a range over the human-only limit needs approval instead"
    )
    guard.add_argument("--reversible", action="store_true", help="--command: state that you can undo what it does")
    guard.add_argument("--guardrails", metavar="LEVEL", help="--command: sandbox, standard (default) or production")
    guard.add_argument("--no-snapshot", action="store_true", help="pipelines: take no snapshot before the run")
    guard.add_argument(
        "--ignore-dependencies",
        action="store_true",
        help="pipelines: do not check upstream coverage (each bypassed upstream is audited as GATE_BYPASS)",
    )
    guard.add_argument("--verify", metavar="MODE", help="on (default: stop at a bad partition), warn or off")
    guard.add_argument(
        "--verify-command", metavar="TEMPLATE", help="--command: run after each partition; non-zero fails it"
    )
    parser.add_argument("--dry-run", action="store_true", help="show the plan; run and save nothing")
    parser.add_argument(
        "--preview",
        action="store_true",
        help="with --dry-run: run the first partition into a scratch copy and show what it would change",
    )
    parser.add_argument(
        "--preview-limit",
        type=positive_int("--preview-limit", 10_000),
        default=20,
        help="with --preview: rows shown per table and kind (default 20)",
    )
    state_dir_flag(parser, "root of the state store (default <repository>/logs/backfills)")
    parser.add_argument(
        "--continue",
        dest="resume",
        metavar="ID",
        type=given_text("--continue", "a backfill ID or a unique prefix of one"),
        help="resume a saved backfill",
    )
    parser.add_argument(
        "--rerun", choices=("failed", "missing", "all"), help="with --continue: which partitions to run again"
    )
    parser.add_argument(
        "--ids",
        nargs="+",
        metavar="PARTITION_ID",
        help="with --continue: run exactly these partitions (IDs or unique prefixes)",
    )
    parser.add_argument(
        "--ids-from", metavar="FILE", type=path_arg("--ids-from"), help="with --continue: partition IDs, one per line"
    )
    parser.add_argument(
        "--asset", metavar="NAME", help="with --continue --ids: run only this asset again (its upstream unchecked)"
    )
    parser.add_argument("--with-downstream", action="store_true", help="with --asset: and everything downstream of it")
    parser.add_argument(
        "--rerun-whole-partition",
        action="store_true",
        help="with --continue: run every asset of a failed pipeline partition again, not only those that failed",
    )
    parser.add_argument("--no-progress", action="store_true", help="compact progress lines, no dashboard")
    parser.add_argument("--no-color", action="store_true", help="no colours (also NO_COLOR, TERM=dumb)")
    _output_flags(parser, paged=True)
    return parser


# `bruin run` flags that cannot mean anything for an embedded DuckDB run: each is one line saying why (exit 2).
BRUIN_ONLY_RUN_FLAGS = {
    "--push-metadata": "metadata push is a Bruin Cloud feature (BigQuery only)",
    "--sensor-mode": "sensors run only on Bruin's platforms; this runner has none",
    "--interactive": "`backfill` itself is the interactive view: run `backfill PIPELINE` on a terminal",
    "--stream": "streaming CDC ingestr assets run only in Bruin",
    "--modified": "this runner does not compare with a git branch: select assets with --selector",
    "--single-check": "check IDs are Bruin's: run --only checks with a --selector",
    "--debug-ingestr-src": "ingestr assets run only in Bruin",
    "--exp-use-winget-for-uv": "Python assets run with the current interpreter, not uv",
    "--use-pip": "Python assets run with the current interpreter",
    "--use-gong": "ingestr assets run only in Bruin",
    "--secrets-backend": "secrets come from .bruin.yml here",
    "--verbose": "the run's output is already everything it does; its record holds the rest",
}
# `bruin run` flags that change nothing here and are accepted as Bruin accepts them.
BRUIN_NO_OP_RUN_FLAGS = ("--no-log-file", "--no-timestamp", "--no-validation", "--minimal-logs")


def run_parser() -> Parser:
    parser = Parser(prog="backfill run", description="Run a pipeline (or one asset) once over one interval.")
    parser.add_argument("target", type=TARGET, help="pipeline directory or asset file")
    parser.add_argument("--start-date", help="start (default: BRUIN_START_DATE, else yesterday 00:00)")
    parser.add_argument("--end-date", help="inclusive end (default: BRUIN_END_DATE, else yesterday 23:59:59.999999)")
    parser.add_argument("--timezone", "--tz", help="zone for unzoned dates (default UTC)")
    _run_option_flags(parser)
    parser.add_argument("-env", dest="environment", help=argparse.SUPPRESS)  # Bruin's single-dash spelling
    parser.add_argument("--env", dest="environment", help=argparse.SUPPRESS)
    parser.add_argument("--force", "-f", action="store_true", help="accepted as in Bruin (no question is asked here)")
    parser.add_argument("--query-annotations", metavar="JSON", help="annotations added to each query as a comment")
    parser.add_argument("--no-color", action="store_true", help="no colours (also NO_COLOR, TERM=dumb)")
    parser.add_argument(
        "--mask-credentials", nargs="?", const="true", help="accepted as in Bruin (credentials are never printed)"
    )
    for flag in BRUIN_NO_OP_RUN_FLAGS:
        parser.add_argument(flag, action="store_true", help="accepted as in Bruin")
    for flag in BRUIN_ONLY_RUN_FLAGS:
        parser.add_argument(flag, nargs="?", const=True, default=None, help=argparse.SUPPRESS)
    parser.add_argument("-i", dest="interactive", action="store_const", const=True, help=argparse.SUPPRESS)
    parser.add_argument(
        "--continue",
        dest="continue_run",
        action="store_true",
        help="run the last run by hand again, only its assets that did not succeed (Bruin's --continue)",
    )
    parser.add_argument("--run-id", help="ID of this run (default: generated)")
    parser.add_argument("--backfill-id", help=argparse.SUPPRESS)
    parser.add_argument(
        "--backfill-total", type=non_negative_int("--backfill-total", MAX_PARTITIONS_CEILING), help=argparse.SUPPRESS
    )
    parser.add_argument("--partition-id", help=argparse.SUPPRESS)
    parser.add_argument("--row-changes-from", help=argparse.SUPPRESS)  # a backfill's snapshot.json (docs/diff.md)
    parser.add_argument("--judged-sql", help=argparse.SUPPRESS)  # what the pre-flight judged (docs/guardrails.md)
    parser.add_argument("--judged-files", help=argparse.SUPPRESS)  # the files as judged: asked again before each asset
    parser.add_argument("--output", choices=("text", "json"), default="text", help="text (default) or JSON")
    stand_in = parser.add_argument_group("stand-in runs (interventions.md)")
    stand_in.add_argument(
        "--stand-in", action="store_true", help="record a run that did not really run; nothing executes"
    )
    stand_in.add_argument("--status", help="--stand-in: succeeded or skipped")
    stand_in.add_argument("--reason", help="--stand-in: why (required; recorded with who)")
    stand_in.add_argument("--rows", type=non_negative_int("--rows", 10**15), help="--stand-in: rows loaded by hand")
    return parser


def list_parser() -> Parser:
    parser = Parser(prog="backfill list", description="Saved backfills of this repository, newest first.")
    state_dir_flag(parser)
    parser.add_argument(
        "--wide", action="store_true", help="text: every column (created too) and names whole, however wide"
    )
    parser.add_argument("--no-color", action="store_true", help="no colours (also NO_COLOR, TERM=dumb)")
    parser.add_argument(
        "--output", choices=("text", "json"), default=None, help="text or JSON (default: TUI on a terminal)"
    )
    return parser


def restore_parser() -> Parser:
    parser = Parser(prog="backfill restore", description="put back what a backfill's snapshot holds")
    parser.add_argument("id", nargs="?", type=BACKFILL_ID, help="backfill ID (or a unique prefix)")
    parser.add_argument("--reason", help="why (required; recorded)")
    parser.add_argument(
        "--force", action="store_true", help="restore although later runs wrote the same tables (undoes them)"
    )
    parser.add_argument(
        "--prune", action="store_true", help="delete the state root's snapshots older than their retention"
    )
    state_dir_flag(parser)
    return parser


def diff_parser() -> Parser:
    parser = Parser(
        prog="backfill diff",
        description="rows a backfill's partitions changed, before → after, against its snapshot (docs/diff.md)",
    )
    parser.add_argument("id", type=BACKFILL_ID, help="backfill ID (or a unique prefix)")
    parser.add_argument(
        "--ids", nargs="+", metavar="PARTITION_ID", help="these partitions (default: those that recorded changes)"
    )
    parser.add_argument("--table", help="this table only")
    parser.add_argument(
        "--limit",
        type=positive_int("--limit", 10_000),
        default=20,
        help="rows shown per table and kind (added, removed, changed; default 20, at most 10,000)",
    )
    parser.add_argument("--output", choices=("text", "json"), default="text", help="text (default) or JSON")
    state_dir_flag(parser)
    return parser


def watch_parser() -> Parser:
    parser = Parser(prog="backfill watch", description="A backfill's dashboard, read-only: every key that acts is off.")
    parser.add_argument("id", type=BACKFILL_ID, help="backfill ID (or a unique prefix)")
    state_dir_flag(parser)
    parser.add_argument("--no-color", action="store_true", help="no colours (also NO_COLOR, TERM=dumb)")
    return parser


def show_parser() -> Parser:
    parser = Parser(prog="backfill show", description="One saved backfill: inputs, counts and partitions.")
    parser.add_argument("id", type=BACKFILL_ID, help="backfill ID (or a unique prefix)")
    state_dir_flag(parser)
    parser.add_argument("--no-color", action="store_true", help="no colours (also NO_COLOR, TERM=dumb)")
    parser.add_argument(
        "--status",
        action="append",
        default=[],
        choices=("queued", "running", "succeeded", "failed", "cancelled", "skipped"),
        help="only partitions with this status (repeatable)",
    )
    _output_flags(parser, paged=True)
    return parser
