"""Render a diagnosis as readable text for a terminal."""

from __future__ import annotations

import textwrap
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from diagnosers.engine import Diagnosis

WIDTH = 100
QUOTE_CHARS = 240


def render_text(diagnosis: Diagnosis, quote_chars: int | None = QUOTE_CHARS) -> str:
    """The diagnosis for a terminal, each quote cut to `quote_chars` (None: whole, as in a file)."""
    lines = [f"verdict: {diagnosis.verdict}", *_wrap(f"summary: {diagnosis.summary}", "  "), ""]
    if not diagnosis.findings:
        lines += ["No findings.", ""]
    for number, found in enumerate(diagnosis.findings, start=1):
        lines.append(f"{number}. [{found.severity}] {found.id}: {found.title} (confidence {found.confidence:.2f})")
        lines += _wrap(found.detail, "   ")
        lines.append(f"   runbook: {found.runbook}")
        for quote in found.evidence:
            lines.append(f"   > {quote.source}:{quote.line}: {_clip(quote.text.strip(), quote_chars)}")
        lines.append("")
    sources = ", ".join(f"{name} {status}" for name, status in diagnosis.sources.items())
    lines += _wrap(f"sources: {sources}", "  ")
    return "\n".join(lines)


def _wrap(text: str, indent: str) -> list[str]:
    return textwrap.wrap(text, WIDTH, initial_indent=indent if indent == "   " else "", subsequent_indent=indent)


def _clip(text: str, limit: int | None) -> str:
    return text if limit is None or len(text) <= limit else text[: limit - 1] + "…"
