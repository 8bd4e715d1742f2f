"""Guardrail settings of an environment (``.bruin.yml``): its level, thresholds, dependency gates, quotas.

```yaml
environments:
  default:
    guardrails: standard          # sandbox | standard | production
    guardrail_limits: {approval_days: 7, human_only_days: 90, max_hours: 1, max_gib: 1,
                       row_ratio: 10, verify_low: 0.5, verify_high: 2.0}
    dependency_gates: enforce     # enforce | warn | off
    connections:
      duckdb:
        - {name: warehouse, path: warehouse.duckdb, daily_run_quota: 500}
```
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from engine.base.errors import BadInput
from engine.guardrails.tiers import LEVELS, PRODUCTION, STANDARD
from engine.pipeline.yamlfile import line_of

GATES = ("enforce", "warn", "off")


@dataclass(frozen=True)
class Limits:
    approval_days: float = 7  # a longer range needs approval
    human_only_days: float = 90  # a longer range is human-only (approval with --allow-long-range)
    max_hours: float = 1  # an estimated duration above this needs approval
    max_gib: float = 1  # tables larger than this need approval
    row_ratio: float = 10  # an estimated row count above this multiple of history needs approval
    verify_low: float = 0.5  # a partition's rows below this fraction of its bucket's mean fail verification
    verify_high: float = 2.0  # and above this multiple
    auto_max_intervals: float = 1  # standard: auto for at most this many partitions (the seed: one)
    snapshot_retention_days: float = 30  # `backfill restore --prune` deletes snapshots older than this

    def to_json(self) -> dict[str, float]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


# Limits that count partitions: a fraction of one means nothing.
COUNTS = frozenset({"auto_max_intervals"})


@dataclass(frozen=True)
class GuardrailSettings:
    level: str = STANDARD
    level_source: str = "default"  # where the level came from, for the report
    limits: Limits = Limits()
    dependency_gates: str = "enforce"
    quotas: dict[str, int] = field(default_factory=dict)  # connection name → runs per day

    def to_json(self) -> dict[str, Any]:
        return {
            "level": self.level,
            "level_source": self.level_source,
            "limits": self.limits.to_json(),
            "dependency_gates": self.dependency_gates,
            "quotas": dict(self.quotas),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> GuardrailSettings:
        return cls(
            data["level"],
            data.get("level_source", "saved"),
            Limits(**data.get("limits", {})),
            data.get("dependency_gates", "enforce"),
            dict(data.get("quotas", {})),
        )


def check_level(value: str, flag: str = "--guardrails") -> str:
    if value not in LEVELS:
        raise BadInput(f"{flag} {value!r} is not a guardrail level: use sandbox, standard or production")
    return value


def settings_for_command(level: str | None) -> GuardrailSettings:
    """Command targets have no environment: ``standard``, or the level given with ``--guardrails``."""
    if level is None:
        return GuardrailSettings()
    return GuardrailSettings(check_level(level), "--guardrails")


def settings_of_environment(name: str, raw: Any, config_path: Path) -> GuardrailSettings:
    """Read the guardrail keys of one environment; a bad value is named with its file and line."""
    raw = raw if isinstance(raw, dict) else {}
    where = f"{config_path}:{{line}}: environment {name!r}"
    level = raw.get("guardrails")
    if level is None:
        level, source = (PRODUCTION, "its name contains 'prod'") if "prod" in name.lower() else (STANDARD, "default")
    elif not isinstance(level, str) or level not in LEVELS:
        line = line_of(raw, "guardrails")
        raise BadInput(where.format(line=line) + f": guardrails is {level!r}: use sandbox, standard or production")
    else:
        source = f"{config_path.name}"
    gates = raw.get("dependency_gates", "enforce")
    if isinstance(gates, bool):  # YAML 1.1 reads the documented spelling ``off`` (and no, false) as False
        gates = "enforce" if gates else "off"
    if gates not in GATES:
        raise BadInput(
            where.format(line=line_of(raw, "dependency_gates"))
            + f": dependency_gates is {gates!r}: use enforce, warn or off"
        )
    limits = Limits()
    given = raw.get("guardrail_limits") or {}
    if not isinstance(given, dict):
        raise BadInput(where.format(line=line_of(raw, "guardrail_limits")) + ": guardrail_limits must be a mapping")
    known = {f.name for f in fields(Limits)}
    for key, value in given.items():
        line = line_of(given, key)
        if key not in known:
            raise BadInput(
                where.format(line=line) + f": guardrail_limits.{key} is not a limit: use {', '.join(sorted(known))}"
            )
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < 1e9:
            raise BadInput(where.format(line=line) + f": guardrail_limits.{key} is {value!r}: use a positive number")
        if key in COUNTS and value != int(value):
            raise BadInput(
                where.format(line=line) + f": guardrail_limits.{key} is {value!r}: use a whole number of partitions"
            )
        limits = replace(limits, **{key: float(value)})
    if limits.verify_low >= 1 or limits.verify_high <= 1:
        raise BadInput(
            where.format(line=line_of(raw, "guardrail_limits")) + ": verify_low must be below 1 and verify_high above 1"
        )
    return GuardrailSettings(level, source, limits, gates, _quotas(raw, where))


def _quotas(raw: dict[str, Any], where: str) -> dict[str, int]:
    quotas: dict[str, int] = {}
    for entries in (raw.get("connections") or {}).values():
        for entry in entries if isinstance(entries, list) else []:
            if not isinstance(entry, dict) or "daily_run_quota" not in entry:
                continue
            value = entry["daily_run_quota"]
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise BadInput(
                    where.format(line=line_of(entry, "daily_run_quota"))
                    + f": daily_run_quota of {entry.get('name')!r} is {value!r}: use a whole number of runs ≥ 1"
                )
            quotas[str(entry.get("name"))] = value
    return quotas
