"""Foundations every layer shares: typed errors with their exit codes, and durable file writes.

Imports nothing else from the engine.
"""
