"""``backfill --continue ID``: resume (or, with --dry-run, show) a saved backfill.

Plan inputs are fixed for a backfill's life; giving one again is an error that
says to start a new backfill. Execution controls may change; those not given
keep the values of the initial invocation.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

from engine.base.errors import BadInput
from engine.base.settings import Settings
from engine.execute.backfill import Loaded, load_backfill
from engine.execute.invocation import Invocation, held_by_control, judge_resume
from engine.execute.rerun import AssetRerun, PartitionSelection
from engine.guardrails.preflight import check_digest_prefix
from engine.guardrails.request import check_reason
from engine.pipeline.options import RUN_OPTIONS
from engine.spec.backfill_spec import ExecutionOptions
from engine.store.control import Decision, resume_options
from tui import human
from tui.cli.arguments import UsageError, split_args, timeout_arg
from tui.cli.preflight_text import approve_line, dry_run_approval, write_report
from tui.cli.reconcile_command import settle_if_expired
from tui.cli.state_output import write_state_json
from tui.cli.terminal import dashboard_possible

PLAN_INPUTS = {
    "target": "TARGET",
    "command": "--command",
    "name": "--name",
    "start_date": "--start-date",
    "end_date": "--end-date",
    "timezone": "--timezone",
    "partition": "--partition",
    "environment": "--environment",
    "config_file": "--config-file",
    **{option.dest: option.flag for option in RUN_OPTIONS},  # every run option is a plan input
    "allow_long_range": "--allow-long-range",
    "reversible": "--reversible",
    "guardrails": "--guardrails",
    "no_snapshot": "--no-snapshot",
    "ignore_dependencies": "--ignore-dependencies",
    "verify": "--verify",
    "verify_command": "--verify-command",
}


def _check_no_plan_inputs(args: argparse.Namespace) -> None:
    given = [flag for attribute, flag in PLAN_INPUTS.items() if getattr(args, attribute)]
    if given:
        raise UsageError(
            f"{', '.join(given)} cannot change when resuming backfill {args.resume}: its plan inputs are saved; "
            "start a new backfill to change them"
        )


def resumed_options(args: argparse.Namespace, loaded: Loaded) -> ExecutionOptions:
    """The initial invocation's controls, overridden by those given now."""
    if loaded.spec.target.is_command:
        exec_choice = args.launcher if args.launcher and not args.launcher.startswith("dask") else None
        given = [flag for flag, value in (("--workers", args.workers), ("--launcher", exec_choice)) if value]
        if given:
            raise UsageError(
                f"{', '.join(given)} mean{'s' if len(given) == 1 else ''} nothing for a --command backfill "
                f"(pipeline partitions only): leave {'it' if len(given) == 1 else 'them'} out"
            )
    options = resume_options(loaded.manifest, loaded.store.directory).with_changes(
        max_parallel=args.max_parallel,
        workers=args.workers,
        retries=args.retries,
        on_failure=args.on_failure,
        reverse=args.reverse,  # --reverse / --no-reverse; None keeps the saved order
        launcher=args.launcher,
        dask_scheduler=args.dask_scheduler,
    )
    if args.launcher and args.launcher != "dask" and args.dask_scheduler is None:
        options = replace(options, dask_scheduler=None)  # the saved scheduler went with the saved launcher
    given, timeout = timeout_arg(args.timeout)
    if given:  # a duration, or `none` to drop a saved timeout
        options = replace(options, timeout=timeout)
    split = split_args(args)
    if split.get("split_on") == () and split.get("split_pattern") is None and "min_partition" not in split:
        split["min_partition"] = None  # --split-on none: the saved minimum goes with the saved policy
    return replace(options, **split)  # checked by judge_resume, like the rerun form's


MAX_ID_LINE = 1024  # characters: longer than any partition ID (64) or comment anyone writes
REPEATS_ALLOWED = 10_000  # an --ids-from file may name a partition more than once, up to this many times in all


def _read_ids(args: argparse.Namespace, partitions: int) -> list[str]:
    ids = list(args.ids or [])
    if args.ids_from:
        ids += _ids_in_file(args.ids_from, partitions)
        if not ids:
            raise BadInput(f"--ids-from {args.ids_from!r} holds no partition ID")
    return ids


def _ids_in_file(name: str, partitions: int) -> list[str]:
    """The partition IDs of an ``--ids-from`` file, read a line at a time and checked as read: a line that is
    neither an ID nor a comment, a line longer than any ID, or more IDs than the backfill has partitions stops
    the reading at once, so a device or a stream without end (``/dev/zero``, ``yes``) is refused, not read whole."""
    found: list[str] = []
    try:
        with open(name, encoding="utf-8") as handle:
            for number, line in enumerate(iter(lambda: handle.readline(MAX_ID_LINE + 1), ""), start=1):
                if len(line.rstrip("\n")) > MAX_ID_LINE:
                    raise BadInput(
                        f"--ids-from {name!r} line {number:,} is over {MAX_ID_LINE:,} characters: give partition "
                        "IDs, one per line"
                    )
                text = line.strip()
                if not text or text.startswith("#"):
                    continue
                if not _is_id_text(text):
                    raise BadInput(
                        f"--ids-from {name!r} line {number:,}: {text[:80]!r} is not a partition ID: give the hex ID "
                        "(at least its first 6 characters), one per line; # starts a comment"
                    )
                found.append(text)
                if len(found) > partitions + REPEATS_ALLOWED:
                    raise BadInput(
                        f"--ids-from {name!r} names over {partitions + REPEATS_ALLOWED:,} partitions, and the "
                        f"backfill has {partitions:,}: give each ID once"
                    )
    except OSError as error:
        raise BadInput(f"--ids-from {name!r} cannot be read: {error.strerror}") from None
    except UnicodeDecodeError:
        raise BadInput(f"--ids-from {name!r} is not text: give a file of partition IDs, one per line") from None
    return found


def _is_id_text(text: str) -> bool:
    """A full partition ID or a prefix of one long enough to name it (at least 6 hex characters)."""
    value = text.lower()
    return len(value) >= 6 and all(c in "0123456789abcdef" for c in value)


def resolve_ids(loaded: Loaded, texts: list[str], *, flag: str = "--ids") -> frozenset[int]:
    """Partition indices for full IDs or unique prefixes (at least 6 characters)."""
    wanted = {}
    for text in texts:
        value = text.strip().lower()
        if not _is_id_text(value):
            raise BadInput(f"{flag} {text!r} is not a partition ID: give the hex ID (at least its first 6 characters)")
        wanted[value] = text
    indices = set()
    for value in [value for value in wanted if len(value) == ID_LENGTH]:  # a whole ID that has a record: no walk
        index = _recorded_index(loaded, value)
        if index is not None:
            indices.add(index)
            del wanted[value]
    found: dict[str, list[int]] = {value: [] for value in wanted}
    plan, ids = loaded.spec.plan, loaded.spec.ids
    for interval in plan if wanted else ():
        partition_id = ids.of(interval.start, interval.end)
        for value in wanted:
            if partition_id.startswith(value):
                found[value].append(interval.index)
    for value, matches in found.items():
        if not matches:
            raise BadInput(f"{flag} {wanted[value]!r} matches no partition of backfill {loaded.store.id}")
        if len(matches) > 1:
            raise BadInput(f"{flag} {wanted[value]!r} matches {len(matches)} partitions: give more characters")
        indices.add(matches[0])
    return frozenset(indices)


ID_LENGTH = 64  # a partition ID is a SHA-256 in hex


def resolve_halves(loaded: Loaded, texts: list[str]) -> dict[str, tuple[str, int]]:
    """The texts (IDs or prefixes of 6 or more hex characters) that name halves of split partitions: text → (the
    half's ID, its plan partition). Texts that name no half are left to :func:`resolve_ids`."""
    from engine.interventions.split_marks import find_half

    found = {}
    for text in texts:
        value = text.strip().lower()
        if not _is_id_text(value):
            continue
        try:
            half = find_half(loaded.store, value)
        except ValueError as error:
            raise BadInput(f"partition {text!r}: {error}: give more characters") from None
        if half is not None:
            found[text] = half
    return found


def _recorded_index(loaded: Loaded, partition_id: str) -> int | None:
    """The partition a whole ID names, from its record file (which is checked against the plan); None when it has
    none (never attempted) or it cannot be read: the plan is walked then."""
    from engine.base.errors import StateUnreadable

    spec = loaded.spec
    try:
        record = loaded.store.read_record(partition_id, spec.plan, spec.ids.of)
    except StateUnreadable:
        return None
    return None if record is None else record.index


def selection_of(args: argparse.Namespace, loaded: Loaded) -> PartitionSelection:
    ids = _read_ids(args, len(loaded.spec.plan))
    if ids and args.rerun:
        raise UsageError("--rerun and --ids select partitions in two ways: give one of them")
    if ids:
        return PartitionSelection(indices=resolve_ids(loaded, ids))
    return PartitionSelection(mode=args.rerun or "default")


def asset_rerun_of(args: argparse.Namespace, selection: PartitionSelection, reason: str | None) -> AssetRerun | None:
    """``--asset NAME [--with-downstream]``: valid only for named partitions of a pipeline backfill, with a
    reason of its own (it runs work that succeeded, and its upstream is not checked). Whether NAME is an asset
    of the pipeline is checked against the pipeline as this invocation validates it."""
    if args.asset is None:
        if args.with_downstream:
            raise BadInput("--with-downstream means nothing without --asset NAME: name the asset to run again")
        return None
    if selection.indices is None:
        raise BadInput("--asset needs --ids (or --ids-from): name the partitions whose asset runs again")
    if reason is None and not args.dry_run:
        raise BadInput(f"--reason is required to run asset {args.asset} again: say why")
    return AssetRerun(args.asset, bool(args.with_downstream))


def whole_partitions_of(args: argparse.Namespace, loaded: Loaded) -> bool:
    """``--rerun-whole-partition``: only a pipeline's partitions carry assets over, and ``--asset`` chooses
    what runs already."""
    if not args.rerun_whole_partition:
        return False
    if loaded.spec.target.is_command:
        raise BadInput(
            "--rerun-whole-partition means nothing for a --command backfill (it has no assets): leave it out"
        )
    if args.asset is not None:
        raise BadInput("--rerun-whole-partition and --asset choose what runs in two ways: give one of them")
    return True


def check_asset_name(loaded: Loaded, name: str) -> None:
    """``--asset`` names an asset of this backfill's pipeline (a command backfill has none)."""
    if loaded.spec.target.is_command:
        raise BadInput("--asset means nothing for a --command backfill (pipeline partitions only): leave it out")
    from engine.pipeline.loading import load_pipeline
    from engine.pipeline.repository import resolve_target
    from engine.pipeline.validation import check_asset_flag

    try:
        pipeline = load_pipeline(resolve_target(loaded.spec.target.path or "").pipeline_dir)
    except BadInput as error:
        raise BadInput(f"--asset {name!r} cannot be checked: the pipeline does not load ({error})") from None
    check_asset_flag(pipeline, name)


def _say_paused(backfill_id: str, paused: Decision) -> int:
    """A paused backfill starts nothing, and a scheduler calling --continue raises no alarm: exit 0."""
    sys.stdout.write(
        f"backfill {backfill_id} is {paused.sentence()}; nothing started "
        f"(backfill resume {backfill_id} --reason TEXT lets it go on)\n"
    )
    return 0


def resume_command(args: argparse.Namespace, settings: Settings) -> int:
    _check_no_plan_inputs(args)
    reason = check_reason(args.reason)
    approve = check_digest_prefix(args.approve) if args.approve is not None else None  # a dry run's too
    loaded = settle_if_expired(load_backfill(args.resume, args.state_dir, Path.cwd()), "--continue")
    if not args.dry_run:
        paused = held_by_control(loaded, reason)
        if paused is not None:
            return _say_paused(loaded.store.id, paused)
    options = resumed_options(args, loaded)
    selection = selection_of(args, loaded)
    invocation = judge_resume(
        loaded,
        options,
        selection,
        reason=reason,
        settings=settings,
        can_ask=dashboard_possible(no_progress=args.no_progress, json_output=args.output == "json"),
        rerun_asset=asset_rerun_of(args, selection, reason),
        whole_partitions=whole_partitions_of(args, loaded),
        dry_run=args.dry_run,
    )
    if invocation.paused is not None:
        return _say_paused(loaded.store.id, invocation.paused)
    if args.dry_run:
        return _print_dry_run(args, loaded, invocation, approve)
    from tui.cli.execute import execute, run_prepared

    if invocation.preflight is None:  # nothing selected runs: nothing to judge, the executor says so
        with invocation:
            prepared = invocation.start(None)
        return run_prepared(prepared, invocation.executor(), args)
    return execute(
        invocation,
        args,
        hint=f"backfill --continue {loaded.store.id}",
        title=f"backfill {loaded.store.id} · --continue",
    )


def _print_dry_run(args: argparse.Namespace, loaded: Loaded, invocation: Invocation, approve: str | None) -> int:
    """What a --continue would run, and (when it runs something) its pre-flight report; nothing changes."""
    selection, planned, preflight = invocation.selection, invocation.planned, invocation.preflight
    selected = selection.count(loaded.board)
    approval = dry_run_approval(preflight, approve)
    if args.output == "json":
        write_state_json(
            sys.stdout.buffer,
            spec=loaded.spec,
            store=loaded.store,
            board=loaded.board,
            options=planned.options,
            parallelism=planned.parallelism,
            selected=selection.mask(loaded.board),
            skipped=len(loaded.spec.plan) - selected,
            offset=args.offset,
            limit=args.limit,
            extra=(
                {"preflight": preflight.to_json(), **({"approve": approval} if approval else {})}
                if preflight is not None
                else None
            ),
        )
        sys.stdout.buffer.flush()
        return 0
    from tui.cli.show_text import print_state_text

    print_state_text(
        loaded,
        planned.options,
        planned.parallelism,
        selection,
        args.offset,
        args.limit,
        title=f"backfill {loaded.store.id} (dry run: {human.count(selected)} partitions would run)",
    )
    if preflight is not None:
        sys.stdout.write("\n")
        write_report(sys.stdout, preflight, hint=f"backfill --continue {loaded.store.id}")
        if approval is not None:
            sys.stdout.write(approve_line(preflight, approve, bool(approval["matches"])) + "\n")
    return 0
