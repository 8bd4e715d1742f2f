"""Bruin's glossary (``glossary.yml`` or ``glossary.yaml`` at the repository's root): entities whose attributes
columns extend. Read as Bruin reads it (``pkg/glossary/entity.go``, ``pkg/pipeline``): a column's
``extends: Entity.attribute`` takes the attribute's name, type and description where it gives none; an asset's
``extends: [Entity]`` adds a column for each attribute of the entity that no column extends already; and a
reference to an entity or attribute the glossary lacks is refused (Bruin's ``valid-entity-references``, a fast
critical lint rule), as is a domain whose ``parent_domain`` is not a domain (``valid-parent-domains``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.base.errors import BadInput
from engine.pipeline.problems import Problems
from engine.pipeline.yamlfile import Located, line_of, read_yaml

GLOSSARY_FILES = ("glossary.yml", "glossary.yaml")


@dataclass(frozen=True)
class Glossary:
    entities: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)  # entity → attribute → fields
    files: tuple[Path, ...] = ()  # the files read, in Bruin's order
    text: str = ""  # their contents: part of the digest of every asset that extends an entity

    def attribute(self, entity: str, attribute: str) -> dict[str, Any] | None:
        return self.entities.get(entity, {}).get(attribute)


def read_glossary(repository: Path | None, problems: Problems) -> Glossary:
    """The repository's glossary (empty when it has none); a file that cannot be read is a problem."""
    if repository is None:
        return Glossary()
    entities: dict[str, dict[str, dict[str, Any]]] = {}
    domains: dict[str, tuple[Path, int, Any]] = {}
    files, texts = [], []
    for name in GLOSSARY_FILES:
        path = repository / name
        if not path.is_file():
            continue
        try:
            texts.append(path.read_text(encoding="utf-8"))
            data = read_yaml(path)
        except (OSError, UnicodeDecodeError) as error:
            problems.add(path, 0, f"cannot read the glossary: {error}")
            continue
        except BadInput as error:
            problems.items.append(str(error))
            continue
        files.append(path)
        data = data if data is not None else {}
        if not isinstance(data, dict):
            problems.add(path, 1, "the glossary must be a mapping with entities and domains")
            continue
        _read_entities(data.get("entities"), path, line_of(data, "entities") or 1, entities, problems)
        found = data.get("domains") or {}
        if not isinstance(found, dict):
            problems.add(path, line_of(data, "domains"), "domains must map a domain's name to its fields")
            continue
        for domain, fields in found.items():
            domains.setdefault(str(domain), (path, line_of(found, domain), fields))
    for domain, (path, line, fields) in domains.items():
        parent = fields.get("parent_domain") if isinstance(fields, dict) else None
        if parent and str(parent) not in domains:
            problems.add(
                path, line, f"parent domain {str(parent)!r} of domain {domain!r} is not a domain of the glossary"
            )
    return Glossary(entities, tuple(files), "\0".join(texts))


def _read_entities(
    found: Any, path: Path, line: int, entities: dict[str, dict[str, dict[str, Any]]], problems: Problems
) -> None:
    """Each entity's attributes by name (the first file to define an entity wins, as Bruin's lookup does)."""
    if found is None:
        return
    if not isinstance(found, dict):
        problems.add(path, line, "entities must map an entity's name to its attributes")
        return
    for name, entity in found.items():
        attributes = entity.get("attributes") if isinstance(entity, dict) else None
        if attributes is not None and not isinstance(attributes, dict):
            problems.add(path, line_of(entity, "attributes"), f"the attributes of entity {name!r} must be a mapping")
            continue
        entity_name = str(entity.get("name") or name) if isinstance(entity, dict) else str(name)
        read: dict[str, dict[str, Any]] = {}
        for key, attribute in (attributes or {}).items():
            fields = attribute if isinstance(attribute, dict) else {}
            read[str(key)] = {
                "name": str(fields.get("name") or key),
                "type": fields.get("type"),
                "description": fields.get("description"),
            }
        entities.setdefault(entity_name, read)


def extend_columns(data: dict[str, Any], glossary: Glossary, path: Path, problems: Problems) -> bool:
    """Apply the glossary to an asset's header before its columns are read: columns extended from it are filled
    in and an asset's ``extends`` adds its entities' columns. True when the asset uses the glossary (its digest
    and watch then take the glossary in)."""
    columns = data.get("columns")
    columns = columns if isinstance(columns, list) else []
    extended = [c for c in columns if isinstance(c, dict) and "extends" in c]
    entities = data.get("extends")
    if entities is not None and not isinstance(entities, list):
        problems.add(path, line_of(data, "extends"), "extends must be a list of glossary entities (as Bruin reads it)")
        entities = None
    if not extended and not entities:
        return False
    referenced = {str(c["extends"]) for c in extended}
    added = []
    for entity in entities or []:
        for key in sorted(glossary.entities.get(str(entity), {})):
            if f"{entity}.{key}" not in referenced:
                column = Located({"extends": f"{entity}.{key}"})
                column.lines, column.line = {}, line_of(data, "extends")
                added.append(column)
    for column in [*extended, *added]:
        _fill(column, glossary, path, problems)
    if added:
        data["columns"] = [*columns, *added]
    return True


def _fill(column: dict[str, Any], glossary: Glossary, path: Path, problems: Problems) -> None:
    """A column's name, type and description from the attribute it extends, where it gives none."""
    line = line_of(column, "extends")
    reference = column["extends"]
    parts = [part.strip() for part in reference.split(".")] if isinstance(reference, str) else []
    if len(parts) != 2:
        problems.add(path, line, f"column extends {reference!r}: give it as entity.attribute (as Bruin requires)")
        return
    entity, attribute = parts
    if not entity or not attribute:
        problems.add(
            path, line, f"column extends {reference!r}: the {'entity' if not entity else 'attribute'} name is empty"
        )
        return
    if entity not in glossary.entities:
        problems.add(
            path, line, f"column extends {reference!r}: entity {entity!r} is not in the glossary ({_where(glossary)})"
        )
        return
    found = glossary.attribute(entity, attribute)
    if found is None:
        problems.add(path, line, f"column extends {reference!r}: entity {entity!r} has no attribute {attribute!r}")
        return
    for key in ("name", "type", "description"):
        if not column.get(key) and found[key] is not None:
            column[key] = found[key]


def _where(glossary: Glossary) -> str:
    return ", ".join(str(path) for path in glossary.files) or "the repository has no glossary.yml"
