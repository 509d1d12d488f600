"""Small helpers the rules share: quoting signals fairly and saying where they came from."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from diagnosers.findings import MAX_QUOTES_PER_FINDING, Finding, Quote, Severity
from diagnosers.parsers.signals import Signal


def spread_quotes(quotes: Iterable[Quote], limit: int = MAX_QUOTES_PER_FINDING) -> list[Quote]:
    """Up to `limit` quotes, one file at a time in turn, so several ranks show before repeats."""
    by_source: dict[str, list[Quote]] = {}
    for quote in quotes:
        by_source.setdefault(quote.source, []).append(quote)
    chosen: list[Quote] = []
    depth = 0
    while len(chosen) < limit and any(len(found) > depth for found in by_source.values()):
        for found in by_source.values():
            if len(found) > depth and len(chosen) < limit:
                chosen.append(found[depth])
        depth += 1
    return chosen


def where(signals: Sequence[Signal]) -> str:
    """' on ranks 3, 7' / ' in 4 files' / '' — where a set of signals was seen."""
    ranks = sorted({int(signal.get("rank")) for signal in signals if signal.get("rank").isdigit()})
    if len(ranks) > 1:
        return f" on {len(ranks)} ranks ({_shorten(ranks)})"
    if ranks:
        return f" on rank {ranks[0]}"
    files = sorted({signal.quote.source for signal in signals})
    return f" in {len(files)} files" if len(files) > 1 else f" in {files[0]}" if files else ""


def _shorten(values: Sequence[int], shown: int = 6) -> str:
    text = ", ".join(str(value) for value in values[:shown])
    return text + (", …" if len(values) > shown else "")


def finding(
    finding_id: str,
    severity: Severity,
    confidence: float,
    title: str,
    detail: str,
    signals: Sequence[Signal] = (),
    quotes: Sequence[Quote] = (),
) -> Finding:
    evidence = spread_quotes([*quotes, *(signal.quote for signal in signals)])
    return Finding(finding_id, severity, confidence, title, detail, evidence)


def first_attr(signals: Sequence[Signal], name: str) -> str:
    return next((signal.get(name) for signal in signals if signal.get(name)), "")
