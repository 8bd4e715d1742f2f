"""Command-line grammar of the verbs that step in on a backfill: mark, cancel, pause, resume, set, audit."""

from __future__ import annotations

from tui.cli.arguments import BACKFILL_ID, MAX_COUNT, Parser, non_negative_int, positive_int, state_dir_flag

MAX_ROWS = 10**15  # rows loaded by hand: beyond this it is a typo


def _common(parser: Parser) -> Parser:
    parser.add_argument("id", type=BACKFILL_ID, help="backfill ID (or a unique prefix)")
    parser.add_argument("--reason", help="why (required; recorded with who and when)")
    state_dir_flag(parser)
    return parser


def mark_parser() -> Parser:
    parser = Parser(
        prog="backfill mark",
        description="Set partitions (or the backfill itself) succeeded, failed or skipped, with a reason.",
    )
    _common(parser)
    parser.add_argument("partitions", nargs="*", metavar="PARTITION", help="partition IDs or unique prefixes")
    parser.add_argument(
        "--status-filter",
        action="append",
        default=[],
        metavar="STATUS",
        help="mark every partition with this status (repeatable)",
    )
    parser.add_argument("--status", help="succeeded, failed or skipped (the backfill itself: succeeded or failed)")
    parser.add_argument(
        "--rows",
        type=non_negative_int("--rows", MAX_ROWS),
        help="rows loaded by hand (a marked success then satisfies row-count checks)",
    )
    parser.add_argument("--asset", help="mark one asset of each pipeline partition")
    parser.add_argument(
        "--stale",
        action="store_true",
        help="the named partitions' attempts are stale: reconcile their expired lease first; refused while live",
    )
    return parser


def simple_parser(verb: str, description: str) -> Parser:
    parser = Parser(prog=f"backfill {verb}", description=description)
    if verb == "cancel":
        _common(parser)
        parser.add_argument(
            "--ids",
            nargs="+",
            metavar="PARTITION_ID",
            help="stop only these running partitions (IDs or unique prefixes); the rest goes on",
        )
        return parser
    if verb == "set":
        _common(parser)
        parser.add_argument(
            "--max-parallel",
            type=positive_int("--max-parallel", MAX_COUNT),
            help="partitions at once from now on (the live run at once; later --continue starts from it)",
        )
        return parser
    if verb not in ("pause", "resume"):
        return _common(parser)
    parser.add_argument("id", nargs="?", type=BACKFILL_ID, help="backfill ID (or a unique prefix); or give --target")
    parser.add_argument(
        "--target",
        metavar="PATH",
        help=f"{verb} a whole pipeline (its directory or an asset file): new backfills, --continue and backfill run "
        "of it start nothing (exit 0)" + (", and its running backfills are paused" if verb == "pause" else ""),
    )
    parser.add_argument("--reason", help="why (required; recorded with who and when)")
    state_dir_flag(parser)
    return parser


def reconcile_parser() -> Parser:
    parser = Parser(prog="backfill reconcile", description="Settle backfills whose executor's lease expired.")
    parser.add_argument(
        "id", nargs="?", type=BACKFILL_ID, help="backfill ID (or a unique prefix); all backfills without it"
    )
    parser.add_argument("--reason", help="why (recorded; default: lease expired)")
    state_dir_flag(parser)
    return parser


def audit_parser() -> Parser:
    parser = Parser(prog="backfill audit", description="Every intervention on a backfill, oldest first.")
    parser.add_argument(
        "id",
        nargs="?",
        type=BACKFILL_ID,
        help="backfill ID (or a unique prefix); without it, what belongs to no backfill (stand-ins)",
    )
    state_dir_flag(parser)
    parser.add_argument(
        "--since",
        type=since_arg,
        metavar="WHEN",
        help="only what was applied at or after WHEN: an RFC 3339 time with its offset, a date (midnight UTC), "
        "or a Go duration ago (90m, 48h)",
    )
    parser.add_argument(
        "--action",
        action="append",
        default=[],
        type=actions_arg,
        metavar="ACTION",
        help="only these actions (repeatable, or comma-separated: MARK,CANCEL)",
    )
    parser.add_argument("--output", choices=("text", "json"), default=None, help="text (default) or JSON lines")
    parser.add_argument("--no-color", action="store_true", help="no colours (also NO_COLOR, TERM=dumb)")
    return parser


def since_arg(text: str) -> int:
    """``--since``: microseconds since the epoch, from an instant with its offset, a date, or a duration ago."""
    import re
    from datetime import UTC, date, datetime

    from engine.base.errors import BadInput
    from engine.dates.durations import parse_duration
    from engine.dates.instants import to_micros

    accepted = "an RFC 3339 time with its offset (2026-12-01T09:00:00Z), a date (2026-12-01) or a duration ago (48h)"
    if not text.strip():
        raise BadInput(f"--since {text!r} is not a time: give {accepted}")
    now = datetime.now(UTC)
    if re.fullmatch(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", text):
        try:
            moment = datetime.combine(date.fromisoformat(text), datetime.min.time(), UTC)
        except ValueError:
            raise BadInput(f"--since {text!r} is not a date: give {accepted}") from None
    elif re.fullmatch(r"[0-9.]+[a-zµ]+([0-9.]+[a-zµ]+)*", text):
        since = to_micros(now) - parse_duration(text, "--since")
        if since < to_micros(datetime(1, 1, 2, tzinfo=UTC)):  # no later reader could print the instant
            raise BadInput(f"--since {text!r} reaches back before the year 1: give a shorter duration, or a date")
        return since
    else:
        try:
            moment = datetime.fromisoformat(text)
        except ValueError:
            raise BadInput(f"--since {text!r} is not a time: give {accepted}") from None
        if moment.tzinfo is None:
            raise BadInput(f"--since {text!r} has no offset: add Z or +HH:MM (which zone it means is not guessed)")
    if moment > now:
        raise BadInput(f"--since {text!r} is in the future: nothing was applied after it yet")
    return to_micros(moment)


def actions_arg(text: str) -> list[str]:
    """``--action``: audit actions, case-insensitive, comma-separated."""
    from engine.base.errors import BadInput
    from engine.store.audit import ACTIONS

    names = [name.strip().upper() for name in text.split(",")]
    for name in names:
        if name not in ACTIONS or not name.isascii():
            raise BadInput(f"--action {name or text!r} is not an audit action: give one of {', '.join(ACTIONS)}")
    return names
