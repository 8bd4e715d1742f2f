"""The pre-flight report as text: one row per check (status, tier, name, detail), the verdict and the digest."""

from __future__ import annotations

from typing import IO

from engine.guardrails.preflight import Preflight

ICONS = {"pass": "✓", "warn": "!", "fail": "✗", "n/a": "·"}


def report_lines(preflight: Preflight) -> list[str]:
    lines = [f"pre-flight ({preflight.settings.level} guardrails)"]
    width = max(len(check.name) for check in preflight.checks)
    for check in preflight.checks:
        tier = check.tier if check.demanded is None else f"{check.demanded}→warn"
        lines.append(
            f"  {ICONS[check.status]} {check.status:<4}  {tier:<16}  {check.name.ljust(width)}  {check.detail}"
        )
    lines += [f"  warning  {warning}" for warning in preflight.pipeline_warnings]
    lines.append(f"verdict: {preflight.verdict}  ·  plan digest {preflight.short_digest}")
    return lines


def next_step(preflight: Preflight, command_hint: str) -> str:
    if preflight.verdict == "never":
        return "next: this backfill is never allowed as planned; fix what the failing checks name"
    if preflight.verdict == "human-only":
        return "next: run it on a terminal with --reason and type the digest on the pre-flight screen"
    if preflight.verdict == "approval":
        return f"next: {command_hint} --reason TEXT --approve {preflight.short_digest}"
    return f"next: {command_hint} --reason TEXT"


def verdict_line(preflight: Preflight) -> str:
    """The one line progress output and the announcement carry."""
    warnings = len(preflight.warnings)
    plural = "s" if warnings != 1 else ""
    return (
        f"  guard   {preflight.verdict} ({preflight.settings.level} guardrails, {warnings} warning{plural}), "
        f"plan {preflight.short_digest}"
    )


def dry_run_approval(preflight: Preflight | None, approve: str | None) -> dict[str, object] | None:
    """A dry run's ``--approve`` (already checked) against its plan, for the JSON: ``{"given", "matches"}``."""
    if preflight is None or approve is None:
        return None
    return {"given": approve, "matches": preflight.digest.startswith(approve)}


def approve_line(preflight: Preflight, given: str, matches: bool) -> str:
    """What a dry run says of its ``--approve``: what a run with it would do."""
    from engine.guardrails.tiers import HUMAN_ONLY, NEVER

    if preflight.verdict == NEVER:
        return f"--approve {given}: nothing approves a plan that is never allowed (a run is refused, exit 3)"
    if not matches:
        digest = preflight.short_digest
        return f"--approve {given}: does not match this plan's digest {digest}: a run with it is held (exit 4)"
    if preflight.verdict == HUMAN_ONLY:
        return (
            f"--approve {given}: matches this plan's digest, but a human-only plan runs only once the digest is typed "
            "on the pre-flight screen"
        )
    return f"--approve {given}: matches this plan's digest: a run with it goes ahead"


def write_report(out: IO[str], preflight: Preflight, *, hint: str | None = None) -> None:
    out.write("\n".join(report_lines(preflight)) + "\n")
    if hint is not None:
        out.write(next_step(preflight, hint) + "\n")
    out.flush()
