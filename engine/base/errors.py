"""Typed errors, each carrying the process exit code a front end should use.

A front end prints ``str(error)`` as one line on stderr and exits with
``error.exit_code``; nothing in the engine prints or exits by itself.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_REFUSED = 3
EXIT_STATE_UNREADABLE = 5
EXIT_NEEDS_APPROVAL = 4  # the verdict needs approval the invocation did not give
EXIT_PAUSED = 22  # an operator paused the backfill: running children finished, the rest waits (INCOMPLETE)
EXIT_CANCELLED = 130


class BackfillError(Exception):
    """Base class: a problem the user can act on, with a one-line message."""

    exit_code = EXIT_BAD_INPUT


class BadInput(BackfillError):
    """A flag, date, zone, target or configuration value that cannot be used."""

    exit_code = EXIT_BAD_INPUT


class NothingToRun(BackfillError):
    """Valid, and there is nothing to do (a pipeline without assets): said on stdout, exit 0."""

    exit_code = EXIT_OK


class Refused(BackfillError):
    """A valid request we will not carry out (already running, production without --force)."""

    exit_code = EXIT_REFUSED


class StateWriteFailed(BackfillError):
    """The state store could not be written (a full disk, an I/O error): the run was stopped safely."""

    exit_code = EXIT_FAILED


class Fenced(BackfillError):
    """This executor no longer owns its backfill's lease: it may write nothing more."""

    exit_code = EXIT_FAILED


class StateUnreadable(BackfillError):
    """A file in the state store that does not parse or does not belong to the plan."""

    exit_code = EXIT_STATE_UNREADABLE
