"""What Bruin's fast critical lint rules (``pkg/lint/list.go``) refuse before ``bruin run`` in fields this runner
does not otherwise act on: a pipeline Bruin would not run is not run here either (exit 2, nothing run).

Each check names the rule it follows. The fields themselves (``schedule``, ``notifications``, ``concurrency``,
``partition_by`` …) change nothing on a DuckDB run here; only their validity is Bruin's.
"""

from __future__ import annotations

import re
import zoneinfo
from pathlib import Path
from typing import Any

from engine.pipeline.asset_types import BRUIN_SQL_TYPES
from engine.pipeline.problems import Problems
from engine.pipeline.yamlfile import line_of

PIPELINE_NAME = re.compile(r"[A-Za-z0-9_.-]+", re.ASCII)
# Strategies that take materialization.incremental_key (Bruin's EnsureMaterializationValuesAreValidForSingleAsset).
KEYED_STRATEGIES = ("delete+insert", "time_interval", "scd2_by_time", "scd2_by_column")
# Strategies whose incremental_key only the guardrails read here (which rows a partition owns): Bruin refuses it.
FENCED_BY_KEY = ("append", "merge")


def check_pipeline(data: dict[str, Any], default: dict[str, Any], path: Path, problems: Problems) -> None:
    """pipeline.yml's fields under valid-pipeline-concurrency, valid-pipeline-max-active-steps,
    default-hooks-applicable-types, valid-pipeline-schedule and valid-notifications."""
    concurrency = data.get("concurrency")
    if concurrency is not None and (not _whole(concurrency) or concurrency < 0):
        problems.add(
            path, line_of(data, "concurrency"), f"concurrency {concurrency!r} must be 1 or greater (as in Bruin)"
        )
    steps = data.get("max_active_steps")
    if steps is not None and (not _whole(steps) or steps <= 0):
        problems.add(
            path,
            line_of(data, "max_active_steps"),
            f"max_active_steps {steps!r} must be a positive number (as in Bruin)",
        )
    hooks = default.get("hooks")
    applicable = hooks.get("applicable_type") if isinstance(hooks, dict) else None
    for name in applicable if isinstance(applicable, list) else []:
        if name not in BRUIN_SQL_TYPES:
            problems.add(
                path,
                line_of(hooks, "applicable_type"),
                f"default hooks' applicable_type {name!r} is not an SQL asset type: hooks reach SQL assets only "
                "(as in Bruin)",
            )
    schedule = data.get("schedule")
    if schedule not in (None, "") and (problem := schedule_problem(str(schedule))):
        problems.add(path, line_of(data, "schedule"), f"schedule {schedule!r} {problem} (as Bruin reads it)")
    check_notifications(data, "", path, problems)


def check_asset_notifications(data: dict[str, Any], path: Path, problems: Problems) -> None:
    """An asset's notifications, and those of its custom checks and column checks (Bruin's
    valid-asset-notifications)."""
    check_notifications(data, "", path, problems)
    checks = data.get("custom_checks")
    for check in checks if isinstance(checks, list) else []:
        if isinstance(check, dict):
            check_notifications(check, f"custom check {check.get('name')!r}: ", path, problems)
    columns = data.get("columns")
    for column in columns if isinstance(columns, list) else []:
        column_checks = column.get("checks") if isinstance(column, dict) else None
        for check in column_checks if isinstance(column_checks, list) else []:
            if isinstance(check, dict):
                owner = f"check {check.get('name')!r} of column {column.get('name')!r}: "
                check_notifications(check, owner, path, problems)


def check_notifications(owner: dict[str, Any], where: str, path: Path, problems: Problems) -> None:
    """``owner['notifications']`` as Bruin's validateNotifications reads it: every Slack channel (without its
    ``#``), Teams and Discord connection given and given once; every email with recipients, none blank, no two
    emails to the same list. Nothing is sent from here: a pipeline Bruin would refuse is refused."""
    notifications = owner.get("notifications")
    if notifications is None:
        return
    line = line_of(owner, "notifications")
    if not isinstance(notifications, dict):
        problems.add(path, line, f"{where}notifications must be a mapping of slack, ms_teams, discord, webhook, email")
        return
    targets = {}
    for kind in ("slack", "ms_teams", "discord", "webhook", "email"):
        entries = notifications.get(kind) or []
        if not isinstance(entries, list) or not all(isinstance(entry, dict) for entry in entries):
            problems.add(path, line_of(notifications, kind) or line, f"{where}notifications.{kind} must be a list")
            entries = []
        targets[kind] = entries
    for message in _notification_problems(targets):
        problems.add(path, line, f"{where}notifications: {message} (as Bruin checks them)")


def _notification_problems(targets: dict[str, list[dict[str, Any]]]) -> list[str]:
    found = []
    keyed = [("slack", "channel"), ("ms_teams", "connection"), ("discord", "connection")]
    for kind, key in keyed:
        seen: set[str] = set()
        for entry in targets[kind]:
            value = str(entry.get(key) or "")
            value = value.removeprefix("#") if kind == "slack" else value
            if not value:
                found.append(f"every {kind} entry needs a {key}")
            elif value in seen:
                found.append(f"{kind} {key} {value!r} is given twice")
            seen.add(value)
    groups: set[tuple[str, ...]] = set()
    for entry in targets["email"]:
        recipients = entry.get("recipients")
        if not isinstance(recipients, list) or not recipients:
            found.append("every email entry needs at least one recipient")
            continue
        kept = tuple(str(r).strip() for r in recipients if str(r or "").strip())
        if len(kept) < len(recipients):
            found.append("an email recipient is blank")
        if kept in groups:
            found.append("two email entries have the same recipients")
        groups.add(kept)
    return found


def materialization_problems(raw: dict[str, Any], kind: Any, strategy: str | None) -> list[tuple[str, str, bool]]:
    """(field, message, fatal) for what Bruin's valid-materialization refuses beyond what a run here checks: a
    view with an incremental key, a partitioning or a clustering; an incremental key beside a strategy that takes
    none. ``strategy``: as written (lowercased), None when not given. Beside ``append`` and ``merge`` the key
    fences each partition's rows for the guardrails here (docs/guardrails.md), so it only warns that Bruin's
    linter refuses it."""
    found = []
    if kind == "view":
        for name in ("incremental_key", "partition_by", "cluster_by"):
            if raw.get(name) not in (None, ""):
                found.append((name, f"a view takes no {name} (as Bruin checks it)", True))
    elif kind == "table" and strategy not in (None, *KEYED_STRATEGIES) and raw.get("incremental_key") not in (None, ""):
        fenced = strategy in FENCED_BY_KEY
        found.append(
            (
                "incremental_key",
                f"incremental_key applies only to strategies {', '.join(KEYED_STRATEGIES)} in Bruin, whose linter "
                f"refuses it beside {strategy}"
                + (": here it tells the guardrails which rows each partition owns" if fenced else ""),
                not fenced,
            )
        )
    return found


def column_detail_problems(column: dict[str, Any]) -> list[tuple[str, str]]:
    """(field, message) for what Bruin's valid-column-metadata refuses in a column's type detail: a precision or
    length that is not a positive whole number, a scale that is negative or above the precision."""
    found = []
    name = column.get("name")
    for key, least in (("precision", 1), ("length", 1), ("scale", 0)):
        value = column.get(key)
        if value is not None and (not _whole(value) or value < least):
            kind = "a positive whole number" if least else "a whole number, not negative"
            found.append((key, f"{key} {value!r} of column {name!r} must be {kind} (as Bruin checks it)"))
    precision, scale = column.get("precision"), column.get("scale")
    if _whole(precision) and _whole(scale) and 0 < precision < scale:
        found.append(
            ("scale", f"scale {scale} of column {name!r} is above its precision {precision} (as Bruin checks it)")
        )
    return found


def name_problem(name: str) -> str | None:
    """Why a pipeline's name (rendered, when it is a template) is not one Bruin takes, or None: its lint rule
    valid-pipeline-name (critical) wants ASCII letters, digits, ``_``, ``.`` and ``-``."""
    if PIPELINE_NAME.fullmatch(name):
        return None
    return f"pipeline name {name!r} must be letters, digits, _, . and - (as in Bruin)"


# Cron as Bruin parses a schedule: robfig/cron v3's ParseStandard (five fields, or a descriptor), after
# Bruin's own names (daily, hourly, weekly, monthly; continuous needs no parse).
_BRUIN_NAMES = ("daily", "hourly", "weekly", "monthly")
_DESCRIPTORS = ("@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly")
_MONTHS = {name: number for number, name in enumerate(("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep",
                                                       "oct", "nov", "dec"), 1)}  # fmt: skip
_WEEKDAYS = {name: number for number, name in enumerate(("sun", "mon", "tue", "wed", "thu", "fri", "sat"))}
# (name, lowest, highest, names) of minute, hour, day of month, month, day of week
_FIELDS = (
    ("minute", 0, 59, {}),
    ("hour", 0, 23, {}),
    ("day of month", 1, 31, {}),
    ("month", 1, 12, _MONTHS),
    ("day of week", 0, 6, _WEEKDAYS),
)
_GO_INT = re.compile(r"[+-]?[0-9]+", re.ASCII)  # strconv.Atoi: no spaces, underscores or other scripts' digits
_GO_DURATION = re.compile(r"[+-]?(?:0|(?:(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:ns|us|µs|μs|ms|s|m|h))+)", re.ASCII)
_WHAT = "is not a cron expression of five fields (minute hour day-of-month month day-of-week), a descriptor "
_WHAT += "(@daily, @every 1h …) or one of daily, hourly, weekly, monthly, continuous"


def schedule_problem(schedule: str) -> str | None:
    """Why Bruin's valid-pipeline-schedule refuses ``schedule``, or None."""
    if schedule in ("continuous", "@continuous"):
        return None
    spec = f"@{schedule}" if schedule in _BRUIN_NAMES else schedule
    if spec.startswith(("TZ=", "CRON_TZ=")):
        zone, _, spec = spec.partition("=")[2].partition(" ")
        try:
            zoneinfo.ZoneInfo(zone) if zone not in ("", "Local") else None  # Go's LoadLocation takes both
        except (ValueError, zoneinfo.ZoneInfoNotFoundError, OSError):  # OSError: a directory, too long a name
            return f"names no time zone ({zone!r})"
        spec = spec.strip()
    if spec.startswith("@"):
        if spec in _DESCRIPTORS:
            return None
        if spec.startswith("@every ") and _GO_DURATION.fullmatch(spec.removeprefix("@every ")):
            return None
        return _WHAT
    fields = spec.split()
    if len(fields) != len(_FIELDS):
        return _WHAT
    for text, (name, low, high, names) in zip(fields, _FIELDS, strict=True):
        for part in text.split(","):
            if problem := _range_problem(part, low, high, names):
                return f"has {name} {text!r}: {problem}"
    return None


def _range_problem(part: str, low: int, high: int, names: dict[str, int]) -> str | None:
    """robfig/cron's getRange: ``*``/``?``, a value or name, ``a-b``, each with an optional ``/step``."""
    range_text, *steps = part.split("/")
    if len(steps) > 1:
        return "too many slashes"
    bounds = range_text.split("-")
    if bounds[0] in ("*", "?"):
        start, end = low, high
    else:
        if len(bounds) > 2:
            return "too many hyphens"
        values = [names.get(bound.lower()) if bound.lower() in names else _go_int(bound) for bound in bounds]
        if None in values:
            return f"{part!r} is not a number{' or a name' if names else ''}"
        start, end = values[0], values[-1]  # "N/step" runs N to the highest: valid whenever N is
    step = _go_int(steps[0]) if steps else 1
    if step is None:
        return f"step {steps[0]!r} is not a number"
    if start < low or end > high:  # type: ignore[operator]  # None is refused above
        return f"outside {low}-{high}"
    if start > end:  # type: ignore[operator]
        return "its range begins after it ends"
    if step == 0:
        return "a step must be positive"
    return None


def _go_int(text: str) -> int | None:
    """A non-negative whole number as Go's Atoi reads one, else None."""
    if not _GO_INT.fullmatch(text) or int(text) < 0:
        return None
    return int(text)


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
