"""Sweep search spaces typed by a person: `lr=loguniform(1e-4,1e-2)`, `layers=randint(1,4)` (both ends
included), `strategy=choice(ddp,fsdp)` or a fixed `epochs=3`.

Every bound and choice is parsed by the parameter's declared type and checked against its bounds,
so the JSON handed to the sweep driver holds only values a launch would accept.
"""

from __future__ import annotations

import re
from typing import Any

from actions.errors import BadRequest
from actions.jobs.templates import JobTemplate, Param, ParamValue, split_assignment

DISTRIBUTION = re.compile(r"^(loguniform|uniform|randint|choice)\((.*)\)$", re.DOTALL)
NUMERIC = frozenset({"float", "int"})
MAX_CHOICES = 64


def parse_space(template: JobTemplate, words: list[str]) -> dict[str, Any]:
    """The driver's space JSON: template defaults as fixed values, overridden by the words."""
    space: dict[str, Any] = {k: p.default for k, p in template.params.items() if p.default is not None}
    for word in words:
        key, text = split_assignment(word)
        param = template.params.get(key)
        if param is None:
            known = ", ".join(sorted(template.params)) or "none"
            raise BadRequest(f"unknown parameter {key!r} for template {template.name} (known: {known})")
        space[key] = _dimension(key, param, text.strip())
    return space


def searched(space: dict[str, Any]) -> list[str]:
    return sorted(key for key, value in space.items() if isinstance(value, dict))


def _dimension(key: str, param: Param, text: str) -> ParamValue | dict[str, list[ParamValue]]:
    match = DISTRIBUTION.match(text)
    if match is None:
        return param.parse(key, text)
    kind, inner = match.groups()
    if kind != "choice" and param.type not in NUMERIC:
        raise BadRequest(f"parameter {key}: {kind}(...) needs a number parameter; use choice(...) for {param.type}")
    if kind == "randint" and param.type != "int":
        raise BadRequest(f"parameter {key}: randint needs an int parameter; use uniform(...) for floats")
    values = [param.parse(key, item.strip()) for item in inner.split(",")] if inner.strip() else []
    if kind == "choice":
        if not 1 <= len(values) <= MAX_CHOICES:
            raise BadRequest(f"parameter {key}: choice(...) takes 1 to {MAX_CHOICES} values")
        return {"choice": values}
    if len(values) != 2:
        raise BadRequest(f"parameter {key}: {kind} takes two bounds, e.g. {kind}(1,10)")
    low, high = values
    if not low < high:  # type: ignore[operator]
        raise BadRequest(f"parameter {key}: {kind}({low},{high}) needs the low bound first")
    if kind == "loguniform" and low <= 0:  # type: ignore[operator]
        raise BadRequest(f"parameter {key}: loguniform needs bounds above 0")
    return {kind: [low, high]}
