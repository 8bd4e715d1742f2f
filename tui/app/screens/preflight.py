"""The pre-flight screen: every check with its status and tier, the verdict, a reason field and, when the
verdict needs a person, the plan digest to type back as approval."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from dataclasses import dataclass

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import Footer, Input, Static

from engine.guardrails.digest import MIN_PREFIX
from engine.guardrails.preflight import Preflight
from engine.guardrails.tiers import AUTO, NEVER

ICONS = {"pass": ("✓", "green3"), "warn": ("!", "yellow3"), "fail": ("✗", "red1"), "n/a": ("·", "grey58")}
TIER_STYLES = {"auto": "grey58", "approval": "yellow3", "human-only": "dark_orange", "never": "red1"}


@dataclass(frozen=True)
class PreflightAnswer:
    reason: str
    approved: bool  # the digest was typed (only asked when the verdict needs it)


def checks_text(preflight: Preflight, width: int = 120) -> Text:
    """A check per line, its detail whole: wrapped under itself within ``width`` (the list scrolls), so at
    80×24 every word of every check can be read before approving."""
    text = Text(no_wrap=True)
    name_width = max(len(check.name) for check in preflight.checks)
    indent = 3 + 5 + 17 + name_width + 2
    room = max(20, width - indent)
    for check in preflight.checks:
        icon, style = ICONS[check.status]
        tier = check.tier if check.demanded is None else f"{check.demanded}→warn"
        text.append(f" {icon} ", style=style)
        text.append(f"{check.status:<4} ", style=style)
        text.append(f"{tier:<16} ", style=TIER_STYLES.get(check.demanded or check.tier, ""))
        text.append(f"{check.name.ljust(name_width)}  ", style="bold")
        lines = textwrap.wrap(check.detail, room, break_long_words=True, break_on_hyphens=False) or [""]
        text.append(lines[0] + "\n")
        for line in lines[1:]:
            text.append(" " * indent + line + "\n")
    return text


class PreflightScreen(Screen[PreflightAnswer | None]):
    """Shown before the first launch when the operator must give a reason or approve the plan."""

    BINDINGS = [
        Binding("escape", "cancel", "Cancel: run nothing"),
        Binding("f2", "preview", "Preview the first partition"),
    ]

    def __init__(
        self, preflight: Preflight, title: str, reason: str | None, preview: Callable[[], str] | None = None
    ) -> None:
        super().__init__()
        self.preflight, self.heading, self.reason = preflight, title, reason
        self.preview = preview
        self.needs_digest = preflight.verdict not in (AUTO, NEVER)

    def compose(self) -> ComposeResult:
        preflight = self.preflight
        with Vertical(id="preflight"):
            yield Static(Text(f"Pre-flight · {self.heading}", style="bold"), id="preflight-title")
            with VerticalScroll(id="preflight-checks"):
                yield Static(checks_text(preflight, self.app.size.width - 4))
            verdict = Text("verdict ", style="bold")
            verdict.append(preflight.verdict, style=TIER_STYLES.get(preflight.verdict, "") + " bold")
            verdict.append(f"  ·  {preflight.settings.level} guardrails  ·  plan digest ")
            verdict.append(preflight.short_digest, style="bold")
            yield Static(verdict, id="preflight-verdict")
            if preflight.verdict == NEVER:
                yield Static(Text("Never allowed as planned: fix what the failing checks name.", style="red1"))
            else:
                yield Input(value=self.reason or "", placeholder="why this backfill runs (required)", id="reason")
                if self.needs_digest:
                    yield Input(
                        placeholder=f"type the plan digest ({MIN_PREFIX}+ characters) to approve it",
                        id="digest",
                    )
            yield Static("", id="preflight-problem")
        yield Footer()

    def on_mount(self) -> None:
        if self.preflight.verdict != NEVER:
            field = "#digest" if self.reason and self.needs_digest else "#reason"
            self.query_one(field, Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        reason = self.query_one("#reason", Input).value.strip()
        problem = self.query_one("#preflight-problem", Static)
        if not reason:
            problem.update(Text("Give a reason: it is saved with the backfill and in its record.", style="red1"))
            self.query_one("#reason", Input).focus()
            return
        if not self.needs_digest:
            self.dismiss(PreflightAnswer(reason, False))
            return
        typed = self.query_one("#digest", Input).value.strip().lower()
        if event.input.id == "reason" and not typed:
            self.query_one("#digest", Input).focus()
            return
        if len(typed) < MIN_PREFIX or not self.preflight.digest.startswith(typed):
            problem.update(
                Text(
                    f"That is not this plan's digest: type at least {MIN_PREFIX} characters of "
                    f"{self.preflight.short_digest}",
                    style="red1",
                )
            )
            return
        self.dismiss(PreflightAnswer(reason, True))

    def action_cancel(self) -> None:
        self.dismiss(None)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return self.preview is not None if action == "preview" else True

    def action_preview(self) -> None:
        """F2: run the first partition into a scratch copy (in a thread: the screen stays live) and show its diff."""
        if self.preview is None:
            return
        screen = PreviewScreen()
        self.app.push_screen(screen)
        preview = self.preview
        self.run_worker(lambda: self.app.call_from_thread(screen.show, preview()), thread=True, exclusive=True)


class PreviewScreen(ModalScreen[None]):
    """What the first partition would change, once its scratch run has ended."""

    BINDINGS = [Binding("escape,q", "dismiss", "Close")]

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="preview-box"):
            yield Static("running the first partition into a scratch copy…", id="preview-text")
        yield Footer()

    def show(self, text: str) -> None:
        self.query_one("#preview-text", Static).update(Text(text, no_wrap=True, overflow="ellipsis"))
