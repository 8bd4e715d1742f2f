"""A small app around the pre-flight screen, run before a backfill's dashboard when a person must answer."""

from __future__ import annotations

from textual.app import App

from engine.guardrails.preflight import Preflight
from tui.app.screens.preflight import PreflightAnswer, PreflightScreen
from tui.app.terminal_driver import TerminalDriver

CSS = """
#preflight { padding: 0 1; }
#preflight-title { margin-bottom: 1; }
#preflight-checks { height: auto; max-height: 70%; }
#preflight-verdict { margin: 1 0; }
Input { margin-bottom: 1; }
"""


class PreflightApp(App[PreflightAnswer | None]):
    CSS = CSS

    def __init__(self, preflight: Preflight, title: str, reason: str | None) -> None:
        super().__init__(driver_class=TerminalDriver)
        self.preflight, self.heading, self.reason = preflight, title, reason
        self.terminal_gone = False

    def terminal_lost(self) -> None:
        """Nobody is left to answer: not approved."""
        self.terminal_gone = True
        self.exit(None)

    def on_mount(self) -> None:
        self.push_screen(PreflightScreen(self.preflight, self.heading, self.reason), callback=self.exit)
