"""The rule registry: each rule module says what it detects and which finding ids it may emit.

A rule is a plain function Evidence -> findings, after HTA's analyses; it reads only the
Evidence and returns nothing when its inputs are missing. RULE_BY_FINDING_ID leads from a finding id (in a
diagnosis, an alert, a runbook) to the one rule that emits it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType

from diagnosers.evidence import Evidence
from diagnosers.findings import Finding
from diagnosers.rules import (
    bottleneck,
    gpu_health,
    measures,
    memory,
    nccl,
    process_group,
    scheduling,
    services,
    small_batch,
    straggler,
    unrecognised,
    workers,
)


@dataclass(frozen=True)
class Rule:
    name: str
    emits: tuple[str, ...]
    check: Callable[[Evidence], list[Finding]]
    doc: str


def _rule(module: ModuleType) -> Rule:
    return Rule(module.__name__.rsplit(".", 1)[-1], module.EMITS, module.check, module.__doc__ or "")


RULES: tuple[Rule, ...] = tuple(
    _rule(module)
    for module in (
        nccl,
        memory,
        gpu_health,
        scheduling,
        process_group,
        workers,
        services,
        bottleneck,
        straggler,
        small_batch,
        # Last: it speaks only when no rule above recognised the failure.
        unrecognised,
    )
)

# After ruff's code registry: each finding id to its rule, from the rules' EMITS
# (tests/unit/diagnosers/test_rules.py checks that each of the ids has exactly one).
RULE_BY_FINDING_ID: dict[str, Rule] = {finding_id: rule for rule in RULES for finding_id in rule.emits}

# The metrics the rules read: load only these of an exporter's metrics.
METRICS_READ: frozenset[str] = measures.METRICS_READ | {gpu_health.XID_METRIC}
