"""Bruin's glossary read through the pipeline loader (engine/pipeline/glossary.py): columns extending an entity's
attribute, an asset extending whole entities, and the references Bruin's lint refuses."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from engine.base.errors import BadInput
from engine.pipeline.loading import PipelineCache, load_pipeline

GLOSSARY = """\
entities:
  Customer:
    attributes:
      id:
        type: integer
        description: The customer's number
      email:
        type: varchar
      country: {}
domains:
  sales:
    description: Sales
  retail:
    parent_domain: sales
"""


def pipeline(tmp_path: Path, header: str, glossary: str | None = GLOSSARY, name: str = "glossary.yml") -> Path:
    """A repository with one SQL asset whose @bruin header is ``header``, and the glossary file."""
    (tmp_path / ".git").mkdir(exist_ok=True)
    directory = tmp_path / "p"
    (directory / "assets").mkdir(parents=True, exist_ok=True)
    (directory / "pipeline.yml").write_text("name: p\n")
    (directory / "assets" / "t.sql").write_text(
        f"/* @bruin\nname: mid.t\ntype: duckdb.sql\n{header}@bruin */\nSELECT 1\n"
    )
    if glossary is not None:
        (tmp_path / name).write_text(glossary)
    return directory


def problems_of(directory: Path) -> list[str]:
    with pytest.raises(BadInput) as raised:
        load_pipeline(directory)
    return [line.strip() for line in str(raised.value).splitlines()[1:] if not line.strip().startswith("warning:")]


def test_a_column_extending_an_attribute_takes_its_name_type_and_description(tmp_path):
    """What the column does not give comes from the attribute; what it gives stays (its checks too)."""
    directory = pipeline(
        tmp_path,
        "columns:\n  - extends: Customer.id\n    checks:\n      - name: not_null\n"
        "  - name: mail\n    extends: Customer.email\n    description: kept\n",
    )
    asset = load_pipeline(directory).assets["mid.t"]
    first, second = asset.columns
    assert (first.name, first.type, first.description, [c.name for c in first.checks]) == (
        "id", "integer", "The customer's number", ["not_null"],
    )  # fmt: skip
    assert (second.name, second.type, second.description) == ("mail", "varchar", "kept")
    assert asset.own_files == (directory / "assets" / "t.sql", tmp_path / "glossary.yml")


def test_an_asset_extending_an_entity_gets_a_column_for_each_attribute_no_column_extends(tmp_path):
    """Sorted by attribute, after the asset's own columns; one a column already extends is not added twice; an
    entity the glossary lacks adds nothing (as in Bruin)."""
    directory = pipeline(
        tmp_path, "extends:\n  - Customer\n  - Nobody\ncolumns:\n  - name: e\n    extends: Customer.email\n"
    )
    columns = load_pipeline(directory).assets["mid.t"].columns
    assert [(c.name, c.type) for c in columns] == [("e", "varchar"), ("country", None), ("id", "integer")]


def test_the_pipeline_s_default_extends_reaches_an_asset_with_an_inline_header(tmp_path):
    """`default: extends:` in pipeline.yml is appended to every asset's, one declared by `-- @bruin.` rows too."""
    directory = pipeline(tmp_path, "")
    (directory / "pipeline.yml").write_text("name: p\ndefault:\n  extends:\n    - Customer\n")
    (directory / "assets" / "t.sql").write_text("-- @bruin.name: mid.t\n-- @bruin.type: duckdb.sql\nSELECT 1\n")
    asset = load_pipeline(directory).assets["mid.t"]
    assert [c.name for c in asset.columns] == ["country", "email", "id"]
    assert asset.own_files[-1] == tmp_path / "glossary.yml"


def test_the_glossary_is_part_of_the_definition_of_an_asset_that_extends_it(tmp_path):
    """Editing the glossary changes the digest of an asset that extends it (an asset-level resume does not carry
    a success over it), not of one that does not."""
    directory = pipeline(tmp_path, "columns:\n  - extends: Customer.id\n")
    (directory / "assets" / "u.sql").write_text("/* @bruin\nname: mid.u\ntype: duckdb.sql\n@bruin */\nSELECT 1\n")
    before = load_pipeline(directory).assets
    (tmp_path / "glossary.yml").write_text(GLOSSARY.replace("integer", "bigint"))
    after = load_pipeline(directory).assets
    assert after["mid.t"].digest != before["mid.t"].digest
    assert after["mid.u"].digest == before["mid.u"].digest
    assert after["mid.u"].own_files == (directory / "assets" / "u.sql",)


def test_a_warm_runner_reads_the_pipeline_again_when_the_glossary_changes(tmp_path):
    """The glossary is outside the pipeline's directory: the cache's signature covers it."""
    directory = pipeline(tmp_path, "columns:\n  - extends: Customer.id\n")
    cache = PipelineCache()
    cache.enabled = True
    assert cache.load(directory).assets["mid.t"].columns[0].type == "integer"
    (tmp_path / "glossary.yml").write_text(GLOSSARY.replace("integer", "bigint"))
    assert cache.load(directory).assets["mid.t"].columns[0].type == "bigint"


@pytest.mark.parametrize(
    ("reference", "problem"),
    [
        ("Customer", "column extends 'Customer': give it as entity.attribute (as Bruin requires)"),
        ("a.b.c", "column extends 'a.b.c': give it as entity.attribute (as Bruin requires)"),
        (".id", "column extends '.id': the entity name is empty"),
        ("Customer.", "column extends 'Customer.': the attribute name is empty"),
        ("Customer.nope", "column extends 'Customer.nope': entity 'Customer' has no attribute 'nope'"),
    ],
)
def test_a_reference_bruin_refuses_is_a_problem_with_its_line(tmp_path, reference, problem):
    """The forms Bruin's parser and its valid-entity-references rule refuse, each named on its line."""
    directory = pipeline(tmp_path, f"columns:\n  - name: x\n    extends: {reference}\n")
    assert problems_of(directory) == [f"{directory}/assets/t.sql:6: {problem}"]


def test_an_entity_without_a_glossary_is_refused_naming_where_it_was_looked_for(tmp_path):
    """No glossary file at the repository's root: the reference cannot be met (Bruin refuses it too)."""
    directory = pipeline(tmp_path, "columns:\n  - name: x\n    extends: Customer.id\n", glossary=None)
    assert problems_of(directory) == [
        f"{directory}/assets/t.sql:6: column extends 'Customer.id': entity 'Customer' is not in the glossary "
        "(the repository has no glossary.yml)"
    ]
    (tmp_path / "glossary.yml").write_text("entities:\n  Order:\n    attributes:\n      id: {}\n")
    assert problems_of(directory) == [
        f"{directory}/assets/t.sql:6: column extends 'Customer.id': entity 'Customer' is not in the glossary "
        f"({tmp_path}/glossary.yml)"
    ]


def test_glossary_yaml_is_read_after_glossary_yml_and_the_first_entity_wins(tmp_path):
    """Both files are read, in Bruin's order; an entity defined in both is the first file's."""
    directory = pipeline(tmp_path, "columns:\n  - extends: Customer.id\n  - extends: Order.total\n")
    (tmp_path / "glossary.yaml").write_text(
        "entities:\n  Customer:\n    attributes:\n      id:\n        type: text\n"
        "  Order:\n    attributes:\n      total:\n        type: double\n"
    )
    columns = load_pipeline(directory).assets["mid.t"].columns
    assert [(c.name, c.type) for c in columns] == [("id", "integer"), ("total", "double")]


def test_a_parent_domain_that_is_not_a_domain_is_refused(tmp_path):
    """Bruin's valid-parent-domains: every parent_domain names a domain of the glossary."""
    directory = pipeline(tmp_path, "", glossary=GLOSSARY + "  online:\n    parent_domain: web\n")
    assert problems_of(directory) == [
        f"{tmp_path}/glossary.yml:15: parent domain 'web' of domain 'online' is not a domain of the glossary"
    ]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("- a\n", "1: the glossary must be a mapping with entities and domains"),
        ("entities: [a]\n", "1: entities must map an entity's name to its attributes"),
        ("owner: me\nentities: [a]\n", "2: entities must map an entity's name to its attributes"),
        (
            "entities:\n  Customer:\n    description: x\n    attributes: [id]\n",
            "4: the attributes of entity 'Customer' must be a mapping",
        ),
        ("entities: {}\ndomains: [a]\n", "2: domains must map a domain's name to its fields"),
    ],
)
def test_a_glossary_of_the_wrong_shape_is_a_problem(tmp_path, text, problem):
    """Each part of the glossary that is not what Bruin reads, with its line."""
    directory = pipeline(tmp_path, "", glossary=text)
    assert problems_of(directory) == [f"{tmp_path}/glossary.yml:{problem}"]


def test_a_glossary_that_is_not_yaml_is_refused(tmp_path):
    """A broken glossary stops the pipeline, as it stops Bruin's, even when no asset extends it."""
    directory = pipeline(tmp_path, "", glossary="entities: [\n")
    [problem] = problems_of(directory)
    assert problem.startswith(f"{tmp_path}/glossary.yml")


def test_names_given_in_the_glossary_name_the_entity_and_the_column(tmp_path):
    """An entity's `name:` is the name columns use; an attribute's `name:` names the column (its key finds it)."""
    directory = pipeline(
        tmp_path,
        "columns:\n  - extends: Customer.id\n",
        glossary="entities:\n  cust:\n    name: Customer\n    attributes:\n      id:\n        name: customer_id\n",
    )
    assert [c.name for c in load_pipeline(directory).assets["mid.t"].columns] == ["customer_id"]


def test_what_the_glossary_leaves_out_is_read_as_empty(tmp_path):
    """An empty glossary, an entity or attribute that is not a mapping, a domain without fields: nothing to
    refuse; an attribute given as a bare value takes only its key as the column's name."""
    directory = pipeline(tmp_path, "columns:\n  - extends: Customer.id\n", glossary="")
    assert problems_of(directory)[0].endswith(f"entity 'Customer' is not in the glossary ({tmp_path}/glossary.yml)")
    (tmp_path / "glossary.yml").write_text(
        "entities:\n  Customer:\n    attributes:\n      id: 5\ndomains:\n  sales: 5\n"
    )
    [column] = load_pipeline(directory).assets["mid.t"].columns
    assert (column.name, column.type) == ("id", None)
    (tmp_path / "glossary.yml").write_text("entities:\n  Customer: 5\n")
    assert problems_of(directory)[0].endswith("column extends 'Customer.id': entity 'Customer' has no attribute 'id'")


def test_a_bad_first_glossary_file_does_not_hide_the_second(tmp_path):
    """glossary.yml unreadable (not UTF-8): a problem naming it, and glossary.yaml is still read."""
    directory = pipeline(tmp_path, "columns:\n  - extends: Customer.id\n", glossary=None)
    (tmp_path / "glossary.yml").write_bytes(b"\xff\xfe entities")
    (tmp_path / "glossary.yaml").write_text(GLOSSARY)
    [problem] = problems_of(directory)
    assert problem.startswith(f"{tmp_path}/glossary.yml: cannot read the glossary: ")


def test_an_asset_s_extends_that_is_not_a_list_is_refused(tmp_path):
    """Bruin reads an asset's extends as a list of names: a bare name is refused on its line."""
    directory = pipeline(tmp_path, "extends: Customer\n")
    assert problems_of(directory) == [
        f"{directory}/assets/t.sql:4: extends must be a list of glossary entities (as Bruin reads it)"
    ]


def test_a_column_an_entity_adds_beside_one_of_the_same_name_is_refused_on_the_extends_line(tmp_path):
    """An asset's own `id` and the `id` its entity adds: declared twice (Bruin's duplicate-column-names), on the
    line of the asset's extends."""
    directory = pipeline(tmp_path, "columns:\n  - name: ID\nextends:\n  - Customer\n")
    assert problems_of(directory) == [
        f"{directory}/assets/t.sql:6: column 'id' is declared twice (as Bruin reads names, without case)"
    ]


def test_an_unknown_entity_names_every_glossary_file_read(tmp_path):
    """Both files, in the order read, so the operator knows where the entity was looked for."""
    directory = pipeline(tmp_path, "columns:\n  - name: x\n    extends: Order.id\n")
    (tmp_path / "glossary.yaml").write_text("entities: {}\n")
    assert problems_of(directory)[0].endswith(f"({tmp_path}/glossary.yml, {tmp_path}/glossary.yaml)")


def test_an_asset_extending_without_a_glossary_keeps_the_digest_it_had(tmp_path):
    """No glossary file: an asset whose `extends` names an entity keeps the digest it had before the glossary was
    read (an asset-level resume over an upgrade carries its successes)."""
    from engine.pipeline.asset_files import _digested

    directory = pipeline(tmp_path, "extends:\n  - Customer\n", glossary=None)
    asset = load_pipeline(directory).assets["mid.t"]
    text = (directory / "assets" / "t.sql").read_text()
    read = asset.digest
    assert read == _digested(copy.copy(asset), text, {}, None).digest
