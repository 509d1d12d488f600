"""Workers that died: DataLoader workers (usually /dev/shm), and Ray workers or actors.

Reads: PyTorch DataLoader worker errors, Ray's dead actor/worker/node messages, crashed
processes (segfault, SIGABRT), launchers' reports of a child killed by a signal, CrashLoopBackOff
and non-memory evictions. A worker death logged as a WARNING in a log that says the run succeeded is the
shutdown's noise, not a failure. A failed job whose only evidence is a Python exception is not a dead
worker: no cause is known, and the unrecognised rule quotes it.
"""

from __future__ import annotations

import re
import signal as signals_module

from diagnosers.evidence import Evidence
from diagnosers.findings import DATALOADER_CRASH, WORKER_DIED, Finding, Severity
from diagnosers.parsers import failures
from diagnosers.parsers.frameworks import ray_log
from diagnosers.parsers.platform import cuda, k8s_text, kernel
from diagnosers.parsers.signals import Signal
from diagnosers.parsers.tracebacks import PythonException
from diagnosers.rules.common import finding, where

EMITS = (DATALOADER_CRASH, WORKER_DIED)

_SIGNAL_MEANINGS = {
    "SIGKILL": " (usually the host OOM killer, or a scheduler that stopped the pod)",
    "SIGSEGV": " (a segfault in native code: a CUDA extension, a data library, a driver mismatch)",
    "SIGBUS": " (usually /dev/shm too small for shared tensors)",
    "SIGABRT": " (a native abort: NCCL's watchdog after a timeout, or a failed C++ check)",
    "SIGHUP": " (the terminal that started it closed: run it under nohup, tmux or a job scheduler)",
    "SIGTERM": " (stopped from outside: preemption, a scheduler's time limit or a cancelled job)",
}

_WARNING_LEVEL = re.compile(r"\bWARN(?:ING)?\b")

# Exceptions that only report that a job or worker failed, not why.
_WRAPPER_TYPES = frozenset({"RayTaskError", "RayActorError", "ActorDiedError", "TrainingFailedError", "RuntimeError"})


def check(evidence: Evidence) -> list[Finding]:
    return [found for found in (_dataloader(evidence), _worker_died(evidence)) if found is not None]


def _dataloader(evidence: Evidence) -> Finding | None:
    signals = evidence.of(cuda.PYTORCH_DATALOADER)
    if not signals:
        return None
    texts = " ".join(signal.quote.text for signal in signals).lower()
    shm = any(marker in texts for marker in ("bus error", "shared memory", "shm", "/torch_"))
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
    succeeded = {signal.quote.source for signal in evidence.of(failures.RUN_SUCCEEDED)}
    actors = [
        signal
        for signal in evidence.of(ray_log.ACTOR_DIED)
        if not (signal.quote.source in succeeded and _logged_as_warning(signal))
    ]
    died = [
        *actors,
        *evidence.of(ray_log.NODE_DIED, kernel.PROCESS_CRASH, k8s_text.CRASH_LOOP),
        *evidence.of(k8s_text.REPLICA_FAILED, failures.LAUNCHER_LOST_DAEMON),
    ]
    evicted = [signal for signal in evidence.of(k8s_text.EVICTED) if "memory" not in signal.quote.text]
    killed = [signal for signal in evidence.of(failures.KILLED_BY_SIGNAL) if not failures.reported_by_shell(signal)]
    signals = [*died, *evicted, *killed]
    if not signals:
        return None
    ending = _ending_exception(evidence)
    detail = (
        f"A worker process died{where(signals)}{_signal_cause(killed)}. Read the dead worker's own log (ray logs "
        "worker-*.err on its node, or the rank's output above torchrun's summary) for the first error; common "
        "causes are a segfault in a native extension, the node being preempted or evicted, the host OOM killer "
        "and an exception in the training loop."
    )
    quotes = [ending.quote] if ending else []
    return finding(WORKER_DIED, Severity.CRITICAL, 0.7, "Worker process died", detail, signals, quotes)


def _logged_as_warning(signal: Signal) -> bool:
    """Ray < 1.0 logs a worker that dies while the driver shuts down at WARNING, even after a run that succeeded."""
    text = signal.quote.text
    return bool(_WARNING_LEVEL.search(text, 0, max(text.find(signal.get("what")), 0)))


def _signal_cause(killed: list[Signal]) -> str:
    """What the signal that killed it usually means; only the launcher's exit codes carry one."""
    numbers = [number for signal in killed if (number := failures.signal_number(signal)) is not None]
    if not numbers:
        return ""
    number = numbers[0]
    try:
        name = signals_module.Signals(number).name
    except ValueError:
        return f": it was killed by signal {number}"
    return f": it was killed by {name}" + _SIGNAL_MEANINGS.get(name, "")


def _ending_exception(evidence: Evidence) -> PythonException | None:
    """The exception that ended a failed job: the last one that is not a mere wrapper."""
    failed = evidence.meta.status.upper() == "FAILED" or bool(evidence.of(ray_log.JOB_FAILED))
    if not failed or not evidence.exceptions:
        return None
    specific = [exception for exception in evidence.exceptions if exception.short_type not in _WRAPPER_TYPES]
    return (specific or evidence.exceptions)[-1]
