"""The per-GPU batch is too small to amortise the gradient all-reduce.

Reads: step-phase timings (steps/ or the breakdowns training tools log, with the per-GPU batch of a
config dump), and benchmark throughput pasted at several GPU counts with the per-GPU batch its header or
command line states (synthetic input, so the lost throughput is the all-reduce's). Several ranks, or a
gradient all-reduce at all, say the run is data-parallel. With DDP every step all-reduces the whole
gradient whatever the batch, so when each GPU gets a few samples and computes for less time than the
all-reduce takes, adding GPUs makes training slower: the classic "DDP on 2 GPUs is slower than on 1".
"""

from __future__ import annotations

from diagnosers.evidence import Evidence
from diagnosers.findings import SMALL_BATCH, Finding, Severity
from diagnosers.parsers.timings.throughput import Scaling
from diagnosers.rules.bottleneck import SCALING_CONFIDENCE, SCALING_EFFICIENCY_LOSS
from diagnosers.rules.common import finding
from diagnosers.rules.hardware import hardware
from diagnosers.rules.measures import benchmark_scaling, step_phases

EMITS = (SMALL_BATCH,)

# DDP buckets gradients in 25 MB (bucket_cap_mb); a step shorter than 100 ms cannot hide even a
# few buckets at tens of GB/s, and per-GPU batches of 32 samples or fewer rarely fill a GPU.
SHORT_STEP_S = 0.1
SMALL_BATCH_SAMPLES = 32
# Collectives above a quarter of the step and longer than the compute itself.
MIN_COMM_SHARE = 0.25


def check(evidence: Evidence) -> list[Finding]:
    phases = step_phases(evidence)
    if phases is None:
        scaling = benchmark_scaling(evidence)
        return [_from_scaling(scaling)] if scaling is not None and _small_and_lost(scaling) else []
    if len(phases.per_rank) < 2 and phases.comm_s <= 0:
        return []
    compute_s = phases.compute_share * phases.mean_step_s
    comm_s = phases.comm_share * phases.mean_step_s
    samples = phases.median_samples()
    small = samples is not None and samples <= SMALL_BATCH_SAMPLES
    short = phases.mean_step_s <= SHORT_STEP_S
    if phases.comm_share < MIN_COMM_SHARE or comm_s < compute_s or not (small or short):
        return []
    unit = hardware(evidence).unit
    batch = f"{samples:g} samples per {unit}, " if samples is not None else ""
    detail = (
        f"Each step is {phases.mean_step_s * 1000:.0f} ms ({batch}{compute_s * 1000:.0f} ms of compute) but "
        f"spends {comm_s * 1000:.0f} ms in collectives: the all-reduce costs more than the work it "
        f"synchronises, so more {unit}s make the run slower. Raise the batch per {unit} (scale the learning "
        f"rate), accumulate gradients over several micro-batches with no_sync(), or use fewer {unit}s."
    )
    # Above comm-bound's ceiling (0.9): with the batch stated, this names why the collectives dominate.
    confidence = 0.92 if small else 0.7
    return [
        finding(
            SMALL_BATCH,
            Severity.WARNING,
            confidence,
            f"Batch per {unit} too small for data parallelism",
            detail,
            quotes=phases.representative(),
        )
    ]


def _small_and_lost(scaling: Scaling) -> bool:
    batch = scaling.batch
    small = batch is not None and batch <= SMALL_BATCH_SAMPLES
    return small and scaling.synthetic and scaling.efficiency < SCALING_EFFICIENCY_LOSS


def _from_scaling(scaling: Scaling) -> Finding:
    base, scaled = scaling.base, scaling.scaled
    detail = (
        f"With {scaling.batch:g} images per GPU, {scaled.gpus} GPUs keep {scaling.efficiency:.0%} of the per-GPU "
        f"throughput of {base.gpus} ({scaled.per_gpu:.1f} against {base.per_gpu:.1f} images/sec, synthetic input): "
        "each step computes too little to hide the gradient all-reduce, whose size does not shrink with the "
        "batch. Raise the per-GPU batch (scale the learning rate), accumulate gradients over several "
        "micro-batches, or use fewer GPUs."
    )
    # Above the comm-bound finding from the same runs: the stated batch says why the collectives dominate.
    return finding(
        SMALL_BATCH,
        Severity.WARNING,
        SCALING_CONFIDENCE + 0.05,
        "Per-GPU batch too small for data parallelism",
        detail,
        quotes=[scaled.quote, base.quote],
    )
