"""A backfill's normalized inputs (what it computes) and execution controls (how it runs).

The spec is immutable: it is what the manifest saves and what resume re-plans
from. Execution controls may change between invocations of the same backfill.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from datetime import tzinfo
from enum import StrEnum
from functools import cached_property
from typing import TYPE_CHECKING, Any

from engine.base.errors import BadInput
from engine.dates.instants import format_instant, zone_name
from engine.dates.plan import PartitionUnit, Plan
from engine.dates.split import SplitUnit
from engine.pipeline.options import RunOptions
from engine.spec.identity import PartitionIds
from engine.spec.parallelism import Parallelism
from engine.spec.split_policy import DEFAULT_MIN_PARTITION, SplitPolicy, SplitTrigger

if TYPE_CHECKING:  # the pipeline code is imported only where a pipeline is planned
    from engine.pipeline.config import Config, Environment
    from engine.pipeline.validation import CheckedPipeline


class OnFailure(StrEnum):
    """What a partition that exhausted its retries does to the rest (``--on-failure``)."""

    STOP = "stop"  # launch nothing more; running children finish
    CONTINUE = "continue"
    FAIL_FAST = "fail-fast"  # launch nothing more and cancel running children


ON_FAILURE = tuple(OnFailure)
LAUNCHERS = ("warm", "exec", "dask")  # and dask-local:N, a local Dask cluster of N worker processes
MAX_LOCAL_DASK_WORKERS = 256


@dataclass(frozen=True)
class TargetSpec:
    """What each partition runs: a pipeline (or asset) path, or a command template."""

    kind: str  # "pipeline", "asset" or "command"
    name: str
    path: str | None = None  # absolute, for pipeline and asset targets
    template: str | None = None  # for command targets
    identity: dict[str, Any] = field(default_factory=dict)

    @property
    def is_command(self) -> bool:
        return self.kind == "command"

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "name": self.name,
            "path": self.path,
            "template": self.template,
            "identity": self.identity,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TargetSpec:
        return cls(data["kind"], data["name"], data.get("path"), data.get("template"), dict(data["identity"]))


@dataclass(frozen=True)
class ExecutionOptions:
    """How to run; may change when resuming."""

    max_parallel: int = 1
    workers: int = 16
    retries: int = 0
    on_failure: str = "stop"
    reverse: bool = False
    timeout: int | None = None  # microseconds per child
    launcher: str = "warm"  # pipeline partitions: "warm" runners or "exec" (a new process each); or dask
    dask_scheduler: str | None = None  # --launcher dask: the scheduler's address (else Dask's own configuration)
    split_on: tuple[str, ...] = ()  # --split-on: "timeout", "oom" (docs/splitting.md)
    split_pattern: str | None = None  # --split-on's regular expression
    min_partition: int | None = None  # --min-partition, µs (DEFAULT_MIN_PARTITION when splitting without it)

    @property
    def splits(self) -> bool:
        return bool(self.split_on) or self.split_pattern is not None

    def split_policy(self, finest: SplitUnit = SplitUnit.SECOND) -> SplitPolicy | None:
        """What splits a failing partition, None when nothing does."""
        if not self.splits:
            return None
        triggers = {SplitTrigger(word) for word in self.split_on}
        if self.split_pattern is not None:
            triggers.add(SplitTrigger.PATTERN)
        minimum = self.min_partition if self.min_partition is not None else DEFAULT_MIN_PARTITION
        return SplitPolicy(frozenset(triggers), self.split_pattern, minimum, finest)

    def to_json(self) -> dict[str, Any]:
        split = (
            {"split_on": list(self.split_on), "split_pattern": self.split_pattern, "min_partition": self.min_partition}
            if self.splits or self.min_partition is not None
            else {}
        )
        return split | {
            "launcher": self.launcher,
            "max_parallel": self.max_parallel,
            "workers": self.workers,
            "retries": self.retries,
            "on_failure": self.on_failure,
            "reverse": self.reverse,
            "timeout": self.timeout,
            "dask_scheduler": self.dask_scheduler,
        }

    def with_changes(self, **changes: Any) -> ExecutionOptions:
        return replace(self, **{k: v for k, v in changes.items() if v is not None})


def check_execution_options(options: ExecutionOptions) -> ExecutionOptions:
    """Reject impossible controls with the accepted range."""
    if options.max_parallel < 1:
        raise BadInput(f"--max-parallel {options.max_parallel} is not allowed: use 1 or more")
    if options.workers < 1:
        raise BadInput(f"--workers {options.workers} is not allowed: use 1 or more")
    if options.retries < 0:
        raise BadInput(f"--retries {options.retries} is not allowed: use 0 or more")
    if options.launcher not in LAUNCHERS and local_dask_workers(options.launcher) is None:
        raise BadInput(
            f"--launcher {options.launcher!r} is not a launcher: use warm, exec, dask or dask-local:N "
            f"(N from 1 to {MAX_LOCAL_DASK_WORKERS})"
        )
    if options.dask_scheduler is not None and options.launcher != "dask":
        raise BadInput("--dask-scheduler means nothing without --launcher dask")
    if options.dask_scheduler is not None:
        check_scheduler_address(options.dask_scheduler, "--dask-scheduler")
    if options.on_failure not in ON_FAILURE:
        raise BadInput(f"--on-failure {options.on_failure!r} is not a policy: use stop, continue or fail-fast")
    if options.min_partition is not None and not options.splits:
        raise BadInput("--min-partition means nothing without --split-on: give both, or leave it out")
    return options


# What Dask's client reaches a scheduler over: SCHEME://HOST:PORT, the host a name (underscores too: Docker's
# service names resolve), an IPv4 address or [IPv6] (with its %zone).
SCHEDULER_ADDRESS = re.compile(
    r"(?:tcp|tls|ws|wss)://(?:\[[0-9A-Za-z:.%]+\]|[A-Za-z0-9_](?:[A-Za-z0-9_.-]*[A-Za-z0-9_])?):([0-9]{1,5})",
    re.ASCII,
)


def check_scheduler_address(address: str, source: str) -> str:
    """``address`` when it is a scheduler's address Dask can connect to; else bad input naming ``source``. Dask
    itself took `localhost`, `http://…` or `tcp://` for addresses and failed later, with a traceback."""
    match = SCHEDULER_ADDRESS.fullmatch(address)
    if match is None or not 1 <= int(match.group(1)) <= 65535:
        raise BadInput(
            f"{source} {address!r} is not a Dask scheduler's address: give tcp://HOST:PORT (or tls://, ws://, "
            "wss://), e.g. tcp://scheduler:8786"
        )
    return address


def local_dask_workers(launcher: str) -> int | None:
    """N of ``dask-local:N`` (ASCII digits, 1 to 256), else None."""
    match = re.fullmatch(r"dask-local:([0-9]{1,3})", launcher, re.ASCII)
    if match is None or not 1 <= int(match.group(1)) <= MAX_LOCAL_DASK_WORKERS:
        return None
    return int(match.group(1))


@dataclass(frozen=True)
class BackfillSpec:
    target: TargetSpec
    environment: str | None
    start: int
    end: int
    zone: tzinfo
    unit: PartitionUnit
    run_options: RunOptions

    @cached_property
    def plan(self) -> Plan:
        return Plan(self.start, self.end, self.zone, self.unit)

    @cached_property
    def ids(self) -> PartitionIds:
        return PartitionIds(self.target.identity, self.environment, self.run_options.identity())

    def to_json(self) -> dict[str, Any]:
        """The normalized inputs, as shown in JSON output."""
        return {
            "target": self.target.template if self.target.is_command else self.target.path,
            "target_kind": self.target.kind,
            "name": self.target.name,
            "environment": self.environment,
            "start": format_instant(self.start, self.zone),
            "end": format_instant(self.end, self.zone),
            "timezone": zone_name(self.zone),
            "partition": self.unit.name,
            "run_options": self.run_options.to_json(),
        }


@dataclass(frozen=True)
class Planned:
    """A spec with what planning learnt about its environment, carried to the pre-flight and the executor so
    that nothing is read or validated twice (pipelines: the configuration, the environment, the validated
    pipeline with its resolved variables and selected assets)."""

    spec: BackfillSpec
    options: ExecutionOptions
    parallelism: Parallelism
    config: Config | None = None
    environment: Environment | None = None
    checked: CheckedPipeline | None = None  # None for a command, or where the pipeline was not validated
