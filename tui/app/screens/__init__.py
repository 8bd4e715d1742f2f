"""Screens of the dashboard and browser, one module each."""
