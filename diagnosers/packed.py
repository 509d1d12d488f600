"""Evidence packed for the trip between two processes (diagnosers.forked): plain tuples and arrays pickle several
times faster than a dataclass instance per signal and a float object per sample.

Generic over the fields of Signal and Quote, so a field added to either crosses too.
"""

from __future__ import annotations

from array import array
from collections import defaultdict
from dataclasses import fields, replace
from typing import Any

from diagnosers.evidence import Evidence, Series
from diagnosers.findings import Quote
from diagnosers.parsers.signals import Signal

_SIGNAL_FIELDS = tuple(field.name for field in fields(Signal) if field.name != "quote")
_QUOTE_FIELDS = tuple(field.name for field in fields(Quote))

Packed = tuple[Evidence, list[tuple[Any, ...]], list["array[float]"]]


def pack(evidence: Evidence) -> Packed:
    """The evidence without its signals and sample values, then those: signals as tuples, values as doubles."""
    signals = [
        (*(getattr(signal, name) for name in _SIGNAL_FIELDS), *(getattr(signal.quote, name) for name in _QUOTE_FIELDS))
        for of_kind in evidence.signals.values()
        for signal in of_kind
    ]
    series = [(metric, one) for metric, of_metric in evidence.series.items() for one in of_metric]
    bare: defaultdict[str, list[Series]] = defaultdict(list)
    for metric, one in series:
        bare[metric].append(replace(one, values=[]))
    values = [array("d", one.values) for _, one in series]
    return replace(evidence, signals=defaultdict(list), series=bare), signals, values


def unpack(packed: Packed) -> Evidence:
    evidence, signals, values = packed
    split = len(_SIGNAL_FIELDS)
    evidence.add_signals(
        [Signal(**dict(zip(_SIGNAL_FIELDS, flat[:split], strict=True)), quote=Quote(*flat[split:])) for flat in signals]
    )
    bare = [one for of_metric in evidence.series.values() for one in of_metric]
    for one, of_one in zip(bare, values, strict=True):
        one.values = of_one.tolist()
    return evidence
