"""What a pre-flight is asked about: the planned backfill, which of its partitions run, and the operator's
guardrail choices (saved with the backfill, so a resume is judged by the same rules)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.base.errors import BadInput
from engine.base.printable import has_controls
from engine.spec.backfill_spec import BackfillSpec, ExecutionOptions

if TYPE_CHECKING:  # the pipeline code is imported only where a pipeline is planned
    from engine.pipeline.config import Config, Environment
    from engine.pipeline.validation import CheckedPipeline

VERIFY_MODES = ("on", "warn", "off")
TRIGGER, RERUN = "trigger", "rerun"
MAX_REASON = 2000


@dataclass(frozen=True)
class GuardOptions:
    """The operator's guardrail choices for one backfill."""

    level: str | None = None  # --guardrails (command targets); pipelines take theirs from .bruin.yml
    allow_long_range: bool = False
    reversible: bool = False  # --reversible: the operator states a command backfill can be undone
    snapshot: bool = True  # pipelines: copy what the backfill can change before the first partition
    verify: str = "on"
    verify_command: str | None = None
    ignore_dependencies: bool = False  # --ignore-dependencies: upstream coverage is not checked (recorded)

    def to_json(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> GuardOptions:
        data = data or {}
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


def check_reason(reason: str | None, flag: str = "--reason") -> str | None:
    """A reason is free text, but not an empty one, and not a novel."""
    if reason is None:
        return None
    if not reason.strip():
        raise BadInput(f"{flag} '' is empty: say why this backfill runs (e.g. --reason 'fix for view_count')")
    if len(reason) > MAX_REASON:
        raise BadInput(f"{flag} is {len(reason):,} characters long: keep it under {MAX_REASON:,}")
    if has_controls(reason):
        raise BadInput(f"{flag} {reason[:40]!r} contains control characters (a newline?): give one line of text")
    return reason.strip()


def check_verify_mode(mode: str) -> str:
    if mode not in VERIFY_MODES:
        raise BadInput(f"--verify {mode!r} is not a verification mode: use on, warn or off")
    return mode


@dataclass(kw_only=True)
class GuardRequest:
    """One invocation to judge: a new backfill (``trigger``) or a ``--continue`` (``rerun``)."""

    spec: BackfillSpec
    options: ExecutionOptions
    guard: GuardOptions
    effective_parallel: int
    mode: str
    selected_count: int
    selected: Callable[[], Iterator[int]]  # the partition indices that run, in order
    state_root: Path
    working_directory: Path
    config: Config | None = None
    environment: Environment | None = None
    checked: CheckedPipeline | None = None  # the pipeline as planning validated it (pipelines: required)
    backfill_id: str | None = None  # the backfill itself, when resuming (not "another executor")
    reason: str | None = None
    now: int = 0  # microseconds since the epoch
    settings_override: Any = None  # a GuardrailSettings saved with the backfill (command targets)
    bounds: tuple[int, int] | None = None  # first and last selected index, when known without iterating
    selection_key: str = "all"  # what selects the partitions (hashed instead of their IDs when there are many)
