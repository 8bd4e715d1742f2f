"""The Bruin-format pipeline runner (``backfill run``): config, assets, selection, templating, materializations.

May import :mod:`engine.dates` and :mod:`engine.base`; it knows nothing of backfills, stores or executors.
"""
