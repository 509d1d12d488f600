"""The engine: run every rule over the Evidence, rank the findings, give a verdict.

`failed` when a critical finding explains why the job failed or could not start (the first
finding is the primary cause); otherwise the strongest bottleneck; `insufficient-evidence`
when neither metrics nor step timings say where the time goes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from diagnosers.bundle import load_bundle
from diagnosers.evidence import Evidence
from diagnosers.findings import (
    BOTTLENECK_IDS,
    COMM_BOUND,
    DASHBOARD_UNREACHABLE,
    DATALOADER_CRASH,
    GPU_NOT_DETECTED,
    GPU_OOM,
    HOST_OOM,
    IMAGE_PULL,
    INSUFFICIENT_GPU,
    MLFLOW_UNREACHABLE,
    NCCL_NETWORK_ERROR,
    NCCL_TIMEOUT,
    PERFORMANCE_IDS,
    RANK_CONFIG,
    STRAGGLER,
    UNRECOGNISED_ERROR,
    WORKER_DIED,
    XID_ERROR,
    Finding,
    Severity,
)
from diagnosers.limits import Limits
from diagnosers.rules import METRICS_READ, RULES, Rule

FAILED = "failed"
INSUFFICIENT_EVIDENCE = "insufficient-evidence"

# When a cause and its usual consequence are both present, the consequence is not the primary
# cause: a rank that OOMs or loses its GPU leaves its peers to time out, and Ray then reports
# the dead actor. Such findings keep their place in the list at a lower confidence.
CONSEQUENCES: dict[str, tuple[str, ...]] = {
    NCCL_TIMEOUT: (GPU_OOM, HOST_OOM, XID_ERROR, DATALOADER_CRASH, NCCL_NETWORK_ERROR, RANK_CONFIG),
    NCCL_NETWORK_ERROR: (GPU_OOM, HOST_OOM, XID_ERROR, DATALOADER_CRASH),
    WORKER_DIED: (
        GPU_OOM,
        HOST_OOM,
        XID_ERROR,
        DATALOADER_CRASH,
        NCCL_TIMEOUT,
        NCCL_NETWORK_ERROR,
        RANK_CONFIG,
        GPU_NOT_DETECTED,
        MLFLOW_UNREACHABLE,
        IMAGE_PULL,
        INSUFFICIENT_GPU,
    ),
    DASHBOARD_UNREACHABLE: (HOST_OOM, IMAGE_PULL, INSUFFICIENT_GPU),
    INSUFFICIENT_GPU: (GPU_NOT_DETECTED,),
    DATALOADER_CRASH: (HOST_OOM,),
}
# The same between performance findings: one slow rank makes every other rank wait for it in each collective, so
# the collective wait that reads as comm-bound is the straggler's doing, and the straggler leads.
PERFORMANCE_CONSEQUENCES: dict[str, tuple[str, ...]] = {COMM_BOUND: (STRAGGLER,)}
CONSEQUENCE_FACTOR = 0.6


class RuleContractError(RuntimeError):
    """A rule emitted an id it did not declare: a bug in trainbot, not in the bundle."""


@dataclass(frozen=True, slots=True)
class Diagnosis:
    verdict: str
    summary: str
    findings: list[Finding]
    sources: dict[str, str]

    def to_dict(self) -> dict[str, object]:
        return {
            "verdict": self.verdict,
            "summary": self.summary,
            "findings": [found.to_dict() for found in self.findings],
            "sources": dict(self.sources),
        }


def diagnose_path(path: Path, limits: Limits | None = None, beyond: Sequence[Finding] = ()) -> Diagnosis:
    return diagnose(load_bundle(path, limits=limits, metrics=METRICS_READ), beyond=beyond)


def diagnose(evidence: Evidence, rules: tuple[Rule, ...] = RULES, beyond: Sequence[Finding] = ()) -> Diagnosis:
    """The bundle's diagnosis. `beyond` are findings made from more than this bundle (a scaling study's, across
    its sizes): they are ranked with the rules' own, and one of them replaces the rules' finding of its id."""
    found_by_rules = [found for rule in rules for found in _run(rule, evidence)]
    replaced = {found.id for found in beyond}
    found_by_rules = [*beyond, *(found for found in found_by_rules if found.id not in replaced)]
    findings = _without_needless_fallbacks(_without_unrecognised_when_explained(found_by_rules))
    _demote_consequences(findings)
    if evidence.meta.did_not_fail:
        _demote_critical(findings)
    findings.sort(key=lambda found: (found.severity.rank, -found.confidence, found.id))
    verdict = _verdict(findings)
    return Diagnosis(verdict, _summary(verdict, findings, evidence), findings, evidence.sources)


def _run(rule: Rule, evidence: Evidence) -> list[Finding]:
    found = rule.check(evidence)
    for one in found:
        if one.id not in rule.emits:
            raise RuleContractError(f"rule {rule.name} emitted {one.id}, which it does not declare")
    return found


def _without_needless_fallbacks(findings: list[Finding]) -> list[Finding]:
    """A fallback (a guess such as SIGKILL read as the OOM killer) gives way to a recognised critical cause, but not
    to a finding that is its own usual consequence: a worker killed by SIGKILL does not explain the SIGKILL."""

    def explained(fallback: Finding) -> bool:
        return any(
            other.severity is Severity.CRITICAL
            and not other.fallback
            and fallback.id not in CONSEQUENCES.get(other.id, ())
            for other in findings
        )

    return [found for found in findings if not (found.fallback and explained(found))]


def _without_unrecognised_when_explained(findings: list[Finding]) -> list[Finding]:
    """unrecognised-error never stands beside a recognised failure; a fallback recognises nothing."""
    explained = any(found.id not in (*PERFORMANCE_IDS, UNRECOGNISED_ERROR) and not found.fallback for found in findings)
    return [found for found in findings if not (found.id == UNRECOGNISED_ERROR and explained)]


def _demote_consequences(findings: list[Finding]) -> None:
    critical = {found.id for found in findings if found.severity is Severity.CRITICAL}
    present = {found.id for found in findings}
    for found in findings:
        causes = [cause for cause in CONSEQUENCES.get(found.id, ()) if cause in critical]
        causes += [cause for cause in PERFORMANCE_CONSEQUENCES.get(found.id, ()) if cause in present]
        if causes:
            found.confidence = round(found.confidence * CONSEQUENCE_FACTOR, 2)
            found.detail += f" This is probably a consequence of {', '.join(causes)}."


def _demote_critical(findings: list[Finding]) -> None:
    """The job did not fail, so nothing found stopped it: a warning, not a cause of failure."""
    for found in findings:
        if found.severity is Severity.CRITICAL:
            found.severity = Severity.WARNING


def _verdict(findings: list[Finding]) -> str:
    if any(found.severity is Severity.CRITICAL for found in findings):
        return FAILED
    bottlenecks = [found for found in findings if found.id in BOTTLENECK_IDS]
    if not bottlenecks:
        return INSUFFICIENT_EVIDENCE
    return max(bottlenecks, key=lambda found: found.confidence).id


def _summary(verdict: str, findings: list[Finding], evidence: Evidence) -> str:
    job = f"{evidence.meta.job}: " if evidence.meta.job else ""
    if verdict == INSUFFICIENT_EVIDENCE:
        noted = f" {len(findings)} other finding(s) are listed." if findings else ""
        return (
            f"{job}No metrics or step timings say where the time goes; collect Prometheus (DCGM) series or "
            f"steps/ timings to classify the run.{noted}"
        )
    # The verdict's finding, or a cause of it that ranks above it (a straggler above the collective wait it causes).
    causes = PERFORMANCE_CONSEQUENCES.get(verdict, ())
    primary = next(found for found in findings if verdict in (FAILED, found.id) or found.id in causes)
    first_sentence = primary.detail.split(". ", 1)[0].rstrip(".")
    prefix = "Failed: " if verdict == FAILED else ""
    # A sweep's bundle holds one trial's timings: say which, so the verdict is not read as every trial's.
    timed = f" Step timings: {evidence.meta.steps_from}." if evidence.meta.steps_from and evidence.steps else ""
    return f"{job}{prefix}{primary.title}. {first_sentence}.{timed} Runbook: {primary.runbook}"
