"""Workers that died: DataLoader workers (usually /dev/shm), and Ray workers or actors.

Reads: PyTorch DataLoader worker errors, Ray's dead actor/worker/node messages, crashed
processes (segfault, SIGABRT), CrashLoopBackOff and non-memory evictions, and, when the job
failed with nothing more specific, the Python exception that ended it.
"""

from __future__ import annotations

from diagnosers.evidence import Evidence
from diagnosers.findings import DATALOADER_CRASH, WORKER_DIED, Finding, Severity
from diagnosers.parsers import cuda, k8s_text, kernel, ray_log
from diagnosers.parsers.tracebacks import PythonException
from diagnosers.rules.common import finding, where

EMITS = (DATALOADER_CRASH, WORKER_DIED)

# Exceptions that only report that a job or worker failed, not why.
_WRAPPER_TYPES = frozenset({"RayTaskError", "RayActorError", "ActorDiedError", "TrainingFailedError", "RuntimeError"})


def check(evidence: Evidence) -> list[Finding]:
    return [found for found in (_dataloader(evidence), _worker_died(evidence)) if found is not None]


def _dataloader(evidence: Evidence) -> Finding | None:
    signals = evidence.of(cuda.PYTORCH_DATALOADER)
    if not signals:
        return None
    texts = " ".join(signal.quote.text for signal in signals)
    shm = any(marker in texts for marker in ("Bus error", "bus error", "shared memory", "shm", "/torch_"))
    cause = (
        "its shared memory (/dev/shm) is too small: containers get 64 MB by default"
        if shm
        else "it was killed or crashed; its own error is usually just above this line"
    )
    detail = (
        f"A DataLoader worker died{where(signals)}: {cause}. Mount an emptyDir with medium: Memory at "
        "/dev/shm in the Ray pods (sized for num_workers x prefetch_factor batches), or lower num_workers."
    )
    return finding(DATALOADER_CRASH, Severity.CRITICAL, 0.9, "DataLoader worker crashed", detail, signals)


def _worker_died(evidence: Evidence) -> Finding | None:
    died = evidence.of(ray_log.ACTOR_DIED, ray_log.NODE_DIED, kernel.PROCESS_CRASH, k8s_text.CRASH_LOOP)
    evicted = [signal for signal in evidence.of(k8s_text.EVICTED) if "memory" not in signal.quote.text]
    signals = [*died, *evicted]
    ending = _ending_exception(evidence)
    if not signals and ending is None:
        return None
    if signals:
        detail = (
            f"A Ray worker or actor died{where(signals)}. Read the dead worker's own log (ray logs "
            "worker-*.err on its node) for the first error; common causes are a segfault in a native "
            "extension, the node being preempted or evicted, and an exception in the training loop."
        )
        quotes = [ending.quote] if ending else []
        return finding(WORKER_DIED, Severity.CRITICAL, 0.7, "Ray worker died", detail, signals, quotes)
    assert ending is not None
    frame = ending.last_frame
    place = f" in {frame.function} ({frame.file}:{frame.line})" if frame else ""
    detail = (
        f"The job failed with {ending.short_type}: {ending.message[:200]}{place}. No known infrastructure "
        "cause was found: this looks like an error in the training code or its inputs."
    )
    found = finding(
        WORKER_DIED, Severity.CRITICAL, 0.5, "Training code raised an exception", detail, [], [ending.quote]
    )
    found.fallback = True
    return found


def _ending_exception(evidence: Evidence) -> PythonException | None:
    """The exception that ended a failed job: the last one that is not a mere wrapper."""
    failed = evidence.meta.status.upper() == "FAILED" or bool(evidence.of(ray_log.JOB_FAILED))
    if not failed or not evidence.exceptions:
        return None
    specific = [exception for exception in evidence.exceptions if exception.short_type not in _WRAPPER_TYPES]
    return (specific or evidence.exceptions)[-1]
