"""The real ``backfill`` command with a dashboard that raises after a few polls: a planted UI fault.

Run as ``python tests/tui/crashing_dashboard.py ARGS...``; everything but the screen is the product's own code.
"""

from __future__ import annotations

import sys

from tui.app.screens.dashboard import DashboardScreen
from tui.cli.main import main

_original = DashboardScreen.refresh_from_source
_calls = {"n": 0}


def refresh_then_fail(self):
    _calls["n"] += 1
    if _calls["n"] == 8:
        raise ZeroDivisionError("planted dashboard fault")
    return _original(self)


DashboardScreen.refresh_from_source = refresh_then_fail

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
