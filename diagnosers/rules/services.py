"""Services the run depends on: the MLflow tracking server and the Ray dashboard.

Reads: MLflow client errors (connection refused, timeouts, 5xx, 429 rate limiting, with urllib3's cause on
the next lines where a wrapped message left it), Ray dashboard connection errors (`ray job submit` and its client's
traceback frames, KubeRay's operator, requests to :8265), and bundle.json's source statuses, where the collector
itself could not reach the service.
"""

from __future__ import annotations

import re

from diagnosers.evidence import OK, Evidence
from diagnosers.findings import DASHBOARD_UNREACHABLE, MLFLOW_UNREACHABLE, Finding, Quote, Severity
from diagnosers.parsers.frameworks import mlflow_log, ray_log
from diagnosers.parsers.signals import Signal
from diagnosers.parsers.tracebacks import PythonException
from diagnosers.rules.common import finding, where

EMITS = (MLFLOW_UNREACHABLE, DASHBOARD_UNREACHABLE)

_DASHBOARD_SOURCES = ("ray", "dashboard", "ray-dashboard")
_MLFLOW_SOURCES = ("mlflow",)
# What an HTTP client raises when nothing answers on the port or the server hangs up.
_CONNECTION_ERRORS = frozenset(
    {
        "ConnectionRefusedError",
        "ConnectionResetError",
        "RemoteDisconnected",
        "ConnectionError",
        "NewConnectionError",
        "MaxRetryError",
        "ProtocolError",
        "ClientConnectorError",
        "ServerDisconnectedError",
        "ConnectTimeout",
    }
)
# Frames of Ray's job-submission client (JobSubmissionClient, `ray job submit`).
_SUBMISSION_CLIENT_FILES = ("dashboard/modules/", "dashboard_sdk", "job_submission")
# A line that is a raised exception, after Ray's `(RayTrainWorker pid=...)` prefix where there is one.
_EXCEPTION_LINE = re.compile(r"^\s*(?:\([^)]*\)\s*)?[\w.]*(?:Error|Exception): ")
# How far below an MLflow line a wrapped message's cause may sit.
_WRAPPED_LINES = 4
# How far below a connection error the tracebacks chained to it (`The above exception was the direct cause ...`)
# may reach the submission client's frames: urllib3, requests and Ray's client add a few dozen lines.
_CHAINED_LINES = 80
# The entry points of the dashboard process and of its per-node agent (Ray 1.x: new_dashboard/): a traceback that
# starts there (dashboard.err, dashboard_agent.log) is one of them dying.
_DASHBOARD_MAIN = re.compile(r"[/\\](?:new_)?dashboard[/\\](?:dashboard|agent)\.py$")


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
    """True when the job's own exception came from this service (it stopped the job): a parsed traceback, or a
    line that is an exception (`requests.exceptions.ConnectionError: ...`), not a retry warning naming one."""
    return any(marker in exception.type or marker in exception.message for exception in evidence.exceptions) or any(
        _EXCEPTION_LINE.match(signal.quote.text) for signal in signals if marker in signal.quote.text
    )


def _mlflow(evidence: Evidence) -> Finding | None:
    signals = [*evidence.of(mlflow_log.SERVER_UNREACHABLE), *_artifact_store_refusals(evidence)]
    collector = _collector_quotes(evidence, _MLFLOW_SOURCES)
    if not signals and not collector:
        return None
    fatal = (
        _raised(signals, evidence, "MlflowException")
        or _raised(signals, evidence, "mlflow")
        or _raised(signals, evidence, "CredentialsError")
    )
    causes = _wrapped_causes(evidence.of(mlflow_log.HTTP_ERROR_CAUSE), signals)
    severity = Severity.CRITICAL if fatal and evidence.meta.status.upper() != "RUNNING" else Severity.WARNING
    if any("429" in signal.quote.text for signal in [*signals, *causes]):
        detail = (
            f"The MLflow tracking server refused the client's requests with HTTP 429 (rate limiting){where(signals)}. "
            "Make fewer calls (log_batch instead of one log_metric per value, fewer runs/search calls, fewer "
            "parallel runs), raise MLFLOW_HTTP_REQUEST_MAX_RETRIES and MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR, or ask "
            "the server's operators for a higher limit."
        )
        title = "MLflow tracking server rate-limited the client"
    else:
        detail = (
            f"The MLflow tracking server failed or could not be reached{where(signals)}. Check "
            "MLFLOW_TRACKING_URI from inside a worker pod (curl $MLFLOW_TRACKING_URI/health), the server's "
            "own log and its database; set MLFLOW_HTTP_REQUEST_MAX_RETRIES for brief outages."
        )
        title = "MLflow tracking server unreachable"
    quotes = [*(cause.quote for cause in causes), *collector]
    return finding(MLFLOW_UNREACHABLE, severity, 0.85, title, detail, signals, quotes)


def _artifact_store_refusals(evidence: Evidence) -> list[Signal]:
    """boto3's missing-credentials errors in a log that shows MLflow at work (its run link, or a traceback through
    MLflow's code): the artifact store refused the run's upload."""
    mlflow_logs = {signal.quote.source for signal in evidence.of(mlflow_log.RUN_LINK)} | {
        exception.quote.source
        for exception in evidence.exceptions
        if any("mlflow" in frame.file for frame in exception.frames)
    }
    return [signal for signal in evidence.of(mlflow_log.ARTIFACT_CREDENTIALS) if signal.quote.source in mlflow_logs]


def _wrapped_causes(causes: list[Signal], signals: list[Signal]) -> list[Signal]:
    """HTTP causes on the lines just after an MLflow line, where a wrapped message left them, that the MLflow
    line itself does not hold."""
    quoted = {(signal.quote.source, signal.quote.line) for signal in signals}
    return [
        cause
        for cause in causes
        if (cause.quote.source, cause.quote.line) not in quoted
        and any(
            signal.quote.source == cause.quote.source and 0 < cause.quote.line - signal.quote.line <= _WRAPPED_LINES
            for signal in signals
        )
    ]


def _submission_refused(evidence: Evidence) -> list[Quote]:
    """Connection errors raised by a job-submission client: its traceback runs through Ray's submission SDK (or a
    traceback chained below it does, even one cut before its own exception), or it follows the `ray job submit`
    line or the dashboard address the client was about to call with no successful submission between (a job's own
    connection errors, printed after `submitted successfully`, are not the dashboard's). A paste cut before the
    exception still shows urllib3 opening the connection there."""
    raised = [
        exception.quote
        for exception in evidence.exceptions
        if exception.short_type in _CONNECTION_ERRORS
        and (
            _through_submission_client(exception)
            or _chained_to_submission_client(evidence, exception.quote)
            or _while_submitting(evidence, exception.quote)
        )
    ]
    if raised:
        return raised
    connecting = [
        frame.quote for frame in evidence.of(ray_log.HTTP_CONNECT_FRAME) if _while_submitting(evidence, frame.quote)
    ]
    if not connecting:
        return []
    # With no exception to quote, the command says whose connection it was.
    command = max(
        (signal.quote for signal in evidence.of(ray_log.JOB_SUBMIT_ADDRESS) if _before(signal.quote, connecting[0])),
        key=lambda quote: quote.line,
    )
    return [command, connecting[0]]


def _chained_to_submission_client(evidence: Evidence, at: Quote) -> bool:
    return any(
        frame.quote.source == at.source and 0 < frame.quote.line - at.line <= _CHAINED_LINES
        for frame in evidence.of(ray_log.SUBMISSION_CLIENT_FRAME)
    )


def _through_submission_client(exception: PythonException) -> bool:
    return any(part in frame.file for frame in exception.frames for part in _SUBMISSION_CLIENT_FILES)


def _before(quote: Quote, at: Quote, after_line: int = 0) -> bool:
    return quote.source == at.source and after_line < quote.line < at.line


def _while_submitting(evidence: Evidence, at: Quote) -> bool:
    named = [signal.quote.line for signal in evidence.of(ray_log.JOB_SUBMIT_ADDRESS) if _before(signal.quote, at)]
    return bool(named) and not any(
        _before(signal.quote, at, max(named)) for signal in evidence.of(ray_log.JOB_SUBMITTED)
    )


def _dashboard(evidence: Evidence) -> Finding | None:
    signals = evidence.of(ray_log.DASHBOARD_UNREACHABLE)
    refused = _submission_refused(evidence)
    crashed = [
        exception.quote
        for exception in evidence.exceptions
        if exception.frames and _DASHBOARD_MAIN.search(exception.frames[0].file)
    ]
    collector = [*_collector_quotes(evidence, _DASHBOARD_SOURCES), *refused, *crashed]
    if not signals and not collector:
        return None
    submission_failed = bool(refused) or any(
        "Failed to connect to Ray at address" in signal.quote.text for signal in signals
    )
    detail = (
        f"The Ray dashboard (port 8265) could not be reached{where(signals)}. Check that the head pod is "
        "Running and its dashboard started (dashboard.log on the head), that the head service exposes "
        "8265, and that RAY_ADDRESS / the dashboard URL point at it."
    )
    severity = Severity.CRITICAL if submission_failed else Severity.WARNING
    confidence = 0.85 if signals else 0.7
    return finding(DASHBOARD_UNREACHABLE, severity, confidence, "Ray dashboard unreachable", detail, signals, collector)
