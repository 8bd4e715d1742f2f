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
    parser.add_argument("--began", help="append this run's ID (BACKFILL_RUN_ID) and PID here as soon as it starts")
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
    time.sleep(args.sleep)
    deadline = time.monotonic() + 120
    while args.wait_for and not os.path.exists(args.wait_for) and time.monotonic() < deadline:
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
    if args.start[:10] in args.fail_on and (args.fail_while is None or os.path.exists(args.fail_while)):
        print(f"failing {args.start[:10]} on purpose", file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
