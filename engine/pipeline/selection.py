"""Which assets a run executes: selectors, tags, excluded tags, an asset target and its downstream.

Selector grammar (one ``--selector`` value; several values are a union)::

    expression := term (" " term)*         space = union
    term       := atom ("," atom)*         comma = intersection
    atom       := ["@"] [N] ["+"] method [ "+" [N] ]
    method     := "tag:" GLOB | "path:" GLOB | "file:" GLOB | "fqn:" NAME | NAME-GLOB

``+name`` adds every upstream asset (``2+name`` up to two levels), ``name+``
every downstream one (``name+1`` one level), ``@name`` the downstream assets
plus everything they need.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from fnmatch import fnmatchcase

from engine.base.errors import BadInput
from engine.pipeline.loading import Pipeline

_ATOM = re.compile(  # depths in ASCII digits: Python's \d alone would read ٣+name as 3+name
    r"^(?P<at>@)?(?:(?P<up_depth>[0-9]+)?(?P<up>\+))?(?P<body>[^+]+?)(?:(?P<down>\+)(?P<down_depth>[0-9]+)?)?$"
)
_SELECTOR_HELP = "use tag:GLOB, path:GLOB, file:GLOB, fqn:NAME or a name, with +name, name+, 2+name+1 or @name"


def _walk(pipeline: Pipeline, start: Iterable[str], *, upstream: bool, depth: int | None) -> set[str]:
    """Names reachable from ``start`` (excluded) going up or down, up to ``depth`` levels."""
    found: set[str] = set()
    frontier = set(start)
    level = 0
    while frontier and (depth is None or level < depth):
        following: set[str] = set()
        for name in frontier:
            neighbours = pipeline.upstream(name) if upstream else pipeline.downstream.get(name, [])
            for neighbour in neighbours:
                if neighbour in pipeline.assets and neighbour not in found:
                    found.add(neighbour)
                    following.add(neighbour)
        frontier = following
        level += 1
    return found


def _method(pipeline: Pipeline, body: str, expression: str) -> set[str]:
    if body.startswith("tag:"):
        pattern = body[4:]
        return {n for n, a in pipeline.assets.items() if any(fnmatchcase(t, pattern) for t in a.tags)}
    if body.startswith("path:"):
        pattern = body[5:]
        folder = pattern.rstrip("/") + "/"  # a directory selects every asset under it
        return {
            n
            for n, a in pipeline.assets.items()
            if fnmatchcase(a.relative_path, pattern)
            or fnmatchcase(a.relative_path, f"assets/{pattern}")
            or fnmatchcase(a.path.name, pattern)
            or a.relative_path.startswith((folder, f"assets/{folder}"))
        }
    if body.startswith("file:"):
        return {n for n, a in pipeline.assets.items() if _matches_file(a.path.name, body[5:])}
    if body.startswith("fqn:"):
        return {body[4:]} & set(pipeline.assets)
    if ":" in body:
        raise BadInput(f"--selector {expression!r}: unknown method {body.split(':')[0]!r}: {_SELECTOR_HELP}")
    return {n for n, a in pipeline.assets.items() if fnmatchcase(n, body) or _matches_file(a.path.name, body)}


def _matches_file(name: str, pattern: str) -> bool:
    """Bruin's file: method (pkg/pipeline/selector.go): the file's name, or its stem with every extension
    taken off (``orders.asset.yml`` → ``orders``), exactly or as a glob."""
    stem = name.split(".", 1)[0] if not name.startswith(".") else name
    return any(fnmatchcase(candidate, pattern) for candidate in {name, stem} if candidate)


def _atom(pipeline: Pipeline, text: str, expression: str) -> set[str]:
    match = _ATOM.match(text)
    if not match:
        raise BadInput(f"--selector {expression!r}: cannot read {text!r}: {_SELECTOR_HELP}")
    base = _method(pipeline, match["body"], expression)
    selected = set(base)
    if match["at"]:
        downstream = base | _walk(pipeline, base, upstream=False, depth=None)
        return downstream | _walk(pipeline, downstream, upstream=True, depth=None)
    if match["up"]:
        depth = int(match["up_depth"]) if match["up_depth"] else None
        selected |= _walk(pipeline, base, upstream=True, depth=depth)
    if match["down"]:
        depth = int(match["down_depth"]) if match["down_depth"] else None
        selected |= _walk(pipeline, base, upstream=False, depth=depth)
    return selected


def evaluate_selector(pipeline: Pipeline, expression: str) -> set[str]:
    """The assets one selector expression names."""
    terms = expression.split()
    if not terms:
        raise BadInput(f"--selector {expression!r} is empty: {_SELECTOR_HELP}")
    result: set[str] = set()
    for term in terms:
        atoms = [atom for atom in term.split(",")]
        if any(not atom for atom in atoms):
            raise BadInput(f"--selector {expression!r}: empty part in {term!r}: {_SELECTOR_HELP}")
        selected = _atom(pipeline, atoms[0], expression)
        for atom in atoms[1:]:
            selected &= _atom(pipeline, atom, expression)
        result |= selected
    return result


def select_assets(
    pipeline: Pipeline,
    *,
    target_asset: str | None,
    downstream: bool,
    selectors: Iterable[str],
    tags: Iterable[str],
    exclude_tags: Iterable[str],
    warnings: list[str] | None = None,
) -> set[str]:
    """The assets to run. An expression or filter that selects nothing is an error; what Bruin only warns of
    (an exclude tag no asset has) is added to ``warnings``."""
    selectors, tags, exclude_tags = list(selectors), list(tags), list(exclude_tags)
    if downstream and target_asset is None:
        raise BadInput("--downstream needs a single asset file as TARGET")
    if target_asset is not None:
        # Bruin's HandleSingleTask (cmd/run.go): a tag filter means nothing for one asset; excluding by tag only
        # with its downstream.
        if tags:
            raise BadInput("you cannot use the '--tag' flag when running a single asset")
        if exclude_tags and not downstream:
            raise BadInput(
                "when running a single asset with '--exclude-tag', you must also use the '--downstream' flag"
            )
        chosen = {target_asset}
        if downstream:
            chosen |= _walk(pipeline, chosen, upstream=False, depth=None)
    else:
        chosen = set(pipeline.assets)
    for expression in selectors:
        if not evaluate_selector(pipeline, expression):
            raise BadInput(f"--selector {expression!r} selects no asset of pipeline {pipeline.name!r}")
    if selectors:
        chosen &= set().union(*(evaluate_selector(pipeline, e) for e in selectors))
    if tags:
        tagged = {n for n, a in pipeline.assets.items() if any(fnmatchcase(t, p) for t in a.tags for p in tags)}
        if not tagged:
            raise BadInput(f"--tag {', '.join(tags)} matches no asset of pipeline {pipeline.name!r}")
        chosen &= tagged
    for pattern in exclude_tags:
        if warnings is not None and not any(fnmatchcase(t, pattern) for a in pipeline.assets.values() for t in a.tags):
            warnings.append(f"no assets found with exclude tag {pattern!r}; continuing without excluding any assets")
    if exclude_tags:
        chosen = {
            n for n in chosen if not any(fnmatchcase(t, p) for t in pipeline.assets[n].tags for p in exclude_tags)
        }
    if not chosen:
        raise BadInput(f"the selection (selectors, tags, excluded tags) leaves no asset of pipeline {pipeline.name!r}")
    return chosen
