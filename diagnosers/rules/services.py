"""Services the run depends on: the MLflow tracking server and the Ray dashboard.

Reads: MLflow client errors (connection refused, timeouts, 5xx), Ray dashboard connection
errors (`ray job submit`, KubeRay's operator, requests to :8265), and bundle.json's source
statuses, where the collector itself could not reach the service.
"""

from __future__ import annotations

from diagnosers.evidence import OK, Evidence
from diagnosers.findings import DASHBOARD_UNREACHABLE, MLFLOW_UNREACHABLE, Finding, Quote, Severity
from diagnosers.parsers import mlflow_log, ray_log
from diagnosers.parsers.signals import Signal
from diagnosers.rules.common import finding, where

EMITS = (MLFLOW_UNREACHABLE, DASHBOARD_UNREACHABLE)

_DASHBOARD_SOURCES = ("ray", "dashboard", "ray-dashboard")
_MLFLOW_SOURCES = ("mlflow",)


def check(evidence: Evidence) -> list[Finding]:
    return [found for found in (_mlflow(evidence), _dashboard(evidence)) if found is not None]


def _collector_quotes(evidence: Evidence, names: tuple[str, ...]) -> list[Quote]:
    """bundle.json statuses that say the collector could not reach a service."""
    return [
        Quote("bundle.json", 1, f'"{name}": "{status}"')
        for name in names
        if (status := evidence.sources.get(name, OK)).startswith(("unreachable", "error"))
    ]


def _raised(signals: list[Signal], evidence: Evidence, marker: str) -> bool:
    """True when the job's own exception came from this service (it stopped the job)."""
    return any(marker in exception.type or marker in exception.message for exception in evidence.exceptions) or any(
        "Error" in signal.quote.text.split(marker, 1)[0] for signal in signals if marker in signal.quote.text
    )


def _mlflow(evidence: Evidence) -> Finding | None:
    signals = evidence.of(mlflow_log.SERVER_UNREACHABLE)
    collector = _collector_quotes(evidence, _MLFLOW_SOURCES)
    if not signals and not collector:
        return None
    fatal = _raised(signals, evidence, "MlflowException") or _raised(signals, evidence, "mlflow")
    detail = (
        f"The MLflow tracking server failed or could not be reached{where(signals)}. Check "
        "MLFLOW_TRACKING_URI from inside a worker pod (curl $MLFLOW_TRACKING_URI/health), the server's "
        "own log and its database; set MLFLOW_HTTP_REQUEST_MAX_RETRIES for brief outages."
    )
    severity = Severity.CRITICAL if fatal and evidence.meta.status.upper() != "RUNNING" else Severity.WARNING
    return finding(MLFLOW_UNREACHABLE, severity, 0.85, "MLflow tracking server unreachable", detail, signals, collector)


def _dashboard(evidence: Evidence) -> Finding | None:
    signals = evidence.of(ray_log.DASHBOARD_UNREACHABLE)
    collector = _collector_quotes(evidence, _DASHBOARD_SOURCES)
    if not signals and not collector:
        return None
    submission_failed = any("Failed to connect to Ray at address" in signal.quote.text for signal in signals)
    detail = (
        f"The Ray dashboard (port 8265) could not be reached{where(signals)}. Check that the head pod is "
        "Running and its dashboard started (dashboard.log on the head), that the head service exposes "
        "8265, and that RAY_ADDRESS / the dashboard URL point at it."
    )
    severity = Severity.CRITICAL if submission_failed else Severity.WARNING
    confidence = 0.85 if signals else 0.7
    return finding(DASHBOARD_UNREACHABLE, severity, confidence, "Ray dashboard unreachable", detail, signals, collector)
