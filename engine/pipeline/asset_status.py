"""How an asset's run ended, as run records say it: a module of its own so that readers of run records (the
guardrails, failure reasons) need not import the runner."""

from __future__ import annotations

from enum import StrEnum


class AssetStatus(StrEnum):
    """How an asset's run ended (and, succeeded or failed, how a whole run did)."""

    SUCCEEDED = "succeeded"
    FAILED = "failed"
    UPSTREAM_FAILED = "upstream_failed"
    SKIPPED = "skipped"
