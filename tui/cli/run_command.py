"""``backfill run TARGET``: one run over one interval, reported as text lines or one JSON object."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import orjson

from engine.base.errors import EXIT_CANCELLED, BadInput
from engine.base.settings import Settings
from engine.guardrails.manual_run import check_run_by_hand, check_stand_in, live_work_of_run
from engine.guardrails.request import check_reason
from engine.pipeline.asset_run import SKIPPED, SUCCEEDED, UPSTREAM_FAILED, AssetResult
from engine.pipeline.judged_sql import read_judged_argument
from engine.pipeline.run_record import STAND_IN_STATUSES, record_json, write_stand_in_record
from engine.pipeline.run_types import RunRequest
from engine.pipeline.runner import CANCELLATION, describe_window, execute_run, prepare_run
from engine.store.live_work import join
from engine.store.target_pauses import check_not_paused
from tui.cli.arguments import BRUIN_ONLY_RUN_FLAGS, run_options_from, run_parser, timeout_arg

if TYPE_CHECKING:
    from engine.guardrails.definition_watch import DefinitionWatch

SYMBOLS = {SUCCEEDED: "✓", "failed": "✗", UPSTREAM_FAILED: "-", SKIPPED: "○"}


def _bruin_flags(args) -> tuple[str | None, str | None, bool]:
    """What `bruin run` users pass through: a flag that cannot mean anything here is one line; by hand (not as a
    backfill's child, whose inputs are its own), BRUIN_START_DATE, BRUIN_END_DATE and BRUIN_FULL_REFRESH stand
    in for flags not given, as in Bruin."""
    for flag, why in BRUIN_ONLY_RUN_FLAGS.items():
        if getattr(args, flag.lstrip("-").replace("-", "_")) is not None:
            raise BadInput(f"{flag} means nothing here: {why}")
    if args.backfill_id:
        return args.start_date, args.end_date, args.full_refresh
    refresh = args.full_refresh
    if not refresh and os.environ.get("BRUIN_FULL_REFRESH"):
        text = os.environ["BRUIN_FULL_REFRESH"].strip().lower()
        if text not in ("1", "0", "true", "false", "t", "f", ""):
            raise BadInput(
                f"BRUIN_FULL_REFRESH {os.environ['BRUIN_FULL_REFRESH']!r} is not a boolean: use 1/0 or true/false"
            )
        refresh = text in ("1", "true", "t")
    start = args.start_date if args.start_date is not None else os.environ.get("BRUIN_START_DATE") or None
    end = args.end_date if args.end_date is not None else os.environ.get("BRUIN_END_DATE") or None
    return start, end, refresh


# What --continue takes from the run it continues, so that giving one of these with it means nothing.
_CONTINUED = ("start_date", "end_date", "selector", "tag", "exclude_tag", "only", "var", "variant", "downstream")


def _continued(request, args, refresh_flag: bool):
    """``--continue``: the last run by hand of the pipeline, again, for the assets that did not succeed."""
    from engine.pipeline.loading import PIPELINES
    from engine.pipeline.repository import resolve_target
    from engine.pipeline.run_continuation import continuation

    given = [name for name in _CONTINUED if getattr(args, name, None) not in (None, [], False)]
    others = [f"--{name.replace('_', '-')}" for name in given if name not in _DATES]
    if others or args.stand_in or args.backfill_id:
        shown = ", ".join(others) or ("--stand-in" if args.stand_in else "--backfill-id")
        raise BadInput(f"{shown} means nothing with --continue: it runs the last run again as that run was given")
    target = resolve_target(request.target)
    pipeline = PIPELINES.load(target.pipeline_dir)
    continued = continuation(request, target, pipeline.name, set(pipeline.assets))
    _check_as_continued(args, refresh_flag, continued.request, continued.run_id)
    sys.stdout.write(f"continuing run {continued.run_id}: {', '.join(continued.assets)} again\n")
    return continued.request


_DATES = ("start_date", "end_date")


def _check_as_continued(args, refresh_flag: bool, continued: RunRequest, run_id: str) -> None:
    """What the continued run was given may be given again — Bruin's own form names the dates, ``bruin run
    --start-date S --end-date E --continue`` (Bruin then reads the saved ones) — and is taken; anything else would
    be ignored without a word (the run goes as it was given), and is refused, naming what that run was given."""
    from engine.dates.durations import format_duration
    from engine.dates.instants import load_zone
    from engine.pipeline.runner import run_window

    zone = continued.timezone
    differ: list[tuple[str, str]] = []  # (what this invocation says, what the continued run was given)
    if args.start_date is not None or args.end_date is not None:
        start = continued.start if args.start_date is None else args.start_date
        end = continued.end if args.end_date is None else args.end_date
        if run_window(start, end, zone) != run_window(continued.start, continued.end, zone):
            given = [f"--{name.replace('_', '-')} {getattr(args, name)}" for name in _DATES if getattr(args, name)]
            differ.append((", ".join(given), f"{continued.start} → {continued.end}"))
    if args.timezone is not None and load_zone(args.timezone) != load_zone(zone):
        differ.append((f"--timezone {args.timezone}", zone))
    if refresh_flag and not continued.full_refresh:
        differ.append(("--full-refresh", "no full refresh"))
    if args.apply_interval_modifiers and not continued.options.apply_interval_modifiers:
        differ.append(("--apply-interval-modifiers", "no interval modifiers"))
    if args.workers is not None and args.workers != continued.workers:
        differ.append((f"--workers {args.workers}", f"--workers {continued.workers}"))
    if args.timeout is not None and timeout_arg(args.timeout)[1] != continued.timeout:
        differ.append(
            (
                f"--timeout {args.timeout}",
                "no timeout" if continued.timeout is None else format_duration(continued.timeout),
            )
        )
    if differ:
        said = ", and ".join(
            f"{given} where {f'run {run_id}' if number == 0 else 'it'} was given {saved}"
            for number, (given, saved) in enumerate(differ)
        )
        raise BadInput(
            f"{said}: --continue runs that run again as it was given; leave {'it' if len(differ) == 1 else 'them'} out"
        )


# A backfill starts each partition's run with these, and with the first three in its environment too.
_AS_CHILD = {"BACKFILL_ID": "backfill_id", "BACKFILL_RUN_ID": "run_id", "BACKFILL_PARTITION_ID": "partition_id"}
_CHILD_ONLY = ("--partition-id", "--backfill-total", "--row-changes-from", "--judged-sql", "--judged-files")


def _check_started_by_a_backfill(args) -> None:
    """``--backfill-id`` marks a partition's run, started by its backfill's executor, whose pre-flight judged it:
    such a run skips the checks of a run by hand. Given by hand (a child's command line copied from a log, say),
    it would walk around them, so it is taken only with the run and partition IDs the executor passes, matching
    the executor's environment; the flags that only go with it are refused without it."""
    if not args.backfill_id:
        given = [flag for flag in _CHILD_ONLY if getattr(args, flag[2:].replace("-", "_")) is not None]
        if given:
            raise BadInput(f"{given[0]} goes only with --backfill-id, which a backfill gives its own partitions' runs")
        return
    unmatched = [
        name
        for name, flag in _AS_CHILD.items()
        if not getattr(args, flag) or os.environ.get(name) != getattr(args, flag)
    ]
    if unmatched:
        raise BadInput(
            f"--backfill-id {args.backfill_id!r} is how a backfill starts its own partitions (with --run-id and "
            f"--partition-id, and {', '.join(unmatched)} the same in their environment): a run by hand leaves it out "
            "and is judged as one"
        )


def _judged_sql(args) -> dict[str, frozenset[str]] | None:
    """A partition's run refuses SQL that cannot be classified unless its pre-flight judged it: the shapes are in the
    state directory's ``judged-sql.json`` (``--judged-sql``); one started without it (its command line copied from a
    log) judged none."""
    if not args.backfill_id:
        return None
    if args.judged_sql is None:
        return {}
    try:
        return read_judged_argument(_given_text(args.judged_sql))
    except (OSError, UnicodeDecodeError, ValueError) as error:
        shown = args.judged_sql[:80]
        why = error.strerror if isinstance(error, OSError) else error
        raise BadInput(f"--judged-sql {shown!r} is not what a backfill gives its partitions: {why}") from None


def _given_text(path: str) -> str:
    """A file of the state directory a backfill gives its partition's run, as text."""
    with open(path, "rb") as given:
        return given.read().decode()


def _judged_watch(args) -> DefinitionWatch | None:
    """A backfill's partition is given the pipeline's files as its pre-flight judged them (``--judged-files``): it
    parses the pipeline as judged, and asks again before each asset (an asset reads some files only then, a Python
    asset's modules when it imports them, possibly long after the executor last looked); None for a run by hand."""
    if args.judged_files is None:
        return None
    from engine.guardrails.definition_watch import DefinitionWatch

    try:
        return DefinitionWatch.from_argument(_given_text(args.judged_files))
    except (OSError, UnicodeDecodeError, ValueError) as error:
        shown = args.judged_files[:80]
        why = error.strerror if isinstance(error, OSError) else error
        raise BadInput(f"--judged-files {shown!r} is not what a backfill gives its partitions: {why}") from None


def _unjudged(watch: DefinitionWatch | None) -> Callable[[Any], str | None] | None:
    """What an asset of a partition is asked before it runs: the changes among the files it reads then."""
    if watch is None:
        return None

    def changed(asset) -> str | None:
        changes = watch.changes_for(asset)
        return watch.changed(changes) if changes else None

    return changed


def run_command(argv: list[str]) -> int:
    args = run_parser().parse_args(argv)
    _check_started_by_a_backfill(args)
    refresh_flag = args.full_refresh  # as given: BRUIN_FULL_REFRESH may stand in for it below
    start, end, full_refresh = _bruin_flags(args)
    args.full_refresh = full_refresh
    watch = _judged_watch(args)
    request = RunRequest(
        target=args.target,
        start=start,
        end=end,
        timezone=args.timezone if args.timezone is not None else "UTC",  # '' is bad input, not the default
        environment=args.environment,
        config_file=args.config_file,
        workers=args.workers or 16,
        options=run_options_from(args),
        full_refresh=args.full_refresh,
        timeout=timeout_arg(args.timeout)[1],
        run_id=args.run_id,
        backfill_id=args.backfill_id,
        backfill_total=args.backfill_total,
        partition_id=args.partition_id,
        row_changes_from=args.row_changes_from,
        judged_sql=_judged_sql(args),
        unjudged=_unjudged(watch),
        reason=None if args.stand_in else check_reason(args.reason),
        stop_grace=Settings.from_environment().stop_grace,
    )
    if args.continue_run:
        request = _continued(request, args, refresh_flag)
        args.full_refresh = request.full_refresh  # a continued full refresh by hand needs its --reason again
    _check_stand_in_flags(args)
    prepared = prepare_run(request) if watch is None else watch.read_as_judged(lambda: prepare_run(request))
    as_json = args.output == "json"
    if args.stand_in:
        check_stand_in(prepared)
        return _stand_in(prepared, args, as_json)
    registration = None
    if not args.backfill_id:  # a backfill's partitions were judged by its pre-flight, and run under its entry
        check_run_by_hand(prepared, reason=request.reason)
        paused = lambda: check_not_paused(prepared.pipeline.directory)  # noqa: E731 - checked under the lock
        registration = join(live_work_of_run(prepared), check=paused)
    try:
        return _run(prepared, as_json, minimal=args.minimal_logs)
    finally:
        if registration is not None:
            registration.release()


def _run(prepared, as_json: bool, *, minimal: bool = False) -> int:
    out = sys.stderr if as_json else sys.stdout
    lock = threading.Lock()
    width = max(len(name) for name in prepared.selected)

    def emit(item: Any) -> None:
        with lock:
            if isinstance(item, AssetResult):
                out.write(_asset_line(item, width))
            else:
                out.write(f"{item}\n")
            out.flush()

    if not as_json and not minimal:  # --minimal-logs: Bruin's "skip initial pipeline analysis logs"
        out.write(
            f"run {prepared.run_id}: {prepared.pipeline.name} ({prepared.environment.name}), "
            f"{describe_window(prepared.window)}, {len(prepared.selected)} asset(s)\n"
        )
        for note in prepared.notes:
            out.write(f"note: {note}\n")
    for warning in prepared.warnings:  # on stderr with --output json, where nothing else may go to stdout
        out.write(f"warning: {warning}\n")
    with _signals_cancel_the_run():
        result = execute_run(prepared, emit)
    if as_json:
        sys.stdout.buffer.write(orjson.dumps(record_json(result)) + b"\n")
        sys.stdout.flush()
    else:
        _summary(out, result)
    if not result.ok and CANCELLATION.reason is not None:
        return EXIT_CANCELLED
    return 0 if result.ok else 1


@contextlib.contextmanager
def _signals_cancel_the_run() -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP stop a run as they stop the warm runner's: queries interrupted and rolled back,
    each Python asset's script and what it left stopped and waited for, then exit 130. Raised as an exception
    wherever the main thread was, a signal ended the process at once and left the scripts, each in a session of
    its own, running. A signal ignored (``nohup``) stays ignored; the warm runner keeps its own handlers."""
    current = signal.getsignal(signal.SIGINT)
    if callable(current) and current is not signal.default_int_handler:
        yield
        return

    def on_stop(signum: int, _frame: object) -> None:
        CANCELLATION.cancel(f"cancelled ({signal.Signals(signum).name})")

    saved = {}
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(signum) is not signal.SIG_IGN:
            saved[signum] = signal.signal(signum, on_stop)
    try:
        yield
    finally:
        for signum, handler in saved.items():
            signal.signal(signum, handler)


def _check_stand_in_flags(args) -> None:
    if not args.stand_in:
        if args.reason is not None and not args.full_refresh:
            raise BadInput("--reason means nothing for this run: only --full-refresh or --stand-in takes one")
        given = [f for f, v in (("--status", args.status), ("--rows", args.rows)) if v]
        if given:
            raise BadInput(f"{', '.join(given)} mean{'s' if len(given) == 1 else ''} nothing without --stand-in")
        return
    if args.status not in STAND_IN_STATUSES:
        shown = "missing" if args.status is None else repr(args.status)
        raise BadInput(f"--status {shown}: a stand-in run is succeeded or skipped")
    if check_reason(args.reason) is None:
        raise BadInput("--reason is required for a stand-in run: say why it did not really run")
    if args.rows is not None and args.status != "succeeded":
        raise BadInput("--rows means nothing for a skipped stand-in: only a success loaded rows")


def _stand_in(prepared, args, as_json: bool) -> int:
    """Write the record of a run that did not run; the guardrails' coverage check judges it like any other."""
    import time

    from engine.base.who import requester
    from engine.store import audit
    from engine.store.manifest import now_text
    from engine.store.state_store import check_state_root, default_state_root

    reason, who = check_reason(args.reason) or "", requester()
    path, record = write_stand_in_record(
        prepared, status=args.status, rows=args.rows, reason=reason, requested_by=who, now=time.time()
    )
    # A stand-in belongs to no backfill: its audit line goes to the state root's own log.
    root = default_state_root(prepared.target.repository)
    check_state_root(root)
    at = now_text()
    line = audit.entry(
        asset=next(iter(prepared.selected)) if len(prepared.selected) == 1 else None,
        action="STAND_IN",
        to_status=args.status,
        target_count=args.rows,
        previous_message=f"run record {path}",
        reason=reason,
        requested_by=who,
        requested_at=at,
        applied_at=at,
        applied_by=f"backfill run --stand-in (run {prepared.run_id})",
    )
    audit.append(root, [line])
    if as_json:
        sys.stdout.buffer.write(orjson.dumps(record) + b"\n")
        return 0
    sys.stdout.write(
        f"stand-in run {prepared.run_id}: {prepared.pipeline.name} ({prepared.environment.name}), "
        f"{describe_window(prepared.window)}, {len(prepared.selected)} asset(s) recorded {args.status} "
        f"without running; record {path}\n"
    )
    return 0


def _asset_line(result: AssetResult, width: int) -> str:
    symbol = SYMBOLS.get(result.status, "?")
    duration = f"{result.duration:.2f}s" if result.duration is not None else ""
    rows = f"{result.rows} rows" if result.rows is not None else ""
    line = (
        f"  {symbol} {result.name.ljust(width)}  {result.status.replace('_', ' '):<15} {duration:>8}  {rows}".rstrip()
    )
    extra = []
    if result.window is not None:
        extra.append(f"      window moved by interval modifiers: {describe_window(result.window)}")
    for check in result.checks:
        if not check.passed:
            kind = "blocking" if check.blocking else "non-blocking"
            extra.append(f"      check {check.name} failed ({kind}): {check.detail}")
    if result.error and result.status not in (UPSTREAM_FAILED, SKIPPED):
        extra.append(f"      error: {result.error}")
    elif result.error:
        extra.append(f"      {result.error}")
    return "\n".join([line, *extra]) + "\n"


def _summary(out, result) -> None:
    if result.error:
        out.write(f"error: {result.error}\n")
    counts: dict[str, int] = {}
    for item in result.results:
        counts[item.status] = counts.get(item.status, 0) + 1
    parts = [f"{n} {status.replace('_', ' ')}" for status, n in sorted(counts.items())]
    outcome = "succeeded" if result.ok else "failed"
    out.write(f"{outcome}: {', '.join(parts) or 'nothing ran'} in {result.seconds:.2f}s; record {result.record_path}\n")
