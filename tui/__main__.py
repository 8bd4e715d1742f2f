"""``python -m tui`` runs the ``backfill`` command."""

import sys

from tui.cli import main

sys.exit(main())
