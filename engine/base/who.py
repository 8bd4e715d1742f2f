"""Who asks: ``user@host``, as every audit line and every mark's message says."""

from __future__ import annotations

import getpass
import os
import socket


def requester() -> str:
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no passwd entry (some containers): the numeric user ID still says who
        user = str(os.getuid())
    return f"{user}@{socket.gethostname()}"
