"""The backfill engine: planning, configuration, pipelines, state, execution.

Nothing here draws on a terminal: functions return values, raise the typed
errors of :mod:`engine.base.errors`, and publish snapshots for front ends to poll.
"""
