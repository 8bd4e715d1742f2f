"""Time: instants in microseconds, calendar arithmetic in a zone, Go durations, the lazy partition plan.

May import only :mod:`engine.base`.
"""
