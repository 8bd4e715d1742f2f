"""``default:`` of ``pipeline.yml``, merged into every asset as Bruin merges it (``pkg/pipeline/pipeline.go``,
``SetupDefaultsFromPipeline``): a value the asset sets wins; strings, the type and the timeout fill what the
asset leaves empty; tags, domains and dependencies are appended when missing; parameters, meta and metadata
merge by key; materialization fills field by field; columns, their checks and custom checks merge by name
(case-insensitive); secrets by key; hooks reach SQL assets only (and only the types ``applicable_type`` lists
when it is given), each phase on its own.

The merge happens on the header as read, before the asset is validated, so a merged value is checked like
one written in the asset (a problem with it names the asset's file).
"""

from __future__ import annotations

import copy
from typing import Any

from engine.pipeline.yamlfile import Located

# Every key of Bruin's DefaultValues.
DEFAULT_FIELDS = (
    "type",
    "description",
    "start_date",
    "connection",
    "tags",
    "domains",
    "meta",
    "materialization",
    "depends",
    "image",
    "instance",
    "owner",
    "tier",
    "parameters",
    "secrets",
    "extends",
    "columns",
    "custom_checks",
    "hooks",
    "metadata",
    "snowflake",
    "athena",
    "bigquery",
    "doris",
    "starrocks",
    "routing",
    "interval_modifiers",
    "rerun_cooldown",
    "retries",
    "timeout",
    "refresh_restricted",
    "notifications",
)
# The timeout is not merged: the pipeline's default.timeout applies to assets without one, and says so when it
# stops one ("the pipeline's default.timeout").
_FILLED = ("description", "start_date", "connection", "image", "instance", "owner", "tier", "rerun_cooldown")
_APPENDED = ("tags", "domains", "extends")
_BY_KEY = ("parameters", "meta", "metadata")
_MATERIALIZATION = (
    "type",
    "strategy",
    "partition_by",
    "cluster_by",
    "incremental_key",
    "incremental_predicate",
    "time_granularity",
)
_COLUMN_FILLED = ("type", "description", "mask", "default", "collation", "owner", "source_column", "merge_sql")
_COLUMN_OR = ("primary_key", "update_on_merge")
_COLUMN_IF_ABSENT = ("nullable", "precision", "scale", "length", "foreign_key")


def _empty(value: Any) -> bool:
    return value is None or value == "" or value == 0 or value == [] or value == {}


def _copy(value: Any) -> Any:
    return copy.deepcopy(value)


def with_defaults(data: dict[str, Any], default: dict[str, Any], *, python_file: bool) -> dict[str, Any]:
    """``data`` (an asset's header) with ``default`` merged in; ``data`` itself is left as it was."""
    if not default:
        return data
    merged = Located(data)
    merged.line, merged.lines = getattr(data, "line", 0), dict(getattr(data, "lines", {}))
    if "type" not in merged and not python_file and isinstance(default.get("type"), str) and default["type"]:
        merged["type"] = default["type"]
    for key in _FILLED:
        if _empty(merged.get(key)) and not _empty(default.get(key)):
            merged[key] = _copy(default[key])
    for key in _APPENDED:
        extra = default.get(key)
        if isinstance(extra, list) and extra:
            own = merged.get(key) if isinstance(merged.get(key), list) else []
            merged[key] = [*own, *(v for v in extra if v not in own)]
    for key in _BY_KEY:
        extra = default.get(key)
        if isinstance(extra, dict) and extra:
            own = merged.get(key) if isinstance(merged.get(key), dict) else {}
            merged[key] = _keyed_merge(own, extra)
    restriction_unset = "refresh_restricted" not in merged and "full_refresh_restricted" not in merged
    if restriction_unset and "refresh_restricted" in default:
        merged["refresh_restricted"] = default["refresh_restricted"]
    _merge_materialization(merged, default.get("materialization"))
    _merge_depends(merged, default.get("depends"))
    _merge_named(merged, "columns", default.get("columns"), _merge_column)
    _merge_named(merged, "custom_checks", default.get("custom_checks"), _merge_filled)
    _merge_secrets(merged, default.get("secrets"))
    _merge_modifiers(merged, default.get("interval_modifiers"))
    _merge_hooks(merged, default.get("hooks"), python_file=python_file)
    return merged


def _keyed_merge(own: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    result = Located(own)
    result.line, result.lines = getattr(own, "line", 0), dict(getattr(own, "lines", {}))
    for key, value in extra.items():
        if key not in result:
            result[key] = _copy(value)
    return result


def _merge_materialization(merged: dict[str, Any], extra: Any) -> None:
    if not isinstance(extra, dict) or not extra:
        return
    own = merged.get("materialization") if isinstance(merged.get("materialization"), dict) else {}
    result = _keyed_merge(own, {})
    for key in _MATERIALIZATION:
        if _empty(result.get(key)) and not _empty(extra.get(key)):
            result[key] = _copy(extra[key])
    for key in extra:  # a key Bruin does not define is left for validation to name
        if key not in _MATERIALIZATION and key not in result:
            result[key] = _copy(extra[key])
    merged["materialization"] = result


def _dependency_name(entry: Any) -> Any:
    return entry.get("asset") if isinstance(entry, dict) else entry


def _merge_depends(merged: dict[str, Any], extra: Any) -> None:
    if not isinstance(extra, list) or not extra:
        return
    own = merged.get("depends") if isinstance(merged.get("depends"), list) else []
    names = {_dependency_name(entry) for entry in own}
    merged["depends"] = [*own, *(_copy(e) for e in extra if _dependency_name(e) not in names)]


def _name(entry: Any) -> str | None:
    name = entry.get("name") if isinstance(entry, dict) else None
    return name.lower() if isinstance(name, str) else None


def _merge_named(merged: dict[str, Any], key: str, extra: Any, merge_one) -> None:
    """Entries merged by name, case-insensitive: a missing one appended, an existing one filled."""
    if not isinstance(extra, list) or not extra:
        return
    own = [_copy(e) for e in merged.get(key)] if isinstance(merged.get(key), list) else []
    for entry in extra:
        index = next((i for i, e in enumerate(own) if _name(e) is not None and _name(e) == _name(entry)), None)
        if index is None:
            own.append(_copy(entry))
        elif isinstance(own[index], dict) and isinstance(entry, dict):
            merge_one(own[index], entry)
    merged[key] = own


def _merge_filled(target: dict[str, Any], extra: dict[str, Any]) -> None:
    for key, value in extra.items():
        if _empty(target.get(key)) and not _empty(value):
            target[key] = _copy(value)


def _merge_column(target: dict[str, Any], extra: dict[str, Any]) -> None:
    for key in _COLUMN_FILLED:
        if _empty(target.get(key)) and not _empty(extra.get(key)):
            target[key] = _copy(extra[key])
    for key in _COLUMN_OR:
        if extra.get(key) is True:
            target[key] = True
    for key in _COLUMN_IF_ABSENT:
        if key not in target and key in extra:
            target[key] = _copy(extra[key])
    for key in ("tags", "domains"):
        if isinstance(extra.get(key), list):
            own = target.get(key) if isinstance(target.get(key), list) else []
            target[key] = [*own, *(v for v in extra[key] if v not in own)]
    if isinstance(extra.get("meta"), dict):
        own = target.get("meta") if isinstance(target.get("meta"), dict) else {}
        target["meta"] = _keyed_merge(own, extra["meta"])
    _merge_named(target, "checks", extra.get("checks"), _merge_filled)


def _merge_secrets(merged: dict[str, Any], extra: Any) -> None:
    if not isinstance(extra, list) or not extra:
        return
    own = merged.get("secrets") if isinstance(merged.get("secrets"), list) else []
    keys = {entry.get("key") for entry in own if isinstance(entry, dict)}
    merged["secrets"] = [*own, *(_copy(e) for e in extra if not isinstance(e, dict) or e.get("key") not in keys)]


def _merge_modifiers(merged: dict[str, Any], extra: Any) -> None:
    """Start and end each on their own, when the asset has modifiers of its own (without any, the pipeline's
    default.interval_modifiers apply whole, as before)."""
    own = merged.get("interval_modifiers")
    if not isinstance(own, dict) or not isinstance(extra, dict):
        return
    merged["interval_modifiers"] = _keyed_merge(own, {k: v for k, v in extra.items() if k in ("start", "end")})


def _merge_hooks(merged: dict[str, Any], extra: Any, *, python_file: bool) -> None:
    if not isinstance(extra, dict) or not extra:
        return
    asset_type = merged.get("type") or ("python" if python_file else "duckdb.sql")
    if not str(asset_type).endswith(".sql"):
        return  # Bruin's assetAcceptsDefaultHooks: SQL assets only
    applicable = extra.get("applicable_type")
    if isinstance(applicable, list) and applicable and asset_type not in applicable:
        return
    own = merged.get("hooks") if isinstance(merged.get("hooks"), dict) else {}
    result = _keyed_merge(own, {})
    for phase in ("pre", "post"):
        if not result.get(phase) and extra.get(phase):
            result[phase] = _copy(extra[phase])
    merged["hooks"] = result
