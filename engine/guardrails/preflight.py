"""The pre-flight: gather the facts, run every check, apply the guardrail level, add up the verdict, digest it,
and decide whether this invocation may run (auto, or approved) — or why not."""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from engine.base.atomic import write_atomic
from engine.base.errors import EXIT_NEEDS_APPROVAL, BackfillError, BadInput, Refused
from engine.base.who import requester
from engine.guardrails.digest import MIN_PREFIX, SHOWN, changed_components, components_of, digest_of
from engine.guardrails.facts import Facts, gather
from engine.guardrails.preflight_checks import run_checks
from engine.guardrails.request import GuardRequest
from engine.guardrails.settings import GuardrailSettings
from engine.guardrails.tiers import APPROVAL, AUTO, HUMAN_ONLY, NEVER, PreflightCheck, apply_level, verdict_of


class NeedsApproval(BackfillError):
    """The verdict is approval or human-only and this invocation is not approved (exit 4)."""

    exit_code = EXIT_NEEDS_APPROVAL


@dataclass
class Preflight:
    verdict: str
    checks: list[PreflightCheck]
    digest: str
    components: dict[str, str]
    settings: GuardrailSettings
    facts: Facts = field(repr=False)

    @property
    def short_digest(self) -> str:
        return self.digest[:SHOWN]

    @property
    def warnings(self) -> list[PreflightCheck]:
        return [c for c in self.checks if c.status == "warn"]

    @property
    def pipeline_warnings(self) -> tuple[str, ...]:
        """What validation read but does not understand (keys of ``.bruin.yml``, fields of the pipeline): shown
        with the report, never a reason to stop."""
        checked = self.facts.request.checked
        return checked.warnings if checked is not None else ()

    @property
    def blocking(self) -> list[PreflightCheck]:
        return [c for c in self.checks if c.tier == self.verdict and self.verdict != AUTO]

    def to_json(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "digest": self.digest,
            "level": self.settings.level,
            "checks": [check.to_json() for check in self.checks],
            "pipeline_warnings": list(self.pipeline_warnings),
        }


def run_preflight(request: GuardRequest) -> Preflight:
    if not request.now:
        request.now = int(time.time() * 1_000_000)
    facts = gather(request)
    results = apply_level(run_checks(facts), facts.settings.level)
    components = components_of(facts, results)
    return Preflight(verdict_of(results), results, digest_of(components), components, facts.settings, facts)


@dataclass(frozen=True)
class Approval:
    digest: str
    by: str
    at: str
    tier: str
    reason: str | None
    how: str  # "auto", "--approve", "typed at the terminal"

    def to_json(self) -> dict[str, Any]:
        return {
            "digest": self.digest,
            "by": self.by,
            "at": self.at,
            "tier": self.tier,
            "reason": self.reason,
            "how": self.how,
        }


def check_digest_prefix(prefix: str) -> str:
    text = prefix.strip()
    if len(text) < MIN_PREFIX or not text.isascii() or any(c not in "0123456789abcdef" for c in text.lower()):
        raise BadInput(
            f"--approve {prefix!r} is not a plan digest: give at least {MIN_PREFIX} hexadecimal characters of the "
            "digest the pre-flight report printed"
        )
    return text.lower()


def decide(
    preflight: Preflight,
    *,
    approve: str | None,
    interactive_approval: bool,
    reason: str | None,
    now_text: str,
) -> Approval:
    """May this run? ``never`` is refused (exit 3); approval and human-only need the digest (exit 4 otherwise);
    human-only needs it typed at a terminal (``interactive_approval``)."""
    verdict = preflight.verdict
    if verdict == NEVER:
        listing = "; ".join(f"{c.name}: {c.detail}" for c in preflight.blocking)
        raise Refused(f"refused (never allowed): {listing}")
    if verdict == AUTO:
        if approve is not None and not preflight.digest.startswith(check_digest_prefix(approve)):
            # It would run unattended, but it is not what the operator approved: say so, never ignore it.
            raise NeedsApproval(_changed_message(preflight, check_digest_prefix(approve)))
        return Approval(preflight.digest, requester(), now_text, AUTO, reason, "auto")
    if interactive_approval:
        return Approval(preflight.digest, requester(), now_text, verdict, reason, "typed at the terminal")
    if approve is None:
        raise NeedsApproval(_held_message(preflight))
    prefix = check_digest_prefix(approve)
    if not preflight.digest.startswith(prefix):
        raise NeedsApproval(_changed_message(preflight, prefix))
    if verdict == HUMAN_ONLY:
        raise NeedsApproval(
            f"human-only (plan {preflight.short_digest}): --approve is not enough; run it on a terminal and type the "
            "digest on the pre-flight screen"
        )
    return Approval(preflight.digest, requester(), now_text, verdict, reason, "--approve")


def _held_message(preflight: Preflight) -> str:
    listing = "; ".join(f"{c.name}: {c.detail}" for c in preflight.blocking)
    how = (
        "run it on a terminal and type the digest on the pre-flight screen"
        if preflight.verdict == HUMAN_ONLY
        else f"review the report (--dry-run), then run again with --approve {preflight.short_digest}"
    )
    needs = "approval" if preflight.verdict == APPROVAL else "a person at a terminal (human-only)"
    return f"needs {needs} (plan {preflight.short_digest}): {listing}; {how}"


# ------------------------------------------------------------------ pending approvals (what a digest covered)


def pending_directory() -> Path:
    import platformdirs

    return Path(platformdirs.user_cache_dir("backfill")) / "approvals"


def remember(preflight: Preflight) -> None:
    """Keep the components of a shown digest (a cache), so that a later --approve can say what changed."""
    with contextlib.suppress(OSError):  # a cache: without it a stale approval is still refused, less precisely
        write_atomic(
            pending_directory() / f"{preflight.digest}.json", orjson.dumps(preflight.components), durable=False
        )


def _changed_message(preflight: Preflight, prefix: str) -> str:
    before = None
    try:
        matches = [p for p in pending_directory().iterdir() if p.name.startswith(prefix) and p.suffix == ".json"]
        if len(matches) == 1:
            before = orjson.loads(matches[0].read_bytes())
    except (OSError, orjson.JSONDecodeError):
        before = None
    if isinstance(before, dict):
        changes = changed_components(before, preflight.components)
        what = "; ".join(changes[:6]) + (f" and {len(changes) - 6} more" if len(changes) > 6 else "")
    else:
        what = "its inputs, files or evidence differ (no record of what the approved digest covered)"
    return (
        f"the plan changed since it was approved: {what}. Approved {prefix}, now {preflight.short_digest}: review "
        f"the report again (--dry-run) before approving it"
    )
