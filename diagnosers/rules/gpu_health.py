"""GPU health: no GPU visible at all, or the GPU reported a fault (XID, ECC, fell off the bus).

Reads: CUDA/driver/NVML/nvidia-smi messages, NGC containers' `The NVIDIA Driver was not detected` banner (a
cause only where the job failed after it), kernel `NVRM: Xid` lines, and dcgm-exporter's
DCGM_FI_DEV_XID_ERRORS series (its value is the last XID seen on that GPU).
"""

from __future__ import annotations

import re

from diagnosers.evidence import Evidence
from diagnosers.findings import GPU_NOT_DETECTED, XID_ERROR, Finding, Quote, Severity
from diagnosers.parsers import failures
from diagnosers.parsers.frameworks import ray_log
from diagnosers.parsers.platform import cuda, kernel
from diagnosers.parsers.signals import Signal
from diagnosers.rules.common import finding, where

EMITS = (GPU_NOT_DETECTED, XID_ERROR)

XID_METRIC = "DCGM_FI_DEV_XID_ERRORS"

# From NVIDIA's XID catalogue (docs.nvidia.com/deploy/xid-errors): what each common XID means
# and whether the usual cause is the application (fix the code) or the hardware (drain the node).
XID_MEANINGS: dict[int, tuple[str, bool]] = {
    13: ("graphics engine exception, usually an out-of-range access in the application", False),
    31: ("GPU memory page fault, usually an illegal address in the application", False),
    43: ("GPU stopped processing after an application fault", False),
    45: ("preemptive cleanup after an earlier error", False),
    48: ("double-bit ECC error", True),
    61: ("internal micro-controller breakpoint", True),
    62: ("internal micro-controller halt", True),
    63: ("ECC page retirement or row remapping recorded", True),
    64: ("ECC page retirement or row remapping failed", True),
    74: ("NVLink error", True),
    79: ("GPU has fallen off the bus", True),
    92: ("high single-bit ECC error rate", True),
    94: ("contained ECC error", True),
    95: ("uncontained ECC error", True),
    119: ("GSP RPC timeout", True),
    120: ("GSP error", True),
    **dict.fromkeys(range(144, 151), ("NVLink error", True)),
}
# Xid 43/45 name the earlier Xid that set them off ("caused by previous Xid 149"): that one is the cause.
_PREVIOUS_XID = re.compile(r"caused by previous Xid (\d+)")
# XIDs that record a problem without stopping work.
_NOTICE_ONLY = frozenset({63, 92})


def check(evidence: Evidence) -> list[Finding]:
    return [found for found in (_not_detected(evidence), _xid(evidence)) if found is not None]


def _not_detected(evidence: Evidence) -> Finding | None:
    errors = evidence.of(cuda.NO_DEVICE)
    banners = evidence.of(cuda.DRIVER_NOT_DETECTED_BANNER)
    signals = [*errors, *banners]
    if not signals:
        return None
    detail = (
        f"The process found no usable GPU{where(signals)}: {signals[0].get('error')}. Check that the pod "
        "requests nvidia.com/gpu in its limits, that the NVIDIA device plugin runs on the node, that the "
        "image's CUDA runtime is not newer than the node's driver, and that Ray was started with num-gpus."
    )
    # The NGC banner alone is also what a deliberate CPU-only run prints: it is the cause only of a failure.
    severity = Severity.CRITICAL if errors or _failed_after(evidence, banners) else Severity.WARNING
    return finding(GPU_NOT_DETECTED, severity, 0.9, "No GPU detected", detail, signals=signals)


def _failed_after(evidence: Evidence, banners: list[Signal]) -> bool:
    """The job failed, or a traceback followed the banner in its log."""
    if evidence.meta.status.upper() == "FAILED" or evidence.of(failures.NONZERO_EXIT, ray_log.JOB_FAILED):
        return True
    raised = [
        *(exception.quote for exception in evidence.exceptions),
        *(signal.quote for signal in evidence.of(failures.FATAL_LINE, failures.TRACEBACK_FRAME)),
    ]
    return any(
        quote.source == banner.quote.source and quote.line > banner.quote.line for quote in raised for banner in banners
    )


def _xid(evidence: Evidence) -> Finding | None:
    xids = evidence.of(kernel.XID)
    faults = evidence.of(kernel.GPU_FAULT)
    metric_quotes, metric_codes = _xid_metric(evidence)
    previous = {int(found) for signal in xids for found in _PREVIOUS_XID.findall(signal.get("message"))}
    codes = sorted({int(signal.get("xid")) for signal in xids} | previous | metric_codes)
    if not codes and not faults:
        return None
    meanings = [f"XID {code}: {XID_MEANINGS.get(code, ('see NVIDIA XID catalogue', True))[0]}" for code in codes]
    hardware = any(XID_MEANINGS.get(code, ("", True))[1] for code in codes) or bool(faults)
    action = (
        "Cordon and drain the node, reset or replace the GPU (nvidia-smi -q -d ECC,PAGE_RETIREMENT), and "
        "rerun the job elsewhere."
        if hardware
        else "These XIDs usually come from the application: look for an illegal memory access in a custom "
        "kernel or a CUDA/driver mismatch before blaming the hardware."
    )
    fault_text = faults[0].get("what") if faults else ""
    described = "; ".join(meanings) or fault_text
    detail = f"The GPU reported a fault ({described}){where([*xids, *faults])}. {action}"
    notice_only = bool(codes) and set(codes) <= _NOTICE_ONLY and not faults
    severity = Severity.WARNING if notice_only else Severity.CRITICAL
    return finding(
        XID_ERROR,
        severity,
        0.9,
        "GPU hardware/driver fault (XID)",
        detail,
        signals=[*xids, *faults],
        quotes=metric_quotes,
    )


def _xid_metric(evidence: Evidence) -> tuple[list[Quote], set[int]]:
    _, series = evidence.metric(XID_METRIC)
    quotes, codes = [], set()
    for one in series:
        last = int(max(one.values))
        if last > 0:
            codes.add(last)
            quotes.append(one.quote(f"= {last}"))
    return quotes, codes
