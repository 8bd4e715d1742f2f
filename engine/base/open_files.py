"""Room in this process's open-files limit for the children it runs at once.

Each child of a local launcher holds a descriptor or more of the executor (measured: one per ``--command``
child; a warm runner's pipes a few more). A desktop's default soft limit (1024) then fails the partition that
starts past it ("Too many open files") and stops the backfill, though the hard limit is usually far higher.
So the executor raises its soft limit to what its children need, never past the hard limit, and only as far as
needed: children inherit it, and some programs walk every descriptor up to it.
"""

from __future__ import annotations

import contextlib
import resource

RESERVE = 64  # the executor's own: records, the index, locks, logs, a DuckDB file
PER_CHILD = 4  # what one child may hold of the executor's descriptors, generously


def make_room(children: int) -> int:
    """Raise the soft RLIMIT_NOFILE to what ``children`` at once need, within the hard limit; the soft limit
    after (``RLIM_INFINITY`` stays so)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = RESERVE + children * PER_CHILD
    if soft == resource.RLIM_INFINITY or soft >= need:
        return soft
    target = need if hard == resource.RLIM_INFINITY else min(need, hard)
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        soft = target
    return soft
