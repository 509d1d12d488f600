"""Out of memory, on the GPU or on the host.

Reads: CUDA OOM messages and the traceback that raised them (was it the backward pass?), the
Kubernetes OOMKilled/OOMKilling reasons and memory evictions, Ray's memory monitor kills,
the kernel OOM killer and its reports (SLURM, systemd, Ray < 2.0), Python MemoryError and other refused
allocations (PyTorch's CPU allocator, numpy, std::bad_alloc, errno 12), and a
process killed with SIGKILL, which alone is only a guess at host OOM. SLURM's `Exceeded ... memory limit at some
point` proves no kill (completed steps print it): it only firms up that guess.
"""

from __future__ import annotations

from diagnosers.evidence import Evidence
from diagnosers.findings import GPU_OOM, HOST_OOM, Finding, Severity
from diagnosers.parsers import failures
from diagnosers.parsers.frameworks import ray_log
from diagnosers.parsers.platform import cuda, k8s_text, kernel
from diagnosers.parsers.signals import Signal
from diagnosers.parsers.tracebacks import PythonException
from diagnosers.rules.common import finding, first_attr, where

EMITS = (GPU_OOM, HOST_OOM)

_HANDLED_WITHIN_LINES = 2
# Python's own, and numpy's subclass of it that says how big the array was.
_MEMORY_ERRORS = frozenset({"MemoryError", "_ArrayMemoryError"})
_HEAD_MARKERS = ("-head-", "head-", "-head", "ray-head", "node-type=head")


def check(evidence: Evidence) -> list[Finding]:
    return [found for found in (_gpu_oom(evidence), _host_oom(evidence)) if found is not None]


def _gpu_oom(evidence: Evidence) -> Finding | None:
    # The trainer's own warning that it caught the OOM stands on the OOM's line or just below it.
    handled = _lines_from(evidence.of(cuda.HANDLED_OUT_OF_MEMORY), range(-_HANDLED_WITHIN_LINES, 1))
    signals = [
        signal for signal in evidence.of(cuda.OUT_OF_MEMORY) if (signal.quote.source, signal.quote.line) not in handled
    ]
    if not signals:
        return None
    raising = [exception for exception in evidence.exceptions if _is_cuda_oom(exception)]
    in_backward = any(exception.ran_through("backward") for exception in raising)
    phase = " during the backward pass" if in_backward else ""
    tried = first_attr(signals, "tried") or first_attr(signals, "bfc_tried")
    asked = f" while allocating {tried}" if tried else ""
    advice = (
        "Lower the per-GPU batch size (keep the global batch with gradient accumulation), enable activation "
        "checkpointing or mixed precision, or shard the model (FSDP/ZeRO)."
    )
    fragmented = first_attr(signals, "reserved_unallocated")
    if fragmented:
        advice = (
            f"{fragmented} was reserved but unallocated: try PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True "
            f"first. {advice}"
        )
    detail = f"CUDA ran out of memory{asked}{phase}{where(signals)}. {advice}"
    title = "GPU out of memory on backward" if in_backward else "GPU out of memory"
    quotes = [exception.quote for exception in raising]
    return finding(GPU_OOM, Severity.CRITICAL, 0.95, title, detail, signals=signals, quotes=quotes)


def _is_cuda_oom(exception: PythonException) -> bool:
    return ("OutOfMemoryError" in exception.type and "CUDA" in exception.message) or (
        "CUDA" in exception.message and "out of memory" in exception.message
    )


def _host_oom(evidence: Evidence) -> Finding | None:
    killed = evidence.of(k8s_text.OOM_KILLED, kernel.OOM_KILL, kernel.OOM_REPORTED)
    ray_kills = evidence.of(ray_log.MEMORY_MONITOR_KILL)
    memory_errors = [exception for exception in evidence.exceptions if exception.short_type in _MEMORY_ERRORS]
    refused = evidence.of(kernel.ALLOCATION_FAILED)
    signals = [*killed, *ray_kills]
    if not signals and not memory_errors and not refused:
        return _sigkilled(evidence)
    on_head = any(marker in signal.quote.text for signal in signals for marker in _HEAD_MARKERS)
    if ray_kills and not killed:
        what = "Ray's memory monitor killed workers because the node ran low on memory"
    elif killed:
        what = "A container or process was killed for exceeding its memory limit (OOMKilled)"
    elif memory_errors:
        what = "Python raised MemoryError: the process could not get host memory"
    else:
        what = "The process asked for host memory and was refused (an allocator or the kernel said no)"
    where_text = " on the head node" if on_head else where(signals)
    detail = (
        f"{what}{where_text}. Raise the pod's memory limit (and request) for that group, cut per-worker "
        "memory (fewer DataLoader workers, smaller prefetch, object store spilling), and keep work off the "
        "head node (num-cpus: 0 in its rayStartParams)."
    )
    title = "Head node out of memory" if on_head else "Host out of memory"
    confidence = 0.9 if signals else 0.7
    quotes = [exception.quote for exception in memory_errors]
    return finding(HOST_OOM, Severity.CRITICAL, confidence, title, detail, signals=[*signals, *refused], quotes=quotes)


def _sigkilled(evidence: Evidence) -> Finding | None:
    """A SIGKILL with no word of memory: most often the OOM killer, so say it, but only where nothing else
    explains the failure (a timeout or a preemption sends the same signal)."""
    not_oom = _under_other_reason(evidence)
    signals = [
        signal
        for signal in evidence.of(failures.KILLED_BY_SIGNAL)
        if failures.is_sigkill(signal) and (signal.quote.source, signal.quote.line) not in not_oom
    ]
    if not signals:
        return None
    touched = evidence.of(kernel.MEMORY_LIMIT_TOUCHED)
    limit = " SLURM also saw the step's memory reach its limit." if touched else ""
    detail = (
        f"A process was killed with SIGKILL{where(signals)} (a shell's 'Killed', exit code 137 or -9, an MPI "
        f"launcher's signal 9), which is what the kernel's OOM killer sends when the host or container runs out of "
        f"memory.{limit} Check the node's dmesg or `kubectl describe pod` (Reason: OOMKilled) to confirm, then raise "
        "the memory limit or cut per-process memory (fewer DataLoader workers, smaller prefetch, no full dataset in "
        "RAM)."
    )
    confidence = 0.7 if touched else 0.6
    title = "Process killed (SIGKILL), likely out of memory"
    found = finding(HOST_OOM, Severity.CRITICAL, confidence, title, detail, [*signals, *touched[:1]])
    found.fallback = True
    return found


# `kubectl describe` prints a terminated state's Message (often one line) between its Reason and its Exit Code.
_REASON_REACH = 3


def _under_other_reason(evidence: Evidence) -> set[tuple[str, int]]:
    """Lines just below a terminated container's `Reason:` that is not OOMKilled (`Error`, `Completed`): the runtime
    saw that exit and found no OOM kill, so an exit code 137 there (a liveness probe's kill, a preemption) is no
    guess at memory."""
    return _lines_from(evidence.of(k8s_text.TERMINATED_REASON), range(1, _REASON_REACH + 1))


def _lines_from(signals: list[Signal], offsets: range) -> set[tuple[str, int]]:
    """(source, line) of the lines at `offsets` from each signal's own line."""
    return {(signal.quote.source, signal.quote.line + offset) for signal in signals for offset in offsets}
