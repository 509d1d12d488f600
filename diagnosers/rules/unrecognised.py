"""A failure that no rule recognises: say so, quote it, and claim no cause.

Reads: bundle.json's status, non-zero exit codes and Ray's `Job ... failed` with the `Status message:` that
follows it (Ray's own reason), fatal log lines and Python exceptions, with or without their traceback header.
A fallback: the engine drops it whenever another failure finding (other than a fallback) is present, so it
never outranks a recognised cause.
"""

from __future__ import annotations

from diagnosers.evidence import Evidence
from diagnosers.findings import UNRECOGNISED_ERROR, Finding, Quote, Severity
from diagnosers.parsers import failures, ray_log
from diagnosers.parsers.signals import Signal
from diagnosers.parsers.tracebacks import PythonException
from diagnosers.rules.common import finding

EMITS = (UNRECOGNISED_ERROR,)

# Launchers' exceptions that only say a child failed; the child's own traceback is printed above them.
_LAUNCHER_WRAPPERS = frozenset({"ChildFailedError", "RayTaskError", "RayActorError", "TrainingFailedError"})


def check(evidence: Evidence) -> list[Finding]:
    fatal = evidence.of(failures.FATAL_LINE)
    ended = evidence.of(failures.NONZERO_EXIT, ray_log.JOB_FAILED)
    exception = _last_exception(evidence.exceptions)
    status_failed = evidence.meta.status.upper() == "FAILED"
    known_failed = status_failed or bool(ended)
    if not (known_failed or fatal or exception):
        return []
    reason = _job_status_reason(evidence)
    quotes = [
        *(signal.quote for signal in fatal[:1]),
        *_exception_quotes(exception),
        *(signal.quote for signal in ended[:1]),
        *(signal.quote for signal in reason[:1]),
    ]
    if not quotes and evidence.meta.status_quote is not None:
        quotes.append(evidence.meta.status_quote)
    severity = Severity.CRITICAL if known_failed else Severity.WARNING
    title = "Job failed with an unrecognised error" if known_failed else "Unrecognised error in the logs"
    found = finding(
        UNRECOGNISED_ERROR, severity, 0.3, title, _detail(known_failed, fatal, exception, reason), quotes=quotes
    )
    found.fallback = True
    return [found]


def _job_status_reason(evidence: Evidence) -> list[Signal]:
    """Ray's `Status message:` lines that come after a `Job ... failed` line of the same file."""
    failed = evidence.of(ray_log.JOB_FAILED)
    return [
        message
        for message in evidence.of(ray_log.JOB_STATUS_MESSAGE)
        if any(job.quote.source == message.quote.source and job.quote.line < message.quote.line for job in failed)
    ]


def _last_exception(exceptions: list[PythonException]) -> PythonException | None:
    own = [exception for exception in exceptions if exception.short_type not in _LAUNCHER_WRAPPERS]
    return (own or exceptions or [None])[-1]


def _exception_quotes(exception: PythonException | None) -> list[Quote]:
    if exception is None:
        return []
    frame = exception.last_frame
    return [frame.quote, exception.quote] if frame is not None and frame.quote is not None else [exception.quote]


def _detail(known_failed: bool, fatal: list[Signal], exception: PythonException | None, reason: list[Signal]) -> str:
    what = "The job failed" if known_failed else "A log holds an error, but nothing says the job failed"
    parts: list[str] = []
    if reason:
        parts.append(f"Ray's status message is {reason[0].get('message')[:200]!r}")
    if fatal:
        parts.append(f"the first fatal line is {fatal[0].quote.text.strip()[:200]!r}")
    if exception is not None:
        frame = exception.last_frame
        place = f" at {frame.file}:{frame.line} in {frame.function}" if frame else ""
        message = f": {exception.message[:200]}" if exception.message.strip() else ""
        parts.append(f"the last exception is {exception.short_type}{message}{place}")
    quoted = f": {'; '.join(parts)}" if parts else ""
    return (
        f"{what} and no rule recognises the cause{quoted}. trainbot claims no cause: read the quoted lines, "
        "collect what the runbook lists and add the case to tests/corpus so a rule can learn it."
    )
