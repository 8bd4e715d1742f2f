"""Check results, risk tiers, guardrail levels and the verdict they add up to."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any


class Tier(StrEnum):
    """What a check demands before the plan may run, in rising order."""

    AUTO = "auto"
    APPROVAL = "approval"
    HUMAN_ONLY = "human-only"
    NEVER = "never"


class CheckStatus(StrEnum):
    PASS = "pass"
    WARN = "warn"
    FAIL = "fail"
    NOT_APPLICABLE = "n/a"


class Level(StrEnum):
    """A guardrail level: what an environment (or a command's --guardrails) makes of the tiers."""

    SANDBOX = "sandbox"
    STANDARD = "standard"
    PRODUCTION = "production"


AUTO, APPROVAL, HUMAN_ONLY, NEVER = Tier
TIERS = tuple(Tier)
PASS, WARN, FAIL, NOT_APPLICABLE = CheckStatus
SANDBOX, STANDARD, PRODUCTION = Level
LEVELS = tuple(Level)


def rank(tier: str) -> int:
    return TIERS.index(Tier(tier))


def highest(tiers: Iterable[str]) -> Tier:
    return Tier(max(tiers, key=rank, default=AUTO))


@dataclass(frozen=True)
class PreflightCheck:
    """One pre-flight check: its status, the tier it demands, one line of detail and its evidence."""

    name: str
    status: CheckStatus
    tier: Tier
    detail: str
    evidence: dict[str, Any] = field(default_factory=dict)
    demanded: Tier | None = None  # the tier before the guardrail level changed it (sandbox), else None

    def to_json(self) -> dict[str, Any]:
        data = {"name": self.name, "status": self.status, "tier": self.tier, "detail": self.detail}
        data["evidence"] = self.evidence
        if self.demanded is not None:
            data["demanded"] = self.demanded
        return data


def passed(name: str, detail: str, **evidence: Any) -> PreflightCheck:
    return PreflightCheck(name, PASS, AUTO, detail, evidence)


def not_applicable(name: str, detail: str, **evidence: Any) -> PreflightCheck:
    return PreflightCheck(name, NOT_APPLICABLE, AUTO, detail, evidence)


def warned(name: str, detail: str, **evidence: Any) -> PreflightCheck:
    return PreflightCheck(name, WARN, AUTO, detail, evidence)


def failed(name: str, tier: Tier, detail: str, **evidence: Any) -> PreflightCheck:
    return PreflightCheck(name, FAIL, tier, detail, evidence)


def apply_level(results: list[PreflightCheck], level: str) -> list[PreflightCheck]:
    """``sandbox``: approval and human-only become warnings (shown, recorded, not blocking); never stays."""
    if level != SANDBOX:
        return results
    adjusted = []
    for result in results:
        if result.tier in (APPROVAL, HUMAN_ONLY):
            result = replace(result, status=WARN, tier=AUTO, demanded=result.tier)
        adjusted.append(result)
    return adjusted


def verdict_of(results: list[PreflightCheck]) -> Tier:
    """The highest tier any check demands."""
    return highest(result.tier for result in results)
