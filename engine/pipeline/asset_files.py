"""Reading one asset file in Bruin's format: a SQL or Python file's ``@bruin`` header (block or inline), or a
``*.asset.yml`` and the file its ``run:`` names; what the file says is built into an :class:`Asset` by
:func:`engine.pipeline.assets.build_asset`."""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path
from typing import Any

import orjson

from engine.base.errors import BadInput
from engine.pipeline.asset_types import AssetKind
from engine.pipeline.assets import YAML_ASSET_SUFFIXES, Asset, build_asset
from engine.pipeline.defaults import with_defaults
from engine.pipeline.glossary import Glossary, extend_columns
from engine.pipeline.inline_header import inline_header
from engine.pipeline.problems import Problems
from engine.pipeline.yamlfile import Located, line_of, parse_yaml

_SQL_HEADER = re.compile(r"\A((?:\s*--[^\n]*\n)*\s*)/\*\s*@bruin(.*?)@bruin\s*\*/", re.S)
_PY_HEADER = re.compile(r"\A(\s*(?:#[^\n]*\n\s*)*)(?:\"\"\"|''')\s*@bruin(.*?)@bruin\s*(?:\"\"\"|''')", re.S)


def is_asset_file(path: Path) -> bool:
    return path.name.endswith((".sql", ".py", *YAML_ASSET_SUFFIXES))


def read_asset(
    path: Path,
    pipeline_dir: Path,
    problems: Problems,
    defaults: dict[str, Any] | None = None,
    glossary: Glossary | None = None,
) -> Asset | None:
    """Parse one asset file, ``default:`` of pipeline.yml merged in and the repository's glossary applied to its
    columns; None when it is not an asset (a .sql/.py file without a @bruin header)."""
    glossary = glossary or Glossary()
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        problems.add(path, 0, f"cannot read the file: {error}")
        return None
    relative = path.relative_to(pipeline_dir).as_posix()
    run_file = None
    if path.name.endswith(YAML_ASSET_SUFFIXES):
        header, header_line, body, body_line = text, 1, "", 1
    else:
        pattern = _SQL_HEADER if path.suffix == ".sql" else _PY_HEADER
        match = pattern.match(text)
        if not match:
            inline = inline_header(text, path.suffix)
            if inline is None:
                if "@bruin" in text:
                    problems.warn(path, 1, "mentions @bruin but has no @bruin header Bruin reads: not an asset")
                return None
            data, body, skipped = inline
            for line, message in skipped:
                problems.warn(path, line, message)
            data = with_defaults(data, defaults or {}, python_file=path.suffix == ".py")
            uses_glossary = extend_columns(data, glossary, path, problems)
            asset = build_asset(data, path, relative, data.line, body, 1, problems)
            return _digested(asset, text, defaults, glossary if uses_glossary else None)
        header = match.group(2)
        header_line = match.group(1).count("\n") + 1
        body = text[match.end() :]
        body_line = text[: match.end()].count("\n") + 1
    try:
        data = parse_yaml(header, str(path), line_offset=header_line - 1 if header is not text else 0)
    except BadInput as error:
        problems.items.append(str(error))
        return None
    if data is None:
        data = Located()
        data.lines, data.line = {}, header_line
    if not isinstance(data, dict):
        problems.add(path, header_line, "the @bruin header must be a YAML mapping")
        return None
    data = with_defaults(data, defaults or {}, python_file=path.suffix == ".py")
    uses_glossary = extend_columns(data, glossary, path, problems)
    yaml_asset = header is text
    if yaml_asset:  # what runs is the file `run:` names
        run_file, body = _run_file(data, path, problems)
        text += f"\0{body}" if run_file is not None else ""  # a YAML asset without one keeps its digest
    asset = build_asset(data, path, relative, header_line, body, body_line, problems, run_file)
    if yaml_asset and asset.kind == AssetKind.PYTHON and "run" not in data:
        problems.add(path, 1, "a Python asset defined in YAML needs run: naming its script (else its YAML would run)")
    return _digested(asset, text, defaults, glossary if uses_glossary else None)


def _run_file(data: dict[str, Any], path: Path, problems: Problems) -> tuple[Path | None, str]:
    """A YAML asset's ``run:`` file and its text, as Bruin reads it: a path joined to the YAML file's directory
    (a leading ``/`` too, as Go's filepath.Join does). Bruin's critical valid-executable-file then wants the file
    that runs (this one, or the YAML file itself) to exist, be a file, not be empty and have no execute
    permission."""
    run = data.get("run")
    line = line_of(data, "run")
    run_path, text = None, ""
    if run is not None and (not isinstance(run, str) or not run.strip()):
        problems.add(path, line, f"run {run!r} must name a file beside the asset (as in Bruin)")
    elif run is not None:
        run_path = Path(os.path.normpath(path.parent / run.lstrip("/")))  # lexical, as Go cleans a joined path
        try:
            text = run_path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            why = {IsADirectoryError: "is a directory, not a file", FileNotFoundError: "does not exist"}
            problems.add(path, line, f"run file {run!r} {why.get(type(error), f'cannot be read: {error}')}")
            return None, ""
        if not text:
            problems.add(path, line, f"run file {run!r} is empty (as Bruin checks it)")
    executable = run_path or path
    if os.stat(executable).st_mode & 0o111:
        problems.add(
            path,
            line or 1,
            f"{executable.name} has execute permission, which Bruin refuses for the file a YAML asset runs: "
            f"chmod a-x it",
        )
    return run_path, text


def _digested(asset: Asset, text: str, defaults: dict[str, Any] | None, glossary: Glossary | None) -> Asset:
    """The asset's digest: its file, the pipeline's ``default:`` it takes in and the glossary its columns extend
    (whose files are then the asset's own: the watch of its definition reads them too)."""
    if glossary is not None:
        asset.glossary_files = glossary.files
        text += f"\0{glossary.text}" if glossary.files else ""  # no glossary: the digest it had before it was read
    merged = orjson.dumps(defaults or {}, option=orjson.OPT_SORT_KEYS, default=str)
    asset.digest = hashlib.sha256(text.encode("utf-8") + b"\0" + merged).hexdigest()[:16]
    return asset
