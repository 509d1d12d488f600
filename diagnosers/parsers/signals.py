"""Signals: what a parser recognised in one line of input, with the line quoted.

A LinePattern names a kind of signal, the literals that any matching line contains (so the
log scanner can skip every other line at memory speed) and the regex that confirms it; named
groups become the signal's attributes. Each pattern carries example lines, which the unit
tests feed through the scanner and the regex, so a needle can never drift from its regex.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property

from diagnosers.findings import Quote


@dataclass(frozen=True, slots=True)
class Signal:
    kind: str
    quote: Quote
    attrs: Mapping[str, str] = field(default_factory=dict)

    def get(self, name: str, default: str = "") -> str:
        return self.attrs.get(name, default)


@dataclass(frozen=True)
class LinePattern:
    kind: str
    needles: tuple[str, ...]
    source: str
    examples: tuple[str, ...]
    caseless: bool = False
    # A long message that a terminal or the paster may break over the next lines (see LogParser).
    wraps: bool = False

    @cached_property
    def regex(self) -> re.Pattern[str]:
        """Compiled on first use: a diagnosis meets few of the patterns, and compiling all of them at start-up
        was a tenth of a small diagnosis."""
        return re.compile(self.source, re.IGNORECASE if self.caseless else 0)

    def match(self, text: str, starts_before: int | None = None) -> dict[str, str] | None:
        """Attributes of the first match, which must begin before `starts_before` where that is given."""
        found = self.regex.search(text)
        if found is None or (starts_before is not None and found.start() >= starts_before):
            return None
        return {name: value for name, value in found.groupdict().items() if value is not None}


def pattern(
    kind: str,
    needles: Sequence[str],
    regex: str,
    examples: Sequence[str],
    caseless: bool = False,
    wraps: bool = False,
) -> LinePattern:
    return LinePattern(kind, tuple(needles), regex, tuple(examples), caseless, wraps)


# Attributes most signals share, read from the line whatever the format's own groups are.
_RANK = re.compile(r"\[(?:[Rr]ank ?|RANK )(\d+)\]|\brank[ =:]?(\d+)\b|\[\d+,(\d+)\]<std")
_HOST_NCCL_PREFIX = re.compile(r"([A-Za-z0-9][\w.-]*):\d+:\d+ \[\d+\]")
_RAY_IP = re.compile(r"\bip=(\d{1,3}(?:\.\d{1,3}){3})")


def common_attrs(text: str, tool_text: str) -> dict[str, str]:
    """Rank and host from the whole line (a launcher's prefix names them) and the tool's own text in it."""
    attrs: dict[str, str] = {}
    rank = _RANK.search(text)
    if rank:
        attrs["rank"] = rank.group(1) or rank.group(2) or rank.group(3)
    host = _HOST_NCCL_PREFIX.match(tool_text) or _RAY_IP.search(text)
    if host:
        attrs["host"] = host.group(1)
    return attrs
