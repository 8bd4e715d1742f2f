"""The state store on disk: manifests, per-partition records and statuses, locks, the catalog of backfills.

May import :mod:`engine.spec` and below; never the executor.
"""
