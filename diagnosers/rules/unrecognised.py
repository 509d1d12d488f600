"""A failure that no rule recognises: say so, quote it, and claim no cause.

Reads: bundle.json's status, non-zero exit codes and Ray's `Job ... failed` with the `Status message:` that
follows it (Ray's own reason), fatal log lines (NCCL's `unhandled system error` among them, which the NCCL rule
claims unless NCCL's own warning blamed this host) and Python exceptions, with or without their traceback header;
a native abort (`terminate called after throwing ...`, `Aborted (core dumped)`), which ended the process; and,
where no exception line was read at all, a traceback header cut after its frames.
A fallback: the engine drops it whenever another failure finding (other than a fallback) is present, so it
never outranks a recognised cause.
"""

from __future__ import annotations

from diagnosers.evidence import Evidence
from diagnosers.findings import UNRECOGNISED_ERROR, Finding, Quote, Severity
from diagnosers.parsers import failures
from diagnosers.parsers.frameworks import ray_log
from diagnosers.parsers.platform import nccl
from diagnosers.parsers.signals import Signal
from diagnosers.parsers.tracebacks import PythonException
from diagnosers.rules.common import finding

EMITS = (UNRECOGNISED_ERROR,)

# Launchers' exceptions that only say a child failed; the child's own traceback is printed above them.
_LAUNCHER_WRAPPERS = frozenset({"ChildFailedError", "RayTaskError", "RayActorError", "TrainingFailedError"})


def check(evidence: Evidence) -> list[Finding]:
    # NCCL's `unhandled system error` ends the process group; the NCCL rule claims it unless NCCL blamed this host.
    fatal = evidence.of(failures.FATAL_LINE, nccl.SYSTEM_ERROR)
    aborted = evidence.of(failures.NATIVE_ABORT)
    ended = evidence.of(failures.NONZERO_EXIT, ray_log.JOB_FAILED)
    exception = _last_exception(evidence.exceptions)
    cut_traceback = [] if exception else _cut_traceback_quotes(evidence)
    status_failed = evidence.meta.status.upper() == "FAILED"
    known_failed = status_failed or bool(ended) or bool(aborted)
    if not (known_failed or fatal or exception or cut_traceback):
        return []
    reason = _job_status_reason(evidence)
    quotes = [
        *(signal.quote for signal in fatal[:1]),
        *(signal.quote for signal in aborted[:2]),
        *_exception_quotes(exception),
        *cut_traceback,
        *(signal.quote for signal in ended[:1]),
        *(signal.quote for signal in reason[:1]),
    ]
    if not quotes and evidence.meta.status_quote is not None:
        quotes.append(evidence.meta.status_quote)
    severity = Severity.CRITICAL if known_failed else Severity.WARNING
    title = "Job failed with an unrecognised error" if known_failed else "Unrecognised error in the logs"
    found = finding(
        UNRECOGNISED_ERROR,
        severity,
        0.3,
        title,
        _detail(known_failed, [*fatal, *aborted], exception, reason, bool(cut_traceback)),
        quotes=quotes,
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


def _cut_traceback_quotes(evidence: Evidence) -> list[Quote]:
    """The last traceback header and the last of the frames right below it: a paste cut before the exception."""
    headers = evidence.of(failures.TRACEBACK_HEADER)
    if not headers:
        return []
    header = headers[-1].quote
    frames = {
        signal.quote.line: signal.quote
        for signal in evidence.of(failures.TRACEBACK_FRAME)
        if signal.quote.source == header.source and signal.quote.line > header.line
    }
    last = header
    while below := [line for line in range(last.line + 1, last.line + 1 + failures.FRAME_GAP) if line in frames]:
        last = frames[below[0]]
    return [header] if last is header else [header, last]


def _last_exception(exceptions: list[PythonException]) -> PythonException | None:
    own = [exception for exception in exceptions if exception.short_type not in _LAUNCHER_WRAPPERS]
    return (own or exceptions or [None])[-1]


def _exception_quotes(exception: PythonException | None) -> list[Quote]:
    if exception is None:
        return []
    frame = exception.last_frame
    return [frame.quote, exception.quote] if frame is not None and frame.quote is not None else [exception.quote]


def _detail(
    known_failed: bool,
    fatal: list[Signal],
    exception: PythonException | None,
    reason: list[Signal],
    cut_traceback: bool,
) -> str:
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
    elif cut_traceback:
        parts.append("a traceback is cut before its exception line: collect the rest of the log")
    quoted = f": {'; '.join(parts)}" if parts else ""
    return (
        f"{what} and no rule recognises the cause{quoted}. trainbot claims no cause: read the quoted lines, "
        "collect what the runbook lists and add the case to tests/corpus so a rule can learn it."
    )
