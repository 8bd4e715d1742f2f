"""Interventions: an operator stepping in on a backfill (mark, cancel, pause, resume), from any terminal.

A request reaches the live executor through the backfill's ``requests/`` folder; without a live executor the
command applies it itself under the backfill's lock. Either way the change goes through :mod:`.apply`, and every
change leaves one line per partition (or one for the backfill) in the append-only ``audit.jsonl``.
"""
