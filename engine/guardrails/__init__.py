"""Guardrails: pre-flight checks, risk tiers and approval, snapshots, per-partition verification, the record.

Nothing here prints: every function returns values (check results, a verdict, a
digest, a verification) that the command line, progress lines and dashboard render.
"""
