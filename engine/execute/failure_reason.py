"""Why an attempt failed, in one line: the failing asset and its error, or the child's last words.

``exited with code 1`` says nothing an operator can act on. A pipeline child leaves a
run record naming the asset that failed and its error; any other child usually
prints the reason last. Both are read once, when the attempt ends, and bounded.
"""

from __future__ import annotations

from pathlib import Path

import orjson

from engine.base.printable import printable
from engine.execute.launcher import describe_exit
from engine.pipeline.asset_status import AssetStatus
from engine.pipeline.repository import logs_root, repository_root  # not run_record: it imports the runner
from engine.spec.backfill_spec import BackfillSpec

REASON_CHARS = 300  # what one reason may take in a record, a table cell or a progress line
TAIL_BYTES = 8192  # of the child's log, read from the end


def failure_reason(spec: BackfillSpec, run_id: str, log_path: Path, exit_code: int) -> str:
    """The attempt's ``error``: the reason when one is found, with the signal when the child was killed."""
    reason = None
    if not spec.target.is_command and spec.target.path:
        reason = pipeline_reason(run_record_path(Path(spec.target.path), run_id))
    reason = reason or last_line(log_path)
    if exit_code < 0 or not reason:
        return describe_exit(exit_code) + (f": {reason}" if reason else "")
    return reason


def run_record_path(target: Path, run_id: str) -> Path:
    """Where ``backfill run --run-id RUN_ID`` of this target writes its record."""
    anchor = target if target.is_dir() else target.parent
    return logs_root(repository_root(anchor)) / "runs" / f"{run_id}.json"


def row_changes_of(spec: BackfillSpec, run_id: str) -> dict | None:
    """What a pipeline child's run record says it changed, per table, against the backfill's snapshot (None: it
    measured nothing: no snapshot, or no record)."""
    if spec.target.is_command or not spec.target.path:
        return None
    try:
        record = orjson.loads(run_record_path(Path(spec.target.path), run_id).read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    changes = record.get("row_changes") if isinstance(record, dict) else None
    return changes if isinstance(changes, dict) and changes else None


def pipeline_reason(path: Path) -> str | None:
    """``staging.order_lines failed: Parser Error: …`` from a run record; None if there is none to read."""
    try:
        record = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    if not isinstance(record, dict):
        return None
    for asset in record.get("assets") or []:
        if not isinstance(asset, dict) or asset.get("status") != AssetStatus.FAILED:
            continue
        name = asset.get("name", "?")
        if asset.get("error"):
            return _clip(f"{name} failed: {_first_line(str(asset['error']))}")
        for check in asset.get("checks") or []:
            if isinstance(check, dict) and check.get("passed") is False and check.get("blocking", True):
                return _clip(f"{name} check {check.get('name')} failed: {_first_line(str(check.get('detail', '')))}")
        return _clip(f"{name} failed")
    if record.get("error"):
        return _clip(_first_line(str(record["error"])))
    return None


def last_line(log_path: Path) -> str | None:
    """The last non-empty line of the child's output (terminal escapes removed), or None."""
    try:
        with open(log_path, "rb") as log:
            log.seek(0, 2)
            size = log.tell()
            log.seek(max(0, size - TAIL_BYTES))
            tail = log.read().decode("utf-8", errors="replace")
    except OSError:
        return None
    for line in reversed(tail.splitlines()):
        if text := _clip(line):
            return text
    return None


def _first_line(text: str) -> str:
    line = next((part.strip() for part in text.splitlines() if part.strip()), "")
    # the runner prefixes errors with the asset file's path: the asset's name already says which
    head, sep, rest = line.partition(": ")
    if sep and head.endswith((".sql", ".py", ".yml", ".yaml")) and "/" in head:
        line = rest
    return line


def _clip(text: str) -> str:
    """One line of printable text, at most REASON_CHARS long."""
    text = " ".join(printable(text).split())  # shown on terminals: see engine/base/printable.py
    return text if len(text) <= REASON_CHARS else text[: REASON_CHARS - 1] + "…"
