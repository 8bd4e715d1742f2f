"""YAML with line numbers, so every configuration problem can name its file and line.

PyYAML is imported at the first parse, not with this module: a command target's invocation reads no YAML.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.base.errors import BadInput

if TYPE_CHECKING:
    import yaml


class Located(dict):
    """A mapping that remembers the line of itself and of each key (1-based)."""

    line: int = 0
    lines: dict[Any, int]

    def line_of(self, key: Any) -> int:
        return getattr(self, "lines", {}).get(key, self.line)  # an empty document has no key lines


class LocatedList(list):
    """A sequence that remembers the line of each item (1-based)."""

    line: int = 0
    lines: list[int]

    def line_of(self, index: int) -> int:
        return self.lines[index] if 0 <= index < len(self.lines) else self.line


@functools.cache
def line_loader() -> type:
    """The loader class that records lines (libyaml's C parser where there is one), made at its first use."""
    import yaml

    base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    loader = type("LineLoader", (base,), {})
    loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
    loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG, _construct_sequence)
    return loader


def _construct_mapping(loader: yaml.SafeLoader, node: yaml.MappingNode) -> Located:
    loader.flatten_mapping(node)
    mapping = Located()
    mapping.lines = {}
    mapping.line = node.start_mark.line + 1 + getattr(loader, "line_offset", 0)
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        line = key_node.start_mark.line + 1 + getattr(loader, "line_offset", 0)
        if key in mapping:
            import yaml

            raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
        mapping[key] = loader.construct_object(value_node, deep=True)
        mapping.lines[key] = line
    return mapping


def _construct_sequence(loader: yaml.SafeLoader, node: yaml.SequenceNode) -> LocatedList:
    offset = getattr(loader, "line_offset", 0)
    sequence = LocatedList(loader.construct_object(child, deep=True) for child in node.value)
    sequence.line = node.start_mark.line + 1 + offset
    sequence.lines = [child.start_mark.line + 1 + offset for child in node.value]
    return sequence


def parse_yaml(text: str, source: str, *, line_offset: int = 0) -> Any:
    """Parse YAML text; errors become ``BadInput("source:line: problem")``."""
    import yaml

    loader = line_loader()(text)
    loader.line_offset = line_offset
    try:
        return loader.get_single_data()
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        line = (mark.line + 1 + line_offset) if mark else line_offset + 1
        problem = (error.problem or error.context or "invalid YAML").strip()
        raise BadInput(f"{source}:{line}: invalid YAML: {problem}") from None
    except yaml.YAMLError as error:
        raise BadInput(f"{source}:{line_offset + 1}: invalid YAML: {error}") from None
    finally:
        loader.dispose()


def read_yaml(path: Path) -> Any:
    """Parse a YAML file, naming it in every error."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise BadInput(f"cannot read {path}: {error.strerror}") from None
    except UnicodeDecodeError:
        raise BadInput(f"{path} is not UTF-8 text: give a YAML file") from None
    if "\0" in text:
        raise BadInput(f"{path} is binary, not YAML text: give a YAML file")
    return parse_yaml(text, str(path))


def line_of(container: Any, key: Any = None) -> int:
    """Best-known line of a key in a parsed mapping (0 when unknown)."""
    if isinstance(container, Located | LocatedList):
        return container.line_of(key) if key is not None else container.line
    return 0
