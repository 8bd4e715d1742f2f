"""A configurable child process for executor tests: records what it saw, sleeps, fails on request.

Usage: child.py --partition PID --start START [--spans FILE] [--sleep S] [--fail-on DATE]...
                [--fail-first-attempt DIR] [--ignore-signals] [--wait-for FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--partition", required=True)
    parser.add_argument("--start", required=True)
    parser.add_argument("--end")
    parser.add_argument("--spans")
    parser.add_argument("--sleep", type=float, default=0.0)
    parser.add_argument("--fail-on", action="append", default=[])
    parser.add_argument("--fail-while", help="fail the --fail-on dates only while this file exists")
    parser.add_argument("--fail-first-attempt")
    parser.add_argument("--ignore-signals", action="store_true")
    parser.add_argument("--exclusive-dir", help="hold a lock per partition; record any overlap with a sibling")
    parser.add_argument("--record-signals", help="append the name of each SIGINT/SIGTERM/SIGHUP received; go on")
    parser.add_argument("--wait-for", help="before finishing, wait (at most 120 s) until this file exists")
    parser.add_argument("--wait-from", help="wait only in windows starting at or after this --start text")
    parser.add_argument("--began", help="append this run's ID (BACKFILL_RUN_ID) and PID here as soon as it starts")
    parser.add_argument(
        "--exclusive-hours", help="hold a lock per hour of the window; record any overlap with another child's window"
    )
    parser.add_argument("--hang-longer-than", type=float, help="hang (until stopped) when the window exceeds H hours")
    parser.add_argument("--allocate-mb-per-hour", type=float, help="allocate this many MB per hour of the window")
    parser.add_argument("--fail-longer-than", type=float, help="fail saying 'too many rows' on windows over H hours")
    parser.add_argument("--output-bytes", type=int, default=0, help="print this many bytes to the log first")
    parser.add_argument(
        "--check-listed",
        nargs=2,
        metavar=("STATE_ROOT", "LEDGER"),
        help="a half (a window within --hang-longer-than): append whether a partition record under STATE_ROOT lists it",
    )
    args = parser.parse_args()
    args.sleep = args.sleep or float(os.environ.get("CHILD_SLEEP", "0"))
    args.wait_for = args.wait_for or os.environ.get("CHILD_WAIT_FOR")
    if args.began:  # the first thing a child does: a ledger of every run that started, however it ended
        with open(args.began, "a") as began:
            began.write(json.dumps({"run_id": os.environ.get("BACKFILL_RUN_ID"), "pid": os.getpid()}) + "\n")
    if args.exclusive_dir:
        import fcntl

        handle = open(os.path.join(args.exclusive_dir, args.partition + ".lock"), "w")  # noqa: SIM115
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            with open(os.path.join(args.exclusive_dir, "OVERLAP"), "a") as overlap:
                overlap.write(args.partition + "\n")
            return 99
    if args.exclusive_hours:
        held = _lock_hours(args)
        if held is None:
            return 99
    window = _window_hours(args)
    if args.allocate_mb_per_hour:
        data = bytearray(int(window * args.allocate_mb_per_hour * 2**20))  # MemoryError under a small ulimit -v
        del data
    if args.fail_longer_than is not None and window > args.fail_longer_than:
        print(f"too many rows for a window of {window:g} h", file=sys.stderr)
        return 4
    if args.hang_longer_than is not None and window > args.hang_longer_than:
        print(f"a window of {window:g} h is too long: hanging", flush=True)
        time.sleep(3600)
    if args.check_listed:  # as it starts: is this half already in its partition's record on disk?
        _check_listed(args.partition, *args.check_listed)
    if args.ignore_signals:
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, signal.SIG_IGN)
    if args.record_signals:

        def record(signum, _frame):
            with open(args.record_signals, "a") as received:
                received.write(signal.Signals(signum).name + "\n")

        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, record)
    started = time.time()
    print(f"child {args.partition[:12]} start={args.start} end={args.end}", flush=True)
    if args.output_bytes:
        print("x" * args.output_bytes, flush=True)
    time.sleep(args.sleep)
    deadline = time.monotonic() + 120
    waits = args.wait_for and (args.wait_from is None or args.start >= args.wait_from)
    while waits and not os.path.exists(args.wait_for) and time.monotonic() < deadline:
        time.sleep(0.02)  # an event the test sends (a file), not a guess at how long it needs
    if args.spans:
        with open(args.spans, "a") as spans:
            spans.write(
                json.dumps(
                    {
                        "partition": args.partition,
                        "start": args.start,
                        "end": args.end,
                        "began": started,
                        "ended": time.time(),
                        "pid": os.getpid(),
                        "pgid": os.getpgid(0),
                        "sid": os.getsid(0),
                        "cwd": os.getcwd(),
                        "env": {k: v for k, v in os.environ.items() if k.startswith("BACKFILL_")},
                    }
                )
                + "\n"
            )
    if args.fail_first_attempt:
        marker = os.path.join(args.fail_first_attempt, args.partition)
        if not os.path.exists(marker):
            open(marker, "w").close()
            print("failing the first attempt on purpose", file=sys.stderr)
            return 7
    failing = args.start[:10] in args.fail_on or any(len(v) > 10 and args.start.startswith(v) for v in args.fail_on)
    if failing and (args.fail_while is None or os.path.exists(args.fail_while)):
        print(f"failing {args.start[:10]} on purpose", file=sys.stderr)
        return 3
    return 0


def _check_listed(partition: str, state_root: str, ledger: str) -> None:
    import glob

    listed = False
    for path in glob.glob(os.path.join(state_root, "*", "partitions", "*.json")):
        with open(path, "rb") as record:
            children = json.load(record).get("children") or []
        listed = listed or any(child.get("id") == partition for child in children)
    with open(ledger, "a") as out:
        out.write(f"{'listed' if listed else 'unlisted'} {partition}\n")


def _window_hours(args) -> float:
    from datetime import datetime

    if not args.end:
        return 0.0
    start, end = datetime.fromisoformat(args.start), datetime.fromisoformat(args.end)
    return ((end - start).total_seconds() + 1e-6) / 3600  # {end} is inclusive: 1 µs before the end


def _lock_hours(args):
    """A lock per UTC hour the window touches: two live children over one instant of data collide (a partition
    and its half, or two copies of one half); the collision is written to OVERLAP."""
    import fcntl
    from datetime import datetime

    start = int(datetime.fromisoformat(args.start).timestamp()) // 3600
    end = int(datetime.fromisoformat(args.end).timestamp()) // 3600
    handles = []
    for hour in range(start, end + 1):
        handle = open(os.path.join(args.exclusive_hours, f"{hour}.lock"), "w")  # noqa: SIM115
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            with open(os.path.join(args.exclusive_hours, "OVERLAP"), "a") as overlap:
                overlap.write(f"{args.partition} hour {hour}\n")
            return None
        handles.append(handle)
    return handles


if __name__ == "__main__":
    sys.exit(main())
