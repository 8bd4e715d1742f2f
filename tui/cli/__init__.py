"""The command line: argument parsing, plan and state output as text or JSON, progress lines, summaries.

May import :mod:`tui.app` (to show the dashboard or browser) and the engine.
"""
