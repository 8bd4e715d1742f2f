"""An asset's interval modifiers as Bruin reads them: one amount in ASCII digits and one unit."""

from __future__ import annotations

import pytest

from engine.pipeline.interval_modifiers import parse_modifier
from engine.pipeline.templating import TemplateProblem


@pytest.mark.parametrize(
    ("text", "expected"), [("-2h", (-2, "h")), ("+1d", (1, "d")), ("3M", (3, "M")), ("-5000ns", (-5000, "ns"))]
)
def test_an_amount_and_a_unit_are_read(text, expected):
    """A signed whole amount and its unit."""
    assert parse_modifier(text) == expected


@pytest.mark.parametrize("text", ["-٣h", "１d", "2", "h", "1_0h", "1.5h"])
def test_anything_else_is_refused_naming_it(text):
    """Other digits than ASCII (Python's \\d would read -٣h as -3h), no unit, no amount, underscores, fractions."""
    with pytest.raises(TemplateProblem, match="is not a single amount and unit"):
        parse_modifier(text)
