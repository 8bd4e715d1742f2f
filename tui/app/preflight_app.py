"""A small app around the pre-flight screen, run before a backfill's dashboard when a person must answer."""

from __future__ import annotations

from collections.abc import Callable

from textual.app import App

from engine.guardrails.preflight import Preflight
from tui.app.screens.preflight import PreflightAnswer, PreflightScreen
from tui.app.terminal_driver import TerminalDriver

CSS = """
#preflight { padding: 0 1; }
#preflight-title { margin-bottom: 1; }
#preflight-checks { height: auto; max-height: 70%; }
#preflight-verdict { margin: 1 0; }
PreviewScreen { align: center middle; }
#preview-box { width: 110; max-width: 98%; height: auto; max-height: 100%; padding: 1 2; border: round $primary;
               background: $panel; }
Input { margin-bottom: 1; }
"""


class PreflightApp(App[PreflightAnswer | None]):
    CSS = CSS

    def __init__(
        self, preflight: Preflight, title: str, reason: str | None, preview: Callable[[], str] | None = None
    ) -> None:
        super().__init__(driver_class=TerminalDriver)
        self.preflight, self.heading, self.reason = preflight, title, reason
        self.preview = preview  # a pipeline's: F2 runs its first partition into a scratch copy (docs/diff.md)
        self.terminal_gone = False

    def terminal_lost(self) -> None:
        """Nobody is left to answer: not approved."""
        self.terminal_gone = True
        self.exit(None)

    def on_mount(self) -> None:
        screen = PreflightScreen(self.preflight, self.heading, self.reason, preview=self.preview)
        self.push_screen(screen, callback=self.exit)
