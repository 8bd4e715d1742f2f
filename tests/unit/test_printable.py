"""What a child printed, made text for a terminal (engine/base/printable.py), and what a typed value may hold."""

from __future__ import annotations

import pytest

from engine.base.printable import has_controls, printable


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("\x1b[1;31mred\x1b[0m", "red"),
        ("csi\x1b[?25l<hidden \x1b[2J\x1b[H", "csi<hidden "),
        ("8-bit\x9b2Jcsi", "8-bitcsi"),
        ("title\x1b]0;PWNED\x07 after", "title after"),
        ("st\x1b]2;x\x1b\\ended", "stended"),
        ("c1\x9d0;x\x9cend", "c1end"),
        ("a\x1b]8;;https://x.io\x1b\\link\x1b]8;;\x1b\\ b", "alink b"),
        ("dcs\x1bPq#0;2;0;0;0\x1b\\ apc\x1b_x\x1b\\ pm\x1b^x\x1b\\ sos\x1bXx\x1b\\.", "dcs apc pm sos."),
        ("open osc\x1b]0;to the end", "open osc"),
        ("charset\x1b(B and keypad\x1b=", "charset and keypad"),
        ("lone\x1b", "lone"),
        ("bell\x07 back\x08 del\x7f c1\x85 tab\t", "bell  back  del  c1  tab "),
        ("plain text, unicode é ✓ and a ~ tilde", "plain text, unicode é ✓ and a ~ tilde"),
    ],
)  # fmt: skip
def test_escape_sequences_go_and_controls_become_spaces(raw, shown):
    """CSI in both forms with private parameters, OSC ended by BEL, ST or C1 ST or by the line's end, hyperlinks,
    DCS/APC/PM/SOS strings, two-byte ESC sequences and a lone ESC are dropped; C0, DEL and C1 left are spaces;
    text (non-ASCII too) is kept."""
    assert printable(raw) == shown


def test_a_typed_value_may_hold_only_what_it_allows():
    """A tab by default; a command's newlines when told so; never ESC, BEL, DEL or C1; the first character past C1
    (a no-break space) is text."""
    assert not has_controls("a\tb") and has_controls("a\nb")
    assert not has_controls("one\ntwo\r\n", "\t\n\r") and has_controls("one\x1b[2J", "\t\n\r")
    for control in ("\x00", "\x07", "\x1b", "\x1f", "\x7f", "\x80", "\x9b", "\x9f"):
        assert has_controls(f"x{control}y"), repr(control)
    assert not has_controls("no\xa0break é")
