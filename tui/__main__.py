"""``python -m tui`` runs the ``backfill`` command."""

import sys

from tui.cli.main import main

sys.exit(main())
