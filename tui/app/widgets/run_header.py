"""The dashboard's header: what runs, where, how wide, and over which range."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from engine.dates.instants import format_instant, zone_name
from tui.app.sources import BackfillSource

NAME_WIDTH = 40  # a long command template must not push the zone and parallelism off the line


class RunHeader(Static):
    def __init__(self, source: BackfillSource, **kwargs) -> None:
        super().__init__(self._text(source, None), **kwargs)
        self.source = source
        self.parallel: tuple[int, int] | None = None

    def show_parallel(self, parallel: tuple[int, int] | None) -> None:
        """--max-parallel changed while it runs (here, or by another terminal): the header says what runs now."""
        if parallel is not None and parallel != self.parallel:
            self.parallel = parallel
            self.update(self._text(self.source, parallel), layout=False)  # its height is fixed

    @staticmethod
    def _text(source: BackfillSource, parallel: tuple[int, int] | None) -> Text:
        spec, parallelism, options = source.spec, source.parallelism, source.options
        target = spec.target
        text = Text(no_wrap=True, overflow="ellipsis")
        name = target.name if len(target.name) <= NAME_WIDTH else target.name[: NAME_WIDTH - 1] + "…"
        text.append(name, style="bold")
        text.append(f"  {target.kind}", style="grey58")
        if spec.environment:
            text.append(f"  env {spec.environment}", style="cyan")
        text.append(f"  {spec.unit.name} in {zone_name(spec.zone)}", style="magenta")
        asked, at_once = parallel or (parallelism.requested, parallelism.effective)
        text.append(f"  {at_once} parallel")
        if not target.is_command:  # workers are assets at once inside a pipeline run: nothing for a command
            text.append(f" × {options.workers} workers")
        if options.launcher.startswith("dask"):  # the cluster when this process runs it, else the saved choice
            text.append(f"  {getattr(source, 'cluster', None) or options.launcher}", style="grey58")
        elif not target.is_command:
            text.append(f"  {'warm runners' if options.launcher == 'warm' else 'exec'}", style="grey58")
        if at_once < asked or (parallel is None and parallelism.reason):  # (or its configuration is unreadable)
            why = parallelism.short_reason or parallelism.reason or (parallelism.limit or (0, "its limits"))[1]
            text.append(f" (capped: {why})", style="yellow")
        text.append("\n")
        # the ID first: at 80 columns the range may be cut, never the ID an operator copies
        text.append(f"backfill {source.store.id}", style="bold")
        text.append("  ·  ", style="grey58")
        text.append(f"{format_instant(spec.start, spec.zone)} → {format_instant(spec.end, spec.zone)}")
        text.append(" (end exclusive)", style="grey58")
        return text
