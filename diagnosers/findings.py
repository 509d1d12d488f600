"""The vocabulary of a diagnosis: finding ids, severities, quotes and findings.

The 20 ids are fixed by BUNDLE.md; runbooks, alerts and saved bundles refer to them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum


class Severity(StrEnum):
    CRITICAL = "critical"
    WARNING = "warning"
    INFO = "info"

    @property
    def rank(self) -> int:
        """Sort key: critical first."""
        return _SEVERITY_ORDER[self]


_SEVERITY_ORDER = {Severity.CRITICAL: 0, Severity.WARNING: 1, Severity.INFO: 2}

NCCL_TIMEOUT = "nccl-timeout"
NCCL_NETWORK_ERROR = "nccl-network-error"
NCCL_SLOW_TRANSPORT = "nccl-slow-transport"
GPU_OOM = "gpu-oom"
HOST_OOM = "host-oom"
GPU_NOT_DETECTED = "gpu-not-detected"
INSUFFICIENT_GPU = "insufficient-gpu"
IMAGE_PULL = "image-pull"
RANK_CONFIG = "rank-config"
XID_ERROR = "xid-error"
DATALOADER_CRASH = "dataloader-crash"
WORKER_DIED = "worker-died"
MLFLOW_UNREACHABLE = "mlflow-unreachable"
DASHBOARD_UNREACHABLE = "dashboard-unreachable"
COMPUTE_BOUND = "compute-bound"
COMM_BOUND = "comm-bound"
IO_BOUND = "io-bound"
STRAGGLER = "straggler"
SMALL_BATCH = "small-batch"
UNRECOGNISED_ERROR = "unrecognised-error"

FINDING_IDS: tuple[str, ...] = (
    NCCL_TIMEOUT,
    NCCL_NETWORK_ERROR,
    NCCL_SLOW_TRANSPORT,
    GPU_OOM,
    HOST_OOM,
    GPU_NOT_DETECTED,
    INSUFFICIENT_GPU,
    IMAGE_PULL,
    RANK_CONFIG,
    XID_ERROR,
    DATALOADER_CRASH,
    WORKER_DIED,
    MLFLOW_UNREACHABLE,
    DASHBOARD_UNREACHABLE,
    COMPUTE_BOUND,
    COMM_BOUND,
    IO_BOUND,
    STRAGGLER,
    SMALL_BATCH,
    UNRECOGNISED_ERROR,
)

BOTTLENECK_IDS: tuple[str, ...] = (COMPUTE_BOUND, COMM_BOUND, IO_BOUND)
# Ids that say how fast a run went; every other id says why something failed.
PERFORMANCE_IDS: tuple[str, ...] = (*BOTTLENECK_IDS, NCCL_SLOW_TRANSPORT, STRAGGLER, SMALL_BATCH)

# A finding quotes at most this many lines: enough to show it happened on several ranks,
# few enough that a Slack thread stays readable.
MAX_QUOTES_PER_FINDING = 5


def runbook_path(finding_id: str) -> str:
    return f"playbooks/{finding_id}.md"


@dataclass(frozen=True, slots=True)
class Quote:
    """One verbatim piece of input and where it is: a file of the bundle and a 1-based line."""

    source: str
    line: int
    text: str

    def to_dict(self) -> dict[str, object]:
        return {"source": self.source, "line": self.line, "text": self.text}


@dataclass(slots=True)
class Finding:
    id: str
    severity: Severity
    confidence: float
    title: str
    detail: str
    evidence: list[Quote] = field(default_factory=list)
    # Said only when nothing more specific explains a failure; the engine drops it otherwise.
    fallback: bool = False

    def __post_init__(self) -> None:
        if self.id not in FINDING_IDS:
            raise ValueError(f"unknown finding id {self.id!r}")
        self.confidence = round(min(1.0, max(0.0, self.confidence)), 2)
        self.evidence = _distinct(self.evidence)[:MAX_QUOTES_PER_FINDING]

    @property
    def runbook(self) -> str:
        return runbook_path(self.id)

    def to_dict(self) -> dict[str, object]:
        return {
            "id": self.id,
            "severity": str(self.severity),
            "confidence": self.confidence,
            "title": self.title,
            "detail": self.detail,
            "evidence": [quote.to_dict() for quote in self.evidence],
            "runbook": self.runbook,
        }


def _distinct(quotes: list[Quote]) -> list[Quote]:
    return list(dict.fromkeys(quotes))
