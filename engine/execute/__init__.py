"""Running a backfill: the executor thread, launchers and children, takeover of a dead executor, snapshots.

May import every other engine package; nothing in the engine imports it.
"""
