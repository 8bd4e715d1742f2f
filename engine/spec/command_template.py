"""The ``--command`` template: split like a shell would (never run through one), with placeholders.

``{start}``, ``{end}`` (inclusive), ``{end_exclusive}``, ``{start_date}``, ``{end_date}``, ``{partition_id}``
and ``{run_id}`` are substituted inside each argument; ``{{`` and ``}}`` are literal braces; any other
``{name}`` is refused when the backfill is planned.
"""

from __future__ import annotations

import re
import shlex

from engine.base.errors import BadInput

PLACEHOLDERS = ("start", "end", "end_exclusive", "start_date", "end_date", "partition_id", "run_id")


def split_template(template: str) -> list[str]:
    """The template's arguments; unbalanced quotes are bad input."""
    try:
        words = shlex.split(template)
    except ValueError as error:
        raise BadInput(f"--command {template!r} cannot be split into arguments ({error}): check its quotes") from None
    if not words:
        raise BadInput("--command '' is empty: give a program and its arguments, e.g. --command 'echo {start}'")
    return words


_BRACES = re.compile(r"\{\{|\}\}|\{([^{}]*)\}")


def substitute(word: str, values: dict[str, str]) -> str:
    """Placeholders replaced; ``{{`` and ``}}`` stand for literal braces."""
    if "{" not in word and "}" not in word:
        return word

    def replace(match: re.Match[str]) -> str:
        text = match.group(0)
        if text == "{{":
            return "{"
        if text == "}}":
            return "}"
        return values[match.group(1)]

    return _BRACES.sub(replace, word)


def check_placeholders(template: str) -> None:
    """Every ``{name}`` must be a placeholder we substitute; a typo such as ``{start_dte}`` would otherwise
    reach every child literally."""
    for word in split_template(template):
        for match in _BRACES.finditer(word):
            name = match.group(1)
            if name is not None and name not in PLACEHOLDERS:
                accepted = ", ".join("{" + p + "}" for p in PLACEHOLDERS)
                raise BadInput(
                    f"--command has an unknown placeholder {{{name}}}: use one of {accepted} "
                    "(write {{ and }} for literal braces)"
                )
        if "{" in _BRACES.sub("", word) or "}" in _BRACES.sub("", word):
            raise BadInput(
                f"--command argument {word!r} has an unbalanced brace: write {{{{ and }}}} for literal braces, and "
                "a placeholder whole, such as {start}"
            )
