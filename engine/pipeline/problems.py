"""Validation problems collected across a pipeline's files, reported all at once."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from engine.base.errors import BadInput


@dataclass
class Problems:
    """Collected validation problems, each ``path:line: message``."""

    items: list[str] = field(default_factory=list)
    # What is read but not understood (a field Bruin accepts that changes nothing here): shown, never fatal.
    warnings: list[str] = field(default_factory=list)

    def warn(self, path: Path | str, line: int, message: str) -> None:
        self.warnings.append(f"{path}:{line}: {message}" if line else f"{path}: {message}")

    def add(self, path: Path | str, line: int, message: str) -> None:
        self.items.append(f"{path}:{line}: {message}" if line else f"{path}: {message}")

    def raise_if_any(self, what: str) -> None:
        if self.items:
            count = len(self.items)
            plural = "problem" if count == 1 else "problems"
            listing = "\n".join([*(f"  {item}" for item in self.items), *(f"  warning: {w}" for w in self.warnings)])
            raise BadInput(f"{count} {plural} in {what} (nothing was run):\n{listing}")
