"""The Textual application: the dashboard and browser screens, their widgets, and the sources they poll.

May import the engine; never :mod:`tui.cli`.
"""
