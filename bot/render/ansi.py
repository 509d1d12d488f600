"""Terminal escape sequences (colours, cursor moves) in text meant for a terminal, removed where it goes elsewhere."""

from __future__ import annotations

import re

# ECMA-48: a control sequence (ESC [ ... final byte: colours, cursor moves), an operating system command
# (ESC ] ... BEL or ESC \: window titles, links) or a two-byte escape (ESC and one of @ to _).
ANSI_ESCAPE = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")


def without_ansi(text: str) -> str:
    """`text` with its terminal escape sequences removed, the rest as it was."""
    return ANSI_ESCAPE.sub("", text)
