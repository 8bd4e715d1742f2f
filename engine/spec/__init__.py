"""A backfill's definition: its normalized inputs, partition identity, effective parallelism and planning.

May import :mod:`engine.pipeline`, :mod:`engine.dates` and :mod:`engine.base`.
"""
