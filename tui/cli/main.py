"""The ``backfill`` command: parse, dispatch, and turn engine errors into one line and an exit code.

Imports stay lazy: ``backfill run`` (paid once per partition) must not load
Textual, and a dry run must not load DuckDB.
"""

from __future__ import annotations

import gc
import os
import signal
import sys
from collections.abc import Sequence

from engine.base.errors import EXIT_BAD_INPUT, EXIT_CANCELLED, EXIT_FAILED, BackfillError, NothingToRun
from engine.base.internal_verbs import LOCAL_CLUSTER_VERB, RUNNER_VERB
from tui.cli.arguments import IMPLEMENTED_VERBS, VERBS, UsageError
from tui.cli.terminal import open_standard_streams


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the exit code."""
    open_standard_streams()
    code = _main(argv)
    if argv is None and code == EXIT_CANCELLED:
        # Stopped by a signal, every child waited for: the interpreter's own finish puts the default action back
        # for any signal we handled, so the same signal sent again then (a supervisor repeating SIGTERM) would
        # turn exit 130 into a death by that signal (143). Nothing is left to stop. (Only the command's own
        # process: the warm runner calls main with arguments, partition after partition.)
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, signal.SIG_IGN)
    if "distributed" in sys.modules:
        # Everything is written and closed. Dask's many objects make the interpreter's last collection take
        # 0.16 s of a user's wait for the prompt (benchmarks/dask_parts_bench.py); frozen, they are freed without
        # it.
        gc.freeze()
    return code


def _main(argv: Sequence[str] | None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == [RUNNER_VERB]:  # internal: started by the warm launcher, never by a person
        from tui.cli.warm_runner import serve_from_arguments

        return serve_from_arguments(args[1:], main)
    if args[:1] == [LOCAL_CLUSTER_VERB]:  # internal: started by --launcher dask-local:N, never by a person
        from tui.cli.local_cluster_process import serve

        return serve(args[1:])
    try:
        if args and args[0] in VERBS:
            return _verb(args[0], args[1:])
        if args and not args[0].startswith("-"):
            _check_not_a_mistyped_verb(args[0])
        from tui.cli.backfill_command import backfill_command

        return backfill_command(args)
    except UsageError as error:
        _fail(str(error))
        return EXIT_BAD_INPUT
    except NothingToRun as error:
        print(error)
        return error.exit_code
    except BackfillError as error:
        _fail(str(error))
        return error.exit_code
    except KeyboardInterrupt:
        return EXIT_CANCELLED
    except BrokenPipeError:
        # The reader went away (`backfill ... | head`): not an error of ours.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except OSError as error:  # a full disk or an I/O error no layer above knew how to say: one line, no frames
        where = f" ({error.filename})" if error.filename else ""
        _fail(
            f"{error.strerror or error}{where}: the command stopped there; what it had written stays, and no "
            "child was left running; fix the cause, then run it again"
        )
        return EXIT_FAILED


def _verb(verb: str, args: list[str]) -> int:
    if verb == "run":
        from tui.cli.run_command import run_command

        return run_command(args)
    if verb == "list":
        from tui.cli.browse_command import list_command

        return list_command(args)
    if verb == "show":
        from tui.cli.browse_command import show_command

        return show_command(args)
    if verb == "watch":
        from tui.cli.browse_command import watch_command

        return watch_command(args)
    if verb == "restore":
        from tui.cli.restore_command import restore_command

        return restore_command(args)
    if verb == "diff":
        from tui.cli.diff_command import diff_command

        return diff_command(args)
    if verb in ("mark", "cancel", "pause", "resume", "set"):
        from tui.cli.intervene_command import intervene_command

        return intervene_command(verb, args)
    if verb == "reconcile":
        from tui.cli.reconcile_command import reconcile_command

        return reconcile_command(args)
    if verb == "audit":
        from tui.cli.audit_command import audit_command

        return audit_command(args)
    raise UsageError(f"'{verb}' is reserved for a later version; available verbs: {', '.join(IMPLEMENTED_VERBS)}")


def _check_not_a_mistyped_verb(word: str) -> None:
    """``backfill lst`` is a typo of ``list`` unless a path of that name exists."""
    import difflib
    from pathlib import Path

    if "/" in word or "." in word or len(word) > 40:
        return  # a path (resolving it, a too-long name included, is the target's own check)
    if Path(word).exists():
        return
    close = difflib.get_close_matches(word, VERBS, n=1, cutoff=0.6)
    if close:
        raise UsageError(f"unknown command {word!r} — did you mean {close[0]!r}? (a target must be an existing path)")


def _fail(message: str) -> None:
    first, *rest = message.splitlines() or [""]
    sys.stderr.write(f"backfill: error: {first}\n" + "".join(f"{line}\n" for line in rest))
    sys.stderr.flush()


def entry() -> None:
    sys.exit(main())
