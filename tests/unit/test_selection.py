"""Selector grammar, tags, excluded tags and asset targets, on a real pipeline read from files."""

from __future__ import annotations

import pytest

from engine.base.errors import BadInput
from engine.pipeline.loading import load_pipeline
from engine.pipeline.selection import evaluate_selector, select_assets
from tests.builder import Repo


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory):
    repo = Repo(tmp_path_factory.mktemp("selection") / "repo")
    repo.write("p/assets/raw/a.sql", "/* @bruin\nname: raw.a\ntags: [raw]\n@bruin */\nselect 1")
    repo.write("p/assets/raw/b.sql", "/* @bruin\nname: raw.b\ntags: [raw, pii]\n@bruin */\nselect 1")
    repo.write(
        "p/assets/stg/c.sql", "/* @bruin\nname: stg.c\ntags: [stg]\ndepends: [raw.a, raw.b]\n@bruin */\nselect 1"
    )
    repo.write("p/assets/mart/d.sql", "/* @bruin\nname: mart.d\ntags: [mart]\ndepends: [stg.c]\n@bruin */\nselect 1")
    repo.write("p/assets/mart/e.sql", "/* @bruin\nname: mart.e\ntags: [mart]\ndepends: [stg.c]\n@bruin */\nselect 1")
    repo.write("p/assets/rpt/f.sql", "/* @bruin\nname: rpt.f\ndepends: [{asset: mart.d}]\n@bruin */\nselect 1")
    repo.write("p/assets/lone.py", '"""@bruin\nname: lone.g\ntags: [py]\n@bruin"""\nprint(1)')
    return load_pipeline(repo.pipeline_dir)


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("tag:raw", {"raw.a", "raw.b"}),
        ("tag:r*", {"raw.a", "raw.b"}),
        ("path:raw/*", {"raw.a", "raw.b"}),
        ("path:assets/mart/*.sql", {"mart.d", "mart.e"}),
        ("path:*.py", {"lone.g"}),
        ("fqn:stg.c", {"stg.c"}),
        ("stg.c", {"stg.c"}),
        ("mart.*", {"mart.d", "mart.e"}),
        ("+stg.c", {"stg.c", "raw.a", "raw.b"}),
        ("stg.c+", {"stg.c", "mart.d", "mart.e", "rpt.f"}),
        ("stg.c+1", {"stg.c", "mart.d", "mart.e"}),
        ("1+mart.d", {"mart.d", "stg.c"}),
        ("2+rpt.f", {"rpt.f", "mart.d", "stg.c"}),
        ("1+stg.c+1", {"stg.c", "raw.a", "raw.b", "mart.d", "mart.e"}),
        ("@mart.d", {"mart.d", "rpt.f", "stg.c", "raw.a", "raw.b"}),
        ("tag:raw lone.g", {"raw.a", "raw.b", "lone.g"}),
        ("tag:raw,tag:pii", {"raw.b"}),
        ("+stg.c,tag:raw", {"raw.a", "raw.b"}),
        ("tag:nothing", set()),
    ],
)
def test_selector_operators(pipeline, expression, expected):
    """Each operator of the selector grammar picks exactly the documented assets."""
    assert evaluate_selector(pipeline, expression) == expected


def select(pipeline, **kwargs):
    options = {"target_asset": None, "downstream": False, "selectors": [], "tags": [], "exclude_tags": []}
    return select_assets(pipeline, **{**options, **kwargs})


def test_several_selectors_are_a_union_and_filters_intersect(pipeline):
    """Repeated --selector values unite; --tag narrows; --exclude-tag removes."""
    assert select(pipeline, selectors=["raw.a", "lone.g"]) == {"raw.a", "lone.g"}
    assert select(pipeline, selectors=["stg.c+"], tags=["mart"]) == {"mart.d", "mart.e"}
    assert select(pipeline, tags=["raw"], exclude_tags=["pii"]) == {"raw.a"}


def test_asset_target_and_downstream(pipeline):
    """An asset target runs alone; with --downstream, its downstream too."""
    assert select(pipeline, target_asset="mart.d") == {"mart.d"}
    assert select(pipeline, target_asset="mart.d", downstream=True) == {"mart.d", "rpt.f"}
    with pytest.raises(BadInput, match="--downstream needs a single asset file"):
        select(pipeline, downstream=True)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"selectors": ["tag:nothing"]}, "--selector 'tag:nothing' selects no asset"),
        ({"selectors": ["owner:me"]}, "unknown method 'owner'"),
        ({"selectors": ["a,,b"]}, "empty part"),
        ({"tags": ["nope"]}, "--tag nope matches no asset"),
        ({"tags": ["raw"], "exclude_tags": ["raw"]}, "leaves no asset"),
    ],
)
def test_selecting_nothing_is_an_error(pipeline, kwargs, message):
    """An expression or filter that selects nothing is an error, not an empty run."""
    with pytest.raises(BadInput, match=message):
        select(pipeline, **kwargs)


@pytest.mark.parametrize("expression", ["٣+mart.d", "mart.d+１"])
def test_a_depth_in_other_digits_than_ascii_is_refused(pipeline, expression):
    """``٣+mart.d`` was read as ``3+mart.d`` (Python's \\d takes any digit) and ran three levels upstream."""
    with pytest.raises(BadInput, match="cannot read"):
        select(pipeline, selectors=[expression])
