"""Everything a person sees: the CLI, progress lines, text and JSON output, the Textual dashboard."""
