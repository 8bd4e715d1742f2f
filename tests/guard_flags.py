"""Guardrail flags for tests whose subject is not the guardrails.

Every real backfill needs a reason. Command backfills in these tests run with ``sandbox``
guardrails, so checks that would hold a run for approval (a range over 7 days, a command
with no restore path) warn instead; test pipelines built by ``tests/builder.py`` set
``guardrails: sandbox`` in their environment for the same reason. The guardrail tests
themselves use standard and production levels.
"""

REASON = ("--reason", "test")
GUARD = (*REASON, "--guardrails", "sandbox")
